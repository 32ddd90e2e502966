#!/usr/bin/env bash
# Benchmark issue 22's table on the machine it is given, side by side on one engine:
#   1. cold: `envbuild image` (BuildKit, layered, installed in place) vs the naive Dockerfile
#      (`RUN pip install --no-cache-dir torch==2.14.1 torchvision==0.29.1`, classic builder);
#   2. add one extra (`einops==0.8.1`): envbuild's rebuild vs cold, and the naive rebuild;
#   3. push to a local registry (Debian's docker-registry on 127.0.0.1): bytes stored by the
#      cold push and by the push after the change;
#   4. a rebuild that reinstalls every layer (one more step before them, as a torch upgrade
#      reinstalls the torch layer): the bytes pip downloads (its `Downloading` lines) against the
#      cold build's, the cache mount answering the rest, and the time pip itself takes;
#   5. with BENCH_CLASSIC=1, envbuild's cold build with the classic builder too.
# Every build's output is timestamped, and where envbuild's time went (each step, the export)
# is printed. The machine's load (`uptime`) is printed before and after: other work on the
# machine slows either side, so the two cold builds run back to back.
# envbuild installs from PyPI spelled with its port (`--pip-mirror https://pypi.org:443/simple`:
# the same index and files, but a folder of the pip cache mount of this benchmark's own), and
# that folder is emptied before the cold build, which so downloads every wheel, as the naive
# build does; other builds' folders on the shared engine are left alone. The pinned uv, if some
# build on the engine fetched it already, is reused (its fetch took 9 s when measured).
# The base is a local Debian 12 (Python 3.11) made with mmdebstrap from the machine's apt
# sources and trusting the host's CA bundle (no registry pulls here), imported under a fresh
# label so that no earlier build's layer cache answers a cold step. The lock is PyPI torch
# 2.14.1 + torchvision 0.29.1 with its closure. A cold build downloads ~3 GB, twice (envbuild and
# naive): expect 15-30 minutes on a loaded machine.
# Needs: a Docker engine (.ci/docker-up.sh), mmdebstrap, docker-registry, uv (.ci/uv-up.sh), a
# built envbuild (ENVBUILD=path, default target/release/envbuild, else target/debug/envbuild).
# Usage: bench/layers.sh [OUT_DIR]   (prints the table; the logs and a JSON summary in OUT_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
out="$(realpath -m "${1:-target/bench-layers}")"
mkdir -p "$out"
envbuild="${ENVBUILD:-}"
if [ -z "$envbuild" ]; then
    for b in target/release/envbuild target/debug/envbuild; do
        if [ -x "$b" ]; then envbuild="$repo_root/$b"; break; fi
    done
fi
[ -x "$envbuild" ] || { echo "no envbuild binary: cargo build --release" >&2; exit 2; }
ca=/etc/ssl/certs/ca-certificates.crt
mirror=https://pypi.org:443/simple
# The binary and the template as they are now: a rebuild during the run changes neither.
frozen="$(mktemp -d /tmp/bench-layers-bin.XXXXXX)"
cp "$envbuild" "$frozen/envbuild"
cp templates/Dockerfile.j2 "$frozen/Dockerfile.j2"
envbuild="$frozen/envbuild"
nonce="$(date +%s)-$$"
work="$(mktemp -d /tmp/bench-layers.XXXXXX)"
reg_pid=""
cleanup() {
    [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null || true
    # Only this run's images, by label.
    docker images -q --filter "label=dev.envbuild.bench=$nonce" | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true
    docker images --format '{{.Repository}}:{{.Tag}}' | grep -E "^(envbuild/bench-layers-$nonce|envbuild-bench/naive-$nonce)" | xargs -r docker rmi -f >/dev/null 2>&1 || true
    rm -rf "$work" "$frozen"
}
trap cleanup EXIT
trap 'echo "bench/layers.sh: failed at line $LINENO; the logs are in $out" >&2; tail -n 5 "$out"/*.log >&2' ERR
now() { date +%s.%N; }
# Timestamp each line (seconds since the epoch), for the phases below.
stamp() { python3 -u -c 'import sys, time
for l in sys.stdin: sys.stdout.write(f"{time.time():.2f} {l}")'; }
# Where a timestamped envbuild log's build time went: each step (to the next one's start) and
# the export (to `built ... in`), in seconds.
phases() {
    python3 - "$1" <<'EOF'
import re, sys
marks = []
for line in open(sys.argv[1], errors="replace"):
    ts, _, text = line.rstrip("\n").partition(" ")
    m = re.search(r"\] (step \d+/\d+: .{0,70}|exporting to image|built .* in [\d.]+s)", text)
    if m:
        marks.append((float(ts), m.group(1)))
# BuildKit names the export only when it ends, so the last step's time includes it.
for (t, what), (t2, then) in zip(marks, marks[1:]):
    if t2 - t >= 1.0:
        tail = ", then the export" if not then.startswith("step") else ""
        print(f"    {t2 - t:7.1f} s  {what}{tail}")
EOF
}
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
netrx() { awk 'NR > 2 && $1 != "lo:" { rx += $2 } END { print rx }' /proc/net/dev; }
# pip's `Downloading NAME (12.3 MB)` lines of a build log, in bytes.
downloaded() {
    python3 - "$1" <<'EOF'
import re, sys
unit = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "bytes": 1}
total = 0
for m in re.finditer(r"Downloading \S+ \(([\d.]+) (kB|MB|GB|bytes)\)", open(sys.argv[1], errors="replace").read()):
    total += float(m.group(1)) * unit[m.group(2)]
print(int(total))
EOF
}
blobs() { du -sb "$work/registry/docker/registry/v2/blobs" 2>/dev/null | cut -f1 || echo 0; }

echo "== load before: $(uptime)"
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), docker $(docker version --format '{{.Server.Version}}'), storage $(docker info --format '{{.Driver}}')"

