"""Command-line layer: `hangwatch.cli.app.main` is the console script."""
