"""hangwatch.parse.stacks: every stack format -> ProcessStack. Samples in tests/fixtures/stacks/ are real
output (see its README.md); a few short ones are inline, copied from ../shared/reference/."""

from __future__ import annotations

import json

import pytest

from hangwatch.model import Frame, Origin, ProcessStack, Source, ThreadStack
from hangwatch.parse.stacks import (
    frame_origin,
    group_by_signature,
    label_and_sample,
    parse_pyspy_json,
    parse_stack_file,
    relative_file,
    split_name,
    stack_signature,
)
from helpers.paths import FIXTURES

STACKS = FIXTURES / "stacks"


def parse(fixture: str, name: str | None = None) -> list[ProcessStack]:
    return parse_stack_file(name or fixture, (STACKS / fixture).read_bytes(), Source(f"stacks/{name or fixture}"))


def only(fixture: str, name: str | None = None) -> ProcessStack:
    stacks = parse(fixture, name)
    assert len(stacks) == 1
    return stacks[0]


def by_qualname(thread: ThreadStack) -> dict[str, Frame]:
    return {f.qualname: f for f in thread.frames}


# ---------------------------------------------------------------- py-spy JSON (real SGLang)


def test_pyspy_json_of_real_sglang_rendezvous() -> None:
    # GIVEN py-spy --json of SGLang's rank 0 waiting for rank 1 in the TCPStore
    stack = only("sglang_tcpstore.json", "TP0.json")
    # THEN
    assert (stack.label, stack.pid, stack.sample, stack.native) == ("TP0", 12368, 0, False)
    main = stack.main
    assert main is not None and main.name == "MainThread" and main.thread_id == 12368
    top = main.frames[0]
    assert (top.function, top.file, top.line, top.origin, top.library) == (
        "_create_c10d_store", "torch/distributed/rendezvous.py", 199, Origin.TORCH, "torch",
    )  # fmt: skip
    frames = by_qualname(main)
    sglang = frames["init_distributed_environment"]
    assert (sglang.file, sglang.origin, sglang.library) == ("sglang/srt/distributed/parallel_state.py", Origin.ENGINE, "sglang")
    assert frames["_time_logger.<locals>.wrapper"].function == "wrapper"
    user = frames["<module>"]
    assert (user.file, user.origin, user.library) == ("dist_hang.py", Origin.USER, None)


def test_pyspy_json_native_keeps_huge_cpp_names_whole() -> None:
    stack = only("sglang_tcpstore_native.json", "TP0.2.json")
    assert (stack.label, stack.sample, stack.native) == ("TP0", 2, True)
    frames = stack.main.frames  # type: ignore[union-attr]
    assert [f.function for f in frames[:4]] == ["clock_nanosleep", "nanosleep", "waitForWorkers", "TCPStore"]
    wait = frames[2]
    assert (wait.qualname, wait.origin, wait.library, wait.file, wait.line) == (
        "c10d::TCPStore::waitForWorkers", Origin.NATIVE, "libtorch_cpu.so", None, None,
    )  # fmt: skip
    pybind = frames[4]
    assert pybind.function == "_FUN" and len(pybind.qualname) > 2000  # the whole template, as py-spy printed it
    assert pybind.qualname.startswith("pybind11::cpp_function::initialize<") and pybind.qualname.endswith("::_FUN")
    assert len(pybind.display) < 160 and "…" in pybind.display
    assert frames[-1].qualname.startswith("0x") and frames[-1].library == "libc.so.6"


def test_pyspy_json_threads_and_native_source_lines() -> None:
    stack = only("spawn_child_native.json")
    frames = by_qualname(stack.main)  # type: ignore[arg-type]
    c_frame = frames["_parse_object_unicode"]
    assert (c_frame.origin, c_frame.file, c_frame.line) == (Origin.NATIVE, "_json.c", 797)
    assert c_frame.library == "_json.cpython-311-x86_64-linux-gnu.so"
    assert frames["<module>"].origin is Origin.LIBRARY  # the `<string>` spawn shim
    assert frames["JSONDecoder.raw_decode"].file == "json/decoder.py"
    assert frames["BaseProcess._bootstrap"].library == "multiprocessing"
    assert frames["Scheduler.init_model_worker"].origin is Origin.ENGINE


