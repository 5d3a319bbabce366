"""ChartWidget: a Vega-Lite spec rendered offline, its brushes synced both ways with Python."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import traitlets

from rlviz_widgets._charts import columns_payload
from rlviz_widgets.widgets._base import STATIC, RpcWidget, rpc


class ChartWidget(RpcWidget):
    """Vega-Lite (bundled, no CDN) over named datasets pulled from Python; brushes are traits."""

    _esm = STATIC / "charts.js"
    _front_end = "charts"

    spec = traitlets.Dict().tag(sync=True)
    """The Vega-Lite spec; its data are named datasets, sent separately."""

    selections = traitlets.Dict().tag(sync=True)
    """Brush values by param name, e.g. {"steps_brush": {"step": [10, 40]}}; None clears one."""

    height = traitlets.Int(0).tag(sync=True)
    """Height in px (0: the spec's own)."""

    def __init__(self, spec: dict, datasets: Callable[[], dict[str, pd.DataFrame]], **kwargs):
        self._datasets = datasets
        super().__init__(spec=spec, **kwargs)

    def interval(self, param: str, field: str) -> tuple[float, float] | None:
        """The brushed [lo, hi] of a param over a field, or None."""
        value = (self.selections or {}).get(param) or {}
        ext = value.get(field)
        return (float(min(ext)), float(max(ext))) if ext and len(ext) == 2 else None

    def set_interval(self, param: str, field: str, extent: tuple[float, float] | None) -> None:
        """Move (or clear, with None) a brush from Python. An extent that is not two finite numbers clears it: NaN
        and infinities are no JSON (Jupyter's messages refuse them)."""
        sel = dict(self.selections or {})
        ext = None if extent is None else [float(extent[0]), float(extent[1])]
        sel[param] = {field: ext} if ext is not None and all(map(math.isfinite, ext)) else None
        if sel != self.selections:
            self.selections = sel

    @rpc
    def data(self):
        frames = self._datasets()
        return {"generation": self.generation, "datasets": {k: columns_payload(v) for k, v in frames.items()}}
