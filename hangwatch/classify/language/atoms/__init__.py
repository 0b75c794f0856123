"""The table of evidence atoms a rule condition may use (docs/rules.md, "Conditions").

`ATOMS` maps each atom to its check, `(compiled argument, Context) -> AtomResult`; `ARGS` maps it
to the parser that compiles its YAML argument once, at load time. Prefix atoms are keyed as
`flag.*`, `env.*`, `meta.*` and receive the name after the dot in their argument.
"""

from __future__ import annotations

from hangwatch.classify.language.atoms import error, host, phase, stack, system, text, wait
from hangwatch.classify.language.conditions import AtomFn
from hangwatch.classify.language.values import ArgParser

__all__ = ["ARGS", "ATOMS", "PREFIXES", "ArgParser", "AtomFn"]

ATOMS: dict[str, AtomFn] = {
    **text.ATOMS,
    **phase.ATOMS,
    **stack.ATOMS,
    **system.ATOMS,
    **error.ATOMS,
    **host.ATOMS,
    **wait.ATOMS,
}
ARGS: dict[str, ArgParser] = {
    **text.ARGS,
    **phase.ARGS,
    **stack.ARGS,
    **system.ARGS,
    **error.ARGS,
    **host.ARGS,
    **wait.ARGS,
}
PREFIXES = ("flag.", "env.", "meta.", *host.PREFIXES)

# The evidence file an atom reads, to tell what is missing (`None`: always there).
_EVIDENCE = {
    "log": "log",
    "error": "log",
    "phase": "log",
    "stack": "stacks",
    "gpu": "gpus",
    "proc": "procs",
    "port": "ports",
    "flag": "cmdline",
    "cmdline": "cmdline",
    "env": "env",
    "dmesg": "dmesg",
    "host": "host",
    "preflight": "preflight",
}


def table_key(name: str) -> str | None:
    """The `ATOMS` key for an atom as written (`flag.tp` → `flag.*`); None when unknown."""
    if name in ATOMS:
        return name
    for prefix in PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return prefix + "*"
    return None


def evidence_of(name: str) -> str | None:
    return _EVIDENCE.get(name.split(".", 1)[0])

