"""Screens: the main monitor and its modal dialogs."""
