# Sourced by the live TUI sessions (scripts/gpu-tui-session.sh,
# scripts/gpu-ladder-session.sh): captures a tmux pane at the session's
# 120x40, then at 80x24 and 200x60 (the terminal a student, a TA and a
# projector have), and gives the window its 120x40 back.
#
#   capture_sizes SESSION PATH_WITHOUT_.txt
#     writes PATH.txt (120x40), PATH-80x24.txt and PATH-200x60.txt
capture_sizes() {
  local session=$1 base=$2 size
  tmux capture-pane -p -t "$session" >"$base.txt"
  for size in 80x24 200x60; do
    tmux resize-window -t "$session" -x "${size%x*}" -y "${size#*x}" 2>/dev/null || return 0
    sleep 1 # the TUI redraws on the resize
    tmux capture-pane -p -t "$session" >"$base-$size.txt"
  done
  tmux resize-window -t "$session" -x 120 -y 40
  sleep 1
}
