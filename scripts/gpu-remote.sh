#!/usr/bin/env bash
# --gpu-host on a GPU machine with no network and no sshd (docs/REMOTE.md):
# starts OpenSSH's server on localhost with fresh keys, then, through it,
#   1. `flashprof check --gpu-host` on the reference kernel (a real GPU check),
#   2. the TUI under tmux for a few saves (screens captured),
#   3. `flashprof bench` through ssh and with a local worker,
# and prints a table of save -> verdict, ssh against local, last.
#
# Usage: scripts/gpu-remote.sh [path/to/flashprof] [folder of .debs]
# The .deb folder (openssh-server, openssh-client, tmux and their libraries,
# fetched elsewhere with `apt-get download`) is used only for what the
# machine lacks: the programs are unpacked with `dpkg -x` into a temporary
# folder and only the libraries the loader cannot find are put on its path.
# Needs root (sshd's privilege separation). Writes its captures to $OUT.
# REPO_ROOT: the checkout whose kernels/ it uses (default: this script's).
set -uo pipefail
BIN=$(realpath "${1:-$(dirname "$0")/../target/release/flashprof}")
DEBS=$(realpath "${2:-$(dirname "$BIN")/debs}")
cd "${REPO_ROOT:-$(dirname "$0")/..}"
REPO=$PWD
OUT=${OUT:-gpu-remote-out}
mkdir -p "$OUT"
ROOT=$(mktemp -d /tmp/flashprof-remote.XXXXXX)
chmod 755 "$ROOT"
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }

