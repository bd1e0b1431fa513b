"""Widgets of the monitor; each receives its slice of the snapshot as attributes."""
