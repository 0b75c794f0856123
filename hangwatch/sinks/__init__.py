"""Outputs: they read what the watcher publishes and never block its loop."""
