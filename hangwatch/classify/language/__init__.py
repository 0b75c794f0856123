"""The rule language: what a rule file says and how it is checked before anything runs.

    rule            the compiled `Rule`
    loader          YAML rule files -> `Rule`s, every error as file:line:column: reason
    positioned_yaml YAML that remembers where each key and value starts (rules and data tables)
    conditions      all/any/not trees of atoms, evaluated to an `Outcome`
    atoms/          the evidence atoms a condition may name (`ATOMS`, `ARGS`), one module per subject
    values          the atoms' argument parsers (durations, names, regexes, ...)
    regexcheck      regex safety: patterns that could take exponential time are refused at load
    template        message templates ({flag.tp}, {match.rank}) checked at load, rendered per match
    ruletest        `tests/rules/<id>/{fires,quiet}` bundles run against their rule (the reader passed in)
"""
