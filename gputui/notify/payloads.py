"""The bodies a target sends: gputui's own JSON, Slack/Teams text, Alertmanager's webhook.

Every string from outside (container names, summaries, labels) passes ``safe_text`` here, at
the output boundary: a receiver never gets an escape sequence, a control character or an
unbounded string from gputui. docs/notify.md documents each shape.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from gputui.boundary.sanitise import safe_text
from gputui.boundary.timestamps import utc
from gputui.notify.events import Event, Status

#: The JSON body's ``schema`` field: bumped when a field changes meaning.
SCHEMA = "gputui.event/1"
#: Formats ``[[notify]] format`` accepts for webhooks.
FORMATS: tuple[str, ...] = ("json", "slack", "alertmanager")
#: Alertmanager's "no end time yet".
_ZERO_TIME = "0001-01-01T00:00:00Z"
_SUMMARY_CHARS = 1000
_LABEL_CHARS = 256


def _labels(e: Event) -> dict[str, str]:
    return {safe_text(k, 64): safe_text(v, _LABEL_CHARS) for k, v in e.labels}


def _figures(e: Event) -> dict[str, float | int | str | None]:
    out: dict[str, float | int | str | None] = {}
    for k, v in e.figures:
        if isinstance(v, str):
            out[safe_text(k, 64)] = safe_text(v, _LABEL_CHARS)
        else:  # a non-finite number is no figure (and not JSON)
            out[safe_text(k, 64)] = v if math.isfinite(v) else None
    return out


def fingerprint(e: Event) -> str:
    """16 hex digits that name the event across its firing and resolved transitions."""
    return hashlib.sha256(e.key.encode("utf-8", "replace")).hexdigest()[:16]


def json_body(e: Event, host: str) -> dict[str, Any]:
    """The body in gputui's own shape (``schema`` :data:`SCHEMA`)."""
    return {
        "schema": SCHEMA,
        "kind": e.kind.value,
        "status": e.status.value,
        "name": safe_text(e.name, _LABEL_CHARS),
        "subject": safe_text(e.subject, _LABEL_CHARS),
        "severity": e.severity,
        "summary": safe_text(e.summary, _SUMMARY_CHARS),
        "host": safe_text(host, _LABEL_CHARS),
        "starts_at": utc(e.starts_at, ""),
        "ends_at": utc(e.ends_at, "") if e.ends_at is not None else None,
        "fingerprint": fingerprint(e),
        "labels": _labels(e),
        "figures": _figures(e),
    }


def text_line(e: Event, host: str) -> str:
    """One line for chat: ``[FIRING warning] host: summary``."""
    status = "RESOLVED" if e.status is Status.RESOLVED else "FIRING"
    return f"[{status} {e.severity}] {safe_text(host, 64)}: {safe_text(e.summary, _SUMMARY_CHARS)}"


def slack_body(e: Event, host: str) -> dict[str, Any]:
    """``{"text": ...}``: what Slack's and Teams' incoming webhooks (and Mattermost's) take."""
    return {"text": text_line(e, host)}


def alertmanager_body(e: Event, host: str, receiver: str) -> dict[str, Any]:
    """Alertmanager's webhook payload (version 4) holding this one event.

    Receivers written for Alertmanager (``alertmanager-webhook-*``, PagerDuty or ticket
    bridges) read it as they read Alertmanager's own: ``alertname`` is the event's name,
    ``severity`` and ``instance`` (the host) are labels, the summary an annotation.
    """
    labels = {
        **_labels(e),
        "alertname": safe_text(e.name, _LABEL_CHARS),
        "severity": e.severity,
        "instance": safe_text(host, _LABEL_CHARS),
        "source": "gputui",
        "kind": e.kind.value,
    }
    group = {"alertname": labels["alertname"]}
    alert = {
        "status": e.status.value,
        "labels": labels,
        "annotations": {
            "summary": safe_text(e.summary, _SUMMARY_CHARS),
            "description": safe_text(e.summary, _SUMMARY_CHARS),
        },
        "startsAt": utc(e.starts_at, _ZERO_TIME),
        "endsAt": utc(e.ends_at, _ZERO_TIME) if e.ends_at is not None else _ZERO_TIME,
        "generatorURL": "",
        "fingerprint": fingerprint(e),
    }
    return {
        "version": "4",
        "groupKey": "{}:" + "{" + f'alertname="{labels["alertname"]}"' + "}",
        "truncatedAlerts": 0,
        "status": e.status.value,
        "receiver": safe_text(receiver, 64),
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": alert["annotations"],
        "externalURL": "",
        "alerts": [alert],
    }


def body(e: Event, host: str, fmt: str, receiver: str) -> bytes:
    """The encoded body of one event in ``fmt`` (:data:`FORMATS`)."""
    if fmt == "slack":
        data = slack_body(e, host)
    elif fmt == "alertmanager":
        data = alertmanager_body(e, host, receiver)
    else:
        data = json_body(e, host)
    # Figures are finite numbers from the engines; allow_nan=False makes a slip an error here.
    return json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