def test_pyspy_json_main_thread_found_when_listed_second() -> None:
    stack = only("sleeper.json")
    assert [t.name for t in stack.threads] == ["bg-worker", "MainThread"]
    assert stack.main is stack.threads[1]
    assert stack.threads[0].active is False


def test_parse_pyspy_json_directly_and_tolerates_odd_fields() -> None:
    data = [
        {"pid": 7, "thread_id": 1, "os_thread_id": 7, "thread_name": None, "active": "yes",
         "frames": [{"name": "f", "filename": None, "line": None}, "junk", {"name": None}]},
        "not a thread",
    ]  # fmt: skip
    stack = parse_pyspy_json(data, "TP3", Source("stacks/TP3.json"), sample=4)
    assert (stack.label, stack.pid, stack.sample) == ("TP3", 7, 4)
    thread = stack.threads[0]
    assert thread.active is None and [f.function for f in thread.frames] == ["f", "?"]


def test_json_with_several_pids_gives_one_stack_each() -> None:
    threads = [
        {"pid": 1, "os_thread_id": 1, "thread_name": "MainThread", "frames": [{"name": "a", "filename": "/x/a.py", "line": 1}]},
        {"pid": 2, "os_thread_id": 2, "thread_name": "MainThread", "frames": [{"name": "b", "filename": "/x/b.py", "line": 2}]},
    ]  # fmt: skip
    stacks = parse_stack_file("dump.json", json.dumps(threads).encode(), Source("stacks/dump.json"))
    assert [(s.label, s.pid) for s in stacks] == [("1", 1), ("2", 2)]


# ---------------------------------------------------------------- py-spy text


def test_pyspy_text_label_from_process_title() -> None:
    stack = only("sglang_tcpstore.txt", "reported.txt")
    assert (stack.label, stack.pid, stack.native) == ("TP0", 12368, False)
    assert stack.source == Source("stacks/reported.txt", line=1)
    frames = by_qualname(stack.main)  # type: ignore[arg-type]
    sglang = frames["init_distributed_environment"]
    # py-spy text prints this SGLang file without its package: still engine code, package unknown
    assert (sglang.file, sglang.line, sglang.origin, sglang.library) == (
        "distributed/parallel_state.py", 2517, Origin.ENGINE, None,
    )  # fmt: skip
    assert stack.main.active is False  # type: ignore[union-attr]


def test_pyspy_text_native() -> None:
    stack = only("sglang_tcpstore_native.txt")
    main = stack.main
    assert stack.native and main is not None and main.active is True
    assert [f.qualname for f in main.frames[:4]] == [
        "clock_nanosleep", "nanosleep", "c10d::TCPStore::waitForWorkers", "c10d::TCPStore::TCPStore",
    ]  # fmt: skip
    assert main.frames[2].library == "libtorch_cpu.so"
    assert main.frames[4].function == "_FUN"


def test_text_json_and_native_dumps_of_one_hang_share_a_signature() -> None:
    signatures = {
        stack_signature(only(name))
        for name in ("sglang_tcpstore.txt", "sglang_tcpstore_native.txt", "sglang_tcpstore.json", "sglang_tcpstore_native.json")
    }
    assert signatures == {
        "_create_c10d_store < _tcp_rendezvous_handler < init_process_group < _time_logger.<locals>.wrapper"
        " < _exception_logger.<locals>.wrapper < init_distributed_environment < <module>"
    }


def test_pyspy_text_locals_are_skipped() -> None:
    plain, with_locals = only("sleeper.txt"), only("sleeper_locals.txt")
    assert [[f.qualname for f in t.frames] for t in with_locals.threads] == [
        ["Worker.run.<locals>.inner", "Worker.run", "<module>"],
        ["background", "Thread.run", "Thread._bootstrap_inner", "Thread._bootstrap"],
    ]
    assert [t.name for t in plain.threads] == ["MainThread", "bg-worker"]
    assert plain.threads[0].frames[0].function == "inner"


