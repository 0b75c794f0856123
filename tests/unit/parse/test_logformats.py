"""Phases read from the engines' own log formats (issue 19, item 4): the mined index's `logger.*`
formats of start-up code, mapped to phases by hangwatch/data/log_phases.yaml, read the lines that no
hand marker (engines/sglang.py, engines/vllm.py) reads, on releases nobody wrote a marker for.

The log lines are the engines' formats filled in: every mapped format of every sampled release, and
by hand a few lines of older and newer releases than the markers were written from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hangwatch.bundle.read import read_bundle
from hangwatch.engines import get_engine, rank_positions
from hangwatch.errors import RuleError
from hangwatch.model import Phase, PhaseEvent
from hangwatch.parse.engine_words import split_template
from hangwatch.parse.logformats import (
    FORMAT_KEY,
    NOTE_KEY,
    RELEASE_KEY,
    UNKNOWN_HINT,
    UNSAMPLED_HINT,
    formats_for,
    formats_note,
    load_table,
    nearest_release,
    read_phases,
)
from hangwatch.parse.logs import read_log_lines
from helpers.paths import DEV_CORPUS

PREFIX = {"sglang": "[2026-01-01 10:00:00 TP0] ", "vllm": "(EngineCore pid=1) INFO 01-01 10:00:00 [x.py:1] "}
FILL = {"int": "8", "float": "1.25", "path": "/models/m", "word": "x", "any": "x"}


def filled(template: str) -> str:
    """A format as the engine prints it: every hole filled with a value of its type."""
    return "".join(part if isinstance(part, str) else FILL[part[0]] for part in split_template(template))


def events(engine: str, text: str, version: str | None = None) -> tuple[PhaseEvent, ...]:
    return read_phases(get_engine(engine), read_log_lines(text.encode()), version=version)


def fallback(evs: tuple[PhaseEvent, ...]) -> list[PhaseEvent]:
    return [e for e in evs if FORMAT_KEY in e.detail]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_mapped_format_reads_as_its_phase(engine: str) -> None:
    # GIVEN every start-up format the table maps, printed by the oldest sampled release that has it
    formats = formats_for(engine)
    assert formats is not None and len(formats.formats) > 200
    wrong, by_hand = [], 0
    for fmt in formats.formats:
        line = PREFIX[engine] + filled(fmt.template).replace("\n", " ")
        release = min(fmt.releases, key=formats.releases.index)
        # WHEN that one line is read with that release's formats
        evs = events(engine, line, release)
        if evs and FORMAT_KEY not in evs[0].detail:
            by_hand += 1  # a hand marker reads it: it keeps the line
            continue
        # THEN it is the table's phase, and the event names the format's code and release
        if len(evs) != 1 or evs[0].phase is not fmt.phase or evs[0].end is not fmt.end:
            wrong.append((fmt.where, release, line))
        elif evs[0].detail[RELEASE_KEY] != f"{formats.title} {release}":
            wrong.append((fmt.where, release, evs[0].detail[RELEASE_KEY]))
    assert not wrong
    assert by_hand < len(formats.formats) // 2  # most mapped formats are lines no marker reads


# Lines of releases older and newer than the markers were written from (SGLang 0.4.6/0.5.9/0.5.23,
# vLLM 0.11/0.33), rendered from the mined formats of the release named.
MISSED_BY_HAND = [
    # SGLang 0.4.3's KV pool line has no `#tokens:` yet
    ("sglang", "0.4.3", "KV Cache is allocated. K size: 3.07 GB, V size: 3.07 GB.", Phase.KV_CACHE, False),
    # SGLang 0.4.9-0.5.12 hierarchical cache
    ("sglang", "0.5.12", "Allocating 12.50 GB host memory for hierarchical KV cache.", Phase.KV_CACHE, False),
    # SGLang 0.5.12 named its HTTP/2 server without "embedded"
    ("sglang", "0.5.12", "Starting Granian HTTP/2 server on 0.0.0.0:30000", Phase.HTTP_UP, True),
    # SGLang 0.5.17+: a prefill graph capture, a name the markers never saw
    ("sglang", "0.5.23", "Capture tc_piecewise prefill CUDA graph begin. backend=tc_piecewise, num_tokens=[8, 16], "
     "avail mem=61.20 GB", Phase.CUDA_GRAPH, False),
    ("sglang", "0.4.9", "Start of prefill warmup ...", Phase.WARMUP, False),
    ("sglang", "0.5.12", "Created global TCPStore at 10.0.0.1:29500 (rank=0, world_size=8)", Phase.DIST_INIT, False),
    # vLLM 0.17+ picks its model runner right after distributed init
    ("vllm", "0.32.0", "Using V2 Model Runner", Phase.DIST_INIT, False),
    ("vllm", "0.13.0", "Initial free memory 78.50 GiB, reserved 20.00 GiB memory for KV Cache as specified by "
     "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the gpu_memory_utilization "
     "config. Only use kv_cache_memory_bytes config when you want manual control of KV cache memory size. If OOM'ed, "
     "check the difference of initial free memory between the current run and the previous run where "
     "kv_cache_memory_bytes is suggested and update it correspondingly.", Phase.KV_CACHE, False),
    ("vllm", "0.10.2", "Cache the graph for dynamic shape for later use", Phase.ATTN_BACKEND, False),
    ("vllm", "0.32.0", "CUDA graph pool memory: 0.41 GiB (actual), 0.45 GiB (estimated), difference: 0.04 GiB (9.8%).",
     Phase.CUDA_GRAPH, False),
]


@pytest.mark.parametrize(("engine", "release", "message", "phase", "end"), MISSED_BY_HAND)
def test_a_line_no_marker_reads_is_read_by_its_format(engine: str, release: str, message: str, phase: Phase,
                                                      end: bool) -> None:  # fmt: skip
    text = PREFIX[engine] + message + "\n"
    (event,) = events(engine, text, release)
    assert FORMAT_KEY in event.detail  # no hand marker: the mined format read it
    assert (event.phase, event.end, event.rank) == (phase, end, "TP0" if engine == "sglang" else None)
    assert NOTE_KEY not in event.detail  # the release's own formats: nothing to say


SGLANG_061 = """\
[2026-01-01 10:00:00 TP0] Init torch distributed begin.
[2026-01-01 10:00:02 TP0] Init torch distributed ends. mem usage=0.00 GB
[2026-01-01 10:00:02 TP0] Load weight begin. avail mem=78.00 GB
[2026-01-01 10:00:30 TP0] Load weight end. elapsed=28.0 s, type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=70.00 GB, mem usage=8.00 GB.
[2026-01-01 10:00:31 TP0] Created global TCPStore at 10.0.0.1:29500 (rank=0, is_master=True)
[2026-01-01 10:00:31 TP0] Capture tc_piecewise prefill CUDA graph begin. backend=tc_piecewise, num_tokens=[8, 16], avail mem=61.20 GB
"""


def test_a_newer_release_is_read_with_the_nearest_mined_one_and_says_so() -> None:
    # GIVEN SGLang 0.6.1, newer than any mined release, capturing a prefill graph after its weights
    evs = events("sglang", SGLANG_061, "0.6.1")
    # THEN the capture line is read with 0.5.23's formats (the nearest), and the event says so
    extra = fallback(evs)
    assert [(e.phase, e.lineno) for e in extra] == [(Phase.CUDA_GRAPH, 6)]
    assert extra[0].detail[NOTE_KEY] == "phases read with SGLang 0.5.23's log formats (nearest to 0.6.1)"
    assert rank_positions(evs) == {"TP0": (Phase.CUDA_GRAPH, False)}
    # the TCPStore line (dist_init) came after the weights: it does not move the rank back
    assert all(e.lineno != 5 for e in evs)
    note = formats_note(evs)
    assert note is not None and note.source == "phases" and "0.5.23" in note.reason


def test_an_unknown_release_is_read_with_the_formats_that_fit_the_log_best() -> None:
    # GIVEN a log of SGLang 0.4.3 lines and no version: its KV line exists in 0.4.3 only
    text = PREFIX["sglang"] + "KV Cache is allocated. K size: 3.07 GB, V size: 3.07 GB.\n"
    (event,) = events("sglang", text)
    assert event.phase is Phase.KV_CACHE
    assert event.detail[RELEASE_KEY] == "SGLang 0.4.3"
    assert "version unknown" in event.detail[NOTE_KEY]
    note = formats_note((event,))
    assert note is not None and note.hint == UNKNOWN_HINT


def test_the_version_a_vllm_log_names_picks_its_formats() -> None:
    # vLLM names its release in its first line: those formats are read, nothing to say
    text = (
        "INFO 01-01 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.32.0) with config: model='m'\n"
        "INFO 01-01 10:00:01 [gpu_worker.py:1] Using V2 Model Runner\n"
    )
    evs = events("vllm", text)
    assert [(e.phase, FORMAT_KEY in e.detail) for e in evs] == [(Phase.LAUNCH, False), (Phase.DIST_INIT, True)]
    assert evs[1].detail[RELEASE_KEY] == "vLLM 0.32.0" and NOTE_KEY not in evs[1].detail


def test_a_local_build_of_a_sampled_release_reads_its_formats_without_a_note() -> None:
    # the lab's vLLM is `0.32.0+cpu` (its dist-info): 0.32.0's own formats, nothing to say
    (event,) = events("vllm", PREFIX["vllm"] + "Using V2 Model Runner\n", "0.32.0+cpu")
    assert event.detail[RELEASE_KEY] == "vLLM 0.32.0" and NOTE_KEY not in event.detail


def test_a_format_of_other_releases_is_not_read() -> None:
    # Granian without "embedded" is 0.5.12's wording only: with 0.5.23's formats it is no phase line
    text = PREFIX["sglang"] + "Starting Granian HTTP/2 server on 0.0.0.0:30000\n"
    assert events("sglang", text, "0.5.23") == ()


def test_nearest_release() -> None:
    releases = ("0.4.0", "0.4.3", "0.5.12", "0.5.23")
    assert nearest_release("0.5.23", releases) == "0.5.23"
    assert nearest_release("0.6.1", releases) == "0.5.23"
    assert nearest_release("0.5.14", releases) == "0.5.12"
    assert nearest_release("0.3.9", releases) == "0.4.0"
    assert nearest_release("0.5.12.post1", releases) == "0.5.12"
    assert nearest_release("0.5.23+cpu", releases) == "0.5.23"  # a local build of a sampled release
    assert nearest_release("unknown", releases) is None
    assert nearest_release(None, releases) is None


def test_the_table_names_real_code_and_is_validated(tmp_path: Path) -> None:
    # every entry maps at least one mined format (a glob that maps nothing is a typo or moved code)
    table = load_table()
    mapped = {id(entry): 0 for entry in table}
    for engine in ("sglang", "vllm"):
        formats = formats_for(engine)
        assert formats is not None
        for fmt in formats.formats:
            entry = next(e for e in table if e.fits(fmt.module, fmt.function, fmt.template))
            mapped[id(entry)] += 1
    assert [e.pattern for e in table if not mapped[id(e)]] == []
    assert all(entry.source.strip() for entry in table)
    bad = tmp_path / "bad.yaml"
    bad.write_text('- site: "x.py:f"\n  phase: loading\n  source: "x"\n', encoding="utf-8")
    with pytest.raises(RuleError, match="unknown phase 'loading'") as err:
        load_table(bad)
    assert err.value.location.line == 1
    bad.write_text('- site: "x.py:f"\n  phase: kv_cache\n', encoding="utf-8")
    with pytest.raises(RuleError, match="site, phase, source"):
        load_table(bad)


def _sglang_061_bundle(tmp_path: Path) -> Path:
    """A bundle of SGLang 0.6.1, newer than any mined release."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang",
                                                "engine_version": "0.6.1"}))  # fmt: skip
    (root / "server.log").write_text(SGLANG_061, encoding="utf-8")
    return root


