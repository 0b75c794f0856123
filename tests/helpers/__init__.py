"""Shared test support: real processes, receivers and hand-built verdicts (imported as `helpers.*`;
pytest puts tests/ on the path through `pythonpath` in pyproject.toml)."""