def test_pyspy_text_subprocesses_gives_each_process() -> None:
    stacks = parse("spawn_subprocesses_native.txt")
    assert [(s.label, s.pid, s.source.line) for s in stacks] == [("4667", 4667, 1), ("4670", 4670, 15), ("4669", 4669, 42)]
    child = by_qualname(stacks[1].main)  # type: ignore[arg-type]
    assert child["Scheduler.__init__"].file == "sglang/srt/managers/scheduler.py"
    assert child["Scheduler.__init__"].origin is Origin.ENGINE
    assert child["barrier"].origin is Origin.TORCH
    assert (child["Py_DECREF"].origin, child["Py_DECREF"].file, child["Py_DECREF"].line) == (Origin.NATIVE, "object.h", 537)
    assert child["<module>"].file == "<string>" and child["<module>"].origin is Origin.LIBRARY
    assert by_qualname(stacks[0].main)["wait_for_ready"].origin is Origin.USER  # type: ignore[arg-type]


def test_pyspy_text_inline_from_reference_with_several_processes() -> None:
    # ../shared/reference/sglang-on-cpu.md §2b: two ranks pasted into one file
    text = b"""Process 18773: sglang::scheduler_TP0
Thread 18773 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    GroupCoordinator.all_reduce (distributed/parallel_state.py:699)
    <module> (dist_hang.py:66)

Process 18774: sglang::scheduler_DP1_TP1
Thread 18774 (idle): "MainThread"
    <module> (dist_hang.py:61)
"""
    stacks = parse_stack_file("reported.txt", text, Source("stacks/reported.txt"))
    assert [(s.label, s.pid) for s in stacks] == [("TP0", 18773), ("DP1_TP1", 18774)]
    assert stacks[0].main.frames[2].function == "all_reduce"  # type: ignore[union-attr]
    assert stacks[0].main.frames[2].qualname == "GroupCoordinator.all_reduce"  # type: ignore[union-attr]


def test_truncated_pyspy_paste() -> None:
    stack = only("truncated_vllm_42987.txt", "reported.txt")
    assert stack.label == "reported" and stack.pid is None
    thread = stack.threads[0]
    assert (thread.name, thread.active) == ("VLLM::EngineCore", True)
    assert [f.function for f in thread.frames] == ["apply_top_k_top_p_tr"]


# ---------------------------------------------------------------- tracebacks, faulthandler, pystack, gdb, kernel


def test_faulthandler_then_chained_traceback() -> None:
    stack = only("faulthandler_traceback.txt")
    names = [t.name for t in stack.threads]
    assert names == ["Thread 0x00007fcea0a646c0", "MainThread", None, None]
    assert stack.main is stack.threads[1]
    assert [f.function for f in stack.threads[1].frames] == ["run", "<module>"]
    # a traceback is written outermost first; frames are stored innermost first
    assert [f.function for f in stack.threads[2].frames] == ["b", "a", "<module>"]
    assert stack.threads[2].frames[0].line == 11
    assert stack.threads[0].frames[1].file == "threading.py"


def test_traceback_with_log_prefixes() -> None:
    text = b"""(EngineCore_DP0 pid=4242) ERROR 08-14 10:01:27 [core.py:700] EngineCore failed to start.
(EngineCore_DP0 pid=4242) Traceback (most recent call last):
(EngineCore_DP0 pid=4242)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
(EngineCore_DP0 pid=4242)     engine_core = EngineCoreProc(*args, **kwargs)
(EngineCore_DP0 pid=4242)   File "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py", line 1162, in synchronize
(EngineCore_DP0 pid=4242)     return torch._C._cuda_synchronize()
(EngineCore_DP0 pid=4242) KeyboardInterrupt
"""
    stack = only_text(text, "4242.txt")
    assert stack.pid == 4242 and stack.label == "4242"
    frames = stack.main.frames  # type: ignore[union-attr]
    assert [(f.function, f.file, f.origin) for f in frames] == [
        ("synchronize", "torch/cuda/__init__.py", Origin.TORCH),
        ("run_engine_core", "vllm/v1/engine/core.py", Origin.ENGINE),
    ]


