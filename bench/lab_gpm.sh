#!/bin/bash
# GPM truth on the H200 lab: a tensor-bound and a memory-bound load, each alone, then both with a
# host process, each phase read by bench/gpm_check.py (gputui's figures against a direct
# nvmlGpmMetricsGet, the exporter against the JSON, per-party estimates against the GPU), plus the
# attribution truth (NVML's PIDs, /proc cgroups and NSpid against `--once --json`) and an exec.
#   source .lab/start.sh && bash bench/lab_gpm.sh          (about 4 minutes)
# Writes to $OUT: tensor.txt, copy.txt, both.txt (gpm_check), both.json (--once --json),
# metrics.txt (the real exporter's GPM and energy series), truth.txt.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if ! declare -F lab_container >/dev/null; then
  # shellcheck disable=SC1091
  source .lab/start.sh || exit 1
fi
OUT=${OUT:-/tmp/gputui-lab-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -m compileall -q -j 0 gputui bench >/dev/null 2>&1
cp bench/gpu_load.py "$lab_dir/gpu_load.py"

load() {  # NAME MODE GIB: one container running bench/gpu_load.py
  docker run -d --name "$1" --network none $LAB_DEVS -v /usr:/usr:ro -v /opt:/opt:ro \
    -v /etc:/etc:ro -v "$lab_dir":/lab:ro -e PATH="$PATH" \
    -e LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -e NVIDIA_VISIBLE_DEVICES=all \
    lab-host:latest python3 /lab/gpu_load.py "$2" "$3" 600 >/dev/null
}
wait_procs() {  # N: until NVML lists N compute processes, then past their warm-up
  for _ in $(seq 1 90); do
    [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" -ge "$1" ] && break
    sleep 1
  done
  sleep 8
}
cleanup() { docker rm -f gpm-tensor gpm-copy >/dev/null 2>&1; [ -n "${HOST:-}" ] && kill "$HOST" 2>/dev/null; }
trap cleanup EXIT

load gpm-tensor tensor 6 && wait_procs 1
python3 -m bench.gpm_check --seconds 5 > "$OUT/tensor.txt" 2>&1
docker rm -f gpm-tensor >/dev/null
for _ in $(seq 1 30); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 1; done

load gpm-copy copy 6 && wait_procs 1
python3 -m bench.gpm_check --seconds 5 > "$OUT/copy.txt" 2>&1

load gpm-tensor tensor 6
python3 "$lab_dir/gpu_load.py" tensor 2 600 >/dev/null 2>&1 &
HOST=$!
wait_procs 3
python3 -m bench.gpm_check --seconds 5 > "$OUT/both.txt" 2>&1
python3 -m gputui --once --json > "$OUT/both.json" 2>&1
python3 -m gputui export --listen 127.0.0.1:9400 >/dev/null 2>&1 &
EXPORTER=$!
sleep 6
python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9400/metrics", timeout=5).read().decode())' | grep -E '^DCGM_FI_(PROF|DEV_TOTAL)' > "$OUT/metrics.txt"
kill "$EXPORTER" 2>/dev/null
{
  echo "== nvidia-smi --query-compute-apps"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader); do
    echo "== $pid cgroup: $(grep -m1 -E 'docker|memory' /proc/$pid/cgroup)"
    echo "== $pid $(grep NSpid /proc/$pid/status)"
  done
  echo "== docker ps"; docker ps --format '{{.ID}} {{.Names}}'
  echo "== gputui --once"; python3 -m gputui --once 2>&1 | head -60
  echo "== exec nvidia-smi in gpm-copy (the x key's path)"
  python3 - <<'EOF'
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector

collector = build_collector(Settings())
collector.collect()
target = next(u for u in collector.collect().containers if u.info.name == "gpm-copy")
result = collector.exec_in_container(target.info.id, ["nvidia-smi", "-L"], 20.0)
print(result)
EOF
} > "$OUT/truth.txt" 2>&1
