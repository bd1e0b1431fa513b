"""YAML measured before it is built: the one importer of PyYAML.

System files in YAML (CDI specs, as ``nvidia-ctk cdi generate`` writes them) are read by
:func:`load_bounded_yaml`. Their events are counted first, by PyYAML's event parser (a state
machine: no recursion however deep the text nests), and a text that nests too deep, holds too
many nodes, or uses anchors and aliases (an alias makes one node count many times: the
"billion laughs") is refused before any object is built. Only then is it loaded, with the safe
loader (plain data, no Python objects).

PyYAML is imported when a YAML text is first read (12 ms; most runs read none).
"""

from __future__ import annotations


class YamlLimitError(ValueError):
    """A YAML text that is malformed or beyond a limit; the message is one line."""


def load_bounded_yaml(text: str, *, max_depth: int, max_nodes: int) -> object:
    """Parse one YAML document of plain data, within limits.

    Args:
        text: The YAML text (its size is the caller's bound).
        max_depth: The deepest nesting of mappings and sequences accepted.
        max_nodes: The most nodes (scalars, mappings, sequences) accepted.

    Returns:
        The document: dicts, lists, strings, numbers, booleans, None (and the dates and
        timestamps of YAML 1.1's safe schema); None for an empty text.

    Raises:
        YamlLimitError: Not YAML, more than one document, anchors or aliases, deeper than
            ``max_depth`` or more than ``max_nodes`` nodes.
    """
    import yaml

    # libyaml's loader where PyYAML was built with it (some 10 times faster), else its own.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    opens = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    closes = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    depth = 0
    nodes = 0
    documents = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise YamlLimitError("anchors and aliases are not accepted")
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise YamlLimitError("more than one YAML document")
            elif isinstance(event, opens):
                depth += 1
                nodes += 1
                if depth > max_depth:
                    raise YamlLimitError(f"nested deeper than {max_depth}")
            elif isinstance(event, closes):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
            if nodes > max_nodes:
                raise YamlLimitError(f"more than {max_nodes} nodes")
        return yaml.load(text, Loader=loader)  # the safe loader: plain data only
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise YamlLimitError(f"not valid YAML: {problem}{where}") from None
