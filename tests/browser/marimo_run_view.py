"""A marimo notebook showing a RunView of the bundled demo run, bare and through mo.ui.anywidget.

tests/browser/test_marimo.py runs it with `marimo run`; each view writes what the kernel holds (its filters,
``len(view.filtered)``, the picked ids) to RLVIZ_MARIMO_OUT/<name>.json whenever they change."""

import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import json
    import os
    from pathlib import Path

    import marimo as mo

    import rlviz_widgets as rw
    from rlviz_widgets.demo import demo_log

    out = Path(os.environ.get("RLVIZ_MARIMO_OUT", "."))
    logs = demo_log(out / "demo")

    def report(view, name):
        """Writes the kernel's view of ``view`` to <out>/<name>.json, now and after every change."""
        def write(_change=None):
            state = {"steps": view.steps, "filtered": len(view.filtered), "selected_ids": view.selected_ids,
                     "strip": view.strip.sample_ids}
            (out / f"{name}.json").write_text(json.dumps(state))
        view.observe(write, ["filtered", "selected_ids"])
        write()

    bare = rw.RunView(logs, progress=False)
    wrapped = rw.RunView(bare.run)
    report(bare, "bare")
    report(wrapped, "wrapped")
    return bare, mo, wrapped


@app.cell
def _(mo):
    mo.md("## bare")
    return


@app.cell
def _(bare):
    bare  # noqa: B018 - marimo shows a cell's last expression
    return


@app.cell
def _(mo, wrapped):
    mo.vstack([mo.md("## wrapped"), mo.ui.anywidget(wrapped)])
    return


if __name__ == "__main__":
    app.run()
