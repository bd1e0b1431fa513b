"""Pure parsers for kernel-log records: ``/dev/kmsg`` framing, NVIDIA XID lines, OOM kills (no I/O).

The kernel log is written by the kernel, by the NVIDIA driver (every driver generation in use
prints its XID line a little differently) and, as root, by anyone. Every function here takes
bytes or text and never raises, whatever the input (the tests fuzz them), and each bounds how much
it looks at, so a garbled or oversized record costs no more than a normal one.

Line forms understood (NVIDIA's XID catalogue and public reports, see tests/data/kmsg_corpus.txt):

* ``NVRM: Xid (PCI:0000:3b:00): 31, pid=48211, name=python3, Ch 00000010, ...`` (R450 and later);
* ``pid='<unknown>', name=<unknown>`` and ``pid=<unknown>`` (no process known to the driver);
* no ``pid=`` at all (``79, GPU has fallen off the bus.``, the NVLink XIDs 144-150);
* the MIG attribution in the parenthesis: ``(PCI:0000:01:00 GPU-I:05 GPU-CI:00)``;
* the older ``NVRM: Xid (0000:01:00): 8, Channel 00000020`` without ``PCI:``;
* cgroup OOM kills: ``oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=...,task_memcg=...,
  task=...,pid=...,uid=...`` and ``Memory cgroup out of memory: Killed process 1234 (python3)
  total-vm:...``, the 4.x ``Task in /docker/<id> killed as a result of limit of ...`` and the
  global ``Out of memory: Killed process ...``.
"""

from __future__ import annotations

import re

from gputui.model.records import record

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_RECORD_BYTES",
    "KmsgRecord",
    "OomContext",
    "OomKill",
    "XidLine",
    "parse_line",
    "parse_oom_context",
    "parse_oom_kill",
    "parse_record",
    "parse_xid",
]

#: A kmsg record is at most about 1 KiB of text (printk's line limit) plus its dictionary; a
#: read buffer of this size takes any record the kernel hands out.
MAX_RECORD_BYTES = 8192
#: The most of one message looked at or kept (the driver's longest XID lines are ~300 chars).
MAX_MESSAGE_CHARS = 1024
#: The header ``prio,seq,usec,flags[,more]`` is short; more than this is not a record.
_MAX_HEADER = 128
_MAX_DIGITS = 20
#: Process names are the kernel's ``comm``: at most 15 bytes, 64 with escapes; keep a margin.
_MAX_NAME = 64
#: cgroup paths of a container are well under this; longer is cut, not parsed further.
_MAX_CGROUP = 1024

# The parenthesis: optional ``PCI:``, an optional domain (4-8 hex digits), bus and device, an
# optional function, then MIG attribution (``GPU-I:05 GPU-CI:00``) or nothing.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2,4}):"
    r"(?P<dev>[0-9a-fA-F]{2})(?:[.:][0-9a-fA-F])?(?P<mig>[^)]{0,40})\):\s*(?P<xid>\d{1,5})\b"
    r",?\s?(?P<rest>.*)",
    re.DOTALL,
)
_GI_RE = re.compile(r"GPU-I:\s*(\d{1,3})")
_CI_RE = re.compile(r"GPU-CI:\s*(\d{1,3})")
_PID_RE = re.compile(r"^pid=(?:'(?P<q>[^']{0,16})'|(?P<u>[^,\s]{0,16}))\s*,?\s?")
_NAME_RE = re.compile(r"^name=(?:'(?P<q>[^']{0,64})'|(?P<u>[^,]{0,64}))\s*,?\s?")
_CHANNEL_RE = re.compile(r"\b(?:Ch|Channel(?: ID)?|channel)\s+(?:0x)?(?P<ch>[0-9a-fA-F]{1,8})\b")
_LINK_RE = re.compile(r"\b[Ll]ink\s+(?P<link>-?\d{1,3})\b")
_CAUSED_RE = re.compile(r"caused by previous Xid (?P<xid>\d{1,5})")

_KILLED_RE = re.compile(
    r"(?P<scope>Memory cgroup out of memory|Out of memory(?: \([^)]{0,40}\))?)?:?\s*"
    r"Killed process (?P<pid>\d{1,10}) \((?P<name>.{0,64}?)\)(?:\s|,|$)"
)
_KB_RE = {
    "total_vm_kb": re.compile(r"total-vm:(\d{1,15})kB"),
    "anon_rss_kb": re.compile(r"anon-rss:(\d{1,15})kB"),
}
_UID_RE = re.compile(r"\bUID:(\d{1,10})\b")
_CONTEXT_TAIL_RE = re.compile(
    r",task=(?P<task>.{0,64}?),pid=(?P<pid>\d{1,10}),uid=(?P<uid>\d{1,10})\s*$"
)
_TASK_IN_RE = re.compile(
    r"Task in (?P<task>\S{1,1024}) killed as a result of limit of (?P<oom>\S{1,1024})"
)


