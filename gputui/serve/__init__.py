"""``gputui serve``: the monitor in a web browser, through textual-serve."""
