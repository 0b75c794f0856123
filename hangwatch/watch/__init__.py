"""The watch loop: the only clocked, stateful part."""

from hangwatch.watch.watcher import WatchConfig, Watcher

__all__ = ["WatchConfig", "Watcher"]
