"""The bounded YAML reader: plain data within limits, everything else one line, never built."""

from __future__ import annotations

import time

import pytest

from gputui.boundary.yaml_limits import YamlLimitError, load_bounded_yaml


def test_plain_data_is_loaded() -> None:
    text = 'kind: nvidia.com/gpu\ndevices:\n- name: "0"\n- name: all\n'
    assert load_bounded_yaml(text, max_depth=4, max_nodes=20) == {
        "kind": "nvidia.com/gpu",
        "devices": [{"name": "0"}, {"name": "all"}],
    }
    assert load_bounded_yaml("", max_depth=4, max_nodes=20) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: [[[1]]]\n", "nested deeper than 3"),
        ("[" + "1, " * 30 + "1]", "more than 20 nodes"),
        ("a: &x [1]\nb: *x\n", "anchors and aliases"),
        ("---\na: 1\n---\nb: 2\n", "more than one YAML document"),
        ("!!python/object/apply:os.system [true]\n", "not valid YAML"),
        ("a: [\n", "not valid YAML: did not find expected node content at line 2"),
    ],
    ids=["deep", "many", "alias", "two-documents", "python-tag", "unclosed"],
)
def test_what_is_beyond_a_limit_is_one_line(text: str, said: str) -> None:
    with pytest.raises(YamlLimitError, match=said.replace("[", r"\[")) as caught:
        load_bounded_yaml(text, max_depth=3, max_nodes=20)
    assert "\n" not in str(caught.value)


def test_an_alias_bomb_is_refused_before_it_is_walked() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
        for i in range(20)
    )
    started = time.monotonic()
    with pytest.raises(YamlLimitError, match="anchors and aliases"):
        load_bounded_yaml(bomb, max_depth=32, max_nodes=100_000)
    assert time.monotonic() - started < 1
