"""The RunView's controls as small Python objects (the view's front end draws them): a value checked as the browser's
control would take it, and buttons that can be clicked from Python."""

from __future__ import annotations

import math
from collections.abc import Callable

import traitlets


class Checked(traitlets.Any):
    """Any value, None included, goes through the owner's check (``Any`` lets None pass unchecked)."""

    allow_none = False


class Control(traitlets.HasTraits):
    """One control: ``value`` (observable, linkable), checked by ``check`` (a ``ValueError`` or ``TypeError`` for
    a value the control cannot take); ``visible`` says whether the view shows it."""

    value = Checked()
    visible = traitlets.Bool(True)

    def __init__(self, value, check: Callable, **kwargs):
        self._check = check
        super().__init__(value=value, **kwargs)

    @traitlets.validate("value")
    def _valid(self, proposal):
        try:
            return self._check(proposal["value"])
        except (TypeError, ValueError) as e:
            raise traitlets.TraitError(str(e)) from None

    def __repr__(self) -> str:
        return f"Control(value={self.value!r})"


class Button:
    """A button of the view: ``click()`` runs what ``on_click`` registered, as a click in the browser does."""

    def __init__(self, description: str):
        self.description = description
        self._handlers: list[Callable] = []

    def on_click(self, handler: Callable[[Button], None]) -> None:
        self._handlers.append(handler)

    def click(self) -> None:
        for handler in self._handlers:
            handler(self)

    def __repr__(self) -> str:
        return f"Button({self.description!r})"


def number_in(lo: float, hi: float) -> Callable[[object], float]:
    """A check: a finite number from ``lo`` to ``hi``."""
    def check(value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError(f"a number from {lo:g} to {hi:g} is needed, not {value!r:.60}")
        if not lo <= value <= hi:
            raise ValueError(f"{value:g} is not between {lo:g} and {hi:g}")
        return float(value)
    return check


def boolean(value) -> bool:
    """A check: True or False."""
    if not isinstance(value, bool):
        raise TypeError(f"True or False is needed, not {value!r:.60}")
    return value


def one_of(*options) -> Callable[[object], object]:
    """A check: one of ``options``."""
    def check(value):
        if isinstance(value, bool) or value not in options:
            raise ValueError(f"one of {', '.join(map(repr, options))} is needed, not {value!r:.60}")
        return value
    return check


class Tabs(Control):
    """The view's tabs: ``value`` is the tab shown (0: samples, 1: GRPO groups); ``selected_index`` is the same,
    as ipywidgets' ``Tab`` names it."""

    def __init__(self):
        super().__init__(0, one_of(0, 1))

    @property
    def selected_index(self) -> int:
        return self.value

    @selected_index.setter
    def selected_index(self, index: int) -> None:
        self.value = index
