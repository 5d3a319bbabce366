"""Checks of what a widget's front end sends: numbers finite and in range, text valid and short when echoed.

Each raises ``ValueError`` naming what it checked; callers turn that into the widget's error line.
"""

from __future__ import annotations

import math
from numbers import Real

MAX_ECHO_CHARS = 300  # of sent input quoted back in an error (a 10 MB name made a 10 MB trait and reply)
JS_SAFE_INT = 2**53  # integers past it name other rows once in the browser (its numbers are doubles)


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def valid_text(text: str) -> str:
    """``text`` with lone surrogates (JavaScript strings may hold them, UTF-8 cannot) as U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def finite(value, name: str) -> float:
    """``value`` as a finite float: a number (not a bool) that a double holds."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name}: a number is needed, not {clip(repr(value), 60)}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{name}: {clip(repr(value), 60)} is too large") from None
    if not math.isfinite(x):
        raise ValueError(f"{name}: {x} is not a finite number")
    return x


def whole(value, name: str, lo: int = -JS_SAFE_INT, hi: int = JS_SAFE_INT) -> int:
    """``value`` as an int in [lo, hi]: an integer (not a bool) the browser holds exactly."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: an integer is needed, not {clip(repr(value), 60)}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: {clip(repr(value), 60)} is out of range [{lo}, {hi}]")
    return int(value)


def whole_list(values, name: str, most: int) -> list[int]:
    """``values`` as a list of at most ``most`` such integers."""
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"{name}: a list of integers is needed, not {type(values).__name__}")
    if len(values) > most:
        raise ValueError(f"{name}: at most {most} values; got {len(values)}")
    return [whole(v, name) for v in values]


def finite_pair(value, name: str) -> tuple[float, float]:
    """A brush's extent: two finite numbers, ascending."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name}: a [lo, hi] pair is needed, not {clip(repr(value), 60)}")
    lo, hi = (finite(v, name) for v in value)
    return (lo, hi) if lo <= hi else (hi, lo)
