"""The one sanitiser every output passes external strings through (``derive.fmt.safe_text``)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.boundary.sanitise import safe_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain-name_1.2", "plain-name_1.2"),
        ("a\x1b[2Jb", "ab"),  # CSI: clear screen
        ("a\x1b]52;c;ZXZpbA==\x07b", "ab"),  # OSC 52: clipboard write
        ("a\x1b]0;title\x1b\\b", "ab"),  # OSC with ST terminator
        ("a\x00b\x07c\rd", "a?b?c?d"),  # NUL, BEL, CR
        ("a\nb\tc", "a b c"),
        ("evil\u202etxt.exe", "evil?txt.exe"),  # right-to-left override
        ("a\u2066b\u2069", "a?b?"),  # bidi isolates
        ("ad\u200bmin", "ad?min"),  # zero-width space
        ("\ufeffbom", "?bom"),
        ("line\u2028sep\u2029x\x85y", "line sep x y"),
        ("\udcff", "\ufffd"),  # an undecodable byte as os.fsdecode gives it
    ],
)
def test_safe_text_neutralises(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown


def test_safe_text_truncates_and_handles_none() -> None:
    assert safe_text("x" * 50, limit=10) == "x" * 9 + "…"
    assert safe_text(None) == "N/A"


_DANGEROUS = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


@given(st.text(max_size=300))
def test_safe_text_never_emits_controls_or_invisible_formatting(raw: str) -> None:
    out = safe_text(raw, limit=400)
    bad = [ch for ch in out if unicodedata.category(ch) in _DANGEROUS]
    assert bad == []


@pytest.mark.parametrize("char", ["\u0600", "\U000e0001", "\U000e0041", "\ue000", "\u06dd"])
def test_safe_text_rarer_invisible_characters(char: str) -> None:
    assert safe_text(f"a{char}b") == "a?b"
