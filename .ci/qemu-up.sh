#!/usr/bin/env bash
# Make this x86_64 machine run arm64 containers under emulation, for the arm64 Docker tests:
# qemu-user-static (the emulator), binfmt-support, mmdebstrap (the arm64 base's packages), then
# binfmt_misc mounted and qemu-aarch64 registered with the kernel. Idempotent: does nothing that
# is done. Needs root (or sudo) only for what must be installed, mounted or registered.
# Called by .ci/run before the tests. `--torch` also makes sure the emulator runs real torch
# (qemu-user 8.2 or newer), as the opt-in real-torch test needs (see below).
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

# --torch: a qemu-user that runs real torch. Before 8.2 qemu-user hands an aarch64 program this
# machine's own /proc/cpuinfo, and `import torch` crashes reading it (EMULATOR_CRASHED,
# docs/image.md "Under emulation"); Debian 12 has 7.2. Then Debian 13's static qemu-aarch64 is
# fetched by apt with a source list of its own (the machine's apt sources and installed
# packages stay as they are), kept under /usr/local/lib/envbuild-qemu, and registered in place
# of the current one, with the same magic, mask and flags.
if [ "${1:-}" = --torch ]; then
    # The registered name (`aarch64-binfmt-P`) makes qemu read its arguments as the kernel
    # passes them: ask the binary it links to.
    interp=$(readlink -f "$(sed -n 's/^interpreter //p' "$BINFMT/qemu-aarch64")")
    version=$({ "$interp" --version 2>/dev/null || true; } |
        sed -n 's/.*version \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
    major=${version%%.*}
    minor=${version#*.}
    if [ -n "$version" ] && { [ "$major" -gt 8 ] || { [ "$major" -eq 8 ] && [ "$minor" -ge 2 ]; }; }; then
        log "qemu-aarch64 $version emulates /proc/cpuinfo: torch runs under it"
    else
        dest=/usr/local/lib/envbuild-qemu
        cache=/var/cache/envbuild-qemu
        log "qemu-aarch64 ${version:-(unknown version)} is older than 8.2: registering Debian 13's"
        $SUDO mkdir -p "$cache/lists/partial" "$cache/debs" "$dest"
        echo "deb http://deb.debian.org/debian trixie main" | $SUDO tee "$cache/sources.list" >/dev/null
        apt_own=(-o "Dir::Etc::sourcelist=$cache/sources.list" -o "Dir::Etc::sourceparts=-"
            -o "Dir::State::Lists=$cache/lists" -o "APT::Get::List-Cleanup=0")
        $SUDO apt-get -qq "${apt_own[@]}" update
        (cd "$cache/debs" && $SUDO apt-get -qq "${apt_own[@]}" download qemu-user 2>/dev/null)
        deb=$(ls -t "$cache"/debs/qemu-user_*.deb | head -n 1)
        tmp=$(mktemp -d)
        dpkg-deb -x "$deb" "$tmp"
        $SUDO install -m 0755 "$tmp/usr/bin/qemu-aarch64" "$dest/qemu-aarch64"
        rm -rf "$tmp"
        # Debian's qemu takes the binfmt P flag from the name it is started by.
        $SUDO ln -sf qemu-aarch64 "$dest/aarch64-binfmt-P"
        line=$(grep -v '^[[:space:]]*#' /usr/lib/binfmt.d/qemu-aarch64.conf | grep -m1 '^:qemu-aarch64:')
        line=$(printf '%s' "$line" | sed "s#:[^:]*:\([A-Z]*\)\$#:$dest/aarch64-binfmt-P:\1#")
        echo -1 | $SUDO tee "$BINFMT/qemu-aarch64" >/dev/null
        printf '%s' "$line" | $SUDO tee "$BINFMT/register" >/dev/null
        grep -q '^enabled' "$BINFMT/qemu-aarch64"
        log "qemu-aarch64 is now $("$dest/qemu-aarch64" --version | head -n 1)"
    fi
fi
log "arm64 binaries run under $(grep '^interpreter' "$BINFMT/qemu-aarch64")"
