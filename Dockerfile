# hangwatch agent: watches an SGLang/vLLM server start-up from a sidecar (shared PID namespace) or a host.
#
#   docker build -t hangwatch .
#   docker run --pid=container:SERVER --cap-add SYS_PTRACE --user 0 \
#       -v /var/lib/docker/containers:/var/lib/docker/containers:ro hangwatch attach 1
#   docker run --pid=host --cap-add SYS_PTRACE -p 127.0.0.1:9464:9464 -e HANGWATCH_TOKEN hangwatch attach PID --serve --host 0.0.0.0
#
# Built and tested by deploy/image/test.sh (CI): the image starts, and a sidecar sharing a server
# container's PID namespace attaches to it and reads its log through Docker's json-file.
# BASE_IMAGE: any Debian-like image with python3 (>= 3.10) and its venv module. CI builds on a
# Debian 12 base made with debootstrap (no image registry is reachable there).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/hangwatch/bin:$PATH \
    # With the NVIDIA container runtime this mounts libnvidia-ml (NVML) without taking a GPU.
    NVIDIA_DRIVER_CAPABILITIES=utility

# procps: pgrep for a sidecar's start script; libcap2-bin: setcap below. python3-venv where the base
# is plain Debian (python:3.11-slim has venv built in and no python3-venv package to install).
RUN apt-get update \
    && apt-get install -y --no-install-recommends procps libcap2-bin \
    && { python3 -m venv --help >/dev/null 2>&1 || apt-get install -y --no-install-recommends python3-venv; } \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY hangwatch ./hangwatch
# A venv: Debian's own python refuses `pip install` into the system (PEP 668). py-spy is a dependency:
# its wheel brings the binary. constraints.txt pins what CI tested.
RUN python3 -m venv /opt/hangwatch \
    && /opt/hangwatch/bin/pip install -c constraints.txt . \
    && rm -rf /src

# A non-root agent keeps py-spy's ptrace capability through a file capability. It only works when the
# container is granted SYS_PTRACE (it is then in the bounding set) and privilege escalation is allowed
# (no_new_privs ignores file capabilities). To read /proc of a server running as root (its fds, to find
# the log), and the runtime's log files, run as root (`--user 0`).
RUN setcap cap_sys_ptrace+ep /opt/hangwatch/bin/py-spy \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin hangwatch \
    && mkdir -p /var/lib/hangwatch && chown hangwatch /var/lib/hangwatch

USER 10001
WORKDIR /var/lib/hangwatch
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=3s \
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=2)"
ENTRYPOINT ["hangwatch"]
CMD ["--help"]
