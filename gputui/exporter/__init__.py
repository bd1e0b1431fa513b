"""``gputui export``: a Prometheus endpoint over the collector the TUI uses.

``families`` (a snapshot's exposition), ``server`` (the HTTP server that sends it) and ``run``
(the loop that builds it after each collection).
"""