def test_a_bundle_of_a_newer_release_says_whose_formats_read_its_phases(tmp_path: Path) -> None:
    # GIVEN a bundle of SGLang 0.6.1 (newer than any mined release)
    root = _sglang_061_bundle(tmp_path)
    # WHEN it is read
    evidence = read_bundle(root)
    # THEN the graph capture line is its phase and the evidence says which release's formats read it
    assert rank_positions(evidence.phases) == {"TP0": (Phase.CUDA_GRAPH, False)}
    notes = [m for m in evidence.missing if m.source == "phases"]
    assert [m.reason for m in notes] == ["phases read with SGLang 0.5.23's log formats (nearest to 0.6.1)"]


@pytest.mark.skipif(not DEV_CORPUS.is_dir(), reason=f"no corpus at {DEV_CORPUS} (set HANGWATCH_CORPUS)")
def test_a_corpus_bundle_whose_phases_were_unknown_now_has_one() -> None:
    # vllm-50705 (vLLM 0.26.0): no marker reads any line; `Using V2 Model Runner` is init_device's
    evidence = read_bundle(DEV_CORPUS / "vllm-50705")
    # (the same format is logged by the GPU and XPU workers' init_device)
    assert [(e.phase, e.detail[FORMAT_KEY].endswith(".init_device")) for e in evidence.phases] == [
        (Phase.DIST_INIT, True)
    ]
    assert [m.reason for m in evidence.missing if m.source == "phases"] == [
        "phases read with vLLM 0.22.0's log formats (nearest to 0.26.0)"
    ]


def test_diagnose_json_says_whose_formats_read_the_phases(tmp_path: Path) -> None:
    # the verdict's `missing` (diagnose --json, and /verdict: the same Verdict.to_dict) carries the note
    root = _sglang_061_bundle(tmp_path)
    done = subprocess.run([sys.executable, "-m", "hangwatch", "diagnose", str(root), "--json"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    verdict = json.loads(done.stdout)
    assert {"source": "phases", "reason": "phases read with SGLang 0.5.23's log formats (nearest to 0.6.1)",
            "hint": UNSAMPLED_HINT} in verdict["missing"]
    assert verdict["phase"] == "cuda_graph"
