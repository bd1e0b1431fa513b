"""The ``--once`` contracts: the snapshot as JSON (``json_report``) and as text (``text_report``).

No Textual or Rich here: ``gputui --once`` must start fast and work with ``TERM=dumb``.
"""
