#!/bin/bash
# gputui vs nvitop on the H200 lab machine, under a busy shared host's load. Run from anywhere:
#   source .lab/start.sh && bash bench/lab.sh        (start.sh is sourced here if not yet)
# The load (LAB_LOAD=busy, the default): five containers and a host process, six GPU processes
# on the GPUs: a container running two, one leaking GPU memory, an idle reservation, a compose
# service, two non-root users (uids 1000 and 1001). LAB_LOAD=two: the earlier two PyTorch loads.
# LAB_SIZES="160x50 120x30" runs the TUI and first-frame benchmarks at each size.
# Writes at most 8 files to $OUT: env.txt, bench.txt and the JSON of each benchmark.
# About 8.5 minutes: loads warm up ~30 s, TUI 6 x 65 s (gputui, the peer and bench/floor_app.py
# twice each; TUI_SECONDS sets the 60), --once 2 x 8 runs, first frame 5 runs. LAB_BENCHES picks a
# subset ("tui"); "capture" keeps each program's screen output and a profile, "threads" splits the
# monitor's CPU by thread, "truth" keeps gputui's report beside nvidia-smi's and docker's (none of
# them is in the default).
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

CONTAINERS="bench-load-a bench-train bench-leak bench-idle bench-web bench-user"
cleanup() {
  docker rm -f $CONTAINERS >/dev/null 2>&1
  [ -n "${HOST_LOAD:-}" ] && kill "$HOST_LOAD" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_in() {  # NAME [docker run args...] -- COMMAND...: a lab container running COMMAND
  local name=$1; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  docker run -d --name "$name" --network none $LAB_DEVS -v /usr:/usr:ro -v /opt:/opt:ro \
    -v /etc:/etc:ro -v "$lab_dir":/lab:ro -e PATH="$PATH" -e HOME=/tmp \
    -e LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -e NVIDIA_VISIBLE_DEVICES=all "${args[@]}" \
    lab-host:latest "$@" >/dev/null
}
# A process whose GPU memory grows by 256 MiB every 5 s (to 8 GiB): the leak a monitor flags.
cat > "$lab_dir/leak.py" <<'PY'
import sys, time
import torch
held, end = [], time.time() + float(sys.argv[1])
x = torch.randn(2048, 2048, device="cuda")
while time.time() < end:
    if len(held) < 32:
        held.append(torch.empty(2**27, dtype=torch.float16, device="cuda"))
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
    time.sleep(5)
PY
docker rm -f $CONTAINERS >/dev/null 2>&1
WANT=2
if [ "${LAB_LOAD:-busy}" = two ]; then
  # Two PyTorch processes busy: one in a container (so gputui's attribution path does real
  # work) and one on the host.
  lab_container bench-load-a 8 "$LOAD_S" >/dev/null
else
  WANT=6
  run_in bench-train --label com.docker.compose.project=research -- sh -c \
    "python3 /lab/load.py 6 $LOAD_S & python3 /lab/load.py 4 $LOAD_S & wait"
  run_in bench-leak --user 1001:1001 -- python3 /lab/leak.py "$LOAD_S"
  lab_idle_container bench-idle >/dev/null
  run_in bench-web --label com.docker.compose.project=shop \
    --label com.docker.compose.service=web -- python3 /lab/load.py 3 "$LOAD_S"
  run_in bench-user --user 1000:1000 -- python3 /lab/load.py 2 "$LOAD_S"
fi
lab_host_load 4 "$LOAD_S"
HOST_LOAD=$!
for _ in $(seq 1 90); do
  [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" -ge "$WANT" ] && break
  sleep 1
done
sleep 5  # past CUDA init: every process at its steady load
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
ROUNDS=${TUI_ROUNDS:-2}  # alternated TUI runs of gputui, the peer and the floor, TUI_SECONDS+5 each
# TUI_FLOOR_LINES=10,15 adds the floor program with that many lines changing each second.
PROGRAMS=$((3 + $(echo "${TUI_FLOOR_LINES:-}" | tr ',' '\n' | grep -c .)))
for size in ${LAB_SIZES:-160x50}; do
  cols=${size%x*} rows=${size#*x}
  [[ $BENCHES == *" first-frame "* ]] && bench 60 first-frame --runs 5 --cols "$cols" \
    --rows "$rows"
  # The peer's first frame with data: its GPU row's memory ("24.92GiB / 140.4GiB"; MiB on
  # smaller GPUs).
  [[ $BENCHES == *" first-frame "* && -n $PEER ]] && mkdir -p "$OUT/peer" \
    && timeout 60 $PY -m bench.run --out "$OUT/peer" --gputui "$PEER" first-frame --runs 5 \
      --cols "$cols" --rows "$rows" --marker '[0-9.]+[KMG]iB */ *[0-9.]+[KMG]iB' 2>&1 | tee -a "$LOG"
  # The floor's: a Textual app of one line that starts NVML and shows GPU 0's memory.
  [[ $BENCHES == *" first-frame "* ]] && mkdir -p "$OUT/floor" \
    && timeout 60 $PY -m bench.run --out "$OUT/floor" --gputui "$PY -m bench.floor_app --interval 1" \
      first-frame --runs 5 --cols "$cols" --rows "$rows" --marker 'gpu0 +[0-9]+% [0-9,]+/[0-9,]+ MiB' \
      2>&1 | tee -a "$LOG"
  [[ $BENCHES == *" tui "* ]] && bench $((ROUNDS * PROGRAMS * (${TUI_SECONDS:-60} + 20) + 10)) tui --rounds "$ROUNDS" \
    --seconds "${TUI_SECONDS:-60}" --warmup 5 --peer "${PEER:+$PEER --interval 1}" \
    --floor-lines "${TUI_FLOOR_LINES:-}" --cols "$cols" --rows "$rows"
done
# capture: each program's raw screen output for CAPTURE_SECONDS at each size (bench/screen_rows.py
# names the rows behind rows/s), gputui's main thread under cProfile, and the one-shot's imports.
if [[ $BENCHES == *" capture "* ]]; then
  for size in ${LAB_SIZES:-160x50}; do
    cols=${size%x*} rows=${size#*x}
    $PY -m bench.screen_rows capture "$OUT/screen-gputui-$size.jsonl" --seconds \
      "${CAPTURE_SECONDS:-25}" --cols "$cols" --rows "$rows" -- $PY -m gputui --interval 1
    [ -n "$PEER" ] && $PY -m bench.screen_rows capture "$OUT/screen-peer-$size.jsonl" \
      --seconds "${CAPTURE_SECONDS:-25}" --cols "$cols" --rows "$rows" -- $PEER --interval 1
  done
  $PY -m bench.screen_rows capture "$OUT/screen-profiled.jsonl" --seconds "${CAPTURE_SECONDS:-25}" \
    -- $PY -m cProfile -o "$OUT/tui-160x50.pstats" -m gputui --interval 1
  # Resident memory by mapping: gputui, the floor (one Textual line with NVML) and the peer.
  for prog in "$PY -m gputui --interval 1" "$PY -m bench.floor_app --interval 1" \
    ${PEER:+"$PEER --interval 1"}; do
    $PY -m bench.memory_map --seconds "${CAPTURE_SECONDS:-25}" -- "$prog" >> "$OUT/memory.txt" 2>&1
  done
  for _ in 1 2 3; do $PY -X importtime -m gputui --once --json 2> "$OUT/once-importtime.txt" >/dev/null; done
  say "capture: $(ls "$OUT" | grep -c screen-) screens kept"
fi
# threads: the monitor's CPU split by thread (collector, NVML lanes, readers, event loop).
if [[ $BENCHES == *" threads "* ]]; then
  for size in ${LAB_SIZES:-160x50}; do
    timeout 120 $PY -m bench.thread_cpu --seconds "${THREAD_SECONDS:-40}" --cols "${size%x*}" \
      --rows "${size#*x}" -- --interval 1 2>&1 | tee -a "$LOG"
  done
fi
[[ $BENCHES == *" live "* ]] && bench 30 live --cycles 30
# truth: gputui's report and the driver's and the engine's own answers, side by side, under load.
if [[ $BENCHES == *" truth "* ]]; then
  $PY -m gputui --once --json > "$OUT/report.json" 2>&1
  { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
    docker ps --format '{{.Names}} {{.ID}}'; } > "$OUT/truth.txt" 2>&1
fi
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$OUT/env.txt" 2>&1
say "lab: done; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
