"""ChartWidget: a Vega-Lite spec rendered offline, its brushes synced both ways with Python."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import traitlets

from rlviz_widgets._charts import columns_payload
from rlviz_widgets.widgets._base import STATIC, RpcWidget, rpc
from rlviz_widgets.widgets._validate import clip, finite, finite_pair

MAX_PARAMS = 64  # selection params a chart holds (a spec has a few)
MAX_FIELDS = 16  # fields of one selection
MAX_VALUES = 10_000  # values of one field (a point selection's picks; an interval's two ends)
MAX_VALUE_CHARS = 1000  # of one text value


def check_selections(value):
    """Selections as a chart's front end sends them (a ValueError if they are not): a few, each well formed."""
    if not isinstance(value, dict) or len(value) > MAX_PARAMS:
        raise ValueError(f"selections: an object of at most {MAX_PARAMS} selections is needed")
    for param, sel in value.items():
        _check_selection(param, sel)
    return value


def _check_selection(param: str, sel) -> None:
    """One selection as Vega-Lite gives it: None, or {field: value or [values]} of JSON scalars, numbers finite."""
    if not isinstance(param, str) or len(param) > MAX_VALUE_CHARS:
        raise ValueError(f"a selection's name must be short text, not {clip(repr(param), 60)}")
    if sel is None:
        return
    if not isinstance(sel, dict) or len(sel) > MAX_FIELDS:
        raise ValueError(f"{clip(param, 60)}: None or an object of at most {MAX_FIELDS} fields is needed")
    for field, values in sel.items():
        name = f"{clip(param, 60)}.{clip(str(field), 60)}"
        values = values if isinstance(values, list) else [values]
        if len(values) > MAX_VALUES:
            raise ValueError(f"{name}: at most {MAX_VALUES} values; got {len(values)}")
        for v in values:
            if isinstance(v, str) and len(v) > MAX_VALUE_CHARS:
                raise ValueError(f"{name}: a text value of {len(v):,} characters")
            if not isinstance(v, (str, bool, type(None))):
                finite(v, name)


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

    _browser_writes = {"selections": check_selections}

    def __init__(self, spec: dict, datasets: Callable[[], dict[str, pd.DataFrame]], **kwargs):
        self._datasets = datasets
        super().__init__(spec=spec, **kwargs)

    def interval(self, param: str, field: str) -> tuple[float, float] | None:
        """The brushed [lo, hi] of a param over a field, or None."""
        value = (self.selections or {}).get(param) or {}
        ext = value.get(field)
        return finite_pair(ext, f"{param}.{field}") if ext else None

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
