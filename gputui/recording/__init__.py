"""Recordings: the snapshot codec, the rotating writer, the reader and the player."""
