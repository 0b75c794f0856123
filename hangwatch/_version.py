"""The one definition of hangwatch's version: the installed package's metadata."""

from importlib import metadata

try:
    __version__ = metadata.version("hangwatch")
except metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
