#!/bin/bash
# The ledger's accuracy on the H200 lab: three containers with scripted duty cycles (25, 50 and
# 100 % busy), one after the other on the one GPU, beside an idle reservation held throughout,
# under a `gputui daemon` writing the store at 1 Hz. Their owners are named three ways (a
# configured label, gputui.owner, the compose project's directory).
#   source .lab/start.sh && bash bench/lab_ledger.sh            (about 8 minutes)
# PHASE_S sets each container's run (default 140 s). Writes to $OUT: ledger.txt and
# ledger.json (by container), owners.txt (by owner), script.txt (what each container was asked
# to do, and when), once.json (a --once --json taken during the 100 % phase), figures-25.jsonl
# (each busy figure as `--once --json` read it five times during the 25 % phase), accuracy.txt
# (busy GPU-seconds against the script's, and the idle reservation's waste).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if ! declare -F lab_container >/dev/null; then
  # shellcheck disable=SC1091
  source .lab/start.sh || exit 1
fi
OUT=${OUT:-/tmp/gputui-lab-out}
PHASE_S=${PHASE_S:-140}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -m compileall -q -j 0 gputui bench >/dev/null 2>&1
cp bench/gpu_load.py "$lab_dir/gpu_load.py"
STORE=/tmp/gputui-lab-ledger.db
CONFIG=/tmp/gputui-lab-config.toml
PROJECT=/tmp/gputui-lab-project
printf '[owners]\nlabels = ["org.example.owner"]\n' > "$CONFIG"
mkdir -p "$PROJECT" && chown 65534:65534 "$PROJECT"

duty() {  # NAME FRACTION SECONDS [docker run args...]: a container busy FRACTION of each second
  local name=$1 fraction=$2 seconds=$3
  shift 3
  docker run -d --name "$name" --network none $LAB_DEVS -v /usr:/usr:ro -v /opt:/opt:ro \
    -v /etc:/etc:ro -v "$lab_dir":/lab:ro -e PATH="$PATH" \
    -e LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -e NVIDIA_VISIBLE_DEVICES=all "$@" \
    lab-host:latest python3 /lab/gpu_load.py "duty:$fraction" 2 "$seconds" >/dev/null
}
cleanup() {
  docker rm -f duty-25 duty-50 duty-100 ledger-idle >/dev/null 2>&1
  [ -n "${DAEMON:-}" ] && kill "$DAEMON" 2>/dev/null
}
trap cleanup EXIT

rm -f "$STORE"*
python3 -m gputui daemon --store "$STORE" --config "$CONFIG" --interval 1 --commit-every 5 \
  > "$OUT/daemon.txt" 2>&1 &
DAEMON=$!
lab_idle_container ledger-idle --label org.example.owner=ivan >/dev/null
: > "$OUT/script.txt"
phase() {  # NAME FRACTION [docker run args...]: one container for PHASE_S, waited for
  local name=$1 fraction=$2
  shift 2
  duty "$name" "$fraction" "$PHASE_S" "$@"
  echo "$name duty $fraction for $PHASE_S s from $(date +%s.%N)" >> "$OUT/script.txt"
  if [ "$name" = duty-100 ]; then
    sleep 30
    python3 -m gputui --once --json --config "$CONFIG" > "$OUT/once.json" 2>&1
  elif [ "$name" = duty-25 ]; then
    # What each busy figure reads of a load busy a quarter of each second: the point read of
    # utilization.gpu, the mean of the driver's samples, GPM graphics and SM activity.
    sleep 20
    for _ in 1 2 3 4 5; do
      python3 -m gputui --once --json --config "$CONFIG" 2>/dev/null | python3 -c '
import json, sys
g = json.load(sys.stdin)["gpus"][0]
keys = ("utilization_gpu", "utilization_gpu_mean", "gpm_graphics_active", "gpm_sm_active")
print(json.dumps({k: g.get(k) for k in keys}))' >> "$OUT/figures-25.jsonl"
      sleep 7
    done
  fi
  docker wait "$name" >/dev/null
  echo "$name exited $(date +%s.%N)" >> "$OUT/script.txt"
  docker logs "$name" 2>/dev/null | tail -1 > "$OUT/truth-$name.json"
}
phase duty-25 0.25 --label org.example.owner=alice
phase duty-50 0.5 --label gputui.owner=bob
phase duty-100 1.0 --label com.docker.compose.project=lab \
  --label com.docker.compose.project.working_dir="$PROJECT"
sleep 5
kill "$DAEMON" 2>/dev/null
wait "$DAEMON" 2>/dev/null
DAEMON=
python3 -m gputui ledger --since 1h --by container --store "$STORE" > "$OUT/ledger.txt" 2>&1
python3 -m gputui ledger --since 1h --by owner --store "$STORE" > "$OUT/owners.txt" 2>&1
python3 -m gputui ledger --since 1h --by container --format json --store "$STORE" \
  > "$OUT/ledger.json" 2>&1
python3 - "$OUT" "$PHASE_S" > "$OUT/accuracy.txt" 2>&1 <<'EOF'
import json
import sys
from pathlib import Path

out, phase = Path(sys.argv[1]), float(sys.argv[2])
doc = json.loads((out / "ledger.json").read_text())
rows = {row["key"]: row for row in doc["rows"]}
# The truth is each container's kernel time by CUDA events (gpu_load.py prints it); the
# script's intent (fraction x phase) is shown beside it, as it includes the start of PyTorch.
print("container  script GPU-s  kernel GPU-s (CUDA events)  ledger busy GPU-s  error vs kernel")
for name, fraction in (("duty-25", 0.25), ("duty-50", 0.5), ("duty-100", 1.0)):
    row = rows.get(name)
    if row is None:
        print(f"{name}: not in the ledger")
        continue
    try:
        truth = json.loads((out / f"truth-{name}.json").read_text())["kernel_busy_s"]
    except (OSError, ValueError, KeyError):
        truth = None
    got = row["busy_gpu_h"] * 3600
    shown = "?" if truth is None else f"{truth:.1f}"
    error = "?" if not truth else f"{100 * (got - truth) / truth:+.1f} %"
    print(f"{name:9}  {fraction * phase:12.1f}  {shown:>26}  {got:17.1f}  {error}")
idle = rows.get("ledger-idle")
if idle is not None:
    print(
        f"ledger-idle: reserved {idle['reserved_gpu_h'] * 3600:.1f} GPU-s, busy "
        f"{idle['busy_gpu_h'] * 3600:.1f}, waste {idle['waste_gpu_h'] * 3600:.1f}"
    )
EOF
cat "$OUT/accuracy.txt"
