"""Each atom on hand-built evidence: whether it holds, and the exact facts it contributes."""

from __future__ import annotations

from hangwatch.classify.language.atoms import ARGS, ATOMS
from hangwatch.classify.language.conditions import Outcome
from hangwatch.model import (
    Evidence,
    Fact,
    GpuInfo,
    GpuProcess,
    GpuSample,
    ListeningSocket,
    Origin,
    Phase,
    ProcessRecord,
    Source,
    ThreadStack,
)
from helpers.classify_builders import check, event, frame, logs, stack

LOG = Evidence(
    log=logs(
        "Init torch distributed begin.",
        "[TP0] Load weight begin.",
        "[TP0] Load weight end.",
        "[TP1] Load weight end.",
        "NCCL version 2.21.5",
    )
)


def test_every_atom_has_a_parser() -> None:
    assert ATOMS.keys() == ARGS.keys()
    assert len(ATOMS) == 37  # 34 + host.* and preflight.finding (preflight) + log.waits


# ---------------------------------------------------------------- log


def test_log_matches_quotes_the_latest_matching_line() -> None:
    # WHEN
    outcome = check("log.matches: 'Load weight end'", LOG)
    # THEN
    assert outcome.held
    assert outcome.facts == (Fact("[TP1] Load weight end.  (+1 more matching lines)", Source("server.log", 4)),)
    assert outcome.values == {"line": "[TP1] Load weight end."}
    assert outcome.atoms == 1


def test_log_matches_does_not_hold_without_a_match() -> None:
    assert check("log.matches: 'KV Cache is allocated'", LOG) == Outcome(False)


def test_log_matches_is_case_sensitive_unless_flagged() -> None:
    assert not check("log.matches: 'nccl version'", LOG).held
    assert check("log.matches: '(?i)nccl version'", LOG).held


def test_log_absent_holds_when_no_line_matches() -> None:
    outcome = check("log.absent: 'KV Cache is allocated'", LOG)
    assert outcome.facts == (Fact("no log line matches 'KV Cache is allocated'", Source("server.log")),)


def test_log_absent_needs_a_log() -> None:
    assert not check("log.absent: 'anything'", Evidence()).held
    assert not check("log.absent: 'NCCL'", LOG).held


def test_log_tail_looks_at_the_last_lines_only() -> None:
    assert not check("log.tail: {matches: 'Init torch', lines: 3}", LOG).held
    outcome = check("log.tail: {matches: 'Init torch', lines: 5}", LOG)
    assert outcome.facts == (Fact("Init torch distributed begin.", Source("server.log", 1)),)


def test_log_tail_defaults_to_five_lines_and_skips_blank_lines() -> None:
    evidence = Evidence(log=logs("x marker", "a", "b", "c", "d", "", "   "))
    assert check("log.tail: 'marker'", evidence).held


def test_log_count() -> None:
    assert check("log.count: {matches: 'Load weight', gte: 3}", LOG).held
    assert not check("log.count: {matches: 'Load weight', gte: 4}", LOG).held
    outcome = check("log.count: {matches: 'Load weight end', gte: 2, lte: 2}", LOG)
    assert outcome.facts == (Fact("[TP1] Load weight end.  (+1 more matching lines)", Source("server.log", 4)),)


def test_log_facts_carry_the_rank() -> None:
    evidence = Evidence(log=logs("Load weight begin.", rank="TP3", start=7))
    outcome = check("log.matches: 'Load weight'", evidence)
    assert outcome.facts == (Fact("Load weight begin.", Source("server.log", 7, "TP3")),)


def test_long_lines_are_clipped_in_facts() -> None:
    evidence = Evidence(log=logs("x" * 1000))
    (fact,) = check("log.matches: x", evidence).facts
    assert len(fact.text) == 240 and fact.text.endswith("…")


# ---------------------------------------------------------------- phases

PHASED = Evidence(
    log=logs(*["line"] * 10),
    phases=(
        event(Phase.DIST_INIT, "TP0", 1),
        event(Phase.DIST_INIT, "TP1", 2),
        event(Phase.DIST_INIT, "TP0", 3, end=True),
        event(Phase.WEIGHT_LOAD, "TP0", 4),
        event(Phase.WEIGHT_LOAD, "TP0", 5, end=True),
    ),
)


