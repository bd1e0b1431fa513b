#!/bin/bash
# Truth on the H200 lab for the container seam, the kernel-log faults and the ledger: a
# tensor-bound container, a memory-bound one, an idle reservation and a host process.
#   source .lab/start.sh && bash bench/lab_wave.sh          (about 3 minutes)
# Writes to $OUT: truth.txt (NVML's PIDs, /proc cgroups and NSpid beside `--once --json`'s
# attribution), once.json, faults.json (an XID line naming a containerised GPU process, written
# to /dev/kmsg), ledger.txt (a daemon's ledger over the run, by container), exec.txt (the x key's
# path through the collector's seam).
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
STORE=/tmp/gputui-lab-ledger.db

load() {  # NAME MODE GIB: one container running bench/gpu_load.py
  docker run -d --name "$1" --network none $LAB_DEVS -v /usr:/usr:ro -v /opt:/opt:ro \
    -v /etc:/etc:ro -v "$lab_dir":/lab:ro -e PATH="$PATH" \
    -e LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" -e NVIDIA_VISIBLE_DEVICES=all \
    lab-host:latest python3 /lab/gpu_load.py "$2" "$3" 600 >/dev/null
}
cleanup() {
  docker rm -f wave-tensor wave-copy wave-idle >/dev/null 2>&1
  [ -n "${HOST:-}" ] && kill "$HOST" 2>/dev/null
  [ -n "${DAEMON:-}" ] && kill "$DAEMON" 2>/dev/null
}
trap cleanup EXIT

rm -f "$STORE"*
python3 -m gputui daemon --store "$STORE" --interval 1 --commit-every 5 > "$OUT/daemon.txt" 2>&1 &
DAEMON=$!
load wave-tensor tensor 6
load wave-copy copy 3
lab_idle_container wave-idle >/dev/null
python3 "$lab_dir/gpu_load.py" tensor 2 600 >/dev/null 2>&1 &
HOST=$!
for _ in $(seq 1 90); do
  [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" -ge 3 ] && break
  sleep 1
done
sleep 30

python3 -m gputui --once --json > "$OUT/once.json" 2>&1
{
  echo "== nvidia-smi --query-compute-apps"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader); do
    echo "== $pid cgroup: $(grep -m1 -E 'docker|memory|^0::' /proc/"$pid"/cgroup)"
    echo "== $pid $(grep NSpid /proc/"$pid"/status)"
  done
  echo "== docker ps"; docker ps --format '{{.ID}} {{.Names}}'
  echo "== gputui --once"; python3 -m gputui --once 2>&1 | head -60
} > "$OUT/truth.txt" 2>&1

# An application XID naming the tensor container's GPU process, as the driver writes it.
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | sed -E 's/^0000//; s/\.[0-9]+$//' | tr 'A-F' 'a-f')
pid=$(docker top wave-tensor -eo pid | awk 'NR==2 {print $1}')
echo "<3>NVRM: Xid (PCI:${bus}): 31, pid=${pid}, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ" > /dev/kmsg
echo "== injected: bus ${bus} pid ${pid}" > "$OUT/faults.json"
sleep 2
python3 -m gputui faults --since 10m --json >> "$OUT/faults.json" 2>&1
python3 -m gputui --once --json > "$OUT/once-after-xid.json" 2>&1

python3 - > "$OUT/exec.txt" 2>&1 <<'EOF'
from gputui.model.settings import Settings
from gputui.wiring.compose import build_collector

collector = build_collector(Settings())
for _ in range(5):
    snapshot = collector.collect()
    target = next((u for u in snapshot.containers if u.info.name == "wave-copy"), None)
    if target is not None and collector.container_owner(target.info.id) is not None:
        break
print("owner:", collector.container_owner(target.info.id))
print(collector.exec_in_container(target.info.id, ["nvidia-smi", "-L"], 20.0))
EOF

sleep 20
kill "$DAEMON" 2>/dev/null
wait "$DAEMON" 2>/dev/null
DAEMON=
python3 -m gputui ledger --since 1h --by container --store "$STORE" > "$OUT/ledger.txt" 2>&1
python3 -m gputui ledger --since 1h --by container --format json --store "$STORE" > "$OUT/ledger.json" 2>&1