# ---- base: Debian 12 with Python 3.11 and pip, trusting the host's CA bundle ----------------
rootfs="$repo_root/target/bench-debian-python311.tar"
if [ ! -f "$rootfs" ]; then
    mmdebstrap --quiet --format=tar --variant=minbase \
        --include=python3,python3-pip,python-is-python3,passwd \
        --customize-hook="rm -f \"\$1\"/usr/lib/python3*/EXTERNALLY-MANAGED; mkdir -p \"\$1\"/etc/ssl/certs; cp $ca \"\$1\"$ca; printf '[global]\\ncert = $ca\\n' > \"\$1\"/etc/pip.conf" \
        bookworm "$rootfs.partial.tar"
    mv "$rootfs.partial.tar" "$rootfs"
fi
base="envbuild-bench/debian-python311:$nonce"
docker import --change "LABEL dev.envbuild.bench=$nonce" "$rootfs" "$base" >/dev/null

# ---- a local registry ------------------------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/registry"
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$work/registry" "$port" > "$work/registry.yml"
docker-registry serve "$work/registry.yml" >/dev/null 2>&1 &
reg_pid=$!
push="127.0.0.1:$port/bench/layers-$nonce"

# ---- the spec and its closure lock -----------------------------------------------------------
proj="$work/proj"
mkdir -p "$proj"
spec() {
    cat > "$proj/envbuild.toml" <<EOF
name = "bench-layers-$nonce"
python = "3.11"
pytorch = "2.14.1"
torchaudio = false
pip = [$1]

[target]
driver = "580.95.05"
gpus = ["H200"]

[image]
base = "$base"
variants = ["runtime"]

[lock]
base-digest = false
EOF
}
image() { # LOG [ARGS...]: one `envbuild image`, its --json on stdout into LOG.json, its
    # timestamped output into LOG
    local log="$1"; shift
    { SSL_CERT_FILE="$ca" CI=true "$envbuild" image "$proj/envbuild.toml" --gpus none --json \
        --verbose --update-lock --pip-mirror "$mirror" "$@" 2>&1 1>&3 | stamp > "$log"; } 3> "$log.json"
    return "${PIPESTATUS[0]}"
}
build_s() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['builds'][0]['build_s'])" "$1"; }

# torchvision 0.29.1 comes with torch 2.14.1 (the spec's `torchvision` key, on by default).
spec ''
# A cold build: the benchmark's folder of the pip cache mount (python-env.sh keys it by the
# requirements' source lines) emptied, by one build that only removes it.
key=$(printf -- '--index-url %s\n' "$mirror" | cksum | cut -d " " -f 1)
mkdir -p "$work/clear"
printf 'FROM {{ base_image }} AS runtime\nRUN --mount=type=cache,target=/root/.cache/pip,sharing=shared rm -rf /root/.cache/pip/envbuild-wheels/%s\n' \
    "$key" > "$work/clear/Dockerfile.j2"
image "$out/clear.log" --templates "$work/clear" || true # its smoke test fails: no smoke files
docker images --format '{{.Repository}}:{{.Tag}}' | grep -E "^envbuild/bench-layers-$nonce" | xargs -r docker rmi -f >/dev/null 2>&1 || true
rx0=$(netrx); t0=$(now)
image "$out/envbuild-cold.log" --push "$push"
t1=$(now); rx1=$(netrx)
cold=$(build_s "$out/envbuild-cold.log.json")
cold_wall=$(secs "$t0" "$t1")
cold_dl=$(downloaded "$out/envbuild-cold.log")
cold_push=$(blobs)
echo "== envbuild cold: where the time went"
phases "$out/envbuild-cold.log"
cold_size=$(docker image inspect --format '{{.Size}}' "$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['builds'][0]['tags'][0])" "$out/envbuild-cold.log.json")")

