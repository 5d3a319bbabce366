#!/usr/bin/env bash
# Installs everything the tests need (venv, package + JS build, Chromium) and runs every test:
# ruff, vitest (front-end logic), pytest (data layer, widget handlers, real JupyterLab in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/lib/chromium/chromium ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
scripts/setup.sh test
(cd js && npm ci --no-audit --no-fund --loglevel=error && npx tsc --noEmit && npx vitest run)
.venv/bin/ruff check rlviz_widgets tests benchmarks hatch_build.py
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
