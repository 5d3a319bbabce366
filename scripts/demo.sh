#!/usr/bin/env bash
# The main job: install, then print a summary of the bundled real run and of a generated token-level run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh notebook
.venv/bin/python -m rlviz_widgets "$@"
