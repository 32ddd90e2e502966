#!/bin/sh
# Times `envbuild render` of every spec in specs/ (from the spec, which resolves first, and from
# its lock) with the release binary. Target: under 10 ms wall per run.
#
# Three figures: the CLI re-rendering into an existing output directory (the common case: only
# changed files are written), the CLI rendering into a fresh directory (every file written
# atomically and fsynced, so the disk's fsync latency dominates), and the pipeline in-process
# (examples/render_bench.rs: no process start-up, no writes).
#
# Uses hyperfine when installed (`apt-get install hyperfine`), otherwise a loop timed with
# `date +%s%N` (mean over RUNS runs). Usage: bench/render.sh [RUNS]   (default 200)
set -eu
cd "$(dirname "$0")/.."
# The machine's load matters on small VMs (other builds share the cores): it is printed with the
# figures so a slow run can be told from a slow binary.
echo "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown), cores: $(nproc 2>/dev/null || echo ?)"
RUNS="${1:-200}"
cargo build --release --quiet
BIN="$PWD/target/release/envbuild"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "== CLI, re-render into an existing directory"
for dir in specs/*/; do
    name="$(basename "$dir")"
    for input in "$dir/envbuild.toml" "$dir/envbuild.lock"; do
        label="$name/$(basename "$input")"
        if command -v hyperfine >/dev/null 2>&1; then
            hyperfine --style basic --warmup 10 --runs "$RUNS" -N \
                --export-json "$OUT/h.json" \
                "$BIN render $input --out $OUT/r" >/dev/null 2>&1
            python3 - "$OUT/h.json" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"{sys.argv[2]:40s} mean {r['mean']*1e3:6.2f} ms  median {r['median']*1e3:6.2f} ms  min {r['min']*1e3:6.2f} ms  max {r['max']*1e3:6.2f} ms  (hyperfine, {len(r['times'])} runs)")
PY
        else
            "$BIN" render "$input" --out "$OUT/r" 2>/dev/null
            start="$(date +%s%N)"
            i=0
            while [ "$i" -lt "$RUNS" ]; do
                "$BIN" render "$input" --out "$OUT/r" 2>/dev/null
                i=$((i + 1))
            done
            end="$(date +%s%N)"
            echo "$label mean $(( (end - start) / RUNS / 1000 )) us (date loop, $RUNS runs)"
        fi
    done
done

echo "== CLI, render into a fresh directory (includes one fsync per file)"
if command -v hyperfine >/dev/null 2>&1; then
    hyperfine --style basic --warmup 3 --runs 30 -N --prepare "rm -rf $OUT/fresh" \
        "$BIN render specs/torch29-cu128/envbuild.lock --out $OUT/fresh" 2>&1 | grep -E "Time|Range"
fi

echo "== in-process (no start-up, no writes)"
cargo run --release --quiet --example render_bench
