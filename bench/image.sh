#!/usr/bin/env bash
# Benchmark `envbuild image` against the Docker CLI, side by side in one run:
#   - the no-op `envbuild image` (lock unchanged, image present) vs `docker build` of the same
#     context with a full cache, as a ratio (target: envbuild <= 1/5 of docker build);
#   - the build context envbuild sends vs the Dockerfile's directory sent as a whole.
# Needs a Docker engine (see .ci/docker-up.sh) and the docker CLI. Release build.
# Usage: bench/image.sh [OUT.json]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/bench-image.json}"
mkdir -p "$(dirname "$out")"
# Both benchmarks: the engine side on a fixture render, and the real CLI on a rendered spec.
ENVBUILD_BENCH_OUT="$(realpath -m "$out")" \
    cargo test --release --test docker bench_ -- --ignored --nocapture --test-threads 1
echo "results: $out and ${out%.json}.cli.json"
