"""Alert delivery (gputui/notify/) against a real HTTP receiver on 127.0.0.1 and real commands.

Payload shapes (gputui's JSON, Slack/Teams text, Alertmanager's webhook), retries on 500 and on
timeouts, no retry on 4xx, deduplication and rate limits on a fake clock, selection by kind
and severity, a hung receiver that never holds the collect loop back, the command target run
with argv only, and secrets never in a message, a repr or a config error.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.loop import CollectLoop
from gputui.config.file import parse_config
from gputui.config.values import ConfigError
from gputui.derive.alerts import AlertRule
from gputui.derive.analysis import Analysis, Analyzer
from gputui.model.gpu import GpuSample
from gputui.model.snapshot import HostInfo, Snapshot
from gputui.notify.config import NotifyTarget
from gputui.notify.events import Kind, event
from gputui.notify.worker import Notifier
from gputui.recording.player import ReplayCollector
from tests.support.net import QuietHTTPServer
from tests.support.paths import REPO

T0 = 1_800_000_000.0
TOKEN = "T0KEN-9c1d7e-secret"


@dataclass
class Receiver:
    """A webhook receiver on loopback: answers each request with the next of ``plan``.

    ``plan`` items: an HTTP status, or ``"hang"`` (read the request, never answer until the
    test ends). When the plan runs out, 200.
    """

    plan: list[int | str] = field(default_factory=list)
    got: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"


@contextmanager
def receiver(*plan: int | str) -> Iterator[Receiver]:
    state = Receiver(list(plan))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                state.got.append(
                    {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)}
                )
                step = state.plan.pop(0) if state.plan else 200
            if step == "hang":
                state.release.wait(60)
                return
            assert isinstance(step, int)
            self.send_response(step)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
    state.port = int(httpd.server_address[1])
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hook(url: str, **kwargs: Any) -> NotifyTarget:
    base = NotifyTarget("hook", "webhook", url=url, headers=(("Authorization", f"Bearer {TOKEN}"),))
    return replace(base, backoff_s=0.01, **kwargs)


def alert(subject: str = "gpu0", severity: str = "warning", at: float = T0) -> Any:
    return event(Kind.ALERT, "gpu-util-high", subject, severity, f"{subject}: util 97%", at)


@contextmanager
def notifier(
    *targets: NotifyTarget, clock: Callable[[], float] = time.monotonic
) -> Iterator[Notifier]:
    lines: list[str] = []
    n = Notifier(targets, "gpu-host-1", log=lines.append, clock=clock)
    try:
        yield n
    finally:
        n.close()
        # Whatever happened, no secret reached a log line.
        assert all(TOKEN not in line for line in [*lines, *n.recent]), lines


def delivered(n: Notifier) -> None:
    wait_for(n.idle)


# -- payload shapes ------------------------------------------------------------------------------


def test_the_json_shape_with_headers_and_the_url_path() -> None:
    with receiver() as r, notifier(hook(r.url)) as n:
        n.submit([alert()])
        delivered(n)
    (req,) = r.got
    assert req["path"] == f"/hooks/{TOKEN}"
    assert req["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["body"]
    assert body["schema"] == "gputui.event/1"
    assert (body["kind"], body["status"], body["severity"]) == ("alerts", "firing", "warning")
    assert body["name"] == "gpu-util-high" and body["subject"] == "gpu0"
    assert body["host"] == "gpu-host-1"
    assert body["starts_at"] == "2027-01-15T08:00:00Z" and body["ends_at"] is None
    assert len(body["fingerprint"]) == 16
    assert n.stats["hook"].sent == 1


def test_the_slack_text_shape_and_hostile_text_sanitised() -> None:
    hostile = event(Kind.FINDING, "idle_reservation", "container:x", "warning", "a\x1b[2Jb\nc", T0)
    with receiver() as r, notifier(hook(r.url, format="slack")) as n:
        n.submit([hostile])
        delivered(n)
    assert r.got[0]["body"] == {"text": "[FIRING warning] gpu-host-1: ab c"}


def test_the_alertmanager_shape_firing_then_resolved() -> None:
    firing = alert("gpu3", "critical")
    with receiver() as r, notifier(hook(r.url, format="alertmanager")) as n:
        n.submit([firing])
        n.submit([firing.resolved(T0 + 60)])
        delivered(n)
    first, second = (g["body"] for g in r.got)
    assert first["version"] == "4"
    assert first["status"] == "firing" and second["status"] == "resolved"
    assert first["receiver"] == "hook"
    assert first["groupKey"] == '{}:{alertname="gpu-util-high"}'
    (a,) = first["alerts"]
    assert a["labels"]["alertname"] == "gpu-util-high"
    assert a["labels"]["severity"] == "critical"
    assert a["labels"]["instance"] == "gpu-host-1"
    assert a["annotations"]["summary"] == "gpu3: util 97%"
    assert a["startsAt"] == "2027-01-15T08:00:00Z"
    assert a["endsAt"] == "0001-01-01T00:00:00Z"
    assert second["alerts"][0]["endsAt"] == "2027-01-15T08:01:00Z"
    assert a["fingerprint"] == second["alerts"][0]["fingerprint"]
    assert first["commonLabels"]["alertname"] == "gpu-util-high"


# -- retries -------------------------------------------------------------------------------------


def test_a_500_is_retried_with_backoff_until_it_succeeds() -> None:
    with receiver(500, 503) as r, notifier(hook(r.url, retries=3)) as n:
        n.submit([alert()])
        delivered(n)
    assert len(r.got) == 3
    assert r.got[0]["body"] == r.got[2]["body"]
    stats = n.stats["hook"]
    assert (stats.sent, stats.retried, stats.failed) == (1, 2, 0)


def test_a_timeout_is_retried() -> None:
    with receiver("hang") as r, notifier(hook(r.url, timeout_s=0.3, retries=2)) as n:
        n.submit([alert()])
        delivered(n)
    assert len(r.got) == 2
    assert (n.stats["hook"].sent, n.stats["hook"].retried) == (1, 1)


def test_a_4xx_is_not_retried_and_retries_end() -> None:
    with receiver(404, 500, 500, 500) as r, notifier(hook(r.url, retries=2)) as n:
        n.submit([alert("gpu0")])
        delivered(n)
        assert len(r.got) == 1 and n.stats["hook"].failed == 1
        n.submit([alert("gpu1")])  # 500 three times: the first try and two retries
        delivered(n)
    assert len(r.got) == 4
    assert n.stats["hook"].failed == 2
    assert any("HTTP 500; given up" in line for line in n.recent)
    assert all(TOKEN not in line for line in n.recent)


# -- dedup, rate limits, selection ---------------------------------------------------------------


def test_the_same_transition_within_repeat_is_sent_once() -> None:
    clock = FakeClock()
    with receiver() as r, notifier(hook(r.url, repeat_s=600.0), clock=clock) as n:
        n.submit([alert(), alert()])
        delivered(n)
        assert len(r.got) == 1 and n.stats["hook"].deduplicated == 1
        clock.now += 599
        n.submit([alert()])
        delivered(n)
        assert len(r.got) == 1
        clock.now += 2
        n.submit([alert()])
        delivered(n)
    assert len(r.got) == 2
    assert n.stats["hook"].deduplicated == 2


def test_a_resolved_event_goes_only_after_its_firing_one() -> None:
    with receiver() as r, notifier(hook(r.url, severity="critical")) as n:
        # The warning was not selected, so its end is not sent either.
        n.submit([alert(severity="warning"), alert(severity="warning").resolved(T0 + 5)])
        delivered(n)
    assert r.got == []


def test_rate_limit_per_hour() -> None:
    clock = FakeClock()
    with receiver() as r, notifier(hook(r.url, rate_limit=3), clock=clock) as n:
        n.submit([alert(f"gpu{i}") for i in range(5)])
        delivered(n)
        assert len(r.got) == 3
        assert n.stats["hook"].rate_limited == 2
        clock.now += 3600
        n.submit([alert("gpu7")])
        delivered(n)
    assert [g["body"]["subject"] for g in r.got] == ["gpu0", "gpu1", "gpu2", "gpu7"]


def test_selection_by_kind_and_severity() -> None:
    finding = event(Kind.FINDING, "gpu_shared", "gpu:0", "critical", "shared", T0)
    info = event(Kind.ALERT, "x", "gpu1", "info", "low", T0)
    with receiver() as r:
        alerts_only = hook(r.url, events=frozenset({"alerts"}))
        with notifier(alerts_only) as n:
            n.submit([finding, info, alert("gpu2", "critical")])
            delivered(n)
    assert [g["body"]["subject"] for g in r.got] == ["gpu2"]


# -- from the analysis, never blocking collection ------------------------------------------------


def snap(i: int, util: int) -> Snapshot:
    gpu = GpuSample(0, "GPU-0", "H200", utilization_gpu=util)
    return Snapshot(T0 + i, "scenario", HostInfo("h"), gpus=(gpu,))


def test_alerts_from_the_analysis_fire_and_resolve() -> None:
    player = ReplayCollector([snap(0, 10), snap(1, 95), snap(2, 95), snap(3, 10)])
    rule = AlertRule("hot", "gpu_util", threshold=50.0)
    with receiver() as r, notifier(hook(r.url, events=frozenset({"alerts"}))) as n:
        analyzer = Analyzer([rule], (n.observe,))
        CollectLoop(player, analyzer.analyse, lambda s, a: None, interval=0.0).run(count=4)
        delivered(n)
    assert [(g["body"]["name"], g["body"]["status"]) for g in r.got] == [
        ("hot", "firing"),
        ("hot", "resolved"),
    ]
    assert r.got[0]["body"]["starts_at"] == "2027-01-15T08:00:01Z"


def test_a_hung_receiver_never_delays_a_refresh() -> None:
    """Each refresh fires or resolves an alert; the receiver never answers (30 s deadline)."""
    snapshots = [snap(i, 95 if i % 2 else 10) for i in range(400)]
    player = ReplayCollector(snapshots)
    rule = AlertRule("hot", "gpu_util", threshold=50.0)
    target = hook("", timeout_s=30.0, repeat_s=0.0, retries=0)
    with receiver(*["hang"] * 50) as r:
        with notifier(replace(target, url=r.url)) as n:
            analyzer = Analyzer([rule], (n.observe,))
            loop: CollectLoop[Analysis] = CollectLoop(
                player, analyzer.analyse, lambda s, a: None, interval=0.01
            )
            thread = threading.Thread(target=loop.run, daemon=True)
            thread.start()
            try:
                wait_for(lambda: len(r.got) >= 1)  # a request is held by the receiver now
                # With deliveries on the loop's thread, 300 refreshes would take 300 x 30 s.
                wait_for(lambda: loop.delivered >= 300, timeout=60.0)
            finally:
                loop.stop()
                thread.join(5)
            assert len(r.got) == 1  # still held: the rest wait in the bounded queue
            assert n.stats["hook"].dropped > 0  # a full queue drops, never waits
            started = time.monotonic()
        # close() cancels the held request: the worker does not wait the 30 s out.
        assert time.monotonic() - started < 30.0
    assert analyzer.sink_errors == 0


# -- the command target --------------------------------------------------------------------------


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "notify-cmd"
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_command_gets_argv_env_and_the_body_without_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    script = _script(
        tmp_path,
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ), 'stdin': sys.stdin.read()}},"
        f" open({str(out)!r}, 'w'))\n",
    )
    pwned = tmp_path / "pwned"
    argv = (str(script), "--team", f"$(touch {pwned})", "; touch " + str(pwned), "`id`")
    target = NotifyTarget(
        "page", "command", argv=argv, env=(("PAGER_TOKEN", TOKEN),), backoff_s=0.01
    )
    with notifier(target) as n:
        n.submit([alert("gpu5", "critical")])
        delivered(n)
        assert n.stats["page"].sent == 1
    got = json.loads(out.read_text())
    assert got["argv"] == list(argv)
    assert not pwned.exists()
    env = got["env"]
    assert env["PAGER_TOKEN"] == TOKEN
    assert env["GPUTUI_EVENT_SUBJECT"] == "gpu5"
    assert env["GPUTUI_EVENT_SEVERITY"] == "critical"
    assert env["GPUTUI_EVENT_STATUS"] == "firing"
    # Only the variables named, not gputui's whole environment.
    assert "HOME" not in env and set(env) - {"PATH", "LANG", "LC_ALL", "TZ", "LC_CTYPE"} <= {
        "PAGER_TOKEN",
        *(k for k in env if k.startswith("GPUTUI_EVENT_")),
    }
    assert json.loads(got["stdin"])["schema"] == "gputui.event/1"


def test_a_failing_command_is_retried_and_a_hung_one_stopped(tmp_path: Path) -> None:
    count = tmp_path / "count"
    failing = _script(
        tmp_path, f"p = {str(count)!r}\nopen(p, 'a').write('x')\nraise SystemExit(3)\n"
    )
    target = NotifyTarget("fails", "command", argv=(str(failing),), retries=2, backoff_s=0.01)
    with notifier(target) as n:
        n.submit([alert()])
        delivered(n)
    assert count.read_text() == "xxx"
    assert n.stats["fails"].failed == 1 and any("exit 3" in line for line in n.recent)

    pidfile = tmp_path / "child.pid"
    hung = tmp_path / "hung"
    hung.write_text(
        f"#!{sys.executable}\nimport os, subprocess, time\n"
        f"child = subprocess.Popen(['sleep', '600'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\ntime.sleep(600)\n"
    )
    hung.chmod(0o755)
    target = NotifyTarget("hangs", "command", argv=(str(hung),), timeout_s=1.0, retries=0)
    with notifier(target) as n:
        n.submit([alert()])
        wait_for(pidfile.exists)
        delivered(n)
    child = int(pidfile.read_text())
    # The command's whole session was stopped: its child too, not left running.
    wait_for(lambda: not _alive(child))
    assert any("did not finish within 1 s" in line for line in n.recent)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# -- config and secrets --------------------------------------------------------------------------

CONFIG = f"""
[[notify]]
name = "slack"
type = "webhook"
url = "https://hooks.example.com/services/{TOKEN}"
format = "slack"
headers = {{ Authorization = "Bearer {TOKEN}" }}
events = ["alerts", "idle"]
severity = "critical"
repeat = "1h"
rate_limit = 10
retries = 2
backoff = "2s"
timeout = "3s"

