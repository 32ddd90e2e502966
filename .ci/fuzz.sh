#!/usr/bin/env bash
# Coverage-guided fuzzing (docs/security.md#fuzzing): builds the fuzz crate (fuzz/, its own
# workspace and Cargo.lock) with cargo-fuzz and runs each target for a bounded time from its
# committed corpus, failing on the first crash, panic, timeout or memory blow-up; the input is
# left in fuzz/artifacts/TARGET/. Called by .ci/run after the tests.
#
#   bash .ci/fuzz.sh                  # every target, FUZZ_SECONDS (20) each
#   FUZZ_SECONDS=300 bash .ci/fuzz.sh marker lock
#
# cargo-fuzz needs nightly flags; on a stable toolchain RUSTC_BOOTSTRAP=1 unlocks them. The
# build has no sanitizer (envbuild is safe Rust: what fuzzing finds here is panics, overflows,
# hangs and unbounded memory, which debug assertions and libFuzzer's limits catch).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds="${FUZZ_SECONDS:-20}"
export RUSTC_BOOTSTRAP=1 CARGO_TERM_COLOR=never

if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# cargo-fuzz has no --locked: check that fuzz/Cargo.lock is current first, so the build uses
# exactly the committed versions.
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

# `--dev`: an unoptimised build, minutes instead of a quarter hour on two cores; a bounded CI
# run needs coverage, not speed (debug assertions are on in it).
flags=(--dev --sanitizer none)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
cargo fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
    echo "== fuzz $t (${seconds}s)"
    # New inputs go to the scratch folder (first): the committed corpus is only read.
    mkdir -p "$scratch/$t"
    if ! cargo fuzz run "${flags[@]}" "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        2>"$scratch/$t.log"; then
        tail -n 40 "$scratch/$t.log"
        failed+=("$t")
    else
        grep -E '^(stat::number_of_executed_units|Done)' "$scratch/$t.log" || true
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