def only_text(text: bytes, name: str) -> ProcessStack:
    stacks = parse_stack_file(name, text, Source(f"stacks/{name}"))
    assert len(stacks) == 1
    return stacks[0]


def test_pystack_native() -> None:
    stack = only("pystack_native.txt")
    assert [t.name for t in stack.threads] == ["python", "MainThread"]
    main = stack.main
    assert main is stack.threads[1] and main.thread_id == 11241
    top = main.frames[0]
    # innermost first; glibc's symbol version is not part of the name
    assert (top.function, top.qualname, top.file, top.line, top.library) == (
        "clock_nanosleep", "clock_nanosleep", "clock_nanosleep.c", 48, "libc.so.6",
    )  # fmt: skip
    assert main.frames[1].function == "pysleep"  # `(inlined)` is not a library
    assert [f.function for f in main.frames if f.origin is not Origin.NATIVE] == ["inner", "run", "<module>"]


def test_gdb_thread_apply_all_bt() -> None:
    stack = only("gdb_sleeper.txt")
    assert stack.pid == 8434 and stack.native
    assert [t.thread_id for t in stack.threads] == [8444, 8434]
    main = stack.main
    assert main is stack.threads[1]
    assert (main.frames[0].function, main.frames[0].file, main.frames[0].line) == ("__GI___clock_nanosleep", "clock_nanosleep.c", 48)
    assert main.frames[-1].function == "_start"
    assert all(f.origin is Origin.NATIVE for f in main.frames)


def test_gdb_nccl_bootstrap_backtrace() -> None:
    # shape of ../shared/reference/anchors.md appendix (init hang, native stack)
    text = b"""#0  0x00007f3c8e11d4c7 in accept () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f3b2c4a1b2e in ncclSocketAccept (sock=0x7ffd1, listenSock=0x7ffd2) at misc/socket.cc:620
#2  0x00007f3b2c46d0f1 in bootstrapInit (nHandles=1, handles=0x55, comm=0x56) at bootstrap.cc:714
#3  0x00007f3b2c47a9d2 in ncclCommInitRankFunc (job_=<optimized out>) at init.cc:1540
#4  0x00007f3b2c47b113 in groupLaunch (job_=0x5) from /usr/lib/x86_64-linux-gnu/libnccl.so.2
#5  0x00007f3b2c47c001 in ncclCommInitRankConfig (newcomm=0x1, nranks=2, commId=..., myrank=0, config=0x2) from /usr/lib/x86_64-linux-gnu/libnccl.so.2
#6  0x00007f3b2c47c9aa in std::_Function_handler<void (), c10d::ProcessGroupNCCL::initNCCLComm(c10::Device&)::{lambda()#1}>::_M_invoke (__functor=...) from /usr/lib/libtorch_cuda.so
"""
    stack = only_text(text, "TP1.txt")
    frames = stack.threads[0].frames
    assert [f.function for f in frames] == [
        "accept", "ncclSocketAccept", "bootstrapInit", "ncclCommInitRankFunc", "groupLaunch", "ncclCommInitRankConfig", "_M_invoke",
    ]  # fmt: skip
    assert (frames[2].file, frames[2].line, frames[2].library) == ("bootstrap.cc", 714, None)
    assert frames[5].library == "libnccl.so.2" and frames[0].library == "libc.so.6"
    assert frames[6].qualname.startswith("std::_Function_handler<void (), c10d::ProcessGroupNCCL::initNCCLComm")


def test_kernel_stack_from_proc() -> None:
    stack = only("kernel_vllm_25127.txt", "reported.txt")
    assert stack.pid == 77637 and stack.native
    frames = stack.threads[0].frames
    assert [(f.function, f.library) for f in frames] == [
        ("uvm_spin_loop", "nvidia_uvm"),
        ("uvm_tracker_wait", "nvidia_uvm"),
        ("uvm_api_map_external_allocation", "nvidia_uvm"),
        ("uvm_io", "kernel"),  # the paste was cut off in the middle of the name
    ]


