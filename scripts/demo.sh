#!/usr/bin/env bash
# The main job: install, print a summary of the bundled real run and a generated token-level run,
# then open notebooks/quickstart.ipynb (RunView on that data) in JupyterLab.
# RLVIZ_NO_LAB=1 stops after the summary (for machines without a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh notebook
.venv/bin/python -m rlviz_widgets
[ "${RLVIZ_NO_LAB:-0}" = 1 ] && exit 0
root=()
[ "$(id -u)" = 0 ] && root=(--allow-root)  # containers often run as root, which JupyterLab refuses without this
exec .venv/bin/jupyter lab ${root[@]+"${root[@]}"} notebooks/quickstart.ipynb "$@"
