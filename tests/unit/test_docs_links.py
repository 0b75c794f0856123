"""The project is self-contained: every relative link in README.md and docs/*.md names a file
inside the repository (a user who installs hangwatch has nothing beside it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and [text]: target; images too. Code spans are removed first.
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def links(text: str) -> list[str]:
    text = _CODE.sub("", text)
    return _INLINE.findall(text) + _REFERENCE.findall(text)


def test_the_link_finder_finds_links() -> None:
    text = "see [a](docs/a.md) and ![img](x.png \"t\") `[no](code.md)`\n[ref]: ../out.md\n"
    assert links(text) == ["docs/a.md", "x.png", "../out.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves_inside_the_project(doc: Path) -> None:
    bad = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # https:, mailto:, an anchor in the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            bad.append(target)
    assert bad == [], f"{doc.relative_to(ROOT)} links outside the project or to nothing: {bad}"
