"""Peak RSS of two fleet queries answered near the 32 MiB cap (a measurement, not a test).

Run from the repository root: ``python tests/measure_fleet_answer_rss.py``. Each case runs in a
fresh child process, which asks two queries at once (as a refresh does) of a loopback server
whose answer is just under the size cap, then parses it as the host table does; the child's
peak RSS (``VmHWM``) is printed. Cases: ``over-count`` (650,000 tiny series: more than
``MAX_RESULTS``, so refused) and ``at-count`` (100,000 series of 26 labels: accepted).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The checkout this file is in, not whichever gputui the interpreter has installed.
sys.path[:0] = [str(HERE.parent), str(HERE)]

from tests.support.hostile_http import Behaviour, HostileServer, json_reply  # noqa: E402

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
    import gputui
    from gputui.fleet.client import FleetError, PrometheusClient, instant_vector, parse_url

    assert Path(gputui.__file__).resolve().parent.parent == HERE.parent.parent, gputui.__file__

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
    # VmHWM, not ru_maxrss: the latter keeps the peak of the parent this process was
    # spawned from (it survives exec), and the parent built the 30 MiB answer.
    status = Path("/proc/self/status").read_text()
    peak = int(status.split("VmHWM:", 1)[1].split()[0]) / 1024
    print(f"  peak RSS {peak:.0f} MB; {outcomes[0]}", flush=True)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
        return
    for name, series, labels in (("over-count", 650_000, 0), ("at-count", 100_000, 25)):
        body = _answer(series, labels)
        assert len(body) < CAP, len(body)
        print(f"{name}: {series} series, {len(body) / 2**20:.1f} MiB", flush=True)
        with HostileServer(_answering(body)) as server:
            subprocess.run(
                [sys.executable, __file__, "--child", server.url],
                check=True,
                env={**os.environ, "PYTHONPATH": str(HERE.parent)},
            )


if __name__ == "__main__":
    main()
