"""Per-sample reductions of the mismatch and entropy fields (issue 32), computed once as a part is written.

Over trained tokens only, non-finite values left out (the tests hold them to one SQL query over the token rows and
to numpy): mean and max |log ratio| (trainer − inference), its sum and count (the sequence
ratios: TRL's product, the geometric mean), mean mismatch KL (the log's own where finite, else k3), mean entropy,
and the tokens the log marks masked and unmasked. Nothing that depends on the masking rule: the run works that out
per rule from these (``_mismatch.rule_sample_sql``). A part without the fields gets none of the columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.metrics import trained_mask

FIGURES = {"mismatch_log_ratio_abs_mean": pa.float64(), "mismatch_log_ratio_abs_max": pa.float64(),
           "mismatch_log_ratio_sum": pa.float64(), "mismatch_tokens": pa.int32(), "mismatch_kl_mean": pa.float64(),
           "sequence_ratio": pa.float64(), "entropy_mean": pa.float64(), "logged_masked_tokens": pa.int32(),
           "logged_unmasked_tokens": pa.int32()}


class _Flat:
    """A list column flattened: its values (``take``: NaN for nulls and non-finite numbers; booleans as 0/1, -1 for
    null), each value's row and position, and whether it is a trained token."""

    def __init__(self, col, trained: tuple | None, boolean: bool = False, layouts: dict | None = None):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if arr.offset:
            arr = pa.concat_arrays([arr])
        offsets = arr.offsets.to_numpy()
        values = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
        self.offsets = offsets - offsets[0]
        key = self.offsets.tobytes()
        layout = (layouts or {}).get(key)
        if layout is None:  # rows and positions, worked out once for the lists of one shape (a part's are alike)
            counts = np.diff(self.offsets)
            row = np.repeat(np.arange(len(counts)), counts)
            pos = np.arange(len(values)) - self.offsets[:-1][row]
            layout = (row, pos, _trained_at(row, pos, trained))
            if layouts is not None:
                layouts[key] = layout
        self.row, self.pos, self.trained = layout
        if boolean:
            self.values = np.where(values.is_null().to_numpy(zero_copy_only=False), -1,
                                   values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.int8))
        else:
            self.values = values.to_numpy(zero_copy_only=False)  # (nulls: NaN) as logged, widened when taken

    def take(self, at: np.ndarray) -> np.ndarray:
        """The values at ``at`` as float64, NaN where not finite (only trained tokens are taken: the rest is half a
        packed sequence)."""
        v = self.values[at].astype(np.float64)
        v[~np.isfinite(v)] = np.nan
        return v


def _trained_at(row: np.ndarray, pos: np.ndarray, trained: tuple | None) -> np.ndarray:
    """Whether each (row, position) is a trained token: the mask's value there (none past its end); a row without a
    mask (a log of response tokens) is trained whole."""
    if trained is None:
        return np.ones(len(row), bool)
    tvals, toffs, has = trained
    inside = pos < np.diff(toffs)[row]
    out = ~has[row]
    at = np.flatnonzero(inside & has[row])
    out[at] = tvals[toffs[:-1][row[at]] + pos[at]]
    return out


def _paired(a: _Flat, b: _Flat) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, positions, where in a's values, where in b's) of the positions both lists have (each row's first
    min(len) of the two)."""
    if np.array_equal(a.offsets, b.offsets):
        at = np.arange(len(a.row))
        return a.row, a.pos, at, at
    m = np.minimum(np.diff(a.offsets), np.diff(b.offsets))
    row = np.repeat(np.arange(len(m)), m)
    pos = np.arange(int(m.sum())) - np.concatenate([[0], np.cumsum(m)])[:-1][row]
    return row, pos, a.offsets[:-1][row] + pos, b.offsets[:-1][row] + pos


def _sum_count(x: np.ndarray, row: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    ok = ~np.isnan(x)
    return (np.bincount(row[ok], weights=x[ok], minlength=n), np.bincount(row[ok], minlength=n))


def _mean(x: np.ndarray, row: np.ndarray, n: int) -> np.ndarray:
    s, k = _sum_count(x, row, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k > 0, s / np.maximum(k, 1), np.nan)


def _max(x: np.ndarray, row: np.ndarray, n: int) -> np.ndarray:
    """Each row's max of ``x`` (NaN: none), for values listed row by row."""
    out = np.full(n, np.nan)
    if not len(x):
        return out
    starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
    top = np.fmax.reduceat(x, starts)  # (fmax: NaN only where every value is)
    out[row[starts]] = top
    return out


