"""The engines' own words: which raise site or log format of SGLang, vLLM or a layer under them a
message came from, its holes read as values, and the releases that print it.

The index (hangwatch/data/engine_words.json.gz) is mined from the engines' released sources by
tools/engine_words/mine.py (docs/engine-words.md). A template is literal text with typed holes,
`{int:port}`, `{float:free_gib}`, `{path:model}`, `{word:name}`, `{any:value}`; literal braces are
doubled. Matching is pure and indexed by literal words: a message is compared only with the sites
that share one of its rarest words, so a log costs a few dozen template checks, not thousands.

    index_doc() -> the shipped index document, read once per process
    EngineWords(index_doc()) / EngineWords.from_bytes(data) -> EngineWords
    words.match(text, exc_type=None, functions=(), packages=None) -> SiteMatch | None
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from hangwatch.errors import RuleError, RuleLocation

__all__ = ["INDEX_FILE", "EngineWords", "Site", "SiteMatch", "anchor_index", "index_doc", "split_template",
           "template_regex"]  # fmt: skip

INDEX_FILE = Path(__file__).resolve().parent.parent / "data" / "engine_words.json.gz"

# 2: the anchor index precompiled by the generator (`anchor_index`, tools/engine_words/mine.py build): a
# process that matches its first failure loads it in a tenth of the time it took to build (1: built on load)
FORMAT = 2
FORMATS = (1, 2)
_HOLE = re.compile(r"\{\{|\}\}|\{(int|float|path|word|any):(\w+)\}")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_HOLES_ONLY = re.compile(r"\{(?:int|float|path|word|any):\w+\}")
# A hole's type comes from a format spec (`%d`, `:.2f`) or only from its name (`device` looked like
# an index and prints `cuda:0`): a number is tried first, any one word after it.
HOLE_RX = {
    "int": r"(?:-?\d[\d,]*(?![\w.:])|\S+?)",
    "float": r"(?:-?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w.:])|\S+?)",
    "path": r"\S+",
    "word": r"\S+",
    "any": r".*?",
}
# A fuzzy match (the wording drifted between releases, or the message was cut or wrapped) needs
# this share of the template's literal words, and at least MIN_SHARED of them.
FUZZY_TEMPLATE_SHARE = 0.75
FUZZY_PREFIX_SHARE = 0.85  # a truncated message: the template's leading words, nearly all there
MIN_SHARED = 4
MIN_TRUNCATED = 6  # leading template words a cut message must reach
ANCHORS = 3  # rarest literal words a site is filed under
HEAD_ANCHORS, HEAD_WORDS = 2, 8  # and the rarest 2 of its first 8
MAX_CANDIDATES = 400  # sites checked per message, at most
PRETTY = {"sglang": "SGLang", "vllm": "vLLM", "torch": "torch", "transformers": "transformers",
          "huggingface_hub": "huggingface_hub", "flashinfer": "FlashInfer"}  # fmt: skip


def split_template(template: str) -> list[tuple[str, str] | str]:
    """Literal runs (str) and holes ((kind, name)), in order."""
    out: list[tuple[str, str] | str] = []
    pos, text = 0, []
    for m in _HOLE.finditer(template):
        text.append(template[pos : m.start()])
        pos = m.end()
        if m.group(0) in ("{{", "}}"):
            text.append(m.group(0)[0])
            continue
        out.append("".join(text))
        text = []
        out.append((m.group(1), m.group(2)))
    text.append(template[pos:])
    out.append("".join(text))
    return [part for part in out if part != ""]


def template_regex(template: str) -> re.Pattern[str]:
    """The template as a regex: literal runs with any run of whitespace matching any other (a
    wrapped or re-indented message), holes as named groups of their type."""
    pieces, holes = [], 0
    parts = split_template(template)
    for index, part in enumerate(parts):
        if isinstance(part, str):
            pieces.append(_literal_regex(part))
        else:
            kind, _ = part
            rx = r".*" if kind == "any" and index == len(parts) - 1 else HOLE_RX[kind]
            pieces.append(f"(?P<h{holes}>{rx})")
            holes += 1
    return re.compile("".join(pieces), re.DOTALL)


def _literal_regex(part: str) -> str:
    """A literal run: a run of whitespace (one space or twenty) matches any run of whitespace. One
    `\\s+` per run, never one per space: `\\s+\\s+...` backtracks exponentially on a line that almost
    matches (a template with 29 spaces in a row took 28 s on one line)."""
    words = part.split()
    if not words:
        return r"\s*"
    rx = r"\s+".join(re.escape(word) for word in words)
    return (r"\s+" if part[0].isspace() else "") + rx + (r"\s+" if part[-1].isspace() else "")


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(text)}


@dataclass(frozen=True)
class Site:
    """One raise site or log call of one package, and the sampled releases that have it."""

    package: str  # import name: sglang, vllm, torch, transformers, huggingface_hub, flashinfer
    module: str  # file path in the package: "vllm/v1/worker/utils.py"
    function: str  # "Class.method", "function" or "<module>"
    line: int  # in the newest release that has it
    kind: str  # raise | log | frame (a traceback's engine frame, for a call that raised no message of its own)
    label: str  # the exception class, or the log level
    template: str
    versions: tuple[str, ...]  # the sampled releases it appears in, oldest first
    of_releases: tuple[str, ...] = ()  # every sampled release of the package

    @property
    def where(self) -> str:
        return f"{self.module}:{self.function}"

    @property
    def span(self) -> str:
        """'vLLM 0.10.2–0.32.0' (a gap in the sampled releases: 'vLLM 0.6.0–0.7.3, 0.10.2–0.32.0')."""
        if not self.versions:
            return PRETTY.get(self.package, self.package)
        runs: list[list[str]] = []
        previous = -2
        for version in self.versions:
            index = self.of_releases.index(version) if version in self.of_releases else -2
            if runs and index == previous + 1:
                runs[-1].append(version)
            else:
                runs.append([version])
            previous = index
        text = ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)
        return f"{PRETTY.get(self.package, self.package)} {text}"

    @cached_property
    def parts(self) -> list[tuple[str, str] | str]:
        return split_template(self.template)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return template_regex(self.template)

    @cached_property
    def words(self) -> frozenset[str]:
        return frozenset(w for part in self.parts if isinstance(part, str) for w in _tokens(part))

    @cached_property
    def sequence(self) -> tuple[str, ...]:
        """The literal words in the order they first appear."""
        return tuple(dict.fromkeys(t.lower() for part in self.parts if isinstance(part, str) for t in _TOKEN.findall(part)))

    @property
    def newest(self) -> int:
        """How recent the newest sampled release that has it (a tie between a moved site's old and new
        homes goes to the new one)."""
        return max((self.of_releases.index(v) for v in self.versions if v in self.of_releases), default=-1)

    @property
    def literal_length(self) -> int:
        return sum(len(part) for part in self.parts if isinstance(part, str))


@dataclass(frozen=True)
class SiteMatch:
    site: Site
    exact: bool  # the template's regex matched; else the literal words did
    score: float  # share of the template's literal words the message has (1.0 when exact)
    holes: tuple[tuple[str, str], ...] = ()  # (name, value) of the typed holes an exact match filled

    @property
    def summary(self) -> str:
        if self.site.kind == "frame":
            return f"raised in {self.site.where} (line {self.site.line}, a {self.site.span} frame of its traceback)"
        how = "" if self.exact else f", wording {self.score:.0%} alike"
        return f"raised by {self.site.where} (line {self.site.line}, {self.site.span}{how})" if self.site.kind == "raise" \
            else f"logged by {self.site.where} (line {self.site.line}, {self.site.span}{how})"  # fmt: skip

    @property
    def values(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.holes)


def anchor_index(rows: Sequence[Sequence[Any]]) -> dict[str, list[int]]:
    """word -> [how many templates hold it, the indexes of the sites filed under it]: each site is
    filed under the rarest ANCHORS words of its template, and the rarest HEAD_ANCHORS of its first
    HEAD_WORDS (a message cut short keeps only its head). Deterministic (a word's sites ascending):
    the generator stores it in the index, a format-1 index builds it on load."""
    sequences = [_TOKEN.findall(_HOLES_ONLY.sub(" ", row[6]).lower()) for row in rows]
    words = [frozenset(sequence) for sequence in sequences]
    frequency: dict[str, int] = {}
    for site_words in words:
        for word in site_words:
            frequency[word] = frequency.get(word, 0) + 1
    by_word: dict[str, list[int]] = {}

    def rarest(some: Iterable[str], n: int) -> list[str]:
        return sorted(set(some), key=lambda w: (frequency[w], w))[:n]

    for index, site_words in enumerate(words):
        for word in {*rarest(site_words, ANCHORS), *rarest(sequences[index][:HEAD_WORDS], HEAD_ANCHORS)}:
            by_word.setdefault(word, []).append(index)
    # only words some site is filed under: candidates() orders a message's words by frequency, and
    # a word filed under no site adds no candidate wherever it stands in that order
    return {word: [frequency[word], *by_word[word]] for word in sorted(by_word)}


class EngineWords:
    """The mined index, filed by rare literal words. Sites are built on first use: a log asks
    about a few dozen of them, the index holds tens of thousands."""

    def __init__(self, doc: dict[str, Any]):
        if doc.get("format") not in FORMATS:
            raise ValueError(f"engine words index: format {doc.get('format')!r}, expected one of {FORMATS}")
        self.releases: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in doc["versions"].items()}
        self._rows: list[list[Any]] = doc["sites"]
        self._sites: dict[int, Site] = {}
        anchors: dict[str, list[int]] = doc["anchors"] if "anchors" in doc else anchor_index(self._rows)
        # word -> the sites filed under it; word -> in how many sites' templates it stands
        self._by_word: dict[str, list[int]] = {word: entry[1:] for word, entry in anchors.items()}
        self._frequency: dict[str, int] = {word: entry[0] for word, entry in anchors.items()}

    def site(self, index: int) -> Site:
        if index not in self._sites:
            package, module, function, line, kind, label, template, mask = self._rows[index]
            releases = self.releases.get(package, ())
            versions = tuple(v for bit, v in enumerate(releases) if mask >> bit & 1)
            self._sites[index] = Site(package, module, function, line, kind, label, template, versions, releases)
        return self._sites[index]

    @property
    def sites(self) -> list[Site]:
        return [self.site(i) for i in range(len(self._rows))]

    @classmethod
    def from_bytes(cls, data: bytes) -> EngineWords:
        return cls(_decode(data))

    def __len__(self) -> int:
        return len(self._rows)

    def candidates(self, text: str, packages: Iterable[str] | None = None) -> list[Site]:
        allowed = set(packages) if packages is not None else None
        seen: dict[int, None] = {}
        for word in sorted(_tokens(text), key=lambda w: (self._frequency.get(w, 0), w)):
            for index in self._by_word.get(word, ()):
                seen.setdefault(index, None)
            if len(seen) >= MAX_CANDIDATES:
                break
        return [self.site(i) for i in seen if allowed is None or self._rows[i][0] in allowed]

    def match(
        self,
        text: str,
        exc_type: str | None = None,
        functions: Sequence[str] = (),
        packages: Iterable[str] | None = None,
        kinds: Iterable[str] = ("raise", "log"),
    ) -> SiteMatch | None:
        """The site that most likely wrote `text`: an exact template match first (the longest
        literal text wins), else the site sharing most of its literal words; a site of the
        traceback's own functions, or raising the same exception class, wins a tie, then the
        site of the newer releases."""
        words = _tokens(text)
        if not words:
            return None
        kinds = tuple(kinds)
        best: tuple[tuple[float, ...], SiteMatch] | None = None
        for site in self.candidates(text, packages):
            if site.kind not in kinds:
                continue
            shared = len(site.words & words)
            # every literal word present is necessary for the regex: only then is it compiled and run
            found = site.regex.search(text) if shared == len(site.words) else None
            exact = found is not None and len(found.group(0)) >= 0.5 * site.literal_length
            score = 1.0 if exact else _fuzzy(shared, words, site)
            if score is None:
                continue
            bonus = (site.label == exc_type) + (site.function.rsplit(".", 1)[-1] in functions)
            key = (float(exact), score, float(bonus), float(site.literal_length), float(site.newest), float(site.line))
            if best is None or key > best[0]:
                holes = _holes(site, found) if exact and found is not None else ()
                best = (key, SiteMatch(site, exact, round(score, 3), holes))
        return best[1] if best else None


def _fuzzy(shared: int, words: set[str], site: Site) -> float | None:
    """How alike, when not exactly: the share of the template's words the message has (the
    wording drifted), or, for a message cut short, the share of the template's leading words up
    to the last one it still has. None: not alike enough."""
    if shared < MIN_SHARED or not site.words:
        return None
    share = shared / len(site.words)
    if share >= FUZZY_TEMPLATE_SHARE:
        return share
    hits = [word in words for word in site.sequence]
    last = max((i for i, hit in enumerate(hits) if hit), default=-1)
    head = hits[: last + 1]
    if len(head) >= MIN_TRUNCATED and sum(head) / len(head) >= FUZZY_PREFIX_SHARE:
        return round(FUZZY_TEMPLATE_SHARE * sum(head) / len(head), 3)  # a prefix: never above a drifted whole
    return None


def _holes(site: Site, found: re.Match[str]) -> tuple[tuple[str, str], ...]:
    names = [part[1] for part in site.parts if not isinstance(part, str)]
    kinds = [part[0] for part in site.parts if not isinstance(part, str)]
    out = []
    for index, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        value = (found.group(f"h{index}") or "").strip()
        if value and (kind != "any" or len(value) <= 60):
            out.append((name, value))
    return tuple(out)


@lru_cache(maxsize=1)
def index_doc() -> dict[str, Any]:
    """The shipped index document, read once per process: the raise-site matcher and the log
    formats' phase fallback (parse/logformats.py) read the same 1.5 MB."""
    try:
        return _decode(INDEX_FILE.read_bytes())
    except (OSError, ValueError) as exc:
        raise RuleError(f"cannot read the engine words index: {exc}", RuleLocation(str(INDEX_FILE))) from exc


def _decode(data: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return doc
