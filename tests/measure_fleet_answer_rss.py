"""Peak RSS of two fleet queries answered near the 32 MiB cap (a measurement, not a test).

Run from the repository root: ``python tests/measure_fleet_answer_rss.py``. Each case runs in a
fresh child process, which asks two queries at once (as a refresh does) of a loopback server
whose answer is just under the size cap, then parses it as the host table does; the child's
peak RSS (``ru_maxrss``) is printed. Cases: ``over-count`` (650,000 tiny series: more than
``MAX_RESULTS``, so refused) and ``at-count`` (100,000 series of 26 labels: accepted).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_http import Behaviour, HostileServer, json_reply

CAP = 32 * 1024 * 1024


def _answer(series: int, labels: int) -> bytes:
    items = []
    for i in range(series):
        metric = {"instance": f"h{i}", **{f"l{j}": f"v{j}" for j in range(labels)}}
        items.append(json.dumps({"metric": metric, "value": [1, "1"]}, separators=(",", ":")))
    return (
        b'{"status":"success","data":{"resultType":"vector","result":['
        + ",".join(items).encode()
        + b"]}}"
    )


def _answering(body: bytes) -> Behaviour:
    def behave(server: HostileServer, sock: socket.socket, request: bytes) -> None:
        json_reply(sock, body)

    return behave


def _child(url: str) -> None:
    from gputui.fleet.client import FleetError, PrometheusClient, instant_vector, parse_url

    client = PrometheusClient(parse_url(url), timeout=120)
    outcomes: list[str] = []

    def ask() -> None:
        try:
            data = client.query("up", 1.0)
            outcomes.append(f"{len(instant_vector(data))} series")
        except FleetError as exc:
            outcomes.append(str(exc)[:70])

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak:.0f} MB; {outcomes[0]}")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
        return
    for name, series, labels in (("over-count", 650_000, 0), ("at-count", 100_000, 25)):
        body = _answer(series, labels)
        assert len(body) < CAP, len(body)
        print(f"{name}: {series} series, {len(body) / 2**20:.1f} MiB")
        with HostileServer(_answering(body)) as server:
            subprocess.run(
                [sys.executable, __file__, "--child", server.url], check=True, env=dict(os.environ)
            )


if __name__ == "__main__":
    main()
