"""Errors in a log read as failures: the shapes each layer prints, across versions and prefixes."""

from __future__ import annotations

import pytest

from hangwatch.parse.failures import (
    cuda_error,
    errno_family,
    module_of,
    read_failures,
    signal_of,
)
from hangwatch.parse.logs import read_log_lines


def failures(text: str):
    return read_failures(read_log_lines(text.encode()))


def test_python_traceback_gives_type_message_and_frames_innermost_first() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 544, in run_server\n'
        "    sock.bind((host, port))\n"
        '  File "/usr/lib/python3.12/socket.py", line 10, in bind\n'
        "    ^^^^^^^^\n"
        "OSError: [Errno 98] Address already in use\n"
    )
    (f,) = failures(log)
    assert (f.kind, f.exc_type, f.errno, f.role) == ("exception", "OSError", "EADDRINUSE", "root")
    assert [fr.function for fr in f.frames] == ["bind", "run_server"]
    assert f.frames[1].module == "vllm.entrypoints.openai.api_server"
    assert f.lines == (1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize(
    "prefix",
    ["", "(Worker_TP1 pid=77) ERROR 08-10 23:02:36 [multiproc_executor.py:898] ", "[2026-11-29 23:43:26 TP1] ",
     "(RayWorkerWrapper pid=9, ip=10.0.0.1) "],
)  # fmt: skip
def test_traceback_read_through_engine_prefixes(prefix: str) -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/x/site-packages/zmq/sugar/socket.py", line 320, in bind',
             "    super().bind(addr)",
             "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30001')"]  # fmt: skip
    (f,) = failures("\n".join(prefix + line for line in lines))
    assert f.exc_type == "zmq.error.ZMQError" and f.errno == "EADDRINUSE"
    assert f.frames[0].module == "zmq.sugar.socket"


def test_chained_exception_keeps_the_first_as_its_cause_and_the_first_is_root() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/a/site-packages/torch/distributed/rendezvous.py", line 5, in f\n'
        "RuntimeError: NCCL error: unhandled system error\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/a/site-packages/sglang/srt/managers/scheduler.py", line 9, in run\n'
        "Exception: Init torch distributed failed\n"
    )
    first, second = failures(log)
    assert first.role == "root" and second.role == "consequence"
    assert second.chained == ("RuntimeError: NCCL error: unhandled system error",)


def test_pasted_excerpt_that_starts_inside_a_traceback_is_still_one_failure() -> None:
    log = (
        "    metadata = builder.build(\n"
        '  File "/v/site-packages/flashinfer/prefill.py", line 447, in get_batch_prefill_module\n'
        "    module = gen().build_and_load()\n"
    )
    (f,) = failures(log)
    assert f.frames[0].function == "get_batch_prefill_module" and f.frames[0].module == "flashinfer.prefill"


def test_cpp_terminate_joins_its_what_line() -> None:
    (f,) = failures("terminate called after throwing an instance of 'c10::DistBackendError'\n"
                    "  what():  NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error\n")  # fmt: skip
    assert f.kind == "terminate" and f.exc_type == "c10::DistBackendError"
    assert "unhandled cuda error" in f.text and f.locations == ("ProcessGroupNCCL.cpp:1970",)


def test_nccl_warn_is_a_failure_but_a_missing_optional_plugin_is_not() -> None:
    log = (
        "host:1:2 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
        "host:1:2 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).\n"
        "host:1:2 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\n"
        "host:1:2 [2] NCCL INFO init.cc:1196 -> 1\n"
    )
    (f,) = failures(log)
    assert (f.kind, f.cuda, f.locations) == ("nccl", "invalid argument", ("nvls.cc:244",))


def test_the_innermost_location_a_wrapped_message_names_comes_first() -> None:
    (f,) = failures("Exception: Capture cuda graph failed: Runtime check failed at "
                    "/w/sgl_kernel/custom_all_reduce.cuh:37: CUDA error: invalid argument\n")  # fmt: skip
    assert f.locations[0] == "custom_all_reduce.cuh:37" and f.cuda == "invalid argument"


