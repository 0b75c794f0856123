"""Preflight: the checks `hangwatch preflight` runs before a launch (docs/preflight.md).

    checks     the `preflight:` entries of rule files, loaded and run on host facts
    hostfacts  what the host says (filesystems, GPUs, ports, locks, caches) as `HostFact`s
    versions   the known-bad releases table (data/known_bad.yaml) matched to installed versions
"""
