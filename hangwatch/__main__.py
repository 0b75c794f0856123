"""`python -m hangwatch ...`: the same as the `hangwatch` command."""

from hangwatch.cli.app import main

main()