[[notify]]
name = "pager"
type = "command"
argv = ["/usr/local/bin/page", "{TOKEN}"]
env = {{ PAGER_TOKEN = "{TOKEN}" }}
"""


def test_the_config_section_and_secrets_never_in_a_repr() -> None:
    config = parse_config(CONFIG, Path("config.toml"))
    slack, pager = config.notify
    assert (slack.format, slack.severity, slack.events) == (
        "slack",
        "critical",
        frozenset({"alerts", "idle"}),
    )
    assert (slack.repeat_s, slack.rate_limit, slack.retries, slack.backoff_s) == (3600, 10, 2, 2)
    assert slack.timeout_s == 3.0 and pager.timeout_s == 10.0
    assert slack.shown == "webhook slack (https://hooks.example.com/…)"
    assert pager.shown == "command pager (page)"
    assert TOKEN not in repr(config) and TOKEN not in repr(slack) + repr(pager)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('type = "webhook"\nurl = "ftp://x/' + TOKEN + '"', "notify[0].url: expected an http"),
        ('type = "webhook"\nurl = "http://u:' + TOKEN + '@x/"', "credentials do not belong"),
        ('type = "webhook"\nurl = "http://x:99999999/' + TOKEN + '"', "notify[0].url: not a URL"),
        ('type = "webhook"\nurl = "http://x/"\nformat = "xml"', "notify[0].format: one of"),
        ('type = "webhook"\nurl = "http://x/é' + TOKEN + '"', "non-ASCII character"),
        (
            'type = "webhook"\nurl = "http://x/"\nheaders = { X = "' + TOKEN + '\\n" }',
            "notify[0].headers.X: holds a control",
        ),
        ('type = "command"\nargv = "/bin/page ' + TOKEN + '"', "notify[0].argv: required"),
        ('type = "command"\nargv = ["a"]\nenv = { "1X" = "' + TOKEN + '" }', "not a valid name"),
        ('type = "command"\nargv = ["a"]\nretries = 99', "notify[0].retries: expected an integer"),
        ('type = "command"\nargv = ["a"]\ntimeout = "1y"', "notify[0].timeout: expected a dur"),
        ('type = "command"\nargv = ["a"]\nevents = ["everything"]', "notify[0].events: a list"),
        ('type = "pigeon"', "notify[0].type: required, one of webhook, command"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_and_key_never_the_secret(
    text: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f'[[notify]]\nname = "t"\n{text}\n', Path("cfg.toml"))
    message = str(caught.value)
    assert message.startswith("cfg.toml: ") and words in message, message
    assert "\n" not in message and TOKEN not in message


def test_a_bad_notify_value_exits_2_with_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG.replace('format = "slack"', 'format = "' + TOKEN + '"'))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    for argv in (["--demo", "--once"], ["export", "--once", "--demo"]):
        result = subprocess.run(
            [sys.executable, "-m", "gputui", *argv, "--config", str(cfg)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=REPO,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "notify[0].format: one of json, slack, alertmanager" in lines[0]
        assert TOKEN not in result.stderr + result.stdout


EXPORT = (sys.executable, "-m", "gputui", "export", "--demo", "--listen", "127.0.0.1:0")


def test_gputui_export_delivers_and_no_output_shows_a_secret(tmp_path: Path) -> None:
    """The exporter's analysis feeds the targets; --once, --json and doctor never show them."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    with receiver() as r:
        cfg = tmp_path / "config.toml"
        cfg.write_text(
            f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "{r.url}"\n'
            f'severity = "info"\nheaders = {{ Authorization = "Bearer {TOKEN}" }}\n'
        )
        process = subprocess.Popen(
            [*EXPORT, "--interval", "0.2", "--config", str(cfg)],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=REPO,
        )
        try:
            wait_for(lambda: len(r.got) >= 1, timeout=60)
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
        body = r.got[0]["body"]
        assert body["schema"] == "gputui.event/1" and body["kind"] in ("findings", "alerts")
        assert r.got[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
        assert TOKEN not in stderr
        for argv in (
            ["--demo", "--once", "--config", str(cfg)],
            ["--demo", "--json", "--config", str(cfg)],
            ["export", "--once", "--demo", "--config", str(cfg)],
            ["doctor", "--json", "--demo"],
        ):
            result = subprocess.run(
                [sys.executable, "-m", "gputui", *argv],
                capture_output=True,
                text=True,
                timeout=60,
                env={**env, "XDG_CONFIG_HOME": str(tmp_path)},
                cwd=REPO,
            )
            assert result.returncode in (0, 1), result.stderr
            assert TOKEN not in result.stdout + result.stderr


def test_the_commented_examples_of_the_contrib_config_parse() -> None:
    text = (REPO / "contrib" / "config.example.toml").read_text()
    # The notify and idle-policy sections, up to the next section of the file.
    tail = text[text.index("# Where alerts, findings") : text.index("# The GPU ledger")]
    body = "\n".join(
        line[2:] if line.startswith("# ") and ("=" in line or line.startswith("# [")) else ""
        for line in tail.splitlines()
    )
    config = parse_config(body, Path("example.toml"))
    assert [t.name for t in config.notify] == ["gpu-slack", "oncall", "pager"]
    assert config.idle_policy.enabled and config.idle_policy.quiet_hours == (22 * 60, 7 * 60)
