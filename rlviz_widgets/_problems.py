"""Problems found while reading logs: each one located (file, line) and counted, never silent."""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from collections import Counter
from dataclasses import asdict, dataclass

import pandas as pd

PROBLEM_COLUMNS = ["file", "line", "kind", "message"]

_PACKAGE_DIR = os.path.dirname(__file__) + os.sep  # as the package's frames spell their files
# where installed libraries and the standard library live: a frame there is no user's line either
_LIBRARY_DIRS = tuple({os.path.join(p, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")
                       if (p := sysconfig.get_paths().get(k))})


@dataclass(frozen=True)
class Problem:
    """One bad thing in one line of one file."""

    file: str
    line: int
    kind: str
    message: str


def short(v, n: int = 40) -> str:
    """A value as text, cut for a message."""
    s = str(v)
    return s if len(s) <= n else s[:n] + "…"


class LogWarning(UserWarning):
    """Issued once per open or refresh when some lines had problems."""


def problems_frame(problems: list[Problem]) -> pd.DataFrame:
    """The problems as a DataFrame with columns file, line, kind, message."""
    if not problems:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c == "line" else "object") for c in PROBLEM_COLUMNS})
    return pd.DataFrame([asdict(p) for p in problems], columns=PROBLEM_COLUMNS)


SEE_EVERY_ONE = "See run.problems for every one."  # where a notebook's user finds them (the CLI says its own)


def problems_text(frame: pd.DataFrame, width: int = 100) -> str:
    """A :func:`problems_frame` as a plain-text table for a terminal, each message cut to ``width`` characters."""
    if not len(frame):
        return "no problems"
    rows = [PROBLEM_COLUMNS] + [[str(r.file), str(r.line), str(r.kind), short(r.message, width).replace("\n", " ")]
                                for r in frame.itertuples(index=False)]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join("  ".join([*(v.ljust(w) for v, w in zip(row, widths)), row[3]]).rstrip() for row in rows)


def summarize(problems: list[Problem], limit: int = 3, see: str = SEE_EVERY_ONE) -> str:
    """One readable paragraph: counts per kind and the first few locations, then ``see`` (where the rest are)."""
    kinds = Counter(p.kind for p in problems)
    files = {p.file for p in problems}
    head = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in kinds.most_common())
    where = "; ".join(f"{p.file}:{p.line} {p.message}" for p in problems[:limit])
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return (f"{len(problems)} problem(s) in {len(files)} file(s): {head}. "
            f"First: {where}{more}. {see}")


def warn(problems: list[Problem]) -> None:
    """Emit a single LogWarning summing up the problems, if any, located at the first caller outside this package
    (the user's ``open_run`` or ``refresh`` line, not ours)."""
    if problems:
        warnings.warn(summarize(problems), LogWarning, stacklevel=_outside_level())


class OptionWarning(UserWarning):
    """An option of ``open_run`` that changed nothing or kept nothing (a marker no prompt holds, say)."""


def warn_option(message: str) -> None:
    """Emit an OptionWarning at the first caller outside this package (as ``warn``)."""
    warnings.warn(message, OptionWarning, stacklevel=_outside_level())


def note(message: str) -> None:
    """Say something the user should know once (a UserWarning at the first caller outside this package)."""
    warnings.warn(message, UserWarning, stacklevel=_outside_level())


def _outside_level() -> int:
    """``stacklevel`` for a ``warnings.warn`` in ``warn``: the first frame whose file is not in this package, if it
    is the user's; else (a refresh from an event loop or a widget's callback) warn's caller in this package."""
    frame, level = sys._getframe(2), 2  # noqa: SLF001 - CPython's frame API, no public spelling; 2: warn's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    if frame is None or frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        return 2
    return level
