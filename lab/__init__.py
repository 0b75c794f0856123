"""hangwatch lab: real SGLang startup hangs on CPU (see README.md). Not part of the package."""