def test_kernel_stack_core_functions_are_kernel() -> None:
    stack = only_text(b"[<0>] futex_wait_queue+0x60/0x90\n[<0>] do_syscall_64+0x5b/0x110\n", "4242.txt")
    assert stack.pid == 4242
    assert [(f.function, f.library, f.origin) for f in stack.threads[0].frames] == [
        ("futex_wait_queue", "kernel", Origin.NATIVE),
        ("do_syscall_64", "kernel", Origin.NATIVE),
    ]


# ---------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\xff\xfe garbage \x80\x81",
        b"hello world\nnothing to see\n",
        b'[{"pid": ',
        b'{"a": 1}',
        b"[1, 2, 3]",
        b'"a string"',
        b"Process 12: sglang::scheduler_TP0\nPython v3.11\n",
        bytes(range(256)) * 50,
    ],
)
def test_unparsable_input_gives_empty_list(data: bytes) -> None:
    for name in ("TP0.txt", "TP0.json"):
        assert parse_stack_file(name, data, Source(f"stacks/{name}")) == []


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("TP0.json", ("TP0", 0)),
        ("TP0.1.json", ("TP0", 1)),
        ("stacks/DP0_TP3.12.txt", ("DP0_TP3", 12)),
        ("1234.txt", ("1234", 0)),
        ("reported.txt", ("reported", 0)),
        ("TP0.native.3.json", ("TP0", 3)),
        ("TP0.native.json", ("TP0", 0)),
    ],
)
def test_label_and_sample(name: str, expected: tuple[str, int]) -> None:
    assert label_and_sample(name) == expected


@pytest.mark.parametrize(
    ("filename", "function", "native", "origin"),
    [
        ("/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", "run", False, Origin.ENGINE),
        ("/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", "f", False, Origin.ENGINE),
        ("/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", "synchronize", False, Origin.TORCH),
        ("/venv/lib/python3.11/site-packages/flashinfer/jit/core.py", "build", False, Origin.LIBRARY),
        ("/usr/lib/python3.10/threading.py", "wait", False, Origin.LIBRARY),
        ("multiprocessing/connection.py", "wait", False, Origin.LIBRARY),
        ("sglang/launch_server.py", "<module>", False, Origin.ENGINE),
        ("model_loader/loader.py", "load_model", False, Origin.ENGINE),
        ("scheduler.py", "run_scheduler_process", False, Origin.ENGINE),
        ("<string>", "<module>", False, Origin.LIBRARY),
        ("/home/me/serve.py", "<module>", False, Origin.USER),
        # library source checkouts (editable installs) are the library's code, not the user's
        ("/workspace/flashinfer/python/flashinfer/jit/core.py", "build", False, Origin.LIBRARY),
        ("/src/triton/python/triton/compiler/compiler.py", "compile", False, Origin.LIBRARY),
        ("/work/main/lab/gpu/user_hooks.py", "after_weights_loaded", False, Origin.USER),
        # code torch.compile generated runs from a temp or cache dir, and is torch's, not the user's
        # (seen live in a vLLM CPU worker's warm-up; a "user" frame there made a healthy start stall)
        ("/tmp/torchinductor_root/zg/czg326q6q4lsb5dxwrpzx.py", "<module>", False, Origin.TORCH),
        ("/root/.cache/vllm/torch_compile_cache/torch_aot_compile/6f55/inductor_cache/zg/czg3.py", "call", False, Origin.TORCH),
        ("dist_hang.py", "<module>", False, Origin.USER),
        ("libc.so.6", "poll", True, Origin.NATIVE),
        (None, "apply", False, Origin.LIBRARY),
    ],
)
def test_frame_origin(filename: str | None, function: str, native: bool, origin: Origin) -> None:
    assert frame_origin(filename, function, native) is origin


def test_relative_file() -> None:
    assert relative_file("/opt/venv/lib/python3.11/site-packages/sglang/srt/utils.py") == "sglang/srt/utils.py"
    assert relative_file("/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py") == "vllm/engine/llm_engine.py"
    assert relative_file("/root/.pyenv/versions/3.11.7/lib/python3.11/multiprocessing/connection.py") == "multiprocessing/connection.py"
    assert relative_file("/usr/lib64/python3.13t/selectors.py") == "selectors.py"
    assert relative_file("/home/me/serve.py") == "/home/me/serve.py"