def test_phase_reached_quotes_the_first_line_of_that_phase_or_later() -> None:
    outcome = check("phase.reached: weight_load", PHASED)
    assert outcome.facts == (Fact("weight_load begin", Source("server.log", 4, "TP0")),)
    assert not check("phase.reached: kv_cache", PHASED).held


def test_phase_at_is_about_the_rank_furthest_behind() -> None:
    outcome = check("phase.at: dist_init", PHASED)
    assert outcome.facts == (Fact("TP1 in dist_init: dist_init begin", Source("server.log", 2, "TP1")),)
    assert outcome.values == {"phase": "dist_init"}
    assert not check("phase.at: weight_load", PHASED).held
    assert check("phase.at: {in: [launch, dist_init]}", PHASED).held


def test_phase_after_holds_when_the_phase_ended_and_nothing_began() -> None:
    evidence = Evidence(phases=(event(Phase.WEIGHT_LOAD, "TP0", 1), event(Phase.WEIGHT_LOAD, "TP0", 2, end=True)))
    outcome = check("phase.after: weight_load", evidence)
    assert outcome.facts == (Fact("TP0 finished weight_load: weight_load end", Source("server.log", 2, "TP0")),)
    assert not check("phase.at: weight_load", evidence).held


def test_phase_split_names_the_ranks_behind() -> None:
    outcome = check("phase.split: true", PHASED)
    assert outcome.culprits == ("TP1",)
    assert outcome.facts == (
        Fact("TP1 in dist_init: dist_init begin", Source("server.log", 2, "TP1")),
        Fact("TP0 finished weight_load: weight_load end", Source("server.log", 5, "TP0")),
    )


def test_phase_split_false_when_ranks_agree() -> None:
    together = Evidence(phases=(event(Phase.DIST_INIT, "TP0", 1), event(Phase.DIST_INIT, "TP1", 2)))
    assert check("phase.split: false", together).held
    assert not check("phase.split: true", together).held
    assert not check("phase.split: false", Evidence()).held  # no ranks: no claim either way


def test_launcher_lines_count_once_ranks_are_done() -> None:
    evidence = Evidence(
        phases=(
            event(Phase.CUDA_GRAPH, "TP0", 1, end=True),
            event(Phase.HTTP_UP, None, 2),
        )
    )
    assert check("phase.at: http_up", evidence).held


# ---------------------------------------------------------------- stacks

COLLECTIVE = frame("all_reduce", "torch/distributed/distributed_c10d.py", Origin.TORCH)
LOADING = frame("DefaultModelLoader.load_weights", "sglang/srt/model_loader/loader.py")
STACKS = Evidence(
    stacks=(
        stack("TP0", COLLECTIVE),
        stack("TP1", COLLECTIVE),
        stack("TP2", COLLECTIVE),
        stack("TP3", LOADING, frame("Scheduler.__init__")),
    )
)


def test_stack_frame_any_groups_ranks_by_frame() -> None:
    outcome = check("stack.frame: 'all_reduce'", STACKS)
    assert outcome.facts == (
        Fact(
            "TP0, TP1, TP2: all_reduce (torch/distributed/distributed_c10d.py)",
            Source("stacks/TP0.json", None, "TP0, TP1, TP2"),
        ),
    )
    assert outcome.values == {"frame": "all_reduce (torch/distributed/distributed_c10d.py)"}
    assert outcome.culprits == ()


def test_stack_frame_all_and_none() -> None:
    assert not check("stack.frame: {match: all_reduce, ranks: all}", STACKS).held
    assert check("stack.frame: {match: 'c10d|Scheduler', ranks: all}", STACKS).held
    outcome = check("stack.frame: {match: flashinfer, ranks: none}", STACKS)
    assert outcome.facts == (Fact("no rank shows a frame matching 'flashinfer'", Source("stacks/")),)
    assert not check("stack.frame: {match: flashinfer, ranks: none}", Evidence()).held


def test_stack_frame_outlier_names_the_minority() -> None:
    outcome = check("stack.frame: {match: load_weights, ranks: outlier}", STACKS)
    assert outcome.culprits == ("TP3",)
    assert outcome.facts == (
        Fact(
            "TP3: DefaultModelLoader.load_weights (sglang/srt/model_loader/loader.py)",
            Source("stacks/TP3.json", None, "TP3"),
        ),
    )
    assert not check("stack.frame: {match: all_reduce, ranks: outlier}", STACKS).held  # a majority


