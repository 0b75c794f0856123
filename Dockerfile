# hangwatch agent: watches an SGLang/vLLM server start-up from a sidecar (shared PID namespace) or a host.
#
#   docker build -t hangwatch .
#   docker run --pid=host --cap-add SYS_PTRACE -p 127.0.0.1:9464:9464 -e HANGWATCH_TOKEN hangwatch attach PID --serve --host 0.0.0.0
#
# Reading another process's Python stacks (py-spy) needs ptrace: the container must be given SYS_PTRACE.
# Written without a Docker engine at hand: checked by reading, not built. See docs/serving.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # With the NVIDIA container runtime this mounts libnvidia-ml (NVML) without taking a GPU.
    NVIDIA_DRIVER_CAPABILITIES=utility

# procps: pgrep for the sidecar's start script; libcap2-bin: setcap below.
RUN apt-get update \
    && apt-get install -y --no-install-recommends procps libcap2-bin \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md ./
COPY hangwatch ./hangwatch
# py-spy is a dependency: its wheel brings the binary.
RUN pip install . && rm -rf /src

# A non-root agent keeps py-spy's ptrace capability through a file capability. It only works when the
# container is granted SYS_PTRACE (it is then in the bounding set) and privilege escalation is allowed
# (no_new_privs ignores file capabilities). To read /proc of a server running as root, run as root.
RUN setcap cap_sys_ptrace+ep "$(command -v py-spy)" \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin hangwatch \
    && mkdir -p /var/lib/hangwatch && chown hangwatch /var/lib/hangwatch

USER 10001
WORKDIR /var/lib/hangwatch
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=3s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=2)"
ENTRYPOINT ["hangwatch"]
CMD ["--help"]
