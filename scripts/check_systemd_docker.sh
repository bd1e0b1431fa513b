#!/usr/bin/env bash
# Docker with the systemd cgroup driver, checked for real (docs/runtimes.md says what it showed).
#
# Builds a Debian bookworm root with systemd and docker.io (debootstrap, from the Debian mirror;
# no image registry), runs it as a privileged podman container with systemd as PID 1, starts
# docker.service with "exec-opts": ["native.cgroupdriver=systemd"], runs two busybox containers
# in that inner engine (one sleep; one shell with a child), and then, from this host:
#   * prints their /proc/PID/cgroup lines and NSpid;
#   * runs `gputui --once --json` with a scenario naming their host PIDs as GPU processes, once
#     through the inner engine's socket (bind-mounted out of the podman container) and once with
#     no engine (the cgroup alone);
#   * checks the container, in-container PID, name and memory against the inner engine's own
#     answers (`docker inspect`, `docker exec ... ps`, `docker stats`), and, through gputui's
#     container source, inspect's process list, an exec, and an exec stopped at its timeout.
#
# Not run by CI: it needs root, podman, runc, debootstrap and Debian's mirror, and takes about
# 4 minutes (most of it debootstrap; GPUTUI_SYSD_ROOT=DIR reuses a root it built, kept).
# Everything it makes is under one mktemp directory and a private podman storage there; it is
# all removed on exit, whatever the exit. Every wait has a deadline.
#
#   sudo PYTHON=.venv/bin/python scripts/check_systemd_docker.sh [OUT_DIR]
#
# OUT_DIR (optional) keeps the evidence: cgroup lines, the JSON reports, the engine's answers.
# Exit status: 0 when gputui agrees with the inner engine, 1 when not, 2 when it cannot run.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
OUT="${1:-}"
NAME="gputui-sysd-$$"
IMAGE="localhost/gputui-sysd-docker:$$"

die() { echo "check_systemd_docker: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (a privileged podman container)"
for tool in podman runc conmon; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install podman runc conmon)"
done
if ! command -v debootstrap >/dev/null; then
    echo "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
        die "needs debootstrap (apt-get install debootstrap)"
fi
"$PYTHON" -c 'import gputui' 2>/dev/null || PYTHONPATH="$REPO" "$PYTHON" -c 'import gputui' ||
    die "PYTHON=$PYTHON cannot import gputui (set PYTHON to the project's virtualenv python)"

WORK="$(mktemp -d /tmp/gputui-sysd.XXXXXX)"
# unix socket paths are at most 107 bytes: the work directory's is short.
mkdir -p "$WORK/run" "$WORK/ptmp" "$WORK/evidence"
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"
P=(podman --root "$WORK/storage" --runroot "$WORK/runroot" --tmpdir "$WORK/ptmp")

# The host's name=systemd hierarchy (cgroup v1). With --cgroupns=private podman mounts it from
# its root into the container, so the container's systemd makes its units there
# (system.slice/docker-<id>.scope, init.scope, ...); they are removed once the container is.
SD="$(grep -E ' - cgroup [^ ]+ ([^ ]*,)?name=systemd(,| |$)' /proc/self/mountinfo | awk '{print $5; exit}')"
systemd_dirs() { [ -z "$SD" ] || find "$SD" -mindepth 1 -maxdepth 2 -type d | LC_ALL=C sort; }
systemd_dirs >"$WORK/cgroups-before"
: >"$WORK/inner-ids"

