"""SQL text shared by every layer: quoting names and values, and the aggregates that never raise."""

from __future__ import annotations

import numpy as np


def ident(name: str) -> str:
    """A column or table name as a DuckDB identifier: double quotes, inner quotes doubled."""
    return '"' + str(name).replace('"', '""') + '"'


def literal(text: str) -> str:
    """A string as a DuckDB string literal: single quotes, inner quotes doubled."""
    return "'" + str(text).replace("'", "''") + "'"


def bin_count(bins) -> int:
    """``bins`` as a whole number of bins, from 1 to 2**31 - 1 (2.5 bins is an error, not 2)."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise TypeError(f"bins must be a whole number, not {bins!r}")
    if not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be from 1 to {MAX_BINS}, not {bins}")
    return int(bins)


MAX_BINS = 2**31 - 1  # a bin number is an INTEGER


def std_sql(x: str) -> str:
    """SQL: the population standard deviation of ``x`` that never raises (DuckDB before 2.0 raises on a result
    that is not finite): NaN where ``x`` holds an infinity, as DuckDB 2.0 gives, and values past 1e145 scaled by
    2**-600 first (exact), so that values such as ±1e308 have a finite spread instead of an overflow."""
    return (f"CASE WHEN bool_or(NOT isfinite({x})) THEN 'nan'::DOUBLE "
            f"WHEN max(abs({x})) < 1e145 THEN stddev_pop({x}) FILTER (WHERE abs({x}) < 1e145) "
            f"ELSE stddev_pop({x} * {2.0 ** -600!r}) FILTER (WHERE isfinite({x})) * {2.0 ** 600!r} END")


def mean_sql(x: str) -> str:
    """SQL: the mean of ``x``, where values past 1e290 are scaled by 2**-600 first (exact), so that the mean of
    finite values such as -1e308, -1e308, 1 is finite (their sum overflows a double)."""
    return (f"CASE WHEN max(abs({x})) FILTER (WHERE isfinite({x})) < 1e290 THEN avg({x}) "
            f"ELSE avg({x} * {2.0 ** -600!r}) * {2.0 ** 600!r} END")
