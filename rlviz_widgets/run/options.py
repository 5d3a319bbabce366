"""OpenOptions: what ``open_run`` takes besides the logs, checked once, in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.readers import READERS
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN
from rlviz_widgets._mismatch import MismatchRule
from rlviz_widgets._sql import ident, literal
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
    mismatch_rule: MismatchRule | str | None = None

    def rule(self) -> MismatchRule:
        """The mismatch rule (the default one where none was given)."""
        return self.mismatch_rule or MismatchRule()

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
        object.__setattr__(self, "mismatch_rule", mismatch_rule_option(self.mismatch_rule))

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


def mismatch_rule_option(rule) -> MismatchRule | None:
    """``mismatch_rule`` checked: None (the default rule), a ``MismatchRule``, or a rule kind's name (its framework's
    default bounds)."""
    if rule is None or isinstance(rule, MismatchRule):
        return rule
    if isinstance(rule, str):
        return MismatchRule(rule)
    raise TypeError(f"mismatch_rule= takes a MismatchRule (or a rule kind's name), not {rule!r}")


def inverted_range_message(name: str, lo, hi) -> str:
    """What ``open_run`` and ``RunView.filter`` say of a (lo, hi) range whose first end is after its last."""
    what = "step" if name == "steps" else "end"
    return f"{name}=({lo}, {hi}): the first {what} is after the last"


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
        raise ValueError(inverted_range_message("steps", lo, hi))
    return (ends[0], ends[1])


def warn_unused(options: OpenOptions, run, rel, problems: list) -> None:
    """An OptionWarning for an option that kept nothing or changed nothing, once a run (``run``, its views ``rel``)
    is open: it looked like a log without samples, or a prompt without a system prompt (a marker misspelt)."""
    n = run.n_samples if rel.files.states else 0
    parts = rel.parts()
    lo, hi = options.steps
    if (lo is not None or hi is not None) and rel.files.states and not n:
        # only where the logs hold samples (an empty log, or a followed run before its first lines, is no news)
        held, first, last = rel.execute(f"SELECT count(*), min(step), max(step) FROM "
                                        f"({rel.samples_sql(parts)})").fetchall()[0] if parts else (0, 0, 0)
        if held or run.skipped_lines:
            span = f"; their steps run {first}..{last}" if held else ""
            problemsmod.warn_option(f"steps=({lo}, {hi}) keeps no sample of these logs ({held + run.skipped_lines}"
                                    f" samples of other steps{span})")
    mapped = getattr(rel.reader, "columns", {})  # columns=: common name -> the logs' field
    if mapped and rel.files.states:
        cols = [c for c in mapped if c in run.columns and c not in ("sample_id", "line")]
        listed = ", ".join(f"count({ident(c)})" for c in cols)
        counts = rel.execute(f"SELECT {listed} FROM _samples_raw").fetchall()[0] if cols and n else []
        empty = [c for c, k in zip(cols, counts) if not k]
        if "step" in mapped and not n and any(p.kind == "missing_step" for p in problems):
            empty.append("step")  # every record skipped for want of it (not kept out by a step range)
        bad_type = {p.message.split(" is ", 1)[0] for p in problems if p.kind == "wrong_type"}
        for c in empty:
            lost = "every record was skipped" if c == "step" else f"{c} is empty"
            if mapped[c] in bad_type:  # the field is there, its values are not of the kind (the LogWarning says)
                problemsmod.warn_option(f"columns= maps {c!r} to {mapped[c]!r}, whose values are all of the "
                                        f"wrong type (see the LogWarning): {lost}")
            else:
                problemsmod.warn_option(f"columns= maps {c!r} to {mapped[c]!r}, which no record holds a value "
                                        f"of: {lost} (a misspelt field?)")
    if rel.system_prompt_end and parts:
        src = f"{rel.source_sql(parts, None, [])} s"
        # the first prompt holding the marker ends the scan: only a marker no prompt holds reads them all
        if not rel.execute(f"SELECT 1 FROM {src} WHERE contains(s.prompt, {literal(rel.system_prompt_end)}) "
                           "LIMIT 1").fetchall():
            prompts = rel.execute(f"SELECT count(s.prompt) FROM {src}").fetchall()[0][0]
            if prompts:
                problemsmod.warn_option(f"system_prompt_end={rel.system_prompt_end!r} occurs in none of the "
                                        f"{prompts} prompts: they are kept whole")
