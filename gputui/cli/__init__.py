"""The command line: ``gputui`` (the TUI), ``--once`` / ``--json`` and the subcommands.

One module per subcommand; :mod:`gputui.cli.main` holds the subcommand table that dispatches
them and generates ``--help``.
"""