def per_sample(table: pa.Table) -> dict[str, pa.Array]:
    """The ``FIGURES`` a part's mismatch fields give (only those its fields allow)."""
    n = table.num_rows
    mask = trained_mask(table)
    layouts: dict = {}
    have = {c for c in ("inference_logprob", "trainer_logprob", "entropy", "logged_mismatch_kl", "is_masked")
            if c in table.column_names and table[c].null_count < n}
    out: dict[str, np.ndarray] = {}
    if {"inference_logprob", "trainer_logprob"} <= have:
        out |= _ratio_figures(table, mask, "logged_mismatch_kl" in have, layouts)
    if "entropy" in have:
        e = _Flat(table["entropy"], mask, layouts=layouts)
        on = np.flatnonzero(e.trained)
        out["entropy_mean"] = _mean(e.take(on), e.row[on], n)
    if "is_masked" in have:
        m = _Flat(table["is_masked"], mask, boolean=True, layouts=layouts)
        on = m.trained & (m.values >= 0)
        masked = np.bincount(m.row[on & (m.values == 1)], minlength=n)
        unmasked = np.bincount(m.row[on & (m.values == 0)], minlength=n)
        logged = np.bincount(m.row[on], minlength=n) > 0
        out["logged_masked_tokens"] = pa.array(masked.astype(np.int32), mask=~logged)
        out["logged_unmasked_tokens"] = pa.array(unmasked.astype(np.int32), mask=~logged)
    return {k: pa.array(v, FIGURES[k], from_pandas=True) if isinstance(v, np.ndarray) else v for k, v in out.items()}


def _ratio_figures(table: pa.Table, mask: tuple | None, logged_kl: bool, layouts: dict) -> dict[str, np.ndarray]:
    n = table.num_rows
    inf = _Flat(table["inference_logprob"], mask, layouts=layouts)
    tr = _Flat(table["trainer_logprob"], mask, layouts=layouts)
    row, pos, ia, ib = _paired(inf, tr)
    on = np.flatnonzero(inf.trained if row is inf.row else _trained_at(row, pos, mask))
    row, pos = row[on], pos[on]
    lr = tr.take(ib[on]) - inf.take(ia[on])
    with np.errstate(over="ignore", invalid="ignore"):
        k3 = np.exp(lr) - 1 - lr
    kl = k3
    if logged_kl:
        logged = _Flat(table["logged_mismatch_kl"], mask, layouts=layouts)
        lk = np.full(len(row), np.nan)
        at = _lookup(logged, row, pos)
        lk[at >= 0] = logged.take(at[at >= 0])
        kl = np.where(np.isfinite(lk), lk, k3)
    s, k = _sum_count(lr, row, n)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = np.where(k > 0, s / np.maximum(k, 1), np.nan)
        return {"mismatch_log_ratio_abs_mean": _mean(np.abs(lr), row, n),
                "mismatch_log_ratio_abs_max": _max(np.abs(lr), row, n),
                "mismatch_log_ratio_sum": np.where(k > 0, s, np.nan), "mismatch_tokens": k.astype(np.int32),
                "mismatch_kl_mean": _mean(kl, row, n), "sequence_ratio": np.exp(mean)}


def _lookup(f: _Flat, row: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Where (row, pos) is in ``f``'s values, -1 where f's row is shorter."""
    lens = np.diff(f.offsets)
    ok = pos < lens[row]
    return np.where(ok, f.offsets[:-1][row] + pos, -1)


def with_mismatch_figures(table: pa.Table) -> pa.Table:
    """``table`` with the per-sample figures of its mismatch fields (none: as it is)."""
    if "mismatch_kl_mean" in table.column_names or "entropy_mean" in table.column_names:
        return table
    for name, values in per_sample(table).items():
        table = table.append_column(name, values)
    return table

