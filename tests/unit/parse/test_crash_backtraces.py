"""Crash-handler backtraces read as stacks, with the fatal signal on the thread it hit: UCX (Triton,
HugeCTR), glog and absl, backward-cpp, gdb's `received signal`, faulthandler's `Fatal Python error`."""

from __future__ import annotations

from hangwatch.model import ProcessStack, Source, ThreadStack
from hangwatch.parse.stacktext import parse_text


def _threads(text: str) -> list[ThreadStack]:
    stacks: list[ProcessStack] = parse_text(text, "crash", Source("stacks/crash.txt"), 0)
    return [t for s in stacks for t in s.threads]


def _names(thread: ThreadStack) -> list[str]:
    return [f.qualname for f in thread.frames]


def test_ucx_backtrace_with_its_caught_signal() -> None:
    text = """[node7:1234 :0:381] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))
==== backtrace (tid:    381) ====
 0  /usr/lib/libucs.so.0(ucs_handle_error+0x2dc) [0x7f01]
 0 0x00000000000143c0 __funlockfile()  ???:0
 1 0x0000000000068d6c ncclProxyProgress()  proxy.cc:912
 2 0x0000000000008609 start_thread()  ???:0
=================================
"""
    (thread,) = _threads(text)
    assert thread.signal == "SIGSEGV" and thread.thread_id == 381
    assert _names(thread) == ["__funlockfile", "ncclProxyProgress", "start_thread"]  # innermost first
    assert thread.frames[1].file == "proxy.cc" and thread.frames[1].line == 912


def test_glog_signal_handler_dump() -> None:
    text = """*** Aborted at 1700000000 (unix time) try "date -d @1700000000" if you are using GNU date ***
PC: @     0x7f3a1c2b4e3f (unknown)
*** SIGBUS (@0x7f2a00000000) received by PID 4242 (TID 0x7f2a9f7fe700) from PID 0; stack trace: ***
    @     0x7f3a1c7c9980 (unknown)
    @     0x7f3a1c2b4e3f ncclShmOpen()
    @     0x7f3a1c2a10d1 ncclTransportP2pSetup(ncclComm*, ncclTopoGraph*, int) +0x41
    @     0x55d5b3b3c1b9 google::LogMessage::Fail() (in /usr/lib/libglog.so.0)
"""
    stacks = parse_text(text, "crash", Source("stacks/crash.txt"), 0)
    (thread,) = stacks[0].threads
    assert stacks[0].pid == 4242 and thread.signal == "SIGBUS"
    assert _names(thread) == ["ncclShmOpen", "ncclTransportP2pSetup", "google::LogMessage::Fail"]
    assert thread.frames[2].library == "libglog.so.0"


def test_absl_failure_signal_handler_dump() -> None:
    text = """*** SIGSEGV received at time=1700000000 on cpu 3 ***
PC: @     0x7f5e2c1a3b4c  (unknown)  cudaMemcpyAsync
    @     0x7f5e2c1a3b4c        160  c10::cuda::CUDACachingAllocator::malloc()
    @     0x7f5e2c0f1020         64  at::native::empty_cuda()
"""
    (thread,) = _threads(text)
    assert thread.signal == "SIGSEGV"
    assert _names(thread) == ["c10::cuda::CUDACachingAllocator::malloc", "at::native::empty_cuda"]


def test_backward_cpp_outermost_first_signal_after_frames() -> None:
    text = """Stack trace (most recent call last) in thread 9001:
#3    Object "/lib/x86_64-linux-gnu/libc.so.6", at 0x7f1, in __libc_start_main
#2    Source "/src/server/main.cc", line 88, in main
         87:   auto backend = LoadBackend(cfg);
      >  88:   backend->Init();
#1    Object "/opt/lib/libnccl.so.2", at 0x7f2, in ncclCommInitRank
#0    Object "/opt/lib/libnccl.so.2", at 0x7f3, in ncclShmOpen
Bus error (Non-existant physical address [0x7f2a00000000])
"""
    (thread,) = _threads(text)
    assert thread.signal == "SIGBUS" and thread.thread_id == 9001
    assert _names(thread) == ["ncclShmOpen", "ncclCommInitRank", "main", "__libc_start_main"]
    assert thread.frames[2].file == "main.cc" and thread.frames[2].line == 88
    assert thread.frames[0].library == "libnccl.so.2"


def test_gdb_and_faulthandler_signal_lines_reach_their_thread() -> None:
    gdb = """Thread 787 "worker" received signal SIGBUS, Bus error.
#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**) () from /usr/lib/libnccl.so.2
#1 0x00007f6b595436d7 in ncclProxyService(void*) () from /usr/lib/libnccl.so.2
"""
    (thread,) = _threads(gdb)
    assert thread.signal == "SIGBUS" and [f.function for f in thread.frames] == ["ncclShmOpen", "ncclProxyService"]
    fault = """Fatal Python error: Segmentation fault

Current thread 0x00007f3a (most recent call first):
  File "/usr/lib/python3.10/site-packages/torch/cuda/__init__.py", line 300 in _lazy_init
  File "/app/serve.py", line 12 in <module>
"""
    (thread,) = _threads(fault)
    assert thread.signal == "SIGSEGV" and _names(thread) == ["_lazy_init", "<module>"]


def test_a_plain_dump_has_no_signal() -> None:
    text = """Thread 0x7f3a (idle): "MainThread"
    wait (threading.py:320)
    <module> (serve.py:12)
"""
    (thread,) = _threads(text)
    assert thread.signal is None
