#!/usr/bin/env bash
# Build the Dockerfile for real and test the image: it starts (`hangwatch --version`), and a sidecar
# sharing a server container's PID namespace attaches with SYS_PTRACE and reads the server's log
# through Docker's json-file (found from the server's cgroup; no --log). Run by .ci/run, as root.
#
# No image registry is reachable here, so the base image is built from Debian packages with
# debootstrap and `docker import`ed; the Dockerfile's BASE_IMAGE build-arg points at it. Docker runs
# on its own data root (overlay2 storage, vfs where the root is itself overlayfs), no bridge and no
# iptables (the host's network is left alone), and is stopped at the end if this script started it.
# Nothing is cached across runs. Prints the seconds each step took.
#
#   bash deploy/image/test.sh            # KEEP=1 keeps dockerd, its data and the images afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
STATE=${HANGWATCH_IMAGE_STATE:-/var/lib/hangwatch-image-test}   # dockerd data root and the base rootfs
SOCK=unix:///run/hangwatch-image-test.sock
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=hangwatch-base:$SUITE
IMAGE=hangwatch:test
DOCKER=(docker -H "$SOCK")
STARTED_DOCKERD=""
t0=$SECONDS
step() { echo "image-test: $1 ($((SECONDS - t0)) s)"; }

cleanup() {
  "${DOCKER[@]}" rm -f hw-server hw-sidecar >/dev/null 2>&1 || true
  if [[ -n "$STARTED_DOCKERD" && -z "${KEEP:-}" ]]; then
    kill "$STARTED_DOCKERD" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$STARTED_DOCKERD" 2>/dev/null || break; sleep 1; done
    rm -rf "$STATE"
  fi
}
trap cleanup EXIT

# 1. Debian's docker.io and debootstrap
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi
step "docker.io and debootstrap installed"

# 2. dockerd of our own
mkdir -p "$STATE"
if ! "${DOCKER[@]}" info >/dev/null 2>&1; then
  # overlay2 where the data root's filesystem takes it (ext4, xfs); vfs (a full copy per layer,
  # slow) where the data root is itself on overlayfs
  driver=overlay2
  [[ "$(findmnt -n -o FSTYPE --target "$STATE" 2>/dev/null)" == overlay ]] && driver=vfs
  dockerd --host "$SOCK" --data-root "$STATE/docker" --exec-root /run/hangwatch-image-test \
    --pidfile /run/hangwatch-image-test.pid --storage-driver "$driver" --iptables=false --ip6tables=false \
    --bridge none >"$STATE/dockerd.log" 2>&1 &
  STARTED_DOCKERD=$!
  for _ in $(seq 60); do "${DOCKER[@]}" info >/dev/null 2>&1 && break; sleep 1; done
  "${DOCKER[@]}" info >/dev/null || { tail -20 "$STATE/dockerd.log"; exit 1; }
fi
DATA_ROOT=$("${DOCKER[@]}" info --format '{{.DockerRootDir}}')
step "dockerd up (data root $DATA_ROOT, $("${DOCKER[@]}" info --format '{{.Driver}}') storage)"

# 3. the base image, from Debian packages
if ! "${DOCKER[@]}" image inspect "$BASE" >/dev/null 2>&1; then
  rm -rf "$STATE/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,procps,libcap2-bin \
    "$SUITE" "$STATE/rootfs" "$MIRROR" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log"; exit 1; }
  rm -rf "$STATE/rootfs/var/cache/apt/archives/"*.deb "$STATE/rootfs/var/lib/apt/lists/"*
  # This host's CA bundle: where TLS to PyPI passes a proxy with its own CA, pip in the build needs
  # it (a plain Debian base trusts only Mozilla's roots). Only the CI base gets it; the Dockerfile
  # is unchanged.
  change=()
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$STATE/rootfs/etc/ssl/certs/ca-certificates.crt"
    change=(--change "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt")
  fi
  tar -C "$STATE/rootfs" -c . | "${DOCKER[@]}" import "${change[@]}" - "$BASE" >/dev/null
  rm -rf "$STATE/rootfs"
fi
step "base image $BASE"

# 4. the Dockerfile, as users build it, on that base (host network: apt and PyPI are reachable)
DOCKER_BUILDKIT=0 "${DOCKER[@]}" build -q --network host --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" . >/dev/null
step "built $IMAGE"

# 5a. the image starts
version=$("${DOCKER[@]}" run --rm --network none "$IMAGE" --version)
expected="hangwatch $(.venv/bin/python -c 'import hangwatch; print(hangwatch.__version__)' 2>/dev/null || echo '')"
echo "image-test: $version"
[[ "$version" == hangwatch\ * && ( "$expected" == "hangwatch " || "$version" == "$expected" ) ]]

# 5b. a server container (the test server: SGLang's log lines and process titles, real ranks)
# writing to its stdout, Docker's json-file behind it; a sidecar in its PID namespace attaches to
# its pid 1 with no --log, and must find and read that log to see the phases and the ready line.
# The server image is the agent's plus setproctitle (the ranks title themselves as SGLang's do).
setproctitle=$(grep -i '^setproctitle==' constraints.txt)
printf 'FROM %s\nUSER 0\nRUN /opt/hangwatch/bin/pip install %s\n' "$IMAGE" "$setproctitle" \
  | DOCKER_BUILDKIT=0 "${DOCKER[@]}" build -q --network host -t hangwatch-testserver:test - >/dev/null
"${DOCKER[@]}" run -d --name hw-server --network none --user 0 --entrypoint python3 \
  -e HW_MODE=healthy -v "$ROOT/tests/integration/programs:/programs:ro" hangwatch-testserver:test \
  /programs/sglang/launch_server.py --model-path /models/tiny --tp-size 2 --port 30000 >/dev/null
"${DOCKER[@]}" run --name hw-sidecar --pid container:hw-server --network container:hw-server \
  --cap-add SYS_PTRACE --user 0 -v "$DATA_ROOT/containers:/var/lib/docker/containers:ro" "$IMAGE" \
  attach 1 --json --exit-on ready,stalled,crashed --timeout 90 >"$STATE/sidecar.json" || true
step "sidecar attached"
python3 - "$STATE/sidecar.json" <<'PY'
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
assert lines, "the sidecar printed no verdict"
last = lines[-1]
missing = {m["source"]: m["reason"] for m in last["missing"]}
print("image-test: sidecar verdict:", last["state"], "phases", last["phases"], "missing", sorted(missing))
assert last["state"] == "ready", json.dumps(last, indent=1)
assert "log" not in missing, missing.get("log")
assert {"TP0", "TP1"} <= set(last["phases"]), last["phases"]
PY
step "passed"
