#!/usr/bin/env bash
# Install the uv release envbuild's closure lock is tested with (the README's quick start
# installs the same one) into ~/.local/bin, unless that uv is there already. Idempotent.
# Called by .ci/run before the tests.
set -euo pipefail

UV_VERSION=0.13.9
want="uv $UV_VERSION"
have="$("$HOME/.local/bin/uv" --version 2>/dev/null | cut -d' ' -f1,2 || true)"
if [ "$have" = "$want" ]; then
    echo "uv-up: $want is installed" >&2
    exit 0
fi
echo "uv-up: installing $want" >&2
# --user: no root needed; a Python that refuses user installs (PEP 668) gets its own venv.
if ! python3 -m pip install --user --quiet "uv==$UV_VERSION"; then
    python3 -m venv "$HOME/.local/share/envbuild-uv"
    "$HOME/.local/share/envbuild-uv/bin/pip" install --quiet "uv==$UV_VERSION"
    mkdir -p "$HOME/.local/bin"
    ln -sf "$HOME/.local/share/envbuild-uv/bin/uv" "$HOME/.local/bin/uv"
fi
"$HOME/.local/bin/uv" --version