# OpenSSH (and tmux) from the machine, else from the .debs.
SYS=$ROOT/sys
LIBS=$ROOT/libs
mkdir -p "$SYS" "$LIBS" "$ROOT/bin"
# FROM_DEBS=1 takes OpenSSH from the .debs even where the machine has it (to try this path).
FROM_DEBS=${FROM_DEBS:-0}
if [ "$FROM_DEBS" = 1 ] || [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null || ! command -v tmux >/dev/null; then
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$SYS"; done
fi
pick() { # a program: the machine's, else the unpacked one
  for p in "$@"; do [ -x "$p" ] && { echo "$p"; return; }; done
}
machine() { [ "$FROM_DEBS" = 1 ] || echo "$1"; }
SSHD=$(pick "$(machine /usr/sbin/sshd)" "$SYS/usr/sbin/sshd")
SSH=$(pick "$(machine "$(command -v ssh)")" "$SYS/usr/bin/ssh")
KEYGEN=$(pick "$(machine "$(command -v ssh-keygen)")" "$SYS/usr/bin/ssh-keygen")
TMUX=$(pick "$(command -v tmux)" "$SYS/usr/bin/tmux")
# Only the libraries the loader lacks, so nothing of the machine's is
# shadowed; again until none is missing (a found one may need others).
for _ in 1 2 3 4 5; do
  added=0
  for program in "$SSHD" "$SSH" "$KEYGEN" "$TMUX"; do
    [ -n "$program" ] || continue
    for lib in $(LD_LIBRARY_PATH=$LIBS ldd "$program" 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
      found=$(find "$SYS" -name "$lib" | head -n 1)
      [ -n "$found" ] && [ ! -e "$LIBS/$lib" ] && ln -sf "$found" "$LIBS/$lib" && added=1
    done
  done
  [ $added = 1 ] || break
done
# The unpacked programs run through wrappers that find those libraries;
# flashprof runs `ssh` from PATH.
for pair in "ssh:$SSH" "ssh-keygen:$KEYGEN" "tmux:$TMUX"; do
  name=${pair%%:*} program=${pair#*:}
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' "$LIBS" "$program" >"$ROOT/bin/$name"
  chmod +x "$ROOT/bin/$name"
done
export PATH=$ROOT/bin:$PATH
say "machine: $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
say "sshd: $SSHD; ssh: $SSH; tmux: $TMUX; libraries taken from the .debs: $(ls "$LIBS" | tr '\n' ' ')"

# sshd: privilege separation needs its user and folder; the key only, no passwords.
id sshd >/dev/null 2>&1 || useradd -r -d /run/sshd -s /usr/sbin/nologin sshd 2>/dev/null ||
  echo 'sshd:x:74:65534::/run/sshd:/usr/sbin/nologin' >>/etc/passwd
mkdir -p /run/sshd && chmod 755 /run/sshd
# Without PAM, sshd refuses a locked account ('!' in its password field), even for a key.
if [ "$(id -u)" = 0 ] && grep -q '^root:!' /etc/shadow 2>/dev/null; then usermod -p '*' root; fi
ssh-keygen -q -t ed25519 -N '' -f "$ROOT/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$ROOT/client_key"
cp "$ROOT/client_key.pub" "$ROOT/authorized_keys"
PORT=${PORT:-42022}
USER_NAME=$(id -un)
cat >"$ROOT/sshd_config" <<CONF
Port $PORT
ListenAddress 127.0.0.1
HostKey $ROOT/host_key
PidFile $ROOT/sshd.pid
AuthorizedKeysFile $ROOT/authorized_keys
AllowUsers $USER_NAME
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
SetEnv LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
CONF
echo "[127.0.0.1]:$PORT $(cat "$ROOT/host_key.pub")" >"$ROOT/known_hosts"
cat >"$ROOT/ssh_config" <<CONF
Host gpu-node
  HostName 127.0.0.1
  Port $PORT
  User $USER_NAME
  IdentityFile $ROOT/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $ROOT/known_hosts
  StrictHostKeyChecking yes
CONF
export FLASHPROF_SSH_CONFIG=$ROOT/ssh_config
LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$SSHD" -f "$ROOT/sshd_config" -E "$ROOT/sshd.log"
stop_sshd() { [ -s "$ROOT/sshd.pid" ] && kill "$(cat "$ROOT/sshd.pid")" 2>/dev/null; }
trap stop_sshd EXIT
for _ in $(seq 50); do ssh -F "$FLASHPROF_SSH_CONFIG" -o BatchMode=yes gpu-node true 2>/dev/null && break; sleep 0.2; done
if ! ssh -F "$FLASHPROF_SSH_CONFIG" -o BatchMode=yes gpu-node true; then
  say "sshd did not let the key in"
  { cat "$ROOT/sshd.log"; LD_LIBRARY_PATH=$LIBS ldd "$SSHD"; } >>"$SUMMARY" 2>&1
  exit 1
fi
ping_ms=$(python3 -c "
import subprocess, time
t = []
for _ in range(5):
    s = time.perf_counter(); subprocess.run(['ssh', '-F', '$FLASHPROF_SSH_CONFIG', 'gpu-node', 'true'], check=True); t.append((time.perf_counter() - s) * 1e3)
print(f'{sorted(t)[2]:.0f}')")
say "sshd up on 127.0.0.1:$PORT; a whole 'ssh gpu-node true' (handshake included): median ${ping_ms} ms"

REMOTE=(--gpu-host gpu-node --gpu-host-flashprof "$BIN")

# 1. A real GPU check through ssh.
say ""
say "== flashprof check --gpu-host gpu-node kernels/flash-prefill/reference.cu"
"$BIN" check "${REMOTE[@]}" kernels/flash-prefill/reference.cu >"$OUT/check-ssh.txt" 2>&1
say "exit $? (0 = every case passed)"
head -n 30 "$OUT/check-ssh.txt" >>"$SUMMARY"

# 2. The TUI through ssh under tmux, a few saves.
WORK=$(mktemp -d)
cp kernels/flash-prefill/starter.cu "$WORK/prefill.cu"
save() { cp "$REPO/$1" "$WORK/prefill.cu.tmp" && mv "$WORK/prefill.cu.tmp" "$WORK/prefill.cu"; }
TUI_SCREENS=$OUT/tui-ssh.txt
capture() { sleep "$2"; { echo "--- $1"; tmux capture-pane -p -t fpr; } >>"$TUI_SCREENS"; }
tmux new-session -d -s fpr -x 120 -y 40 \
  "cd $WORK && FLASHPROF_SSH_CONFIG=$FLASHPROF_SSH_CONFIG $BIN ${REMOTE[*]} prefill.cu 2>$OUT/tui-stderr.log"
capture starter 15
save kernels/flash-prefill/bugs/missing-l-rescale.cu
capture missing-l-rescale 10
save kernels/flash-prefill/reference.cu
capture reference 12
tmux send-keys -t fpr q
sleep 2
tmux kill-server 2>/dev/null
say ""
say "== the TUI through ssh (first lines of each screen; all in tui-ssh.txt)"
grep -a -A1 '^--- ' "$TUI_SCREENS" >>"$SUMMARY"

# 3. Save -> verdict: bench through ssh and with a local worker, in
# alternating pairs (local first, then ssh, PAIRS times), one optimized
# build per round (--quick-build off) so the two runs time the same work.
ROUNDS=${ROUNDS:-10}
PAIRS=${PAIRS:-1}
for pair in $(seq 1 "$PAIRS"); do
  "$BIN" bench --rounds "$ROUNDS" --quick-build off kernels/flash-prefill/reference.cu >"$OUT/bench-local-$pair.md" 2>&1
  "$BIN" bench --rounds "$ROUNDS" --quick-build off "${REMOTE[@]}" kernels/flash-prefill/reference.cu >"$OUT/bench-ssh-$pair.md" 2>&1
done

# Nothing left: no worker, no ssh session.
sleep 1
left=$(ps -eo pid,args | grep -E '__worker|sshd: |ssh .*gpu-node' | grep -v -e grep -e '\[listener\]')
say ""
say "left running after the runs (the server itself excepted): ${left:-nothing}"

# The table, last.
row() { grep -F "| $2 |" "$1" | head -n 1 | awk -F'|' '{gsub(/ /,"",$3); print $3}'; }
say ""
say "| pair | warm round, $ROUNDS rounds (median ms) | local worker | through ssh | ssh adds |"
say "|---|---|---:|---:|---:|"
for pair in $(seq 1 "$PAIRS"); do
  for phase in "compile + load" "all hazard cases" "request to last verdict"; do
    l=$(row "$OUT/bench-local-$pair.md" "$phase") s=$(row "$OUT/bench-ssh-$pair.md" "$phase")
    say "| $pair | $phase | $l | $s | $(python3 -c "print(f'{float(\"$s\") - float(\"$l\"):+.1f}')" 2>/dev/null) |"
  done
done
header=$(grep -a -m1 ' on gpu-node' "$TUI_SCREENS" | head -c 160)
say ""
say "TUI header through ssh: ${header:-not seen}"