remove_systemd_dirs() {
    [ -n "$SD" ] || return 0
    systemd_dirs >"$WORK/cgroups-after"
    LC_ALL=C comm -13 "$WORK/cgroups-before" "$WORK/cgroups-after" | while read -r dir; do
        rel="${dir#"$SD"/}"
        # New at the top: this run's systemd made it. Below an existing one: only the scopes
        # of this run's containers (a host's own systemd may be making units meanwhile).
        case "$rel" in
            */*) grep -qxF "$(basename "$rel" | sed -n 's/^docker-\(.*\)\.scope$/\1/p')" \
                "$WORK/inner-ids" || continue ;;
        esac
        find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null # only empty cgroups go
    done
}

# The container's systemd mounts the v1 controllers the host left unmounted (hugetlb,
# perf_event, net_cls,net_prio here), and a hierarchy, once made, stays bound in the kernel after
# the container is gone. Every process then lists it in /proc/PID/cgroup with no mount on the
# host, and containerd's v1 metrics fail on it: `docker stats` reads 0 B and an OOM kill is no
# longer flagged (`State.OOMKilled` false). Mounting each such hierarchy where Debian would have
# put it gives the host's engine its metrics back.
remount_orphan_hierarchies() {
    local controllers dir
    while IFS=: read -r _ controllers _; do
        case "$controllers" in "" | name=*) continue ;; esac
        grep -qE " - cgroup [^ ]+ ([^ ]*,)?${controllers}(,| |$)" /proc/self/mountinfo && continue
        dir="/sys/fs/cgroup/$controllers"
        mkdir -p "$dir" && mount -t cgroup -o "$controllers" cgroup "$dir" &&
            echo "mounted the cgroup hierarchy $controllers at $dir (left bound by the container's systemd)"
    done </proc/self/cgroup
}

cleanup() {
    local rc=$?
    set +e
    if [ -n "$OUT" ] && [ -d "$WORK/evidence" ]; then
        mkdir -p "$OUT" && cp -r "$WORK/evidence/." "$OUT/"
    fi
    timeout 60 "${P[@]}" rm -f -t 5 "$NAME" >/dev/null 2>&1
    timeout 60 "${P[@]}" rmi -f "$IMAGE" >/dev/null 2>&1
    remove_systemd_dirs
    remount_orphan_hierarchies
    # podman's own mounts of its private storage (overlay, shm), deepest first.
    awk -v w="$WORK/" '$2 ~ "^"w {print $2}' /proc/self/mounts | sort -r |
        while read -r m; do umount -l "$m"; done
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS WHAT COMMAND...: run COMMAND each second until it succeeds, or fail.
wait_for() {
    local limit=$1 what=$2 until
    shift 2
    until=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$until" ]; then
            echo "check_systemd_docker: $what did not happen within ${limit} s" >&2
            return 1
        fi
        sleep 1
    done
}
in_pod() { timeout 120 "${P[@]}" exec "$NAME" "$@"; }

# --- the root: Debian bookworm, systemd, docker.io, busybox --------------------------------
ROOT="${GPUTUI_SYSD_ROOT:-$WORK/root}"
if [ ! -x "$ROOT/usr/sbin/dockerd" ]; then
    echo "debootstrap bookworm into $ROOT (about 3 minutes)"
    timeout 1200 debootstrap --variant=minbase \
        --include=systemd,systemd-sysv,docker.io,dbus,busybox-static,iproute2 \
        bookworm "$ROOT" http://deb.debian.org/debian >"$WORK/evidence/debootstrap.log" 2>&1 ||
        die "debootstrap failed: see the last lines of its log: $(tail -3 "$WORK/evidence/debootstrap.log")"
fi
mkdir -p "$ROOT/etc/docker" "$ROOT/etc/systemd/system/docker.service.d"
# The systemd driver; a second socket in a directory the host bind-mounts; vfs (overlay on
# podman's overlay is refused) and no networking (no bridge, no iptables in the container).
cat >"$ROOT/etc/docker/daemon.json" <<'EOF'
{
  "exec-opts": ["native.cgroupdriver=systemd"],
  "hosts": ["unix:///run/docker.sock", "unix:///run/docker-host/docker.sock"],
  "storage-driver": "vfs",
  "iptables": false,
  "ip-masq": false,
  "bridge": "none"
}
EOF
# Debian's unit passes -H fd://, which dockerd refuses beside "hosts" in daemon.json.
cat >"$ROOT/etc/systemd/system/docker.service.d/hosts.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=/usr/sbin/dockerd --containerd=/run/containerd/containerd.sock
EOF
echo "importing the root as $IMAGE"
tar -C "$ROOT" -c . | timeout 600 "${P[@]}" import - "$IMAGE" >/dev/null

# --- systemd as PID 1 in a privileged podman container ---------------------------------------
# --cgroupns=private: with the host's cgroup namespace (podman's default on cgroup v1) systemd
# runs, but runc cannot start a container: "error mounting "cgroup" to rootfs at
# "/sys/fs/cgroup": stat /sys/fs/cgroup/systemd/system.slice/docker-<id>.scope: no such file or
# directory" (the controllers are mounted at the podman container's cgroup, the paths are the
# host's).
timeout 120 "${P[@]}" run -d --privileged --systemd=always --cgroupns=private --network none \
    --name "$NAME" -v "$WORK/run:/run/docker-host" "$IMAGE" /sbin/init >/dev/null
system_up() { in_pod systemctl is-system-running | grep -Eq '^(running|degraded)$'; }
wait_for 90 "systemd in the podman container reaching running" system_up
wait_for 90 "docker.service answering" in_pod docker info
driver="$(in_pod docker info --format '{{.CgroupDriver}}')"
echo "inner engine: Docker $(in_pod docker version --format '{{.Server.Version}}'), cgroup driver $driver"
[ "$driver" = systemd ] || { echo "the inner engine's cgroup driver is $driver, not systemd" >&2; exit 1; }
[ -S "$WORK/run/docker.sock" ] || { echo "the inner engine's socket is not at $WORK/run" >&2; exit 1; }

# --- two containers in the inner engine ------------------------------------------------------
in_pod sh -c 'set -e; d=$(mktemp -d); mkdir -p "$d/bin"; cp /bin/busybox "$d/bin/"
    for a in sh sleep ps cat; do ln -s busybox "$d/bin/$a"; done
    tar -C "$d" -c . | docker import -c "ENV PATH=/bin" - gputui-sysd-busybox:latest >/dev/null
    rm -rf "$d"'
in_pod docker run -d --network none --name sysd-sleep gputui-sysd-busybox sleep 900 >/dev/null
# A child, and a little CPU (a short count every 0.2 s: a few % of one core).
in_pod docker run -d --network none --name sysd-tree gputui-sysd-busybox \
    sh -c 'sleep 901 & while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.2; done' >/dev/null

# Host PIDs of a container: the processes whose cgroup names its scope (independent of gputui).
host_pids() { grep -l -- "docker-$1.scope" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | sort -n; }
declare -A ID
for c in sysd-sleep sysd-tree; do
    ID[$c]="$(in_pod docker inspect -f '{{.Id}}' "$c")"
    echo "${ID[$c]}" >>"$WORK/inner-ids"
done
two_in_tree() { [ "$(host_pids "${ID[sysd-tree]}" | grep -c .)" -ge 2 ]; }
wait_for 30 "sysd-tree starting its child" two_in_tree

ev="$WORK/evidence"
: >"$ev/processes.txt"
pids=()
for c in sysd-sleep sysd-tree; do
    in_pod docker inspect -f "{{.Name}} {{.Id}} State.Pid={{.State.Pid}}" "$c" | tee -a "$ev/engine.txt"
    in_pod docker exec "$c" ps -o pid,args | tee -a "$ev/engine.txt"
    for pid in $(host_pids "${ID[$c]}"); do
        args="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || continue
        nspid="$(awk '/^NSpid:/ {$1=""; print substr($0, 2)}' "/proc/$pid/status" 2>/dev/null)" ||
            continue
        # The init and the long sleeps; not the loop's short-lived forks and sleeps.
        case "$args" in
            "sleep 900 " | "sleep 901 ") ;;
            "sh -c "*) [ "${nspid##* }" = 1 ] || continue ;;
            *) continue ;;
        esac
        echo "$c $pid ${nspid##* } $args" >>"$ev/processes.txt"
        { echo "== host PID $pid ($c: $args) NSpid: $nspid"; cat "/proc/$pid/cgroup"; } |
            tee -a "$ev/cgroups.txt"
        pids+=("$pid")
    done
done
init="$(timeout 60 "${P[@]}" inspect -f '{{.State.Pid}}' "$NAME")"
dockerd="$(pgrep -x dockerd -P "$init" || true)"
if [ -n "$dockerd" ]; then
    { echo "== host PID $dockerd (the inner dockerd) NSpid: $(awk '/^NSpid:/ {$1=""; print substr($0, 2)}' "/proc/$dockerd/status")"
      cat "/proc/$dockerd/cgroup"; } | tee -a "$ev/cgroups.txt"
fi
in_pod docker stats --no-stream --no-trunc --format '{{.ID}} {{.MemUsage}}' | tee "$ev/stats.txt"

# --- gputui, from the host -------------------------------------------------------------------
"$PYTHON" - "${pids[@]}" >"$ev/scenario.json" <<'EOF'
import json, sys
processes = [{"pid": int(p), "used_memory_mib": 100 + i} for i, p in enumerate(sys.argv[1:])]
gpu = {"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_used_mib": 1000}
print(json.dumps({"nvml": "ok", "gpus": [{**gpu, "processes": processes}]}))
EOF
gputui() {
    (cd "$REPO" && PYTHONPATH="$REPO" timeout 120 "$PYTHON" -m gputui --scenario "$ev/scenario.json" \
        --once --json "$@")
}
gputui --engine "docker=unix://$WORK/run/docker.sock" >"$ev/once-engine.json"
gputui --engine "docker=unix://$WORK/none.sock" >"$ev/once-no-engine.json"

failed=0 # every check runs; the exit status says whether one failed
"$PYTHON" - "$ev" "${ID[sysd-sleep]}" "${ID[sysd-tree]}" <<'EOF' || failed=1
import json, sys
from pathlib import Path

ev = Path(sys.argv[1])
ids = {"sysd-sleep": sys.argv[2], "sysd-tree": sys.argv[3]}
truth = {}  # host PID -> (container name, in-container PID)
for line in (ev / "processes.txt").read_text().splitlines():
    name, pid, ctr_pid, _ = line.split(" ", 3)
    truth[int(pid)] = (name, int(ctr_pid))
stats = {}
units = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
for line in (ev / "stats.txt").read_text().splitlines():
    cid, usage = line.split(" ", 1)
    number = usage.split(" / ")[0]
    unit = next(u for u in ("KiB", "MiB", "GiB", "B") if number.endswith(u))
    stats[cid] = float(number[: -len(unit)]) * units[unit]
bad = []
for label, engine in (("with the engine", "once-engine.json"), ("without an engine", "once-no-engine.json")):
    doc = json.loads((ev / engine).read_text())
    print(f"gputui --once --json, {label}: sources {doc['sources'].get('docker', {}).get('ok')}")
    for proc in doc["processes"]:
        name, ctr_pid = truth[proc["pid"]]
        c = proc.get("container") or {}
        print(f"  PID {proc['pid']}: container {c.get('id', '')[:12]} {c.get('name')}"
              f" (in-container PID {proc.get('container_pid')}, runtime {proc.get('runtime')})")
        if c.get("id") != ids[name] or proc.get("container_pid") != ctr_pid:
            bad.append(f"{label}: PID {proc['pid']} is {name}'s PID {ctr_pid}, gputui said {c.get('id')} / {proc.get('container_pid')}")
        if engine == "once-engine.json" and c.get("name") != name:
            bad.append(f"{label}: PID {proc['pid']} named {c.get('name')!r}, not {name!r}")
    if engine == "once-engine.json":
        print(f"  engine: cgroup driver {doc['engine']['cgroup_driver']}, cgroup v{doc['engine']['cgroup_version']}")
        for c in doc["containers"]:
            mem, want = c.get("memory_used_bytes"), stats.get(c["id"])
            print(f"  {c['name']}: CPU {c.get('cpu_percent')} %, memory {mem} B (docker stats: {want} B)")
            if mem is None or c.get("cpu_percent") is None:
                bad.append(f"{c['name']}: no CPU or memory figure")
            elif want and not 0.5 * want <= mem <= 2 * want + 1024 * 1024:
                bad.append(f"{c['name']}: memory {mem} B, docker stats says {want} B")
for line in bad:
    print("MISMATCH:", line)
sys.exit(1 if bad else 0)
EOF
# Through gputui's container source: inspect's process list (host PIDs, from the engine's
# State.Pid made a host PID), an exec, and an exec gputui stops (its PID, translated too).
(cd "$REPO" && PYTHONPATH="$REPO" timeout 120 "$PYTHON" - "unix://$WORK/run/docker.sock" "$ev" \
    "${ID[sysd-sleep]}" "${ID[sysd-tree]}") <<'EOF' || failed=1
import os, sys, time
from pathlib import Path
from gputui.collect.docker.source import DockerSource

url, ev = sys.argv[1], Path(sys.argv[2])
ids = {"sysd-sleep": sys.argv[3], "sysd-tree": sys.argv[4]}
truth: dict[str, set[tuple[int, int]]] = {}
for line in (ev / "processes.txt").read_text().splitlines():
    name, pid, ctr_pid, _ = line.split(" ", 3)
    truth.setdefault(name, set()).add((int(pid), int(ctr_pid)))


def in_container(cid: str, argv: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            proc = Path("/proc", entry)
            if (proc / "cmdline").read_bytes() == argv and cid in (proc / "cgroup").read_text():
                found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


bad = []
src = DockerSource(url, timeout=5.0)
try:
    assert src.read().status.ok
    for name, cid in ids.items():
        top = src.processes(cid)
        shown = {(p.pid, p.container_pid) for p in top.processes}
        print(f"inspect's processes of {name}: {top.error or sorted(shown)}")
        if not truth[name] <= shown:
            bad.append(f"{name}: inspect lists {sorted(shown)}, not all of {sorted(truth[name])}")
    result = src.exec(ids["sysd-sleep"], ["cat", "/proc/1/cmdline"], 10.0)
    print(f"exec cat /proc/1/cmdline: exit {result.exit_code}, {result.stdout!r}")
    if result.exit_code != 0 or not result.stdout.startswith("sleep"):
        bad.append(f"exec: {result}")
    stopped = src.exec(ids["sysd-sleep"], ["sleep", "77"], 1.0)
    deadline = time.monotonic() + 10
    while (left := in_container(ids["sysd-sleep"], b"sleep\x0077\x00")) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.2)
    print(f"exec sleep 77, 1 s timeout: timed out {stopped.timed_out}, {stopped.error}; left {left}")
    if not stopped.timed_out or left:
        bad.append(f"the timed-out exec was not stopped: {stopped}, host PIDs left {left}")
finally:
    src.close()
for line in bad:
    print("MISMATCH:", line)
sys.exit(1 if bad else 0)
EOF
if [ "$failed" != 0 ]; then
    echo "gputui disagrees with the inner engine (MISMATCH lines above)"
    exit 1
fi
echo "gputui agrees with the inner engine"
