"""StepSlider: a slider over a run's real step values whose synced state does not grow with the steps."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import ipywidgets as W
import traitlets

from rlviz_widgets.widgets._base import BrowserState


class _Slider(BrowserState, W.IntSlider):
    """The slider itself: its view sets only its value (ipywidgets would take min, max or disabled too)."""

    _browser_writes = {"value": None}


class StepSlider(W.HBox):
    """A slider over the step values (uneven gaps kept); the browser gets a few numbers, never the list.

    ipywidgets' ``SelectionSlider`` syncs every option's label: 170 KB at 20,000 steps, sent again on each poll
    of a run still training. Steps evenly spaced (the usual log) are an ``IntSlider`` over the steps themselves,
    with its live readout; uneven ones an ``IntSlider`` over positions with the step shown beside it.
    """

    value = traitlets.Int(None, allow_none=True,
                          help="The step picked; None while none is (every step shown, or a range: ``idle`` says).")

    idle = traitlets.Unicode("all steps", help="What the slider says while no single step is picked.")

    def __init__(self, values: Sequence[int], description: str = "step", width: str = "420px"):
        self._values: list[int] = []
        self._by_value = True  # the slider's numbers are the steps themselves (else positions in _values)
        self._moving = False  # the slider is being set up: its own changes are not the user's
        self._slider = _Slider(min=0, max=0, continuous_update=False, description=description,
                                   layout=W.Layout(flex="1 1 auto"))
        self._label = W.Label(layout=W.Layout(min_width="4em"))
        super().__init__([self._slider, self._label], layout=W.Layout(width=width, align_items="center"))
        self._slider.observe(self._on_slider, "value")
        self.set_values(values)

    @property
    def values(self) -> tuple[int, ...]:
        """The steps the slider moves over, ascending."""
        return tuple(self._values)

    def set_values(self, values: Sequence[int]) -> None:
        """Move over new step values; the step picked stays if it is still one of them, else none is."""
        self._values = [int(v) for v in values]
        keep = self.value if self._index(self.value) is not None else None
        gaps = {b - a for a, b in zip(self._values, self._values[1:])}
        self._by_value = len(gaps) <= 1
        if self._by_value:
            lo, hi, step = (self._values[0], self._values[-1], gaps.pop() if gaps else 1) if self._values else (0, 0, 1)
        else:
            lo, hi, step = 0, len(self._values) - 1, 1
        self._moving = True
        try:
            s = self._slider
            with s.hold_trait_notifications():
                if lo > s.max:  # min never above max, whichever way the range moved
                    s.max, s.min = hi, lo
                else:
                    s.min, s.max = lo, hi
                s.step, s.disabled = step, not self._values
        finally:
            self._moving = False
        self.value = keep
        self._show()

    def _index(self, step: int | None) -> int | None:
        if step is None:
            return None
        i = bisect.bisect_left(self._values, step)
        return i if i < len(self._values) and self._values[i] == step else None

    @traitlets.validate("value")
    def _valid(self, proposal):
        step = proposal["value"]
        if step is not None and self._index(step) is None:
            raise traitlets.TraitError(f"{step!r} is not one of the run's steps")
        return step

    @traitlets.observe("value", "idle")
    def _show(self, _change=None) -> None:
        """A step picked: the slider at it, read by its readout (or, over positions, the label beside it). None:
        the handle at the first step and ``idle`` beside it, no number (a readout would read the first step)."""
        i = self._index(self.value)
        at = (self.value if self._by_value else i) if i is not None else self._slider.min
        self._moving = True
        try:
            with self._slider.hold_trait_notifications():
                self._slider.value = at
                self._slider.readout = self._by_value and i is not None
        finally:
            self._moving = False
        self._label.value = self.idle if i is None else str(self.value)
        self._label.layout.display = "none" if self._by_value and i is not None else None

    def _on_slider(self, change) -> None:
        if self._moving or not self._values:
            return
        v = int(change["new"])
        if not self._by_value:
            self.value = self._values[min(max(v, 0), len(self._values) - 1)]
            return
        i = bisect.bisect_left(self._values, v)  # a number typed into the readout: the nearest step
        near = [self._values[k] for k in (i - 1, i) if 0 <= k < len(self._values)]
        self.value = min(near, key=lambda s: abs(s - v))