def test_first_failure_is_root_and_what_the_launcher_says_after_is_consequence() -> None:
    log = (
        "[2026-01-01 10:00:01 TP0] Init torch distributed begin.\n"
        "[2026-01-01 10:00:02 TP1] zmq.error.ZMQError: Address already in use\n"
        "[2026-01-01 10:00:03] Received sigquit from a child process. It usually means the child failed.\n"
        "[2026-01-01 10:00:03] RuntimeError: Rank 0 scheduler died during initialization (exit code: -9).\n"
        "[2026-01-01 10:00:04] DetokenizerManager hit an exception: Traceback (cut)\n"
    )
    found = failures(log)
    assert next(f.role for f in found) == "root" and found[0].errno == "EADDRINUSE"
    assert all(f.role == "consequence" for f in found[1:])


def test_a_timeout_is_root_only_when_nothing_else_failed() -> None:
    log = (
        "[W1201 10:00:09.381 socket.cpp:462] [c10d] waitForInput: poll returned 0, socket timed out after 60000ms\n"
        "[E1201 10:00:09.401 socket.cpp:1019] [c10d] The server socket has failed to listen on any local "
        "network address. port: 28312, code: -98, name: EADDRINUSE, message: address already in use\n"
    )
    timeout, bind = failures(log)
    assert bind.role == "root" and bind.errno == "EADDRINUSE" and timeout.role == "consequence"
    (only,) = failures("torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients.\n")
    assert only.role == "root"


@pytest.mark.parametrize(
    "line",
    ["NCCL INFO Connected all rings", "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.",
     "Falling back to NCCL: error setting up custom all-reduce", "Capturing CUDA graphs finished without errors",
     "INFO Loading weights took 3.2 s", "WARNING: failed to import optional module triton; will fall back to torch",
     "[2026-12-01 04:17:56] Cannot detect CUDA architecture."],
)  # fmt: skip
def test_polarity_disabled_fell_back_connected_finished_is_no_failure(line: str) -> None:
    assert failures(line + "\n") == ()


def test_a_probe_that_cannot_detect_is_no_failure_but_a_gpu_it_cannot_reach_is() -> None:
    # SGLang on a host without CUDA logs the probe's result; the bind error after it is the root
    log = ("[2026-12-01 04:17:56] Cannot detect CUDA architecture.\n"
           "[2026-12-01 04:17:57] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 31390): "
           "address already in use\n")
    (bind,) = failures(log)
    assert bind.role == "root" and bind.errno == "EADDRINUSE"
    assert failures("Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error\n") != ()


@pytest.mark.parametrize(
    ("text", "family"),
    [("OSError: [Errno 98] Address already in use", "EADDRINUSE"), ("bind failed: EADDRINUSE", "EADDRINUSE"),
     ("errno: 98 - Address already in use", "EADDRINUSE"), ("zmq.error.ZMQError: Address already in use", "EADDRINUSE"),
     ("Socket creation failed : Address family not supported by protocol", "EAFNOSUPPORT"),
     ("posix_fallocate failed : No space left on device", "ENOSPC"), ("(111) Connection refused", "ECONNREFUSED"),
     ("Cannot assign requested address", "EADDRNOTAVAIL"), ("just text", None)],
)  # fmt: skip
def test_errno_families(text: str, family: str | None) -> None:
    assert errno_family(text) == family


@pytest.mark.parametrize(
    ("text", "error"),
    [("RuntimeError: CUDA error: out of memory", "out of memory"),
     ("NCCL WARN Cuda failure 1 'invalid argument'", "invalid argument"),
     ("Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'", "invalid argument"),
     ("CUDA runtime error in error: peer access is not supported between these two devices",
      "peer access is not supported between these two devices"),
     ("RuntimeError: CUDA Runtime API error: <cudaError_t.cudaErrorInvalidDevice: 101>", "invalid device ordinal"),
     ("CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"),
     ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)", None)],
)  # fmt: skip
def test_cuda_errors_by_name_or_text(text: str, error: str | None) -> None:
    assert cuda_error(text) == error