def test_stack_frame_top_limits_the_depth() -> None:
    assert not check("stack.frame: {match: 'Scheduler', top: 1}", STACKS).held
    assert check("stack.frame: {match: 'Scheduler', top: 2}", STACKS).held


def test_stack_frame_thread_main_ignores_other_threads() -> None:
    warmup = ThreadStack("Thread-2 (_wait_and_warmup)", 2, (frame("Session.post", "requests/sessions.py"),))
    evidence = Evidence(stacks=(stack("123", frame("Server.serve", "uvicorn/server.py"), extra=(warmup,)),))
    assert not check("stack.frame: {match: 'requests/', thread: main}", evidence).held
    outcome = check("stack.frame: {match: 'requests/'}", evidence)
    assert outcome.facts == (
        Fact(
            "pid 123: Session.post (requests/sessions.py) [thread Thread-2 (_wait_and_warmup)]",
            Source("stacks/123.json", None, "pid 123"),
        ),
    )


def test_stack_frame_roles_and_pid_labels_from_procs() -> None:
    procs = (
        ProcessRecord(10, 1, "sglang::scheduler_TP0", "scheduler", rank="TP0"),
        ProcessRecord(11, 1, "sglang::detokenizer", "detokenizer"),
    )
    evidence = Evidence(procs=procs, stacks=(stack("10", COLLECTIVE), stack("11", frame("from_pretrained"))))
    outcome = check("stack.frame: {match: from_pretrained, roles: [detokenizer, tokenizer]}", evidence)
    assert outcome.facts == (Fact("pid 11: from_pretrained (sglang/srt/x.py)", Source("stacks/11.json", None, "pid 11")),)
    # `all` counts over ranks only: the detokenizer is not one
    assert check("stack.frame: {match: all_reduce, ranks: all}", evidence).held


def test_stack_frame_uses_the_latest_sample() -> None:
    evidence = Evidence(stacks=(stack("TP0", LOADING, sample=0), stack("TP0", COLLECTIVE, sample=1)))
    assert check("stack.frame: all_reduce", evidence).held
    assert not check("stack.frame: load_weights", evidence).held


def test_stack_origin() -> None:
    hook = frame("dump_hidden_states", "/home/me/hooks.py", Origin.USER)
    evidence = Evidence(stacks=(stack("TP0", hook, LOADING),))
    outcome = check("stack.origin: user", evidence)
    assert outcome.facts == (Fact("TP0: dump_hidden_states (/home/me/hooks.py)", Source("stacks/TP0.json", None, "TP0")),)
    assert not check("stack.origin: {in: [native]}", evidence).held


def test_stack_outlier() -> None:
    outcome = check("stack.outlier: true", STACKS)
    assert outcome.culprits == ("TP3",)
    assert outcome.facts == (
        Fact("TP3 stands apart: DefaultModelLoader.load_weights (sglang/srt/model_loader/loader.py)", Source("stacks/TP3.json", None, "TP3")),
        Fact("TP0, TP1, TP2 (3 ranks): all_reduce (torch/distributed/distributed_c10d.py)", Source("stacks/TP0.json", None, "TP0")),
    )
    assert not check("stack.outlier: false", STACKS).held


def test_stack_outlier_needs_a_majority() -> None:
    two = Evidence(stacks=(stack("TP0", COLLECTIVE), stack("TP1", LOADING)))
    assert not check("stack.outlier: true", two).held
    same = Evidence(stacks=(stack("TP0", COLLECTIVE), stack("TP1", COLLECTIVE)))
    assert check("stack.outlier: false", same).held


def test_stack_dumped() -> None:
    assert check("stack.dumped: true", STACKS).facts == (Fact("4 processes dumped", Source("stacks/")),)
    assert check("stack.dumped: false", Evidence()).held
    assert not check("stack.dumped: true", Evidence()).held


# ---------------------------------------------------------------- GPUs

RTX = GpuInfo(0, "NVIDIA RTX PRO 6000 Blackwell", compute_capability="12.0", utilization_pct=100.0, memory_used_mib=1000)
H100 = GpuInfo(1, "NVIDIA H100 80GB HBM3", compute_capability="9.0", utilization_pct=0.0, memory_used_mib=1000)


def _gpus(*samples: tuple[float, tuple[GpuInfo, ...]]) -> Evidence:
    return Evidence(gpus=tuple(GpuSample(t, gpus) for t, gpus in samples))


