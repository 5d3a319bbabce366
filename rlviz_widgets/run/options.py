"""OpenOptions: what ``open_run`` takes besides the logs, checked once, in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlviz_widgets._ingest.readers import READERS
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN
from rlviz_widgets._store import cache as cachemod

_INT64 = np.iinfo(np.int64)  # steps are 64-bit integers: a farther end is as good as open; so is a cap past them


@dataclass(frozen=True, kw_only=True)
class OpenOptions:
    """The options of ``open_run`` (see there), checked when made: ``max_samples_per_step`` becomes an int or None,
    ``steps`` a (first, last) pair whose open ends are None. ``RunSet.open``, ``RunView`` and the command line hand
    one of these on instead of the ten keywords."""

    format: str = "auto"
    columns: dict[str, str] | None = None
    tokenizer: object = None
    pad_token: str | None = DEFAULT_PAD_TOKEN
    system_prompt_end: str | None = None
    max_samples_per_step: int | None = None
    steps: tuple[int | None, int | None] | None = None
    cache_dir: str | Path | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("pad_token", "system_prompt_end"):
            text = getattr(self, name)
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{name}= takes text (or None), not {text!r}")
        if self.format != "auto" and self.format not in READERS:
            raise ValueError(f"unknown format {self.format!r}; known: auto, {', '.join(READERS)}")
        # frozen: the checked values are set once, here
        object.__setattr__(self, "max_samples_per_step", _cap_option(self.max_samples_per_step))
        object.__setattr__(self, "steps", _steps_option(self.steps))

    def cache_root(self) -> Path:
        """The cache dir as an absolute folder (default: ``$RLVIZ_CACHE_DIR``, else the user cache dir)."""
        root = Path(self.cache_dir).expanduser().resolve() if self.cache_dir else cachemod.default_cache_root()
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(f"the cache dir {root} is a file: pass cache_dir= a folder")
        return root

    def whole_steps(self) -> tuple[int | None, int | None]:
        """The step range as the first and last whole step in it, None for an open end: (0.5, 1.5) is steps 1..1.
        A range past every 64-bit step is 1..0: no step is in it."""
        lo, hi = self.steps
        if (lo is not None and lo > _INT64.max) or (hi is not None and hi < _INT64.min):
            return 1, 0
        lo = None if lo is None or math.ceil(lo) <= _INT64.min else math.ceil(lo)
        hi = None if hi is None or math.floor(hi) >= _INT64.max else math.floor(hi)
        return lo, hi

    def cap(self) -> int | None:
        """The per-step cap a reader can skip lines by (None: none, or one past every 64-bit step count)."""
        cap = self.max_samples_per_step
        return None if cap is None or cap >= _INT64.max else cap


def _number(x) -> float | None:
    """``x`` as a float if it is a number (numpy's, Decimal, Fraction...), else None (text and booleans are not)."""
    if isinstance(x, (str, bytes, bool, np.bool_)):
        return None
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return None


def _cap_option(cap) -> int | None:
    """``max_samples_per_step`` checked: None or a whole number of at least 1 (2.0 and 1e3 are whole numbers)."""
    if cap is None:
        return None
    value = _number(cap)
    if value is None or not value.is_integer():
        raise TypeError(f"max_samples_per_step must be a whole number or None, not {cap!r}")
    if cap < 1:
        raise ValueError(f"max_samples_per_step must be at least 1, not {cap}")
    return int(cap)


def _steps_option(steps) -> tuple[float | None, float | None]:
    """``steps`` checked: None or (lo, hi), each a number or None (an open end; so is -inf first or +inf last; +inf
    first or -inf last is kept: no step is in that range), lo <= hi."""
    if steps is None:
        return (None, None)
    try:
        if isinstance(steps, (str, bytes)):
            raise TypeError
        lo, hi = steps
    except (TypeError, ValueError):
        raise ValueError(f"steps must be (first, last), either end None for open, not {steps!r}") from None
    ends = []
    for end, open_end in ((lo, -math.inf), (hi, math.inf)):
        value = None if end is None else _number(end)
        if end is not None and (value is None or math.isnan(value)):
            raise ValueError(f"steps=(first, last): each end a number or None, not {end!r}")
        ends.append(None if value is None or value == open_end else end)
    if lo is not None and hi is not None and float(lo) > float(hi):
        raise ValueError(f"steps=({lo}, {hi}): the first step is after the last")
    return (ends[0], ends[1])