# ---- the naive Dockerfile, classic builder ---------------------------------------------------
naive="$work/naive"
mkdir -p "$naive"
naive_build() { # PKGS LOG
    printf 'FROM %s\nRUN pip install --no-cache-dir %s\n' "$base" "$1" > "$naive/Dockerfile"
    local t0 t1
    t0=$(now)
    DOCKER_BUILDKIT=0 docker build --label "dev.envbuild.bench=$nonce" -t "envbuild-bench/naive-$nonce" "$naive" 2>&1 | stamp > "$2"
    t1=$(now)
    secs "$t0" "$t1"
}
naive_cold=$(naive_build "torch==2.14.1 torchvision==0.29.1" "$out/naive-cold.log")
naive_size=$(docker image inspect --format '{{.Size}}' "envbuild-bench/naive-$nonce")
echo "== cold: envbuild ${cold}s, naive ${naive_cold}s; load: $(cut -d ' ' -f 1-3 /proc/loadavg)"
# Free its 6 GB now: the rebuild after the change shares none of it.
docker rmi -f "envbuild-bench/naive-$nonce" >/dev/null

# ---- add one extra ---------------------------------------------------------------------------
spec '"einops==0.8.1"'
image "$out/envbuild-einops.log" --push "$push"
einops=$(build_s "$out/envbuild-einops.log.json")
einops_push=$(( $(blobs) - cold_push ))
naive_einops=$(naive_build "torch==2.14.1 torchvision==0.29.1 einops==0.8.1" "$out/naive-einops.log")

# ---- every layer reinstalled, downloads from the cache mount ---------------------------------
# One more step before the installs (a `--templates` copy of the Dockerfile): BuildKit's layer
# cache answers none of them, as after a torch upgrade for the torch layer, while the pip cache
# mount still holds every wheel.
mkdir -p "$work/templates"
python3 - "$frozen/Dockerfile.j2" "$work/templates/Dockerfile.j2" "$nonce" <<'EOF2'
import sys
text = open(sys.argv[1]).read()
at = "FROM {{ base_image }} AS base\n{% else %}"
assert text.count(at) == 1, "the template's BuildKit stage line moved"
open(sys.argv[2], "w").write(text.replace(at, at.replace("\n", f"\nRUN echo {sys.argv[3]} > /etc/bench-bust\n", 1)))
EOF2
rx2=$(netrx)
image "$out/envbuild-rebuild.log" --templates "$work/templates"
rx3=$(netrx)
rebuild=$(build_s "$out/envbuild-rebuild.log.json")
rebuild_dl=$(downloaded "$out/envbuild-rebuild.log")
echo "== envbuild rebuild of every layer: where the time went"
phases "$out/envbuild-rebuild.log"

classic=0
if [ "${BENCH_CLASSIC:-0}" = 1 ]; then
    # The classic builder: the throwaway install stage with pip, then the copy into the base.
    docker images --format '{{.Repository}}:{{.Tag}}' | grep -E "^envbuild/bench-layers-$nonce" | xargs -r docker rmi -f >/dev/null 2>&1 || true
    ENVBUILD_BUILDER=legacy image "$out/envbuild-classic.log"
    classic=$(build_s "$out/envbuild-classic.log.json")
fi

python3 - "$out/summary.json" <<EOF
import json, sys
r = dict(cold_s=$cold, cold_wall_s=$cold_wall, naive_cold_s=$naive_cold, cold_size=$cold_size,
         naive_size=$naive_size, einops_s=$einops, naive_einops_s=$naive_einops,
         cold_pushed_bytes=$cold_push, einops_pushed_bytes=$einops_push,
         cold_pip_downloaded=$cold_dl, cold_host_rx=$rx1 - $rx0,
         rebuild_s=$rebuild, rebuild_pip_downloaded=$rebuild_dl, rebuild_host_rx=$rx3 - $rx2,
         classic_cold_s=$classic)
json.dump(r, open(sys.argv[1], "w"), indent=1)
print(f"| build | envbuild (BuildKit) | naive (classic) | ratio |")
print(f"|---|---|---|---|")
print(f"| cold | {r['cold_s']:.1f} s, {r['cold_size']:,} B | {r['naive_cold_s']:.1f} s, {r['naive_size']:,} B | {r['cold_s'] / r['naive_cold_s']:.2f}x |")
print(f"| add einops==0.8.1 | {r['einops_s']:.1f} s = {100 * r['einops_s'] / r['cold_s']:.1f} % of cold | {r['naive_einops_s']:.1f} s | {r['einops_s'] / r['naive_einops_s']:.3f}x |")
print(f"| pushed | cold {r['cold_pushed_bytes']:,} B, after the change {r['einops_pushed_bytes']:,} B | | {r['einops_pushed_bytes'] / max(r['cold_pushed_bytes'], 1):.5f} |")
if r["classic_cold_s"]:
    print(f"| cold, classic builder | {r['classic_cold_s']:.1f} s = {r['classic_cold_s'] / r['cold_s']:.2f}x BuildKit's | | {r['classic_cold_s'] / r['naive_cold_s']:.2f}x |")
print(f"| every layer reinstalled | {r['rebuild_s']:.1f} s, pip downloaded {r['rebuild_pip_downloaded']:,} B (cold: {r['cold_pip_downloaded']:,} B); host rx {r['rebuild_host_rx']:,} B (cold {r['cold_host_rx']:,} B) | | |")
EOF
echo "== load after: $(uptime)"
echo "logs and summary.json: $out"
