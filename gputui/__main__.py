"""``python -m gputui``."""

from gputui.cli.main import main

raise SystemExit(main())
