#!/usr/bin/env python3
"""Idle CPU of the live TUI: how much processor time flashprof spends while
nobody types and the file does not change.

The TUI redraws only when a message arrives, so an idle screen should cost
close to nothing. This starts the real binary on a copy of the starter
kernel in a pseudo-terminal (it needs one, like a user's terminal), lets
the first check finish, then reads utime + stime from /proc for the TUI
and its worker process over a quiet window, and counts the bytes the TUI
wrote to the terminal meanwhile (a redraw would show up there).

Usage: scripts/idle_cpu.py [--binary target/release/flashprof] [--seconds 10]
NVRTC must be loadable (LD_LIBRARY_PATH) for the first check to compile.
"""

import argparse
import fcntl
import os
import pty
import shutil
import struct
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    """utime + stime of one process, or 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0
    # Fields after the command name, which may itself hold spaces or ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def family(pid):
    """`pid` and every process below it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for child in children:
            found.extend(family(int(child)))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / "target/release/flashprof"))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds allowed for start-up and the first check")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="flashprof-idle-"))
    kernel = folder / "prefill.cu"
    shutil.copy(ROOT / "kernels/flash-prefill/starter.cu", kernel)
    pid, terminal = pty.fork()
    if pid == 0:
        os.chdir(folder)
        os.environ["TERM"] = "xterm-256color"
        os.execv(args.binary, [args.binary, str(kernel)])
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))

    written = [0]

    def drain():
        # The TUI blocks if nobody reads its output, so read it all.
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:
                return
            if not chunk:
                return
            written[0] += len(chunk)

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(args.settle)
    processes = family(pid)
    bytes_before = written[0]
    ticks_before = sum(cpu_ticks(p) for p in processes)
    time.sleep(args.seconds)
    ticks_after = sum(cpu_ticks(p) for p in processes)
    idle_bytes = written[0] - bytes_before
    os.write(terminal, b"q")
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(folder, ignore_errors=True)

    cpu_seconds = (ticks_after - ticks_before) / CLOCK_TICKS
    print(f"binary: {args.binary}")
    print(f"processes measured: {len(processes)} (the TUI and its worker)")
    print(f"idle window: {args.seconds:.1f} s after {args.settle:.1f} s of start-up")
    print(f"cpu time: {cpu_seconds:.3f} s ({100 * cpu_seconds / args.seconds:.2f}% of one core;"
          f" resolution {1 / CLOCK_TICKS:.3f} s)")
    print(f"bytes drawn while idle: {idle_bytes}")
    print(f"exit status after q: {os.waitstatus_to_exitcode(status)}")


if __name__ == "__main__":
    main()
