#!/usr/bin/env bash
# Install the hangwatch lab: a venv with the real SGLang 0.5.23 server on CPU, and the tiny model.
# Idempotent: every step checks whether it is already done. Prints the lab python path last.
#   HANGWATCH_LAB_VENV  venv path (default: .lab-venv at the repo root)
set -euo pipefail
LAB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$LAB")"
VENV="${HANGWATCH_LAB_VENV:-$ROOT/.lab-venv}"
MODEL="$LAB/.work/tiny-llama"
PY="$VENV/bin/python"
log() { echo "[lab/install] $*" >&2; }

if [[ ! -x "$PY" ]]; then
  log "creating venv $VENV (python3.11)"
  python3.11 -m venv "$VENV"
fi

# The pip steps are skipped when the exact pins already import; `pip install` of an already
# satisfied set is also a no-op, but costs ~10 s of resolution on this machine.
if ! "$PY" -c 'import sglang, torch, transformers, uvicorn; assert torch.__version__.startswith("2.13.0")' 2>/dev/null \
   || [[ "$("$PY" -m pip show sglang 2>/dev/null | sed -n 's/^Version: //p')" != "0.5.23" ]]; then
  log "installing pinned packages (torch 2.13.0+cpu from the local wheel)"
  "$PY" -m pip install -q -c "$LAB/constraints.txt" -r "$LAB/requirements.txt"
  # --no-deps: sglang declares torch==2.14.1, flashinfer, sglang-kernel, cuda-python (all CUDA).
  "$PY" -m pip install -q -c "$LAB/constraints.txt" --no-deps sglang==0.5.23 torchvision==0.28.0
fi

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for f in _torchvision_cpu_shim.py torchvision_cpu_shim.pth; do
  if ! cmp -s "$LAB/shim/$f" "$SITE/$f"; then
    log "installing torchvision shim $f"
    cp "$LAB/shim/$f" "$SITE/$f"
  fi
done

if [[ ! -f "$MODEL/model.safetensors" || ! -f "$MODEL/tokenizer.json" ]]; then
  log "building tiny model in $MODEL"
  mkdir -p "$LAB/.work"
  "$PY" "$LAB/make_tiny_llama.py" "$MODEL" >&2
fi

echo "$PY"
