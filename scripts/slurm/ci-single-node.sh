#!/usr/bin/env bash
# End-to-end test of the Slurm path on a real one-node Slurm cluster: install
# slurm-wlm and munge (Debian), start munged, slurmctld and slurmd on
# localhost with a throwaway configuration under a temporary folder, submit
# grade-array.sbatch over the shipped kernels in compile-only mode, wait for
# the array to drain, merge the shards and check that the merged gradebook
# holds every submission exactly once.
#
# Needs root (package install, munged, slurmd) and python3. Usage:
#   FLASHPROF=target/debug/flashprof scripts/slurm/ci-single-node.sh
# FLASHPROF defaults to target/debug/flashprof (built when missing).
# NVRTC must be loadable by flashprof (LD_LIBRARY_PATH is passed to the tasks).
#
# For tests that need the cluster while they run (tests/slurm.rs, --gpu-slurm):
#   scripts/slurm/ci-single-node.sh start       # prints WORK=... and SLURM_CONF=..., leaves it up
#   scripts/slurm/ci-single-node.sh stop WORK   # stops those daemons, removes WORK
set -euo pipefail
MODE=${1:-array}
if [ "$MODE" = stop ]; then
  WORK=${2:?stop needs the WORK folder that start printed}
  for pidfile in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  sleep 1
  rm -rf "$WORK"
  exit 0
fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TASKS=${TASKS:-3}
WAIT_SECONDS=${WAIT_SECONDS:-300}

if [ "$(id -u)" != 0 ]; then
  echo "ci-single-node.sh: needs root (it installs and starts Slurm daemons)" >&2
  exit 2
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
fi

FLASHPROF=${FLASHPROF:-$REPO/target/debug/flashprof}
if [ ! -x "$FLASHPROF" ]; then
  (cd "$REPO" && cargo build --quiet)
fi
FLASHPROF=$(realpath "$FLASHPROF")

WORK=$(mktemp -d /tmp/flashprof-slurm.XXXXXX)
chmod 755 "$WORK"
export SLURM_CONF=$WORK/etc/slurm.conf
mkdir -p "$WORK/etc" "$WORK/state" "$WORK/spool" "$WORK/log" "$WORK/munge"

stop_daemons() {
  # Only the daemons this script started, by the pids they recorded.
  for pidfile in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munge/munged.pid"; do
    if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
}
fail() {
  echo "ci-single-node.sh: FAILED: $*" >&2
  for log in "$WORK"/log/*.log "$WORK"/munge/*.log "$WORK"/out/*.log; do
    [ -f "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }
  done
  exit 1
}
trap stop_daemons EXIT

# munge: a private socket and key, so a host's own munged (if any) is untouched.
MUNGE_SOCKET=$WORK/munge/munge.socket
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
fi
chown munge:munge "$WORK/munge"
runuser -u munge -- munged --socket="$MUNGE_SOCKET" --pid-file="$WORK/munge/munged.pid" \
  --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/munged.seed" </dev/null >/dev/null 2>&1
for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
[ -S "$MUNGE_SOCKET" ] || fail "munged did not start"

CPUS=$(nproc)
cat > "$SLURM_CONF" <<CONF
ClusterName=flashprof-ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

# The daemons must not hold the caller's pipes open (`start` leaves them running).
slurmctld -f "$SLURM_CONF" -i </dev/null >/dev/null 2>&1 || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N localhost </dev/null >/dev/null 2>&1 || fail "slurmd did not start"
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || fail "the node never became idle (state: ${state:-none})"
# The daemons answering must be this run's (a cluster left by an earlier run holds the ports).
for daemon in slurmctld slurmd; do
  pid=$(cat "$WORK/$daemon.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null ||
    fail "$daemon did not stay up (is another cluster on ports 16817/16818?)"
done
if [ "$MODE" = start ]; then
  trap - EXIT
  printf 'WORK=%s\nSLURM_CONF=%s\n' "$WORK" "$SLURM_CONF"
  exit 0
fi

# The submissions: every shipped kernel, planted bugs in their own folder.
SUBMISSIONS=$WORK/submissions
mkdir -p "$SUBMISSIONS/bugs" "$WORK/out"
cp "$REPO"/kernels/flash-prefill/*.cu "$SUBMISSIONS/"
cp "$REPO"/kernels/flash-prefill/bugs/*.cu "$SUBMISSIONS/bugs/"
EXPECTED=$(cd "$SUBMISSIONS" && find . -name '*.cu' | sed 's|^\./||' | sort)

JOB=$(sbatch --parsable --array=0-$((TASKS - 1)) --chdir="$WORK/out" \
  --output="$WORK/out/task-%a.log" \
  --export=ALL,SUBMISSIONS="$SUBMISSIONS",OUT_ROOT="$WORK/out",FLASHPROF="$FLASHPROF",FLASHPROF_COMPILE_ONLY=1,FLASHPROF_SEED=20261130 \
  "$REPO/scripts/slurm/grade-array.sbatch") || fail "sbatch refused the job"
echo "submitted array job $JOB ($TASKS tasks)"
deadline=$((SECONDS + WAIT_SECONDS))
while [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || { scancel "$JOB"; fail "the array was still queued after ${WAIT_SECONDS}s"; }
  sleep 1
done

for k in $(seq "$TASKS"); do
  [ -f "$WORK/out/shard-$k/journal.jsonl" ] || fail "shard $k left no journal"
done
"$FLASHPROF" grade --merge "$WORK"/out/shard-* --out "$WORK/merged" || fail "merge failed"

python3 - "$WORK/merged/gradebook.csv" "$EXPECTED" <<'PY' || fail "the merged gradebook is wrong"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
expected = sys.argv[2].split("\n")
ids = [r["id"] for r in rows]
assert sorted(ids) == sorted(expected), f"ids {ids} != expected {expected}"
assert len(ids) == len(set(ids)), f"duplicate ids in {ids}"
bad = [r["id"] for r in rows if r["status"] not in ("compiled", "rejected")]
assert not bad, f"unexpected statuses for {bad}"
assert {r["seed"] for r in rows} == {"20261130"}, "shards graded on different seeds"
print(f"merged gradebook: {len(rows)} submissions, each exactly once")
PY
echo "ci-single-node.sh: OK"
# Keep the folder for inspection only when asked (KEEP_WORK=1).
[ "${KEEP_WORK:-0}" = 1 ] || { stop_daemons; sleep 1; rm -rf "$WORK"; }
