#!/usr/bin/env bash
# The tests of the data layer and the widget handlers on the oldest Python the README names, 3.10, where pip
# installs DuckDB 1.5 (2.0 has no 3.10 wheel) and older pandas and pyarrow. Run where a Python 3.10 is found
# (RLVIZ_PY310, pyenv's, or python3.10 on the PATH); skipped with a word otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

find_py310() {
    local root c
    root=$(pyenv root 2>/dev/null || true)
    for c in "${RLVIZ_PY310:-}" ${root:+"$root"/versions/3.10*/bin/python} python3.10; do
        if [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
            echo "$c"
            return
        fi
    done
}

py=$(find_py310)
if [ -z "$py" ]; then
    echo "test_py310.sh: no Python 3.10 on this machine: skipped"
    exit 0
fi
echo "test_py310.sh: $("$py" --version) at $py"
rm -rf .venv310
"$py" -m venv .venv310
.venv310/bin/python -m pip install -q --upgrade pip
.venv310/bin/python -m pip install -q . pytest hypothesis
.venv310/bin/python -c 'import duckdb, pandas, pyarrow; print("duckdb", duckdb.__version__, "pandas", pandas.__version__, "pyarrow", pyarrow.__version__)'
# the browser, notebook, benchmark and packaging tests need the full set-up: they run on the main Python
.venv310/bin/python -m pytest -q -p no:cacheprovider tests --ignore=tests/browser --ignore=tests/widgets/test_notebook.py \
    --ignore=tests/test_packaging.py --ignore=tests/benchmarks/test_bench_runview.py --ignore=tests/benchmarks/test_bench_widgets.py
