"""hangwatch: says why an SGLang or vLLM server is stuck starting up.

The library API, for tools that embed the classifier::

    from hangwatch import classify, load_rules, read_bundle
    verdict = classify(read_bundle("stuck.tar.gz"), load_rules())
"""

from hangwatch._version import __version__
from hangwatch.bundle import read_bundle
from hangwatch.classify import classify, load_rules
from hangwatch.model import Evidence, Verdict

__all__ = ["Evidence", "Verdict", "__version__", "classify", "load_rules", "read_bundle"]
