"""Every repository file that the code, the docs, the tests and `--help` name exists: a comment that
says "see BUNDLE.md" when the file is docs/bundle-format.md sends a newcomer nowhere.

A reference is a `*.md` name or a path under one of the repository's folders (`docs/...`,
`rules/...`, `bench/...`, `tests/...`, `classify/...`; a module path may leave out `.py` or go on
to a name in it: `watch/relaunch.HostProbe`). It resolves beside the file that names it, at the
repository's root, or under `hangwatch/`, `docs/` or `tests/`. Not references: URLs, the files a
bundle holds (the table of docs/bundle-format.md: a bundle's `notes.md`), paths `.gitignore` names
(outputs made at run time), and `../shared/...`, the material beside the repository in the
development setup (docs/development.md), named so as outside.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from hangwatch.cli.app import cli_command

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("docs", "rules", "bench", "tools", "lab", "tests", "deploy", "dashboards", "hangwatch", "data",
           "integration", "unit", "helpers", "bundle", "classify", "cli", "engines", "parse", "sinks",
           "sources", "watch", "shared")  # fmt: skip
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_OUTSIDE = re.compile(r"\.\./shared/\S*")
_MD = re.compile(r"(?<![\w/.*<-])([\w-]+\.md)\b")
_PATH = re.compile(r"(?<![\w/.*<-])((?:%s)/[\w./*-]*[\w/*])" % "|".join(FOLDERS))
_BASES = (ROOT, ROOT / "hangwatch", ROOT / "docs", ROOT / "tests")
_SKIP_SUFFIXES = {".gz", ".png", ".pyc", ".json", ".log", ".txt", ".ico"}
# these two test the finders themselves: their examples name files that do not exist on purpose
_SELF_TESTS = {"test_file_references.py", "test_docs_links.py"}


def references(text: str) -> Iterator[tuple[int, str]]:
    """(line number, reference) for every repository file `text` names."""
    text = _OUTSIDE.sub(lambda m: " " * len(m.group()), _URL.sub(lambda m: " " * len(m.group()), text))
    for match in [*_MD.finditer(text), *_PATH.finditer(text)]:
        yield text.count("\n", 0, match.start()) + 1, match.group(1).rstrip(".")


def resolves(ref: str, beside: Path) -> bool:
    stem, _, _ = ref.rpartition(".")
    forms = [ref, ref + ".py", stem + ".py"] if stem else [ref, ref + ".py"]
    return any(any(True for _ in base.glob(form)) if "*" in form else (base / form).exists()
               for base in (beside, *_BASES) for form in forms)


def _bundle_members() -> set[str]:
    """The file names of the bundle format's table (first column of docs/bundle-format.md)."""
    return set(re.findall(r"^\| `([^`]+)` \|", (ROOT / "docs" / "bundle-format.md").read_text(), re.M))


def _ignored() -> list[str]:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return [line.strip("/") for line in lines if line.startswith("/")]


def _sources() -> Iterator[Path]:
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    for folder, suffixes in (("hangwatch", None), ("tests", {".py", ".md"})):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix in _SKIP_SUFFIXES or path.name in _SELF_TESTS:
                continue
            if suffixes is None or path.suffix in suffixes:
                yield path


def _help_texts() -> Iterator[tuple[str, str]]:
    stack: list[tuple[str, click.Command]] = [("hangwatch", cli_command())]
    while stack:
        name, command = stack.pop()
        yield f"{name} --help", "\n".join(filter(None, [command.help, command.epilog, *(getattr(p, "help", None) for p in command.params)]))
        stack.extend((f"{name} {sub}", cmd) for sub, cmd in getattr(command, "commands", {}).items())


def dangling(text: str, beside: Path) -> list[str]:
    members, ignored = _bundle_members(), _ignored()
    return [f"{line}: {ref}" for line, ref in references(text)
            if ref not in members and not any(ref == i or ref.startswith(i + "/") for i in ignored)
            and not resolves(ref, beside)]


def test_the_reference_finder_finds_references() -> None:
    text = "see BUNDLE.md, docs/causes.md and `watch/relaunch.HostProbe`;\nnot https://x.org/a.md or ../shared/DESIGN.md\n"
    assert list(references(text)) == [(1, "BUNDLE.md"), (1, "docs/causes.md"), (1, "watch/relaunch.HostProbe")]
    assert dangling(text, ROOT) == ["1: BUNDLE.md"]
    assert dangling("tests/probe_corpus/ff-* and tests/rules/<rule-id>/fires/ and bench/nothing_here.py", ROOT) == [
        "1: bench/nothing_here.py"]


def test_every_file_named_in_the_repository_exists() -> None:
    bad = [f"{path.relative_to(ROOT)}:{where}" for path in _sources()
           for where in dangling(path.read_text(encoding="utf-8", errors="replace"), path.parent)]
    assert bad == []


def test_every_file_named_in_help_exists() -> None:
    bad = [f"{name}: {where}" for name, text in _help_texts() for where in dangling(text, ROOT)]
    assert bad == []
