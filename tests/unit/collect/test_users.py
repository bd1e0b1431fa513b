"""The one uid → name lookup the /proc reader, the inspect screen, the engines and owners share."""

from __future__ import annotations

import os
import pwd

from gputui.collect.linux.users import UserNames, user_name


def _unused_uid() -> int:
    taken = {entry.pw_uid for entry in pwd.getpwall()}
    return next(uid for uid in range(60_000, 2**31) if uid not in taken)


def test_a_uid_with_a_passwd_entry_is_its_name_else_its_number() -> None:
    me = os.getuid()
    assert user_name(me) == pwd.getpwuid(me).pw_name
    assert user_name(_unused_uid()) is None
    names = UserNames()
    assert names(me) == pwd.getpwuid(me).pw_name
    assert names(_unused_uid()) == str(_unused_uid())


def test_a_uid_out_of_range_is_a_number_not_an_exception() -> None:
    # A hostile /proc status or engine answer: getpwuid raises OverflowError for these.
    for uid in (2**32, 2**63, -1):
        assert user_name(uid) is None
        assert UserNames()(uid) == str(uid)


def test_names_remembered_are_bounded_and_forgotten_on_clear() -> None:
    names = UserNames(limit=2)
    for uid in range(10):
        names(uid)
    assert len(names._names) == 2
    names.clear()
    assert not names._names
