"""Stand-ins with the real sources' interfaces: scenario files and the ``--demo`` machine."""
