"""The RunView's filters as values: (lo, hi) ranges checked and normalised, and the SQL condition they make."""

from __future__ import annotations

import bisect
import math

import traitlets

from rlviz_widgets.run.options import inverted_range_message

Range = tuple[float | None, float | None]


class _Unset:
    """``filter``'s default: the argument not given, that filter left as it is."""

    def __repr__(self) -> str:
        return "<unchanged>"


UNSET = _Unset()


def normalise_range(value, name: str) -> Range | None:
    """Normalise a (lo, hi) range; either end may be None; None clears it. A TraitError names ``name`` (as
    ``open_run`` does, an inverted range is refused)."""
    if value is None:
        return None
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise traitlets.TraitError(f"{name} must be a (lo, hi) pair or None; got {value!r}") from None
    try:
        lo = None if lo is None else float(lo)
        hi = None if hi is None else float(hi)
    except (TypeError, ValueError):
        raise traitlets.TraitError(f"{name}: each end must be a number or None; got {value!r}") from None
    if any(x is not None and math.isnan(x) for x in (lo, hi)):
        raise traitlets.TraitError(f"{name}: an end cannot be NaN; got {value!r} (None leaves an end open)")
    if lo is not None and hi is not None and lo > hi:
        raise traitlets.TraitError(inverted_range_message(name, *value))
    lo = None if lo == -math.inf else lo  # as open as None (and SQL has no literal for it)
    hi = None if hi == math.inf else hi
    return None if lo is None and hi is None else (lo, hi)


def condition(steps: Range | None, reward: Range | None, where: str) -> str:
    """The SQL condition over the samples of a step range, a reward range and a ``where`` (without the text
    search); "" for none."""
    conds = []
    for col, rng in (("step", steps), ("reward", reward)):
        if rng:
            lo, hi = rng
            if lo is not None:
                conds.append(f"{col} >= {lo!r}::DOUBLE" if math.isfinite(lo) else "false")  # only +inf left
            if hi is not None:
                conds.append(f"{col} <= {hi!r}::DOUBLE" if math.isfinite(hi) else "false")  # only -inf left
    if where.strip():
        conds.append(f"({where}\n)")  # a where ending in a -- comment must not swallow the ")"
    return " AND ".join(conds)


def steps_label(steps: Range | None) -> str:
    """The step filter in words, for the step slider while no single step is picked: "all steps", "steps 5–9"."""
    lo, hi = steps or (None, None)
    if lo is None and hi is None:
        return "all steps"
    if lo is None or hi is None:
        return f"steps ≤ {hi:g}" if lo is None else f"steps ≥ {lo:g}"
    return f"step {lo:g}" if lo == hi else f"steps {lo:g}–{hi:g}"


def step_by(values: list[int], current: float | None, delta: int) -> int | None:
    """The step after (``delta`` > 0) or before ``current`` in the sorted ``values`` (the first one when
    ``current`` is None), kept within them; None without steps."""
    if not values:
        return None
    current = values[0] - 1 if current is None else current
    i = bisect.bisect_right(values, current) if delta > 0 else bisect.bisect_left(values, current) - 1
    return values[max(0, min(len(values) - 1, i))]
