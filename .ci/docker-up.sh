#!/usr/bin/env bash
# Make sure a Docker engine answers and the tools the Docker tests use to make their base
# images (mmdebstrap, busybox-static) are installed. Idempotent: does nothing that is done.
# Needs root (or sudo) only when something must be installed or dockerd started.
# Called by .ci/run before the tests.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

log() { echo "docker-up: $*" >&2; }

apt_install() {
    # Only what is missing; one apt-get update per run at most.
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]}"
        if [ -z "${APT_UPDATED:-}" ]; then
            $SUDO apt-get update -qq
            APT_UPDATED=1
        fi
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

engine_answers() {
    # `docker version` asks the engine too; `info` is what fails fastest when none runs.
    timeout 10 docker info >/dev/null 2>&1
}

if ! command -v docker >/dev/null 2>&1; then
    apt_install docker.io
fi

if engine_answers; then
    log "engine answers at ${DOCKER_HOST:-unix:///var/run/docker.sock}"
else
    if [ -n "${DOCKER_HOST:-}" ]; then
        log "DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local dockerd for a remote host"
        exit 1
    fi
    apt_install docker.io
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        log "starting dockerd (log: /tmp/dockerd.log)"
        # Started directly (no systemd in CI containers); it adds its bridge and iptables rules.
        $SUDO sh -c 'nohup dockerd >/tmp/dockerd.log 2>&1 &'
    fi
    for _ in $(seq 1 60); do
        if engine_answers; then break; fi
        sleep 1
    done
    if ! engine_answers; then
        log "dockerd did not answer within 60 s; last log lines:"
        tail -n 20 /tmp/dockerd.log >&2 || true
        exit 1
    fi
    log "engine is up"
fi

# Base images for the tests are made locally: no registry is reachable.
apt_install mmdebstrap busybox-static

# A real registry (distribution 2.8) for the push/pull tests: each test starts its own instance
# on a free 127.0.0.1 port with temporary storage, so the system service is not needed.
apt_install docker-registry

# The token-auth registry test (tests/docker/token.rs) makes its token server's key and
# certificate and signs its JWTs with the openssl CLI.
apt_install openssl
