"""Bytes -> model, pure and shared by the live and offline paths: logs, flags, frames, stacks, ss."""
