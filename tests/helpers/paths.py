"""Where the test data lives, named once so moving a test never breaks a relative path."""

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
DATA = TESTS / "data"
PROGRAMS = TESTS / "integration" / "programs"
RULE_BUNDLES = TESTS / "rules"
# the dev corpus of real reports, beside the checkout (../shared/corpus/dev) unless named
DEV_CORPUS = Path(os.environ.get("HANGWATCH_CORPUS", ROOT.parent / "shared" / "corpus" / "dev"))
