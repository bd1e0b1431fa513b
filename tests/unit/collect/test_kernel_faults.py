"""The kernel-log parsers: every line of the corpus of real XID and OOM-kill lines, the kmsg
record framing, the XID catalogue's classes, and a fuzz run (never raises, bounded)."""

from __future__ import annotations

import random

import pytest

from gputui.collect.linux.kernel_faults import (
    MAX_MESSAGE_CHARS,
    OomContext,
    OomKill,
    XidLine,
    parse_line,
    parse_record,
)
from gputui.collect.xid_catalog import HARDWARE_CLASSES, XID_TABLE, classify
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "kmsg-corpus.txt"


def corpus() -> list[tuple[dict[str, str], str]]:
    """The corpus entries: (expected facts, line)."""
    out = []
    for raw in CORPUS.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        expect, sep, line = raw.partition(" || ")
        assert sep, raw
        words = expect.split()
        facts = {"type": words[0].split("=")[0]}
        for word in words:
            key, sep, value = word.partition("=")
            if sep:
                facts[key] = value
        out.append((facts, line))
    return out


def _value(text: str) -> int | str | None:
    if text == "-":
        return None
    try:
        return int(text)
    except ValueError:
        return text


def test_the_corpus_spans_driver_generations() -> None:
    entries = corpus()
    xids = [line for facts, line in entries if facts["type"] == "xid"]
    assert len(xids) >= 50
    # The forms: r535+ unknown process, a named process, MIG, NVLink, no "PCI:" prefix.
    assert any("pid='<unknown>'" in line for line in xids)
    assert any("pid=<unknown>" in line for line in xids)
    assert any("GPU-I:" in line and "GPU-CI:" in line for line in xids)
    assert any("NVRM: Xid (0000:" in line for line in xids)
    assert any("): 149, " in line for line in xids)
    assert sum(1 for facts, _ in entries if facts["type"] == "oom") >= 5


@pytest.mark.parametrize(("facts", "line"), corpus(), ids=lambda v: str(v)[:60])
def test_every_corpus_line_parses_to_its_facts(facts: dict[str, str], line: str) -> None:
    parsed = parse_line(line)
    kind = facts["type"]
    if kind == "none":
        assert parsed is None
    elif kind == "xid":
        assert isinstance(parsed, XidLine)
        assert parsed.xid == int(facts["xid"])
        assert parsed.pci == facts["pci"]
        assert parsed.pid == _value(facts.get("pid", "-"))
        assert parsed.process_name == _value(facts.get("name", "-"))
        assert parsed.gpu_instance == _value(facts.get("gi", "-"))
        assert parsed.compute_instance == _value(facts.get("ci", "-"))
        assert parsed.link == _value(facts.get("link", "-"))
        assert parsed.caused_by == _value(facts.get("caused", "-"))
    elif kind == "oom":
        assert isinstance(parsed, OomKill)
        assert parsed.pid == int(facts["pid"])
        assert parsed.process_name == facts["name"]
        assert parsed.cgroup == {"yes": True, "no": False, "-": None}[facts["cgroup"]]
    else:
        assert kind == "ctx"
        assert isinstance(parsed, OomContext)
        assert (parsed.task_memcg or parsed.oom_memcg) == _value(facts["memcg"])
        assert parsed.pid == _value(facts["pid"])
        assert parsed.task == _value(facts["task"])


def test_application_xids_are_never_hardware() -> None:
    for xid in (13, 31, 43, 45, 68):
        assert classify(xid).fault_class == "application"
    for entry in XID_TABLE.values():
        if entry.fault_class == "application":
            assert "the GPU is fine" in entry.fix or "GPU is fine" in entry.fix
    # Unknown numbers are unknown, not hardware.
    for xid in (0, 1, 999, 65535):
        assert classify(xid).fault_class not in HARDWARE_CLASSES
    assert classify(79).fault_class == "bus"
    assert classify(48).fault_class == "memory"
    assert classify(149).fault_class == "nvlink"
    assert classify(119).fault_class == "gsp"


def test_kmsg_record_framing() -> None:
    record = parse_record(
        b"3,4471,3023054882,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off "
        b"the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
    )
    assert record is not None
    assert (record.level, record.facility, record.seq, record.usec) == (3, 0, 4471, 3023054882)
    assert record.message.endswith("fallen off the bus.")
    # A line a program wrote (facility user) and the optional header fields.
    user = parse_record(b"11,9,5,c,extra;hello\n")
    assert user is not None and (user.level, user.facility, user.message) == (3, 1, "hello")
    for bad in (b"", b";", b"x,1,2,-;m", b"1,2;m", b"1,-2,3,-;m", b"9" * 30 + b",1,2,-;m"):
        assert parse_record(bad) is None


def test_fuzzed_lines_never_raise_and_stay_bounded() -> None:
    rng = random.Random(30)
    seeds = [line for _, line in corpus()]
    alphabet = (
        "NVRM: Xid(PCI)0123456789abcdef,'<>=pidnameGPU-I:C xkilledprocesoom-kil_memcg/\x00\n\\"
    )
    for i in range(5_000):
        base = seeds[i % len(seeds)]
        chars = list(base)
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            pos = rng.randrange(len(chars) + 1)
            if op < 0.4 and chars:
                del chars[min(pos, len(chars) - 1)]
            elif op < 0.8:
                chars.insert(pos, rng.choice(alphabet))
            else:
                chars[pos:pos] = list(rng.choice(seeds))
        text = "".join(chars)
        parsed = parse_line(text)
        if isinstance(parsed, XidLine):
            assert len(parsed.detail) <= MAX_MESSAGE_CHARS
            assert parsed.process_name is None or len(parsed.process_name) <= 64
        data = f"{rng.randint(0, 999)},{i},{rng.randint(0, 10**12)},-;{text}".encode(
            "utf-8", "surrogatepass"
        )
        record = parse_record(data + bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))))
        assert record is None or len(record.message) <= MAX_MESSAGE_CHARS
    # Oversized and hostile input: a megabyte line and deep repetition cost no more than a read.
    huge = "NVRM: Xid (PCI:0000:3b:00): 31, pid=" + "9" * 1_000_000
    assert parse_line(huge) is not None
    context = parse_line("oom-kill:constraint=CONSTRAINT_MEMCG" + ",task=x" * 200_000)
    assert isinstance(context, OomContext) and context.constraint == "CONSTRAINT_MEMCG"
    record = parse_record(b"1,2,3,-;" + b"A" * 10_000_000)
    assert record is not None and len(record.message) <= MAX_MESSAGE_CHARS
