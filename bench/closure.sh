#!/usr/bin/env bash
# The closure lock against PyPI, side by side on the same requirements and index (needs the
# network; run by hand, not in CI). For specs/pypi-torch214-closure's inputs (torch 2.14.1,
# torchvision 0.29.1, einops>=0.8 for CPython 3.13 on x86_64 glibc 2.36) it times, RUNS times
# each, alternating:
#   envbuild  `envbuild lock --upgrade` (a fresh resolution: pip with the target's markers)
#   pip       `pip install --dry-run --report` with the same target flags (no shim: markers and
#             Requires-Python are then the running interpreter's, which can pick other versions)
#   uv        `uv pip compile --generate-hashes` for x86_64-manylinux_2_36, Python 3.13
#   reuse     `envbuild lock` with the closure unchanged (no network)
# and prints the package counts and whether the three chose the same versions. UV names a uv binary (e.g. in a throwaway venv:
# `python3 -m venv /tmp/uvenv && /tmp/uvenv/bin/pip install uv`). Caches (pip's, uv's) are
# warm after the first run of each; the figures are medians.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/envbuild
UV=${UV:-uv}
RUNS=${RUNS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$ROOT/specs/pypi-torch214-closure/envbuild.toml" "$WORK/"
printf 'torch==2.14.1\ntorchvision==0.29.1\neinops>=0.8\n' > "$WORK/reqs.in"
plats=()
for m in $(seq 36 -1 5); do plats+=(--platform "manylinux_2_${m}_x86_64"); done
plats+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
declare -A times
for i in $(seq "$RUNS"); do
  times[envbuild]+="$(t "$BIN" lock "$WORK/envbuild.toml" --upgrade) "
  times[pip]+="$(t python3 -m pip install --dry-run --ignore-installed --quiet --only-binary=:all: \
      "${plats[@]}" --python-version 3.13 --implementation cp --abi cp313 --target "$WORK/t" \
      --report "$WORK/pip.json" --index-url https://pypi.org/simple -r "$WORK/reqs.in") "
  times[uv]+="$(t "$UV" pip compile --generate-hashes --python-version 3.13 \
      --python-platform x86_64-manylinux_2_36 --index-url https://pypi.org/simple \
      -o "$WORK/uv.txt" "$WORK/reqs.in") "
  times[reuse]+="$(t "$BIN" lock "$WORK/envbuild.toml") "
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in envbuild pip uv reuse; do printf '%-9s median %8.3f s  (runs: %s)\n' "$k" "$(echo "${times[$k]}" | med)" "${times[$k]}"; done
python3 - "$WORK" <<'PY'
import json, re, sys, tomllib
w = sys.argv[1]
canon = lambda n: re.sub(r"[-_.]+", "-", n).lower()
env = {f"{c['name']}=={c['version']}" for c in tomllib.load(open(f"{w}/envbuild.lock", "rb"))["closure"]}
pip = {f"{canon(i['metadata']['name'])}=={i['metadata']['version']}" for i in json.load(open(f"{w}/pip.json"))["install"]}
uv = {l.split()[0] for l in open(f"{w}/uv.txt") if re.match(r"[a-z0-9]", l)}
print(f"packages: envbuild {len(env)}, pip {len(pip)}, uv {len(uv)}")
print("envbuild vs uv:", "same" if env == uv else sorted(env ^ uv))
print("envbuild vs plain pip:", "same" if env == pip else sorted(env ^ pip))
PY
