"""The first failure, traced to the engine code that raised it, and that code to a cause.

The mined index (hangwatch/data/engine_words.json.gz, parse/engine_words.py) says which raise site
or log call of which releases printed a failure's message; the hand-kept table
(hangwatch/data/raise_site_causes.yaml) says which cause a failure of that code names. A site with a
cause becomes a rule of its own for this one classification (`site_rules`), so it ranks beside the
shipped rules by the same order; every site, with a cause or without, is evidence (`with_site`).

    load_causes(path=None) -> (SiteCause, ...)     validated; RuleError names file:line
    find_site(ctx) -> SiteFinding | None
    site_rules(ctx) -> (Rule, ...)                  zero or one rule
    with_site(facts, ctx) -> facts                  the site's fact after the first failure's

Both data files are read once per process (package data, like the shipped rules); matching is pure.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hangwatch.classify.causes import CAUSES
from hangwatch.classify.language.atoms.error import failure_fact
from hangwatch.classify.language.conditions import Outcome
from hangwatch.classify.language.rule import Rule
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import Fact, LogLine, Source
from hangwatch.parse.engine_words import INDEX_FILE, EngineWords, Site, SiteMatch, index_doc
from hangwatch.parse.failures import Failure

if TYPE_CHECKING:
    from hangwatch.classify.verdict.context import Context

__all__ = ["TABLE_FILE", "SiteCause", "SiteFinding", "engine_words", "find_site", "load_causes",
           "site_rules", "with_site"]  # fmt: skip

DATA = Path(__file__).resolve().parents[2] / "data"
TABLE_FILE = DATA / "raise_site_causes.yaml"
# What a mapped site is worth: the engine's own code names the failure, but the table maps a whole
# module or function to one cause, so it stays below a hand-written signature that reads the same
# failure with more evidence (0.72+: the KV check failing under a small --gpu-memory-utilization is
# memory held by others, not the KV pool) and above a generic one. A site found by its words alone
# (the wording drifted, or the line was cut) less: below 0.6, where a verdict counts as confident
# (docs/accuracy.md).
EXACT_CONFIDENCE = 0.7
FUZZY_CONFIDENCE = 0.55
MAX_TRIED = 6  # failures tried, first first: the root, then what followed it
LAYERS = ("torch", "transformers", "huggingface_hub", "flashinfer")
ENGINE_PACKAGES = {"sglang": ("sglang",), "vllm": ("vllm",)}
_KEYS = {"site", "cause", "source"}
_FRAME_KEYS = {"frame", "errno"}  # optional: an entry for the engine's own frame (SiteCause.frame)


@dataclass(frozen=True)
class SiteCause:
    pattern: str  # glob over "module:function", or over the module alone
    cause: str
    source: str
    location: RuleLocation = RuleLocation("?")
    # a frame entry names the engine function a traceback's innermost engine frame is in, for a call
    # that raises with no message of the engine's own (`sock.bind` of the API port: `OSError: [Errno
    # 98]`), and only for failures of this errno family when one is given
    frame: bool = False
    errno: str | None = None

    def fits(self, module: str, function: str) -> bool:
        if ":" in self.pattern:
            return fnmatch.fnmatchcase(f"{module}:{function}", self.pattern)
        return fnmatch.fnmatchcase(module, self.pattern)


@dataclass(frozen=True)
class SiteFinding:
    failure: Failure
    match: SiteMatch
    cause: SiteCause | None

    @property
    def fact(self) -> Fact:
        site = self.match.site
        values = f"; {self.match.values}" if self.match.holes else ""
        mapped = f" → {self.cause.cause}" if self.cause else ""
        text = f"{self.match.summary}{mapped}{values}"
        return Fact(text, Source("server.log", self.failure.lineno, f"engine site {site.module}:{site.line}"),
                    self.failure.role)  # fmt: skip


def load_causes(path: Path | None = None) -> tuple[SiteCause, ...]:
    from hangwatch.parse.positioned_yaml import read_table

    path = path or TABLE_FILE
    doc = read_table(path, "raise-site table")
    if not isinstance(doc, list):
        raise RuleError("the raise-site table is a list of {site, cause, source}", RuleLocation(str(path)))
    marks = getattr(doc, "marks", None)
    out = []
    for index, raw in enumerate(doc):
        where = RuleLocation(str(path), marks[index].line + 1, marks[index].column + 1) if marks else RuleLocation(str(path))
        out.append(_entry(raw, where))
    return tuple(out)


def _entry(raw: Any, where: RuleLocation) -> SiteCause:
    if not isinstance(raw, dict) or not _KEYS <= set(raw) or set(raw) - _KEYS - _FRAME_KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise RuleError(f"an entry has the keys site, cause, source, and optionally frame, errno (got {keys})", where)
    if "errno" in raw and raw.get("frame") is not True:
        raise RuleError("errno is for a frame entry (frame: true)", where)
    if raw["cause"] not in CAUSES or raw["cause"] == "unknown":
        raise RuleError(f"unknown cause id {raw['cause']!r} (docs/causes.md lists them)", where)
    if not str(raw["site"]).strip() or not str(raw["source"]).strip():
        raise RuleError("site and source must not be empty", where)
    errno = str(raw["errno"]) if raw.get("errno") else None
    return SiteCause(str(raw["site"]), str(raw["cause"]), str(raw["source"]), where, raw.get("frame") is True, errno)


@lru_cache(maxsize=1)
def engine_words() -> EngineWords:
    try:
        return EngineWords(index_doc())
    except (ValueError, KeyError) as exc:
        raise RuleError(f"cannot read the engine words index: {exc}", RuleLocation(str(INDEX_FILE))) from exc


@lru_cache(maxsize=1)
def _table() -> tuple[SiteCause, ...]:
    return load_causes()


def cause_of(module: str, function: str, table: tuple[SiteCause, ...] | None = None) -> SiteCause | None:
    """The cause the table gives a mined raise site (frame entries are for tracebacks only)."""
    entries = table if table is not None else _table()
    return next((entry for entry in entries if not entry.frame and entry.fits(module, function)), None)


def _frame_site(failure: Failure, engine: str | None) -> SiteFinding | None:
    """No mined site printed the failure: the innermost frame of its traceback, in the engine's own
    code or a layer under it, that a frame entry of the table names (with the failure's errno family,
    when the entry gives one)."""
    packages = set(_packages(engine) or (*(p for own in ENGINE_PACKAGES.values() for p in own), *LAYERS))
    for frame in failure.frames:  # innermost first
        package = (frame.module or "").split(".", 1)[0]
        if package not in packages or frame.module is None:
            continue
        module = frame.module.replace(".", "/") + ".py"
        entry = next((e for e in _table() if e.frame and e.fits(module, frame.function)
                      and (e.errno is None or e.errno == failure.errno)), None)  # fmt: skip
        if entry is not None:
            site = Site(package, module, frame.function, frame.line or 0, "frame", failure.exc_type or "", failure.message, ())
            return SiteFinding(failure, SiteMatch(site, exact=False, score=1.0), entry)
    return None


def _packages(engine: str | None) -> tuple[str, ...] | None:
    """The engine's own package and the layers under it; an unknown engine: every package."""
    own = ENGINE_PACKAGES.get(engine or "")
    return (*own, *LAYERS) if own else None