@record
class KmsgRecord:
    r"""One ``/dev/kmsg`` record.

    Attributes:
        level: Syslog level 0-7 (3 = err).
        facility: Syslog facility: 0 for the kernel itself, 1 (user) for a line written into
            ``/dev/kmsg`` by a program.
        seq: The kernel's record sequence number.
        usec: Microseconds since boot when the record was logged.
        message: The text (at most :data:`MAX_MESSAGE_CHARS`), the kernel's ``\\xNN`` escapes kept.
    """

    level: int
    facility: int
    seq: int
    usec: int
    message: str


@record
class XidLine:
    """The facts of one NVIDIA XID line.

    Attributes:
        pci: ``dddd:bb:dd`` (domain, bus, device; lowercase hex), the GPU's PCI address.
        xid: The XID number.
        pid: The host PID the driver named, None for none or ``<unknown>``.
        process_name: The process name the driver named, None for none or ``<unknown>``.
        gpu_instance: The MIG GPU instance (``GPU-I:``), None off MIG.
        compute_instance: The MIG compute instance (``GPU-CI:``), None when not given.
        channel: The channel number (``Ch 00000010``), None when not given.
        link: The NVLink link number (XID 74, 144-150), None when not given.
        caused_by: The XID an XID 45 says caused it (``caused by previous Xid 149``).
        detail: The rest of the line after the XID number and the process.
    """

    pci: str
    xid: int
    pid: int | None = None
    process_name: str | None = None
    gpu_instance: int | None = None
    compute_instance: int | None = None
    channel: int | None = None
    link: int | None = None
    caused_by: int | None = None
    detail: str = ""


@record
class OomContext:
    """The cgroup context the kernel prints before an OOM kill.

    Attributes:
        constraint: ``CONSTRAINT_MEMCG`` (a cgroup's limit), ``CONSTRAINT_NONE`` (the host ran
            out), ...; None for the 4.x ``Task in`` line (always a cgroup's limit).
        oom_memcg: The cgroup whose limit was hit.
        task_memcg: The cgroup of the killed task.
        task: The killed task's name.
        pid: Its host PID, None for the 4.x line (the ``Killed process`` line that follows has it).
        uid: Its user id.
    """

    constraint: str | None
    oom_memcg: str | None
    task_memcg: str | None
    task: str | None = None
    pid: int | None = None
    uid: int | None = None


@record
class OomKill:
    """The kernel's ``Killed process`` line.

    Attributes:
        pid: Host PID of the killed process.
        process_name: Its name.
        cgroup: True for ``Memory cgroup out of memory:`` (a cgroup's limit), False for the
            global ``Out of memory:``, None when the line does not say (the 4.x second line).
        total_vm_kb: Its virtual size.
        anon_rss_kb: Its anonymous resident memory.
        uid: Its user id.
    """

    pid: int
    process_name: str
    cgroup: bool | None = None
    total_vm_kb: int | None = None
    anon_rss_kb: int | None = None
    uid: int | None = None


def _digits(value: bytes) -> int | None:
    if not value or len(value) > _MAX_DIGITS or not value.isdigit():
        return None
    return int(value)


def parse_record(data: bytes) -> KmsgRecord | None:
    r"""One record as ``read(2)`` on ``/dev/kmsg`` returns it, None when it is not one.

    The format is ``<prio>,<seq>,<usec>,<flags>[,...];<message>\\n`` followed by optional
    `` KEY=value`` dictionary lines, which are ignored.
    """
    try:
        data = data[:MAX_RECORD_BYTES]
        semi = data.find(b";", 0, _MAX_HEADER)
        if semi < 0:
            return None
        fields = data[:semi].split(b",")
        if len(fields) < 3:
            return None
        prio, seq, usec = (_digits(f) for f in fields[:3])
        if prio is None or seq is None or usec is None:
            return None
        end = data.find(b"\n", semi + 1)
        body = data[semi + 1 : end if end >= 0 else len(data)]
        message = body[: MAX_MESSAGE_CHARS * 4].decode("utf-8", "replace")[:MAX_MESSAGE_CHARS]
        return KmsgRecord(prio & 7, min(prio >> 3, 255), seq, usec, message)
    except Exception:
        return None


def _pci(match: re.Match[str]) -> str | None:
    dom = int(match.group("dom") or "0", 16)
    bus = int(match.group("bus"), 16)
    dev = int(match.group("dev"), 16)
    if dom > 0xFFFF_FFFF or bus > 0xFF or dev > 0x1F:
        return None
    return f"{dom:04x}:{bus:02x}:{dev:02x}"


def _known(text: str | None) -> str | None:
    """None for the driver's ``<unknown>`` (quoted or not) and for empty text."""
    if text is None:
        return None
    text = text.strip().strip("'")
    return None if not text or text == "<unknown>" else text[:_MAX_NAME]


