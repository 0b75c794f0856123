#!/usr/bin/env bash
# The built-in demo: start a real SGLang 0.5.23 server on this machine's CPU whose startup really
# hangs, and let hangwatch watch it live and say why. Installs what it needs first (pinned):
# hangwatch in .venv, the lab (SGLang on CPU, a tiny local model) in .lab-venv.
#   DEMO_SCENARIO  tp2-one-rank-loading (default), hs-dump-patch, weights-fifo, two-node-missing, ...
#                  (lab/README.md lists them all)
#   --serve        keep watching and serve the page on http://127.0.0.1:9464/ until Ctrl-C; with two
#                  nodes, one agent per node (:9465, :9466) and `hangwatch fleet` over both on :9464
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIO="${DEMO_SCENARIO:-tp2-one-rank-loading}"
SERVE=0
[[ "${1:-}" == "--serve" ]] && SERVE=1
TWO_NODES=" tp2-one-rank-loading two-node-missing two-node-late rank-killed "
say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

if [[ ! -x .venv/bin/hangwatch ]]; then
  say "installing hangwatch into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q -c constraints.txt -e .
fi
say "installing the lab (real SGLang 0.5.23 on CPU; ~2 min the first time)"
LAB_PY="$(bash lab/install.sh)"

say "starting lab scenario '$SCENARIO' (lab/README.md says what really happens in it)"
EVENTS="$(mktemp)"
# its own session: the lab kills its whole process group when it stops
setsid "$LAB_PY" lab/run.py "$SCENARIO" --hold 600 >"$EVENTS" &
RUNNER=$!
trap 'kill "$RUNNER" 2>/dev/null; wait "$RUNNER" 2>/dev/null || true; rm -f "$EVENTS"' EXIT
for _ in $(seq 100); do [[ -s "$EVENTS" ]] && break; sleep 0.2; done
PID="$(head -n1 "$EVENTS" | "$LAB_PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["pid"])')"
LOG="$(head -n1 "$EVENTS" | "$LAB_PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["log"])')"

if ((SERVE)); then
  AGENTS=()
  trap 'kill "${AGENTS[@]}" 2>/dev/null; kill "$RUNNER" 2>/dev/null; wait 2>/dev/null || true; rm -f "$EVENTS"' EXIT
  if [[ "$TWO_NODES" != *" $SCENARIO "* ]]; then
    say "open http://127.0.0.1:9464/   (hangwatch attach $PID --serve; Ctrl-C stops)"
    .venv/bin/hangwatch attach "$PID" --log "$LOG" --serve || true
    exit 0
  fi
  .venv/bin/hangwatch attach "$PID" --log "$LOG" --serve --port 9465 >/dev/null &
  AGENTS+=($!)
  # node 1's agent starts when node 1 does (never, in two-node-missing: the page says so)
  (
    for _ in $(seq 600); do
      NODE1="$(grep '"launched"' "$EVENTS" | grep '"node": 1' | head -n1 || true)"
      if [[ -n "$NODE1" ]]; then
        PID1="$(echo "$NODE1" | "$LAB_PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["node_pid"])')"
        LOG1="$(echo "$NODE1" | "$LAB_PY" -c 'import json,sys; print(json.loads(sys.stdin.readline())["log"])')"
        exec .venv/bin/hangwatch attach "$PID1" --log "$LOG1" --serve --port 9466 >/dev/null
      fi
      sleep 1
    done
  ) &
  AGENTS+=($!)
  say "open http://127.0.0.1:9464/   (both nodes; each node's own page: :9465, :9466; Ctrl-C stops)"
  .venv/bin/hangwatch fleet http://127.0.0.1:9465 http://127.0.0.1:9466 --port 9464 || true
  exit 0
fi

say "hangwatch attach $PID   (the server's log: $LOG)"
set +e
.venv/bin/hangwatch attach "$PID" --log "$LOG" --exit-on stalled,crashed,ready --timeout 300
status=$?
set -e
say "hangwatch exited $status (0: ready, 1: stalled/crashed/timeout); stopping the scenario"
exit 0
