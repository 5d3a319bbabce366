"""StepSlider: a slider over a run's real step values whose synced state does not grow with the steps."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import ipywidgets as W
import traitlets


class StepSlider(W.HBox):
    """A slider over the step values (uneven gaps kept); the browser gets an index and one label.

    ipywidgets' ``SelectionSlider`` syncs every option's label: 170 KB at 20,000 steps, sent again on each poll
    of a run still training. Here the browser holds an ``IntSlider`` over positions and the step shown beside it.
    """

    value = traitlets.Int(None, allow_none=True, help="The step shown (None while the run has no steps).")

    def __init__(self, values: Sequence[int], description: str = "step", width: str = "420px"):
        self._values: list[int] = []
        self._slider = W.IntSlider(min=0, max=0, readout=False, continuous_update=False, description=description,
                                   layout=W.Layout(flex="1 1 auto"))
        self._label = W.Label(layout=W.Layout(min_width="4em"))
        super().__init__([self._slider, self._label], layout=W.Layout(width=width, align_items="center"))
        self._slider.observe(self._on_index, "value")
        self.set_values(values)

    @property
    def values(self) -> tuple[int, ...]:
        """The steps the slider moves over, ascending."""
        return tuple(self._values)

    def set_values(self, values: Sequence[int]) -> None:
        """Move over new step values; the step shown stays if it is still one of them, else the first is shown."""
        self._values = [int(v) for v in values]
        keep = self.value if self._index(self.value) is not None else None
        self._slider.disabled = not self._values
        self._slider.max = max(len(self._values) - 1, 0)
        self.value = keep if keep is not None else (self._values[0] if self._values else None)
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
        if step is None and self._values:
            raise traitlets.TraitError("a step is needed: the run has steps")
        return step

    @traitlets.observe("value")
    def _show(self, _change=None) -> None:
        i = self._index(self.value)
        if i is not None and self._slider.value != i:
            self._slider.value = i
        self._label.value = "-" if self.value is None else str(self.value)

    def _on_index(self, change) -> None:
        if self._values and 0 <= change["new"] < len(self._values):
            self.value = self._values[change["new"]]