def parse_xid(message: str) -> XidLine | None:
    """The facts of an NVIDIA XID line, None when ``message`` is none.

    The line is found anywhere in the message, so a ``dmesg``/``journalctl`` prefix (time stamp,
    host, ``kernel:``) does not hide it.
    """
    try:
        text = message[:MAX_MESSAGE_CHARS]
        if "Xid" not in text:
            return None
        found = _XID_RE.search(text)
        if found is None:
            return None
        pci = _pci(found)
        xid = int(found.group("xid"))
        if pci is None or xid > 65535:
            return None
        mig = found.group("mig") or ""
        gi = _GI_RE.search(mig)
        ci = _CI_RE.search(mig)
        rest = found.group("rest").strip()
        pid: int | None = None
        name: str | None = None
        got = _PID_RE.match(rest)
        if got is not None:
            raw = _known(got.group("q") if got.group("q") is not None else got.group("u"))
            if raw is not None and raw.isdigit() and len(raw) <= 10:
                pid = int(raw) if 0 < int(raw) <= 0x3FFF_FFFF else None
            rest = rest[got.end() :]
            named = _NAME_RE.match(rest)
            if named is not None:
                name = _known(
                    named.group("q") if named.group("q") is not None else named.group("u")
                )
                rest = rest[named.end() :]
        channel = _CHANNEL_RE.search(rest)
        link = _LINK_RE.search(rest) if xid == 74 or 144 <= xid <= 150 else None
        caused = _CAUSED_RE.search(rest)
        return XidLine(
            pci=pci,
            xid=xid,
            pid=pid,
            process_name=name,
            gpu_instance=int(gi.group(1)) if gi else None,
            compute_instance=int(ci.group(1)) if ci else None,
            channel=int(channel.group("ch"), 16) if channel else None,
            link=int(link.group("link")) if link else None,
            caused_by=int(caused.group("xid")) if caused else None,
            detail=rest.strip()[:MAX_MESSAGE_CHARS],
        )
    except Exception:
        return None


def _cut(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value[:limit] if value and value != "(null)" else None


def parse_oom_context(message: str) -> OomContext | None:
    """The ``oom-kill:constraint=...`` line or the 4.x ``Task in ...`` line, else None.

    The 4.x line reads ``Task in <cgroup> killed as a result of limit of <cgroup>``.
    """
    try:
        text = message[: MAX_MESSAGE_CHARS * 4]
        at = text.find("oom-kill:")
        if at >= 0:
            body = text[at + len("oom-kill:") :]
            fields: dict[str, str] = {}
            # Values such as nodemask=0-2,4 hold commas: only the known keys are looked up,
            # each value up to the next ``,key=``.
            for key in ("constraint", "oom_memcg", "task_memcg"):
                hit = re.search(rf"(?:^|,){key}=(.*?)(?=,[a-z_]+=|$)", body)
                if hit is not None:
                    fields[key] = hit.group(1)
            tail = _CONTEXT_TAIL_RE.search(body)
            if not fields and tail is None:
                return None
            return OomContext(
                constraint=_cut(fields.get("constraint"), 40),
                oom_memcg=_cut(fields.get("oom_memcg"), _MAX_CGROUP),
                task_memcg=_cut(fields.get("task_memcg"), _MAX_CGROUP),
                task=_cut(tail.group("task"), _MAX_NAME) if tail else None,
                pid=int(tail.group("pid")) if tail else None,
                uid=int(tail.group("uid")) if tail else None,
            )
        task_in = _TASK_IN_RE.search(text.strip())
        if task_in is not None:
            return OomContext(
                constraint=None,
                oom_memcg=_cut(task_in.group("oom"), _MAX_CGROUP),
                task_memcg=_cut(task_in.group("task"), _MAX_CGROUP),
            )
        return None
    except Exception:
        return None


def parse_oom_kill(message: str) -> OomKill | None:
    """The ``Killed process <pid> (<name>) ...`` line, None for any other message."""
    try:
        text = message[:MAX_MESSAGE_CHARS]
        if "Killed process" not in text:
            return None
        found = _KILLED_RE.search(text)
        if found is None:
            return None
        pid = int(found.group("pid"))
        if not 0 < pid <= 0x3FFF_FFFF:
            return None
        scope = found.group("scope")
        sizes: dict[str, int | None] = {}
        for key, pattern in _KB_RE.items():
            hit = pattern.search(text)
            sizes[key] = int(hit.group(1)) if hit else None
        uid = _UID_RE.search(text)
        return OomKill(
            pid=pid,
            process_name=found.group("name")[:_MAX_NAME],
            cgroup=None if scope is None else scope.startswith("Memory cgroup"),
            total_vm_kb=sizes["total_vm_kb"],
            anon_rss_kb=sizes["anon_rss_kb"],
            uid=int(uid.group(1)) if uid else None,
        )
    except Exception:
        return None


def parse_line(message: str) -> XidLine | OomContext | OomKill | None:
    """Whichever of the three a message is, None for every other kernel message."""
    return parse_xid(message) or parse_oom_kill(message) or parse_oom_context(message)
