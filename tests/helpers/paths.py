"""Where the test data lives, named once so moving a test never breaks a relative path."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
DATA = TESTS / "data"
PROGRAMS = TESTS / "integration" / "programs"
RULE_BUNDLES = TESTS / "rules"
