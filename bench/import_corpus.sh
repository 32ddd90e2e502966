#!/usr/bin/env bash
# The import corpus: every environment file in DIR (environment.yml/.yaml, requirements*.txt,
# conda lists) is imported with `envbuild import FILE --driver 535.104.05 --gpu A100` and, when
# that writes a spec, locked at table level (`envbuild lock --no-closure`: no network). Prints
# one row per file (import, lock, and the first refusal with its code and FILE:LINE), then the
# totals. The copies of real files stay outside the repository; docs/import.md has the figures.
# ENVBUILD names the binary (default: the debug build, built first).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:?usage: bench/import_corpus.sh DIR}
if [ -z "${ENVBUILD:-}" ]; then
    (cd "$ROOT" && cargo build --locked --quiet) || exit 2
    ENVBUILD=$ROOT/target/debug/envbuild
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
total=0 imported=0 locked=0
printf '| file | import | lock | first refusal |\n|---|---|---|---|\n'
for f in "$DIR"/*; do
    [ -f "$f" ] || continue
    total=$((total + 1))
    name=$(basename "$f")
    spec="$WORK/$total.toml"
    # The first error line (`error[CODE]: ...`) and its location line (`--> FILE:LINE:COL`).
    why() { grep -m1 -A1 '^error' "$1" | tr '\n' ' ' | sed -E 's/ +/ /g; s/\|/\\|/g' | cut -c1-220; }
    if "$ENVBUILD" import "$f" --out "$spec" --driver 535.104.05 --gpu A100 \
        >/dev/null 2>"$WORK/import.err"; then
        imported=$((imported + 1))
        notes=$(grep -c '^warning\[IMPORT_' "$WORK/import.err")
        if "$ENVBUILD" lock "$spec" --no-closure --out "$WORK/lock-$total" \
            >/dev/null 2>"$WORK/lock.err"; then
            locked=$((locked + 1))
            chosen=$(grep -m1 "^torch = " "$WORK/lock-$total/envbuild.lock" | sed -E "s/torch = \"(.*)\"/torch \1/")
            printf '| %s | yes (%s notes) | yes %s | - |\n' "$name" "$notes" "$chosen"
        else
            printf '| %s | yes (%s notes) | refused | %s |\n' "$name" "$notes" "$(why "$WORK/lock.err")"
        fi
    else
        printf '| %s | refused | - | %s |\n' "$name" "$(why "$WORK/import.err")"
    fi
done
printf '\n%s files: %s import, %s lock at table level (driver 535.104.05, A100)\n' \
    "$total" "$imported" "$locked"
