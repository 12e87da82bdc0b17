#!/usr/bin/env bash
# The README's path on a fresh machine with Python and no CUDA: a minimal
# Debian (debootstrap: python3, pip, nothing of NVIDIA's), the release
# binary copied in, the README's one pip step, then `flashprof doctor` and
# the TUI under tmux, first on the starter it writes, then after a save
# with a syntax error. Needs root (chroot), debootstrap, tmux and network
# access to Debian's and PyPI's mirrors. Usage: scripts/clean-container-check.sh [ROOTFS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${1:-/tmp/flashprof-clean-root}
BIN=target/release/flashprof
[ -x "$BIN" ] || cargo build --release
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates bookworm "$ROOT" http://deb.debian.org/debian >/dev/null
fi
cp "$BIN" "$ROOT/usr/local/bin/flashprof"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# A network that intercepts TLS needs its own CA in the root too.
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
mount -t proc proc "$ROOT/proc"; mount --bind /dev "$ROOT/dev"; mount --bind /dev/pts "$ROOT/dev/pts"
trap 'tmux kill-session -t flashprof-clean 2>/dev/null; umount "$ROOT/dev/pts" "$ROOT/dev" "$ROOT/proc"' EXIT
in_root() { chroot "$ROOT" /bin/sh -c "$1"; }
in_root 'rm -rf /root/.local /home/student && mkdir -p /home/student'
echo "== before the README's step"; in_root 'flashprof doctor | grep -A1 nvrtc' || true
# The README's step (Debian's Python is "externally managed": the flag the README names).
in_root 'python3 -m pip install -q --user --break-system-packages "nvidia-cuda-nvrtc==13.0.*"'
echo "== after"; in_root 'flashprof doctor | grep -A1 nvrtc' || true
tmux new-session -d -s flashprof-clean -x 100 -y 30 "chroot $ROOT /bin/sh -c 'cd /home/student && TERM=xterm-256color flashprof'"
sleep 6
echo "== the TUI on the starter it wrote"; tmux capture-pane -p -t flashprof-clean | head -6
sed -i 's/const int h = blockIdx.y;/const int h = blockIdx.y +;/' "$ROOT/home/student/prefill.cu"
sleep 3
echo "== after saving a syntax error"; tmux capture-pane -p -t flashprof-clean | head -5