MAX_CONTINUED = 3  # indented lines after a failure's summary that carry on its message


def _texts(failure: Failure, log: tuple[LogLine, ...]) -> list[str]:
    """The exception chain's first printed message first: that is where it began. A summary whose
    message goes on in indented lines (pydantic's `ValidationError: 1 validation error for X` then
    `  Value error, ...`) is read with them."""
    texts = [*failure.chained, failure.text] if failure.chained else [failure.text]
    at = failure.lineno - 1
    if 0 <= at < len(log) and log[at].lineno == failure.lineno:
        more = []
        for line in log[at + 1 : at + 1 + MAX_CONTINUED]:
            body = line.message or line.text
            if not body[:1].isspace() or not body.strip():
                break
            more.append(body.strip())
        if more:
            texts.append(" ".join([failure.text, *more]))
    return texts


def find_site(ctx: Context) -> SiteFinding | None:
    """The site that raised the first failure the index knows, trying the root failure first."""
    failures = [f for f in ctx.failures if f.role == "root"] + [f for f in ctx.failures if f.role != "root" and not f.consequence]
    if not failures:
        return None
    words = engine_words()
    packages = _packages(ctx.engine)
    for failure in failures[:MAX_TRIED]:
        functions = tuple(frame.function for frame in failure.frames)
        for text in _texts(failure, ctx.evidence.log):
            found = words.match(text, exc_type=failure.exc_type, functions=functions, packages=packages)
            if found is not None:
                return SiteFinding(failure, found, cause_of(found.site.module, found.site.function))
    return _frame_site(failures[0], ctx.engine) if failures[0].frames else None


@dataclass(frozen=True)
class SiteNode:
    """The condition of a site rule: it holds for the one context it was made from."""

    finding: SiteFinding
    location: RuleLocation = RuleLocation("engine words")

    def evaluate(self, ctx: Context) -> Outcome:
        values: dict[str, Any] = {"line": self.finding.failure.text, **dict(self.finding.match.holes)}
        return Outcome(True, (failure_fact(self.finding.failure), self.finding.fact), values=values, atoms=2)

    def atom_names(self) -> frozenset[str]:
        return frozenset({"error_root"})


def _finding(ctx: Context) -> SiteFinding | None:
    # asked twice per classification (the rule, the evidence): ~1 ms each (bench/bench_engine_words.py),
    # cheaper than state kept outside the classify call
    return find_site(ctx) if ctx.failures else None


def site_rules(ctx: Context) -> tuple[Rule, ...]:
    """One rule for a failure whose raise site names a cause; none otherwise."""
    finding = _finding(ctx)
    if finding is None or finding.cause is None:
        return ()
    site, cause = finding.match.site, finding.cause
    exc = finding.failure.exc_type or site.label
    message = f"{exc} from {site.where} ({site.span}), code that names {cause.cause}".replace("{", "(").replace("}", ")")
    return (
        Rule(
            id=f"engine-site.{cause.cause}", cause=cause.cause, title=f"The engine raised it in {site.where}",
            severity="critical", when=SiteNode(finding), remedy=_remedy(cause.cause), message=message,
            confidence=EXACT_CONFIDENCE if finding.match.exact else FUZZY_CONFIDENCE,
            references=(cause.source,), location=cause.location,
        ),
    )  # fmt: skip


def _remedy(cause: str) -> str:
    from hangwatch.classify.causes import CATALOGUE

    return next((c.remedy for c in CATALOGUE if c.id == cause), "")


def with_site(facts: tuple[Fact, ...], ctx: Context) -> tuple[Fact, ...]:
    """The raise site's fact right after the first failure's; mapped or not, it says where it began."""
    finding = _finding(ctx)
    if finding is None:
        return facts
    fact = finding.fact
    if any(f.text == fact.text for f in facts):
        return facts
    at = next((i + 1 for i, f in enumerate(facts) if f.role == "root"), 0)
    return (*facts[:at], fact, *facts[at:])
