#!/bin/bash
# gputui vs nvitop on the H200 lab machine, under two PyTorch loads. Run from anywhere:
#   source .lab/start.sh && bash bench/lab.sh        (start.sh is sourced here if not yet)
# Writes at most 8 files to $OUT: env.txt, bench.txt and the JSON of each benchmark.
# About 8.5 minutes: loads warm up ~30 s, TUI 6 x 65 s (gputui, the peer and bench/floor_app.py
# twice each), --once 2 x 8 runs, first frame 5 runs. LAB_BENCHES picks a subset ("tui").
# nvitop: taken from PATH or python3 -m nvitop; else installed from a wheel found in $NVITOP_WHEEL,
# .whl/ or .lab/wheels/ (into /tmp/site, no deps: it needs only nvidia-ml-py and psutil).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if ! declare -F lab_container >/dev/null; then
  # shellcheck disable=SC1091
  source .lab/start.sh || exit 1
fi
OUT=${OUT:-/tmp/gputui-lab-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this tree's gputui and bench, not a wheel
# The lab machine sets PYTHONDONTWRITEBYTECODE=1: without compiled bytecode every run would
# compile this tree's modules again, and start-up figures would measure the compiler.
python3 -m compileall -q -j 0 gputui bench >/dev/null 2>&1
LOAD_S=${LOAD_S:-600}
PY=python3
LOG=$OUT/bench.txt
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }

if ! $PY -c 'import nvitop' 2>/dev/null; then
  wheel=${NVITOP_WHEEL:-$(ls .whl/nvitop-*.whl .lab/wheels/nvitop-*.whl 2>/dev/null | head -1)}
  if [ -n "$wheel" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheel" \
      && export PYTHONPATH=$PYTHONPATH:/tmp/site
  fi
fi
if $PY -c 'import nvitop' 2>/dev/null; then
  PEER="$PY -m nvitop"
else
  PEER=""
  say "nvitop is not installed (no wheel found): gputui figures only"
fi

cleanup() {
  docker rm -f bench-load-a bench-load-b >/dev/null 2>&1
  [ -n "${HOST_LOAD:-}" ] && kill "$HOST_LOAD" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two PyTorch processes busy, as in the issue's nvitop measurement: one in a container (so
# gputui's attribution path does real work) and one on the host.
docker rm -f bench-load-a bench-load-b >/dev/null 2>&1
lab_container bench-load-a 8 "$LOAD_S" >/dev/null
lab_host_load 4 "$LOAD_S"
HOST_LOAD=$!
for _ in $(seq 1 60); do
  [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" -ge 2 ] && break
  sleep 1
done
sleep 5  # past CUDA init: both at steady matmul load
{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi
  echo "== versions"
  $PY -c 'import sys, gputui, textual, docker, psutil, pynvml; print(sys.version); print("gputui", gputui.__file__); print("textual", textual.__version__, "docker", docker.__version__, "psutil", psutil.__version__)'
  [ -n "$PEER" ] && $PEER --version
  echo "== cpu"; nproc; grep -m1 'model name' /proc/cpuinfo
  echo "== commands"; echo "peer TUI: $PEER --interval 1"; echo "peer once: $PEER --once"
} > "$OUT/env.txt" 2>&1

bench() { timeout -s TERM "$1" $PY -m bench.run --out "$OUT" "${@:2}" 2>&1 | tee -a "$LOG"; }
BENCHES=" ${LAB_BENCHES:-once first-frame live tui} "  # a subset: LAB_BENCHES="tui"
[[ $BENCHES == *" once "* ]] && bench 60 once --runs 8 --peer-once "${PEER:+$PEER --once}"
[[ $BENCHES == *" first-frame "* ]] && bench 60 first-frame --runs 5
[[ $BENCHES == *" live "* ]] && bench 30 live --cycles 30
ROUNDS=${TUI_ROUNDS:-2}  # alternated TUI runs of gputui, the peer and the floor, 65 s each
# TUI_FLOOR_LINES=10,15 adds the floor program with that many lines changing each second.
PROGRAMS=$((3 + $(echo "${TUI_FLOOR_LINES:-}" | tr ',' '\n' | grep -c .)))
[[ $BENCHES == *" tui "* ]] && bench $((ROUNDS * PROGRAMS * 80 + 10)) tui --rounds "$ROUNDS" \
  --seconds 60 --warmup 5 --peer "${PEER:+$PEER --interval 1}" --floor-lines "${TUI_FLOOR_LINES:-}"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$OUT/env.txt" 2>&1
say "lab: done; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
