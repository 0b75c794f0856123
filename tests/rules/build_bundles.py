"""Regenerate tests/rules/<rule>/{fires,quiet}/<case>/ from bundle_cases.py.

    python tests/rules/build_bundles.py            # every rule in bundle_cases.py
    python tests/rules/build_bundles.py RULE_ID    # only these rules

The bundles are hand-assembled from the mechanism (../shared/reference/sglang-startup.md, ../shared/reference/sglang-on-cpu.md), not
copied from any corpus. A rule's folder is rewritten from scratch, so edit the case here, not the
files.
"""
import shutil
import sys
from pathlib import Path

from bundle_cases import CASES  # run as a script, its own folder is on the path
from bundle_lib import dumps

HERE = Path(__file__).resolve().parent

FILES = (("log", "server.log"), ("cmdline", "cmdline.txt"), ("env", "env.txt"), ("ports", "ports.txt"), ("dmesg", "dmesg.txt"))


def write(dest: Path, bundle: dict) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "meta.json").write_text(dumps(bundle["meta"]))
    for key, name in FILES:
        if bundle.get(key) is not None:
            text = bundle[key]
            (dest / name).write_text(text if text.endswith("\n") else text + "\n")
    for key, name in (("procs", "procs.json"), ("gpus", "gpus.json")):
        if bundle.get(key) is not None:
            (dest / name).write_text(dumps(bundle[key]))
    for label, text in (bundle.get("stacks") or {}).items():
        (dest / "stacks").mkdir(exist_ok=True)
        (dest / "stacks" / f"{label}.txt").write_text(text)


def main(only: set[str]) -> None:
    for rule, kinds in CASES.items():
        if only and rule not in only:
            continue
        shutil.rmtree(HERE / rule, ignore_errors=True)
        for kind, cases in kinds.items():
            for name, bundle in cases.items():
                write(HERE / rule / kind / name, bundle)


if __name__ == "__main__":
    main(set(sys.argv[1:]))
