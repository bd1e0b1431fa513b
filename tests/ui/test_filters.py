"""What a filter's text asks for: words, and ``gpu:`` tokens narrowed by the GPU scope."""

from __future__ import annotations

from gputui.ui.filters import FilterQuery, parse_filter, requests_gpu
from tests.support.factories import proc


def test_words_and_gpu_tokens() -> None:
    assert parse_filter("") == FilterQuery("", None) and parse_filter("").empty
    assert parse_filter("train") == FilterQuery("train", None)
    assert parse_filter("gpu:3") == FilterQuery("", frozenset({3}))
    assert parse_filter("GPU:0,2 train  py") == FilterQuery("train py", frozenset({0, 2}))
    assert parse_filter("gpu:0 gpu:2").gpus == frozenset({0, 2})  # tokens add up
    # Not a list of indexes: plain text, matched as typed.
    assert parse_filter("gpu:x") == FilterQuery("gpu:x", None)
    assert parse_filter("gpu:1,") == FilterQuery("gpu:1,", None)


def test_the_scope_narrows_the_tokens() -> None:
    assert parse_filter("", scope=1) == FilterQuery("", frozenset({1}))
    assert parse_filter("gpu:0,1", scope=1).gpus == frozenset({1})
    assert parse_filter("gpu:0", scope=1).gpus == frozenset()  # nothing: GPU 1 is not asked for
    query = parse_filter("gpu:1")
    assert query.on_gpus(proc(5, 1)) and not query.on_gpus(proc(6, 0))


def test_a_reservation_names_its_gpus() -> None:
    assert requests_gpu("all", frozenset({3}))
    assert requests_gpu(("0", "3"), frozenset({3}))
    assert requests_gpu("0,3", frozenset({3}))
    assert not requests_gpu(("0",), frozenset({3}))
    assert not requests_gpu(None, frozenset({0}))
    assert not requests_gpu(("GPU-1234",), frozenset({0}))