@pytest.mark.parametrize(
    ("text", "sig"),
    [("Bus error (core dumped)", "SIGBUS"), ("Caught signal 7 (Bus error: nonexistent physical address)", "SIGBUS"),
     ('Thread 787 "x" received signal SIGBUS, Bus error.', "SIGBUS"), ("died, exit code: -11", "SIGSEGV"),
     ("Fatal Python error: Segmentation fault", "SIGSEGV"), ("all fine", None)],
)  # fmt: skip
def test_signals(text: str, sig: str | None) -> None:
    assert signal_of(text) == sig


def test_module_of_reads_site_packages_and_checkouts() -> None:
    assert module_of("/usr/lib/python3/dist-packages/torch/utils/file_baton.py") == "torch.utils.file_baton"
    assert module_of("/sgl-workspace/sglang/python/sglang/srt/server.py") == "sglang.srt.server"
    assert module_of("/home/me/run.py") is None


@pytest.mark.parametrize(
    "line",
    ["ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'",
     "/tmp/build/kernel.cu(41): error: identifier \"__nv_fp8_e4m3\" is undefined",
     "csrc/norm.cu:12:3: error: no matching function", "ninja: build stopped: subcommand failed."],
)  # fmt: skip
def test_a_failed_compiler_or_build_is_a_failure(line: str) -> None:
    (f,) = failures(line + "\n")
    assert f.role == "root"


def test_torch_rank_prefix_and_nccl_last_error_join_one_failure() -> None:
    log = (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled system error\n"
        "[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "[rank3]: Last error:\n"
        "[rank3]: Error while creating shared memory segment /dev/shm/nccl-Qa81Zc (size 9637888)\n"
    )
    (f,) = failures(log)
    assert f.exc_type == "torch.distributed.DistBackendError" and "/dev/shm/nccl-Qa81Zc" in f.text
    assert f.lines == (1, 2, 3, 4)


def test_a_line_that_opens_by_saying_it_failed_is_a_failure() -> None:
    (f,) = failures("Failed to initialize NVML: Driver/library version mismatch\n")
    assert f.role == "root" and f.kind == "exit"
    assert failures("Could not find the optional plugin; falling back to the default\n") == ()


def test_a_failure_logged_as_a_warning_is_root_only_when_nothing_failed_at_error_level() -> None:
    log = (
        "(Worker pid=7) WARNING 11-29 10:00:00 [utils.py:12] Failed to import optional kernel module: ImportError\n"
        "(Worker pid=7) ERROR 11-29 10:00:05 [worker.py:80] RuntimeError: CUDA error: out of memory\n"
    )
    warn, err = failures(log)
    assert warn.warning and warn.role == "consequence" and err.role == "root"
    (only,) = failures("[W socket.cpp:436] [c10d] The server socket has failed to bind (errno: 98 - Address already in use).\n")
    assert only.warning and only.role == "root"
    (nccl,) = failures("h:1:2 [0] transport/nvls.cc:155 NCCL WARN Cuda failure 1 'invalid argument'\n")
    assert not nccl.warning


def test_the_line_shapes_find_every_line_a_search_per_line_finds() -> None:
    # GIVEN a log of repeated batch lines (counters differ) with failures of every kind of _MAYBE among them
    from hangwatch.parse import failures

    words = ["the peer said (111)", "Connection refused", "CUDA error: an illegal memory access", "exit code 1", "SIGSEGV received",
             "Timed out after 30 s", "NCCL WARN Call to connect returned", "oom-killer", "Xid 79", "can't open"]
    text = "".join(f"[2026-11-30 10:00:{i % 60:02d} TP0] Prefill batch. #new-seq: {i}, #new-token: {i * 7}\n"
                   + (f"[2026-11-30 10:00:{i % 60:02d} TP1] {words[i // 50 % len(words)]} at step {i}\n" if i % 50 == 7 else "")
                   for i in range(2000))
    lines = read_log_lines(text.encode())
    # WHEN the candidates are found by their shapes
    found = failures._candidates(lines)
    # THEN they are every line _MAYBE finds in the line itself (a superset is allowed: _single reads each)
    each = {i for i, line in enumerate(lines) if failures._MAYBE.search(failures._body(line).lower())}
    assert each and each <= found
    assert failures._MAYBE_SHAPE.pattern != failures._MAYBE.pattern  # its literal with digits was made 0s
