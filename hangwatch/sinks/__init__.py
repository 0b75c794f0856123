"""Outputs: the page (web/)."""
