"""`python -m hangwatch ...`: the same as the `hangwatch` command."""

from hangwatch.cli import main

main()
