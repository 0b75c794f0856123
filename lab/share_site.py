"""Share the packages two lab venvs pin alike: hard-link them from one venv into the other.

    python share_site.py SRC_SITE DST_SITE REQUIREMENTS

For every `name==version` in REQUIREMENTS that SRC_SITE has installed at exactly that version,
the files its RECORD lists under site-packages (and its .dist-info) are hard-linked into
DST_SITE, so that a later `pip install --no-deps -r REQUIREMENTS` finds them installed and skips
them. The SGLang and vLLM labs pin 70 packages alike, torch 2.13.0+cpu, triton, transformers and
sympy among them: about 2 GB that need not be unpacked twice. Files outside site-packages (console
scripts, whose shebang names the other venv's python) are not shared.

Standard library only; prints what it shared. Nothing is shared across filesystems (a hard link
cannot cross them): pip then installs those packages itself.
"""
from __future__ import annotations

import os
import re
import sys
from importlib.metadata import Distribution, distributions
from pathlib import Path


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(requirements: Path) -> dict[str, str]:
    out = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name)] = version.strip()
    return out


def _files(dist: Distribution, site: Path) -> list[Path] | None:
    """The dist's files inside `site` (relative), or None when its RECORD is missing."""
    if dist.files is None:
        return None
    out = []
    for entry in dist.files:
        rel = Path(str(entry))
        if rel.parts and rel.parts[0] != ".." and not rel.is_absolute():
            out.append(rel)
    return out


def share(src: Path, dst: Path, wanted: dict[str, str]) -> list[str]:
    shared = []
    have = {_norm(d.metadata["Name"]) for d in distributions(path=[str(dst)])}
    for dist in distributions(path=[str(src)]):
        name = _norm(dist.metadata["Name"])
        if wanted.get(name) != dist.version or name in have:
            continue
        files = _files(dist, src)
        if not files:
            continue
        # the .dist-info last: a package half linked must not look installed to pip
        files.sort(key=lambda rel: rel.parts[0].endswith(".dist-info"))
        linked: list[Path] = []
        try:
            for rel in files:
                source, target = src / rel, dst / rel
                if not source.is_file() or target.exists():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(source, target)
                linked.append(target)
        except OSError as exc:  # another filesystem, or a file we may not link: pip installs it
            for target in linked:
                target.unlink(missing_ok=True)
            print(f"share_site: not sharing {name}: {exc}", file=sys.stderr)
            return shared
        shared.append(f"{name}=={dist.version}")
    return shared


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, requirements = Path(argv[0]), Path(argv[1]), Path(argv[2])
    if not src.is_dir() or not dst.is_dir():
        print(f"share_site: no such site-packages: {src if not src.is_dir() else dst}", file=sys.stderr)
        return 2
    shared = share(src, dst, pins(requirements))
    print(f"share_site: {len(shared)} packages hard-linked from {src}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