def test_gpu_compute_capability_from_samples() -> None:
    outcome = check("gpu.compute_capability: {in: ['12.0', '12.1']}", _gpus((5.0, (RTX,))))
    assert outcome.facts == (
        Fact("GPU 0: NVIDIA RTX PRO 6000 Blackwell, compute capability 12.0", Source("gpus.json", detail="t=5s, GPU 0")),
    )
    assert outcome.values == {"gpu.name": "NVIDIA RTX PRO 6000 Blackwell", "gpu.compute_capability": "12.0"}


def test_gpu_falls_back_to_meta_and_compares_numbers() -> None:
    evidence = Evidence(meta={"gpu_model": "NVIDIA GeForce RTX 5090", "compute_capability": 12.0})
    outcome = check("gpu.compute_capability: 12.0", evidence)
    assert outcome.facts == (Fact("GPU: NVIDIA GeForce RTX 5090, compute capability 12.0", Source("meta.json")),)
    assert check("gpu.compute_capability: {gte: 10}", evidence).held
    assert check("gpu.name: 'RTX 5090'", evidence).held
    assert not check("gpu.name: H100", evidence).held


def test_gpu_pcie_only() -> None:
    assert check("gpu.pcie_only: true", _gpus((0.0, (RTX,)))).facts == (
        Fact("GPU 0: NVIDIA RTX PRO 6000 Blackwell (PCIe only, no NVLink)", Source("gpus.json", detail="t=0s, GPU 0")),
    )
    assert not check("gpu.pcie_only: true", _gpus((0.0, (H100,)))).held
    assert check("gpu.pcie_only: false", _gpus((0.0, (H100,)))).held
    assert not check("gpu.pcie_only: true", Evidence()).held
    for name in ("NVIDIA L20", "NVIDIA A16", "NVIDIA A2", "Tesla P40", "NVIDIA TITAN V", "NVIDIA GeForce RTX 3090", "NVIDIA A100-PCIE-40GB"):
        assert check("gpu.pcie_only: true", Evidence(meta={"gpu_model": name})).held, name
    for name in ("NVIDIA H20", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA B200", "NVIDIA A800-SXM4-80GB"):
        assert not check("gpu.pcie_only: true", Evidence(meta={"gpu_model": name})).held, name


def test_gpu_util_quantifiers_and_rank_names() -> None:
    idle = GpuInfo(2, "NVIDIA H100 80GB HBM3", utilization_pct=0.0, processes=(GpuProcess(22),))
    busy = [GpuInfo(i, "NVIDIA H100 80GB HBM3", utilization_pct=100.0) for i in range(3)]
    procs = (ProcessRecord(22, 1, "sglang::scheduler_TP2", "scheduler", rank="TP2"),)
    evidence = Evidence(procs=procs, gpus=(GpuSample(1.0, (busy[0], busy[1], idle, GpuInfo(3, "H100", utilization_pct=100.0))),))
    outcome = check("gpu.util: {lt: 5, gpus: outlier}", evidence)
    assert outcome.culprits == ("TP2",)
    assert outcome.facts == (
        Fact("TP2: NVIDIA H100 80GB HBM3 at 0% utilisation", Source("gpus.json", detail="t=1s, GPU 2")),
    )
    assert check("gpu.util: {gte: 90}", evidence).held
    assert not check("gpu.util: {gte: 90, gpus: all}", evidence).held


def test_gpu_util_uses_the_latest_sample() -> None:
    busy = GpuInfo(0, "H100", utilization_pct=100.0)
    idle = GpuInfo(0, "H100", utilization_pct=0.0)
    assert check("gpu.util: {lte: 1}", _gpus((2.0, (idle,)), (1.0, (busy,)))).held


def test_gpu_memory_trend_over_the_recent_window() -> None:
    def mem(mib: float) -> tuple[GpuInfo, ...]:
        return (GpuInfo(0, "H100", memory_used_mib=mib),)

    rising = _gpus((0.0, mem(1000)), (10.0, mem(5000)))
    assert check("gpu.memory: rising", rising).facts == (
        Fact("GPU memory rising: 1000 → 5000 MiB over 10s", Source("gpus.json")),
    )
    # rose long ago, flat over the last two minutes
    settled = _gpus((0.0, mem(1000)), (200.0, mem(5000)), (300.0, mem(5010)), (400.0, mem(5020)))
    assert check("gpu.memory: flat", settled).held
    assert not check("gpu.memory: flat", _gpus((0.0, mem(1000)))).held  # one sample: no trend


# ---------------------------------------------------------------- processes and ports

PROCS = Evidence(
    procs=(
        ProcessRecord(1, None, "python -m sglang.launch_server", "launcher", state="S"),
        ProcessRecord(10, 1, "sglang::scheduler_TP0", "scheduler", rank="TP0", state="S", num_threads=90),
        ProcessRecord(11, 1, "sglang::scheduler_TP1", "scheduler", rank="TP1", alive=False, exit_code=-9),
        ProcessRecord(12, 10, "ninja -v", "compiler", state="R"),
        ProcessRecord(13, 10, "nvcc x.cu", "compiler", alive=False, exit_code=0),
        ProcessRecord(14, 1, "sglang::detokenizer", "detokenizer", state="D"),
    ),
)


def test_proc_dead_names_the_rank() -> None:
    outcome = check("proc.dead: {roles: [scheduler, worker]}", PROCS)
    assert outcome.culprits == ("TP1",)
    assert outcome.facts == (Fact("scheduler TP1 (pid 11) exited with code -9", Source("procs.json", detail="TP1")),)


def test_proc_dead_default_roles_skip_compilers() -> None:
    assert check("proc.dead: true", PROCS).culprits == ("TP1",)
    assert not check("proc.dead: {roles: [launcher]}", PROCS).held


def test_proc_dead_sees_zombies() -> None:
    zombie = Evidence(procs=(ProcessRecord(5, 1, "w", "worker", rank="TP5", state="Z"),))
    assert check("proc.dead: true", zombie).facts == (Fact("worker TP5 (pid 5) is a zombie", Source("procs.json", detail="TP5")),)


def test_proc_state_children_threads() -> None:
    assert check("proc.state: {in: [D]}", PROCS).facts == (
        Fact("detokenizer (pid 14) in state D", Source("procs.json", detail="14")),
    )
    assert not check("proc.state: {in: [D], roles: [scheduler]}", PROCS).held
    assert check("proc.children: compiler", PROCS).facts == (
        Fact("compiler (pid 12) alive: ninja -v", Source("procs.json", detail="12")),
    )
    assert check("proc.threads: {gte: 64}", PROCS).facts == (
        Fact("scheduler TP0 (pid 10) has 90 threads", Source("procs.json", detail="TP0")),
    )
    assert not check("proc.threads: {gte: 100}", PROCS).held


def test_port_listening_and_conflict() -> None:
    procs = (ProcessRecord(1, None, "python -m sglang.launch_server", "launcher"),)
    stranger = Evidence(
        engine="sglang", procs=procs, flags={"port": "30001"},
        ports=(ListeningSocket("0.0.0.0", 30001, pid=999, process="python3"),),
    )  # fmt: skip
    assert check("port.listening: true", stranger).facts == (Fact("port 30001 is listening", Source("ports.txt")),)
    assert check("port.conflict: true", stranger).facts == (
        Fact("port 30001 is held by python3 (pid 999), not by the server", Source("ports.txt")),
    )
    closed = Evidence(engine="sglang", procs=procs, ports_text="State Recv-Q ...\n")
    assert check("port.listening: false", closed).facts == (Fact("nothing listens on port 30000", Source("ports.txt")),)
    assert not check("port.listening: false", Evidence(engine="sglang")).held  # ports unknown


def test_an_assumed_port_accuses_nobody() -> None:
    # no port flag read (a title hangwatch could not split, or none given): 30000 is the engine's
    # default, assumed; a stranger holding it is no evidence against it
    procs = (ProcessRecord(1, None, "python -m sglang.launch_server", "launcher"),)
    stranger = ListeningSocket("0.0.0.0", 30000, pid=999, process="python3")
    assumed = Evidence(engine="sglang", procs=procs, flags={}, server_port=30000, ports=(stranger,))
    assert not check("port.conflict: true", assumed).held
    read = Evidence(engine="sglang", procs=procs, flags={"port": "30000"}, server_port=30000, ports=(stranger,))
    assert check("port.conflict: true", read).held


# ---------------------------------------------------------------- configuration

CONFIG = Evidence(
    engine="vllm",
    cmdline="vllm serve m --tensor-parallel-size 4 --enforce-eager",
    flags={"tensor-parallel-size": "4", "enforce-eager": True, "attention_backend": "FLASHINFER"},
    env={"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
    meta={"nnodes": 2, "engine_version": "0.6.3"},
    dmesg=("[1.0] ok", "[2.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus"),
)


def test_flags_with_aliases_and_comparisons() -> None:
    assert check("flag.tp: {gt: 2}", CONFIG).facts == (Fact("--tp 4", Source("cmdline.txt")),)
    assert check("flag.tp: 4", CONFIG).held
    assert check("flag.enforce-eager: true", CONFIG).facts == (Fact("--enforce-eager", Source("cmdline.txt")),)
    assert check("flag.attention-backend: FLASHINFER", CONFIG).held
    assert check("flag.nnodes: {gt: 1}", CONFIG).facts == (Fact("--nnodes 2", Source("meta.json", detail="nnodes")),)


def test_flag_absent_only_when_the_command_line_is_known() -> None:
    assert check("flag.disable-custom-all-reduce: false", CONFIG).facts == (
        Fact("no --disable-custom-all-reduce on the command line", Source("cmdline.txt")),
    )
    assert not check("flag.disable-custom-all-reduce: false", Evidence()).held
    assert not check("flag.enforce-eager: false", CONFIG).held


def test_env_regex_glob_and_absence() -> None:
    assert check("env.NCCL_P2P_DISABLE: '^1$'", CONFIG).facts == (Fact("NCCL_P2P_DISABLE=1", Source("env.txt")),)
    assert check("env.NCCL_*: true", CONFIG).facts == (
        Fact("NCCL_P2P_DISABLE=1", Source("env.txt")),
        Fact("NCCL_DEBUG=INFO", Source("env.txt")),
    )
    assert check("env.NCCL_SOCKET_IFNAME: {present: false}", CONFIG).facts == (
        Fact("NCCL_SOCKET_IFNAME is not set", Source("env.txt")),
    )
    assert not check("env.NCCL_SOCKET_IFNAME: {present: false}", Evidence()).held


def test_meta_engine_cmdline_dmesg() -> None:
    assert check("meta.nnodes: {gt: 1}", CONFIG).facts == (Fact("nnodes = 2", Source("meta.json")),)
    assert check("meta.engine_version: {matches: '^0\\.6'}", CONFIG).held
    assert check("engine: vllm", CONFIG).facts == (Fact("engine vllm", Source("server.log", detail="guessed")),)
    assert not check("engine: sglang", CONFIG).held
    assert check("cmdline.matches: enforce-eager", CONFIG).facts == (Fact(CONFIG.cmdline or "", Source("cmdline.txt")),)
    assert check("dmesg.matches: 'Xid'", CONFIG).facts == (
        Fact("[2.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus", Source("dmesg.txt", 2)),
    )


def test_quiet_s_unknown_holds() -> None:
    assert check("quiet_s: {gte: 600}", Evidence()) == Outcome(True, atoms=1)
    known = Evidence(since_last_progress_s=700.0)
    assert check("quiet_s: {gte: 600}", known).facts == (
        Fact("no progress for 700s", Source("meta.json", detail="since_last_progress_s")),
    )
    assert not check("quiet_s: {gte: 800}", known).held
    assert check("quiet_s: {gte: 600}", Evidence(meta={"since_last_progress_s": 601})).held


def test_evidence_only_meta() -> None:
    assert check("evidence.only_meta: true", Evidence(meta={"engine": "sglang"})).held
    assert check("evidence.only_meta: false", LOG).held


# ---------------------------------------------------------------- combinators


def test_all_any_not_merge_facts_and_count_atoms() -> None:
    outcome = check(
        """
all:
  - log.matches: 'NCCL version'
  - any:
      - log.matches: 'Load weight begin'
      - log.matches: 'never'
      - log.matches: 'Init torch'
  - not: {log.matches: 'fired up'}
""",
        LOG,
    )
    assert outcome.atoms == 4
    assert outcome.facts == (
        Fact("NCCL version 2.21.5", Source("server.log", 5)),
        Fact("[TP0] Load weight begin.", Source("server.log", 2)),
        Fact("Init torch distributed begin.", Source("server.log", 1)),
    )
    assert outcome.values["line"] == "NCCL version 2.21.5"


def test_not_fails_when_its_child_holds() -> None:
    assert not check("not: {log.matches: 'NCCL'}", LOG).held
