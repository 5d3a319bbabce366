#!/usr/bin/env bash
# The main job: install, print a summary of the bundled real run and a generated token-level run,
# then open the quickstart notebook (RunView on that data) in JupyterLab.
# JupyterLab opens a working copy, notebooks/quickstart.local.ipynb (git-ignored, made from the tracked
# notebooks/quickstart.ipynb when missing), so the outputs it saves leave `git status` clean.
# Delete the working copy to start again from the tracked notebook.
# RLVIZ_NO_LAB=1 stops after the summary (for machines without a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh notebook
.venv/bin/python -m rlviz_widgets
[ "${RLVIZ_NO_LAB:-0}" = 1 ] && exit 0
notebook=notebooks/quickstart.local.ipynb
if [ ! -e "$notebook" ]; then
  cp notebooks/quickstart.ipynb "$notebook"
  echo "made $notebook from notebooks/quickstart.ipynb (your working copy: git ignores it)"
fi
root=()
[ "$(id -u)" = 0 ] && root=(--allow-root)  # containers often run as root, which JupyterLab refuses without this
exec .venv/bin/jupyter lab ${root[@]+"${root[@]}"} "$notebook" "$@"