@pytest.mark.parametrize(
    ("name", "native", "expected"),
    [
        ("Worker.run.<locals>.inner", False, ("inner", "Worker.run.<locals>.inner")),
        ("<module>", False, ("<module>", "<module>")),
        ("DefaultModelLoader._get_weights_iterator.<locals>.<genexpr>", False, ("<genexpr>", "DefaultModelLoader._get_weights_iterator.<locals>.<genexpr>")),
        ("c10d::TCPStore::waitForWorkers", True, ("waitForWorkers", "c10d::TCPStore::waitForWorkers")),
        ("c10d::detail::TCPClient::receiveValueWithTimeout<c10d::detail::WaitResponseType>", True,
         ("receiveValueWithTimeout", "c10d::detail::TCPClient::receiveValueWithTimeout<c10d::detail::WaitResponseType>")),
        ("safetensors_rust::Open::new::hb84c69fe05b2d5e1", True, ("new", "safetensors_rust::Open::new")),
        ("clock_nanosleep@GLIBC_2.2.5", True, ("clock_nanosleep", "clock_nanosleep")),
        ("0x7f6ac44a3f16", True, ("0x7f6ac44a3f16", "0x7f6ac44a3f16")),
    ],
)  # fmt: skip
def test_split_name(name: str, native: bool, expected: tuple[str, str]) -> None:
    assert split_name(name, native) == expected


# ---------------------------------------------------------------- cross-rank view


def _stack(label: str, *qualnames: str, sample: int = 0, native_top: bool = False) -> ProcessStack:
    frames = [Frame(q.rsplit(".", 1)[-1], q, f"m/{q}.py", 10 + i, Origin.ENGINE) for i, q in enumerate(qualnames)]
    if native_top:
        frames.insert(0, Frame("poll", "poll", None, None, Origin.NATIVE, "libc.so.6"))
    thread = ThreadStack("MainThread", 1, tuple(frames))
    return ProcessStack(label, 1, (thread,), Source(f"stacks/{label}.json"), sample=sample)


def test_stack_signature_drops_lines_and_native_frames_and_caps_depth() -> None:
    a = _stack("TP0", "wait", "GroupCoordinator.all_reduce", "<module>")
    b = _stack("TP1", "wait", "GroupCoordinator.all_reduce", "<module>", native_top=True)
    assert stack_signature(a) == stack_signature(b) == "wait < GroupCoordinator.all_reduce < <module>"
    assert stack_signature(a, depth=1) == "wait"
    assert stack_signature(ProcessStack("x", None, (), Source("stacks/x.txt"))) == ""


def test_group_by_signature_names_the_outlier_and_uses_latest_sample() -> None:
    stacks = [
        _stack("TP0", "synchronize", "capture"),
        _stack("TP1", "synchronize", "capture"),
        _stack("TP2", "load_weights", "capture"),  # an old sample of TP2
        _stack("TP2", "synchronize", "capture", sample=1),
        _stack("TP3", "bootstrapInit", "init"),
    ]
    assert group_by_signature(stacks) == {
        "synchronize < capture": ["TP0", "TP1", "TP2"],
        "bootstrapInit < init": ["TP3"],
    }


def test_json_user_file_shows_short_name_but_origin_from_full_path() -> None:
    # a user script called scheduler.py is not SGLang's scheduler, though its short name looks so
    frame = {"name": "main", "filename": "/home/me/scheduler.py", "short_filename": "scheduler.py", "line": 3, "module": None}
    stack = parse_pyspy_json([{"pid": 5, "os_thread_id": 5, "thread_name": "MainThread", "frames": [frame]}], "5", Source("stacks/5.json"))
    top = stack.main.frames[0]  # type: ignore[union-attr]
    assert (top.file, top.origin, top.library) == ("scheduler.py", Origin.USER, None)
