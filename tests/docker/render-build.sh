#!/bin/sh
# Manual check that a rendered Dockerfile builds and behaves on a real engine with the classic
# builder, offline: a local Debian base with python3 + pip stands in for python:3.X-slim, and the
# lock installs one small PyPI package instead of torch (download.pytorch.org and Docker Hub are
# not needed). Not run by `cargo test`: it needs a Docker engine, mmdebstrap, root, and PyPI and
# Debian mirrors reachable from containers; takes a few minutes.
#
# Checks: runtime and dev targets build; containers run as uid 10001; the smoke test and
# expect.json are readable; NVIDIA_* variables are set; the labels carry the lock hash; the dev
# entrypoint refuses to start JupyterLab without a token (exit 64) and starts it with one; a
# command given to the dev image runs as given; no SSH host key is in the image.
#
# Usage: tests/docker/render-build.sh   (leaves images envbuild-render-test/*; remove them with
# `docker rmi envbuild-render-test/app:runtime envbuild-render-test/app:dev envbuild-render-test/pybase:1`)
set -eu
cd "$(dirname "$0")/../.."
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export DOCKER_BUILDKIT=0

if ! docker image inspect envbuild-render-test/pybase:1 >/dev/null 2>&1; then
    # Debian's pip refuses system installs (PEP 668); python:3.X-slim has no such marker.
    # The host's CA bundle is copied in for machines behind a TLS-inspecting proxy.
    mmdebstrap --variant=minbase --include=python3,python3-pip,python-is-python3,passwd,ca-certificates \
        --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
        --customize-hook='cp /etc/ssl/certs/ca-certificates.crt "$1"/etc/ssl/certs/ca-certificates.crt' \
        bookworm "$WORK/rootfs.tar"
    docker import "$WORK/rootfs.tar" envbuild-render-test/pybase:1
fi

python3 - "$WORK/envbuild.lock" <<'PY'
import re, sys
s = open("specs/torch29-cu128/envbuild.lock").read()
s = s.replace('base = "python:3.12-slim-bookworm"', 'base = "envbuild-render-test/pybase:1"')
s = re.sub(r'pip = \["torch.*?\]\n', 'pip = ["six==1.16.0"]\n', s)
s = re.sub(r'pip_extra_index_urls = \[.*?\]\n', '', s)
open(sys.argv[1], "w").write(s)
PY
cargo run --quiet -- render "$WORK/envbuild.lock" --out "$WORK/ctx"
HASH="$(grep -m1 'Lock sha256' "$WORK/ctx/Dockerfile" | awk '{print $4}')"

docker build --target runtime -t envbuild-render-test/app:runtime "$WORK/ctx"
docker build --target dev -t envbuild-render-test/app:dev "$WORK/ctx"

R=envbuild-render-test/app:runtime
D=envbuild-render-test/app:dev
test "$(docker run --rm "$R" id -u)" = 10001
test "$(docker run --rm "$D" id -u)" = 10001
docker run --rm "$R" sh -c 'cat /opt/envbuild/envbuild_smoke.py /opt/envbuild/expect.json >/dev/null'
docker run --rm "$R" python -c 'import six; assert six.__version__ == "1.16.0"'
test "$(docker run --rm "$R" printenv NVIDIA_DRIVER_CAPABILITIES)" = compute,utility
test "$(docker run --rm "$R" printenv NVIDIA_REQUIRE_CUDA)" = 'cuda>=12.8'
test "$(docker image inspect "$R" --format '{{index .Config.Labels "dev.envbuild.lock-sha256"}}')" = "$HASH"
test "$(docker image inspect "$D" --format '{{index .Config.Labels "dev.envbuild.variant"}}')" = dev
! docker run --rm "$R" sh -c 'command -v jupyter || command -v sshd' >/dev/null
test -z "$(docker run --rm "$D" sh -c 'ls /etc/ssh/ssh_host_* 2>/dev/null || true')"
set +e
docker run --rm "$D" >"$WORK/notoken.log" 2>&1
rc=$?
set -e
test "$rc" = 64
grep -q JUPYTER_TOKEN "$WORK/notoken.log"
test "$(docker run --rm "$D" python -c 'print("cmd ok")')" = "cmd ok"
cid="$(docker run -d -e JUPYTER_TOKEN=test-token-123 "$D")"
sleep 8
docker logs "$cid" 2>&1 | grep -q "Jupyter Server" || { docker logs "$cid"; docker rm -f "$cid"; exit 1; }
docker rm -f "$cid" >/dev/null
echo "render-build: all checks passed"
