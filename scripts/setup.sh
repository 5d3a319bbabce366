#!/usr/bin/env bash
# Creates .venv and installs rlviz_widgets into it (editable, with its JS front ends built by npm + esbuild).
# Usage: scripts/setup.sh [extra]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extra=${1:-notebook}
command -v npm >/dev/null || { echo "npm (Node.js) is needed to build the front ends" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$extra]"
