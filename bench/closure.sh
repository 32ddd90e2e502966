#!/usr/bin/env bash
# The closure lock against PyPI, side by side with uv on the same inputs and target (needs the
# network; run by hand, not in CI). Inputs: torch==2.14.1, einops>=0.8, numpy<2.5 for CPython
# 3.11 on x86_64 glibc 2.28 (uv's x86_64-manylinux_2_28). RUNS times each, alternating:
#   envbuild  `envbuild lock --upgrade` (a fresh resolution: uv for the target, then the lock)
#   uv        `uv pip compile --no-cache --no-build` with the same target, index and output
#             format (pylock.toml): the floor envbuild is measured against
#   relock    `envbuild lock` with nothing changed (the closure reused: no network, no engine)
# Prints the medians, the ratio envbuild/uv (the goal: at most 1.5), and whether the two chose
# the same closure: the same names, versions, wheel URLs and sha256s.
# UV names the uv binary (default: `uv` on PATH; the README installs uv 0.13.9). The release
# binary is built first.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/envbuild
UV=${UV:-$(command -v uv || true)}
RUNS=${RUNS:-5}
[ -x "$UV" ] || { echo "closure.sh: no uv (set UV=/path/to/uv)" >&2; exit 2; }
(cd "$ROOT" && cargo build --release --locked --quiet)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/envbuild.toml" <<'SPEC'
name = "bench-closure"
python = "3.11"
pytorch = "2.14.1"
torchvision = false
torchaudio = false
pip = ["einops>=0.8", "numpy<2.5"]

[target]
driver = "580.95.05"
gpus = ["H200"]
glibc = "2.28"

[lock]
# The bench times the resolution; the base image's digest is another question (the engine's).
base-digest = false
SPEC
printf 'torch==2.14.1\neinops>=0.8\nnumpy<2.5\n' > "$WORK/reqs.in"
mkdir -p "$WORK/uv"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>"$WORK/last.err" || { cat "$WORK/last.err" >&2; exit 1; }; e=$(date +%s.%N); echo "$e - $s" | bc; }
declare -A times
for i in $(seq "$RUNS"); do
  times[envbuild]+="$(t env ENVBUILD_UV="$UV" "$BIN" lock "$WORK/envbuild.toml" --upgrade) "
  times[uv]+="$(t "$UV" pip compile --quiet --no-config --no-cache --no-build --format pylock.toml \
      --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
      --default-index https://pypi.org/simple -o "$WORK/uv/pylock.toml" "$WORK/reqs.in") "
  times[relock]+="$(t env ENVBUILD_UV="$UV" "$BIN" lock "$WORK/envbuild.toml") "
  rm -f "$WORK/uv/pylock.toml.prev"; mv "$WORK/uv/pylock.toml" "$WORK/uv/pylock.toml.prev"
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in envbuild uv relock; do
  printf '%-9s median %8.3f s  (runs: %s)\n' "$k" "$(echo "${times[$k]}" | med)" "${times[$k]}"
done
e=$(echo "${times[envbuild]}" | med); u=$(echo "${times[uv]}" | med)
printf 'ratio envbuild/uv: %.2f (goal <= 1.5)\n' "$(echo "$e / $u" | bc -l)"
echo "machine: $(nproc) CPUs, $(uname -srm), $("$UV" --version)"
python3 - "$WORK" <<'PY'
import sys, tomllib
w = sys.argv[1]
env = {c["name"]: (c["version"], c["url"], c["sha256"])
       for c in tomllib.load(open(f"{w}/envbuild.lock", "rb"))["closure"]}
uv = {p["name"]: (p["version"], {(f["url"], f["hashes"]["sha256"]) for f in p["wheels"]})
      for p in tomllib.load(open(f"{w}/uv/pylock.toml.prev", "rb"))["packages"]}
print(f"packages: envbuild {len(env)}, uv {len(uv)}; uv lists more than one wheel for "
      f"{sum(len(f) > 1 for _, f in uv.values())}")
same = env.keys() == uv.keys() and all(
    env[n][0] == uv[n][0] and (env[n][1], env[n][2]) in uv[n][1] for n in env)
print("closures:", "identical (names, versions, and each wheel's URL and sha256)" if same else
      sorted(set(env) ^ set(uv)) or [(n, env[n], uv.get(n)) for n in env if env[n][0] != uv[n][0]])
PY
