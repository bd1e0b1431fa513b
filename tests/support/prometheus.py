"""The one Prometheus launcher: a real ``prometheus`` on loopback, for the tests and bench/.

Debian's ``prometheus`` package (CI installs it; ``tests/conftest.py``'s ``prometheus_bin``
fixture finds it or skips) started with a config of the caller's, its TSDB and its log in a
directory of the caller's, on a free loopback port. It is read back through the HTTP query API,
as a dashboard would.

bench/fleet.py imports this module (bench/ depends on tests/support, never the other way: see
:mod:`tests.support.images`), so it imports no pytest.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.net import free_port
from tests.support.processes import stop_process


class PrometheusError(RuntimeError):
    """Prometheus answered a query with an error."""


@dataclass
class Prometheus:
    """A started Prometheus: its process, its base URL and its log file."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def query(self, promql: str, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The ``result`` of an instant query.

        Raises:
            OSError: Prometheus does not answer (yet: it takes a moment to listen).
            PrometheusError: It answered with an error status.
        """
        url = f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}"
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            doc: Any = json.load(response)
        if doc.get("status") != "success":
            raise PrometheusError(f"{promql}: {doc}")
        return list(doc["data"]["result"])

    def log_tail(self, chars: int = 2000) -> str:
        """The last ``chars`` characters of its log, for a failure message."""
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL when it has not exited after ``grace_s``."""
        stop_process(self.process, grace_s)


def start_prometheus(binary: str, directory: Path, config: str) -> Prometheus:
    """Start ``binary`` with ``config`` (the YAML text) on a free loopback port.

    Args:
        binary: The ``prometheus`` executable.
        directory: Where ``prometheus.yml``, the TSDB (``tsdb/``) and ``prometheus.log`` go.
        config: The configuration file's text (its scrape targets).

    Returns:
        The running Prometheus; the caller stops it (:meth:`Prometheus.stop`).
    """
    config_file = directory / "prometheus.yml"
    config_file.write_text(config)
    port = free_port()
    log = directory / "prometheus.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return Prometheus(process, f"http://127.0.0.1:{port}", log)
