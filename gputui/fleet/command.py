"""What ``gputui fleet`` does once its arguments are parsed: open the source, print a report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from gputui.fleet import queries
from gputui.fleet.client import FleetError, PrometheusClient, auth_from, parse_url
from gputui.fleet.model import HostRow, pod_name, sorted_rows
from gputui.fleet.report import detail_json, to_json, to_text
from gputui.fleet.source import FleetSnapshot, FleetSource, LiveFleet, RecordedFleet, save_answers
from gputui.model.records import record


class Credentials(Protocol):
    """The config file's ``[fleet]`` values (:class:`gputui.config.file.FleetPrefs`)."""

    @property
    def token(self) -> str | None:
        """Bearer token."""
        ...

    @property
    def user(self) -> str | None:
        """Basic-auth user."""
        ...

    @property
    def password(self) -> str | None:
        """Basic-auth password."""
        ...


@record
class FleetOptions:
    """The command line of ``gputui fleet``, validated by argparse.

    Attributes:
        url: ``--prometheus`` (or the config file's), None when not given.
        match: ``--match`` selectors.
        answers: ``--answers FILE``: recorded answers instead of a Prometheus.
        save_answers: ``--save-answers FILE``.
        timeout: Seconds per query.
        sort: The host table's order.
        host: ``--host``: one host's drill-down.
    """

    url: str | None = None
    match: tuple[str, ...] = ()
    answers: Path | None = None
    save_answers: Path | None = None
    timeout: float = 10.0
    sort: str = "host"
    host: str | None = None


def open_source(options: FleetOptions, env: Mapping[str, str], prefs: Credentials) -> FleetSource:
    """The live or recorded fleet the options name.

    Raises:
        FleetError: no URL, a bad URL or selector, or an unreadable answers file.
    """
    match = queries.validate_match(list(options.match))
    if options.answers is not None:
        if options.url is not None and options.save_answers is not None:
            raise FleetError("--answers replays a file: --save-answers needs --prometheus instead")
        return RecordedFleet(options.answers)
    if not options.url:
        raise FleetError(
            "no Prometheus to ask: give --prometheus URL (like http://prometheus:9090) "
            'or prometheus = "URL" in the [fleet] section of the config file'
        )
    endpoint = parse_url(options.url)
    auth = auth_from(env, prefs.token, prefs.user, prefs.password)
    client = PrometheusClient(endpoint, auth, timeout=options.timeout)
    saved: dict[str, Any] | None = {} if options.save_answers is not None else None
    return LiveFleet(client, match, endpoint.shown, save=saved, timeout=options.timeout)


def find_host(snapshot: FleetSnapshot, name: str) -> HostRow:
    """The host named ``name`` (its ``Hostname`` or ``instance``).

    Raises:
        FleetError: no such host.
    """
    for row in snapshot.hosts:
        if name in (row.host, row.instance):
            return row
    raise FleetError(
        f"no host {name!r} in the fleet: give a HOST or instance as gputui fleet --once lists them"
    )


def print_once(source: FleetSource, options: FleetOptions, as_json: bool) -> str:
    """The report ``--once`` / ``--json`` prints (and ``--save-answers`` written).

    Raises:
        FleetError: a query failed, or ``--host`` names no host.
    """
    snapshot = source.snapshot()
    hosts = tuple(sorted_rows(snapshot.hosts, options.sort))
    snapshot = FleetSnapshot(
        snapshot.taken_at, snapshot.source, hosts, snapshot.query_s, snapshot.server_s
    )
    if options.host is not None:
        row = find_host(snapshot, options.host)
        detail = source.detail(row)
        doc = {"host": to_json(snapshot)["hosts"][hosts.index(row)], **detail_json(detail)}
        text = _json(doc) if as_json else _detail_text(doc)
    elif as_json:
        text = _json(to_json(snapshot))
    else:
        text = to_text(snapshot)
    if isinstance(source, LiveFleet) and source.saved is not None and options.save_answers:
        save_answers(options.save_answers, source.saved)
    return text


def _json(doc: dict[str, Any]) -> str:
    """Strict JSON: a non-finite number is an error, never ``NaN`` printed as JSON.

    Raises:
        FleetError: the report holds a number JSON cannot carry.
    """
    try:
        return json.dumps(doc, indent=2, ensure_ascii=True, allow_nan=False) + "\n"
    except ValueError:
        raise FleetError("the fleet's answer holds a non-finite number: no JSON written") from None


def _detail_text(doc: dict[str, Any]) -> str:
    def num(value: float | None, unit: str) -> str:
        return "N/A" if value is None else f"{value:.0f}{unit}"

    lines = [f"{doc['host']['host']} ({doc['host']['instance']})"]
    for gpu in doc["gpus"]:
        lines.append(
            f"  GPU {gpu['gpu']} {gpu['model']}: util {num(gpu['util_pct'], '%')}, memory "
            f"{num(gpu['memory_used_mib'], '')}/{num(gpu['memory_total_mib'], ' MiB')}, "
            f"{num(gpu['power_w'], ' W')}, {num(gpu['temp_c'], ' °C')}"
        )
    for c in doc["containers"]:
        idle = " (idle reservation)" if c["idle_reservation"] else ""
        pod = pod_name(c["namespace"] or "", c["pod"] or "")
        lines.append(
            f"  {c['name']}{f' (pod {pod})' if pod else ''} {c['image']}: "
            f"GPU {','.join(c['gpus']) or '-'}, "
            f"{c['gpu_memory_bytes'] / 2**20:.0f} MiB{idle}"
        )
    lines.extend(f"  alert {a}" for a in doc["alerts"])
    lines.extend(f"  check {c['check']} {c['status']}" for c in doc["checks"])
    return "\n".join(lines) + "\n"
