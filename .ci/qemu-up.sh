#!/usr/bin/env bash
# Make this x86_64 machine run arm64 containers under emulation, for the arm64 Docker tests:
# qemu-user-static (the emulator), binfmt-support, mmdebstrap (the arm64 base's packages), then
# binfmt_misc mounted and qemu-aarch64 registered with the kernel. Idempotent: does nothing that
# is done. Needs root (or sudo) only for what must be installed, mounted or registered.
# Called by .ci/run before the tests.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

log() { echo "qemu-up: $*" >&2; }

missing=()
for pkg in qemu-user-static binfmt-support mmdebstrap; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BINFMT=/proc/sys/fs/binfmt_misc
# A container's /proc often lacks the mount: the kernel only sees registrations through it.
if [ ! -e "$BINFMT/register" ]; then
    log "mounting binfmt_misc at $BINFMT"
    $SUDO mount -t binfmt_misc binfmt_misc "$BINFMT"
fi

if [ -e "$BINFMT/qemu-aarch64" ]; then
    log "qemu-aarch64 is registered: $(head -n 1 "$BINFMT/qemu-aarch64")"
else
    CONF=/usr/lib/binfmt.d/qemu-aarch64.conf
    if [ ! -f "$CONF" ]; then
        log "$CONF is missing (qemu-user-static should install it)"
        exit 1
    fi
    # The file's one registration line (`:qemu-aarch64:M::...:/usr/libexec/qemu-binfmt/...:F`);
    # the F flag makes the kernel open the interpreter now, so containers need no copy of it.
    line=$(grep -v '^[[:space:]]*#' "$CONF" | grep -m1 '^:qemu-aarch64:')
    log "registering qemu-aarch64 from $CONF"
    printf '%s' "$line" | $SUDO tee "$BINFMT/register" >/dev/null
fi
grep -q '^enabled' "$BINFMT/qemu-aarch64"
log "arm64 binaries run under $(grep '^interpreter' "$BINFMT/qemu-aarch64")"
