#!/usr/bin/env bash
# The built-in demo: start a real SGLang 0.5.23 server on this machine's CPU whose startup really
# hangs, and let hangwatch watch it live and say why. Installs what it needs first (pinned):
# hangwatch in .venv, the lab (SGLang on CPU, a tiny local model) in .lab-venv.
#   DEMO_SCENARIO  tp2-one-rank-loading (default), hs-dump-patch, weights-fifo, two-node-missing, ...
#                  (lab/README.md lists them all)
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIO="${DEMO_SCENARIO:-tp2-one-rank-loading}"
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

say "hangwatch attach $PID   (the server's log: $LOG)"
set +e
.venv/bin/hangwatch attach "$PID" --log "$LOG" --exit-on stalled,crashed,ready --timeout 300
status=$?
set -e
say "hangwatch exited $status (0: ready, 1: stalled/crashed/timeout); stopping the scenario"
exit 0
