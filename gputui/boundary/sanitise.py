"""The one sanitiser: every string from outside passes :func:`safe_text` before it is shown."""

from __future__ import annotations

import re
import unicodedata

#: What every output writes for a value that is not available (never zero).
NA = "N/A"

# C0/C1 control characters and DEL, and ANSI escape sequences, which must never reach the terminal
# from a container name, label or command line (terminal injection).
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Invisible format characters: bidirectional overrides and isolates (U+202E makes "exe.txt" read
# as "txt.exe"), zero-width spaces and joiners, the BOM, soft hyphen, interlinear annotation. They
# let a name look like another one, so each shows as "?", like a control character.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
# Categories that never show as themselves: controls, format, surrogates, private use,
# unassigned, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Line and paragraph separators end a line in some terminals and log viewers.
_SEPARATORS = re.compile("[\u2028\u2029\x85]")
# Lone surrogates (undecodable bytes as psutil and os.fsdecode return them) cannot be written by
# any UTF-8 stream: one in a label would crash the report or the TUI mid-write.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def safe_text(value: str | None, limit: int = 200, na: str = NA) -> str:
    """Make an untrusted string safe and short enough to display on one line.

    Strips ANSI escape sequences, replaces newlines, tabs and line separators with a space, other
    control characters and invisible format characters (bidi overrides, zero-width characters)
    with ``?``, lone surrogates with U+FFFD, and truncates with an ellipsis. This is the one
    sanitiser every output (TUI, text, metrics, logs) passes external strings through.

    Args:
        value: Text from a container, label or process; None for unknown.
        limit: Maximum length of the result.
        na: What to show for None.

    Returns:
        The cleaned text.
    """
    if value is None:
        return na
    text = _SEPARATORS.sub(" ", _ANSI.sub("", value).replace("\n", " ").replace("\t", " "))
    text = _SURROGATE.sub("\ufffd", _INVISIBLE.sub("?", _CONTROL.sub("?", text)))
    if not text.isprintable():
        # Rare: a format or private-use character outside the common set above (Unicode grows
        # new ones). Per-character only here, so the usual printable text costs one C call.
        text = "".join(
            "?" if ch != " " and unicodedata.category(ch) in _HIDDEN_CATEGORIES else ch
            for ch in text
        )
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text
