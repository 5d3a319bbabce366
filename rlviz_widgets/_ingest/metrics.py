"""Derived metrics: per token, then reduced per sample (numpy over Arrow lists, no Python loops).

Per token: log_ratio = logprob - ref_logprob; kl = exp(log_ratio) - 1 - log_ratio (the k3
estimator, never negative: computed so that it stays so near 0); prob = exp(logprob);
ref_prob = exp(ref_logprob). Per sample:
the token count, the trained tokens' count, mean and sum of log_ratio and kl, mean logprob, mean value, summed token
reward. The statistics are over the trained tokens only (``trained``, the loss mask, where a log covers the whole
sequence; a log of response tokens has none: every token is trained).
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

TOKEN_METRICS = ("token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value")
ARRAYS = ("logprobs", "ref_logprobs", "values", "token_rewards")  # stored per-token lists
SAMPLE_METRICS = ("n_tokens", "n_trained_tokens", "log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum",
                  "logprob_mean", "value_mean", "token_reward_sum")


def _flat(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values with NaN for nulls, offsets, row validity) of a list<float> column.

    The values keep their stored type (float32, usually a zero-copy view): sums are taken in float64 by the
    reductions, widened into a reused scratch array (``_doubles``).
    """
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.offset:
        arr = pa.concat_arrays([arr])  # normalise a sliced array
    offsets = arr.offsets.to_numpy()
    values = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
    vals = values.to_numpy(zero_copy_only=False)
    return vals, offsets - offsets[0], ~arr.is_null().to_numpy(zero_copy_only=False)


_scratch = threading.local()


def _doubles(n: int, k: int) -> np.ndarray:
    """This thread's float64 scratch array ``k`` (0-2), ``n`` long: reused from part to part. Fresh arrays for
    every part (the log-ratios, the KLs, float32 values widened for their sums) cost as much again in page
    faults as the arithmetic on them."""
    bufs = _scratch.__dict__.setdefault("bufs", [np.empty(0)] * 3)
    if len(bufs[k]) < n:
        bufs[k] = np.empty(n + n // 4)
    return bufs[k][:n]


BIG = 2.0**52  # past this, adding a value of 1 (or less) to a partial sum may leave it as it was


def _big_apart(vals: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Row sums with the values past ``BIG`` summed apart from the others: in one running sum, reduceat's
    unrolled loop adds small terms into huge partial sums, so where two huge values cancel (-3e38 and 3e38, a
    masked position filled with float32's lowest in one array only) the small ones were lost and the sum was 0."""
    big = np.abs(vals) > BIG
    return np.add.reduceat(np.where(big, 0.0, vals), starts) + np.add.reduceat(np.where(big, vals, 0.0), starts)


def _segment(vals: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row sum and count of the values that are not NaN (missing: a null in the log), each row summed on its
    own (running totals subtracted at the row ends lost every digit of the rows after one huge value: a KL of
    1e17 made later samples' sums 0). An infinite value is kept: a KL that overflows (a log-ratio past ~709)
    makes its sample's KL infinite, as ``tokens()`` shows it, not 0."""
    counts = np.diff(offsets)
    sums = np.zeros(len(counts))
    rows = counts > 0
    ok = ~np.isnan(vals)
    clean = ok.all()  # the usual case: no masks
    if rows.any():  # reduceat over the non-empty rows only: each one's segment ends where the next begins
        if vals.dtype != np.float64 or not clean:  # summed in float64, missing values as 0: in scratch (reduceat
            wide = _doubles(len(vals), 2)  # would allocate its own float64 copy)
            np.copyto(wide, vals)
            if not clean:
                wide[~ok] = 0.0
            vals = wide
        if vals.max() > BIG or vals.min() < -BIG:  # rare (two passes without a copy tell): huge values apart
            sums[rows] = _big_apart(vals, offsets[:-1][rows])
        else:
            sums[rows] = np.add.reduceat(vals, offsets[:-1][rows])
    if clean:
        return sums, counts
    ccnt = np.concatenate([[0], np.cumsum(ok)])  # integers: exact
    return sums, ccnt[offsets[1:]] - ccnt[offsets[:-1]]


def _mean(s: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def _lists(table: pa.Table) -> tuple[np.ndarray, np.ndarray, dict]:
    """(each row's token count, whether it has a token array at all, each float list column ``_flat``)."""
    lens = np.zeros(table.num_rows, dtype=np.int64)
    listed = np.zeros(table.num_rows, dtype=bool)  # a token array there (an empty one is a response of 0 tokens)
    flat = {}
    for name in ("tokens", *ARRAYS):
        if name in table.column_names:
            col = table[name]
            lengths = pa.compute.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False)
            lens = np.maximum(lens, lengths)
            if name == "tokens":
                listed |= col.is_valid().to_numpy(zero_copy_only=False)
            else:
                flat[name] = _flat(col)
                listed |= flat[name][2]
    return lens, listed, flat


def per_sample(table: pa.Table) -> dict[str, np.ndarray]:
    """The per-sample reductions of a table holding the token-list columns.

    Each float list column is joined into one array first: a part (at most one chunk of the file) holds a few MB
    of them, and reducing DuckDB's record batches (128 rows) one by one cost ~20 numpy calls per batch, 2x
    the time of the sums themselves."""
    rows = table.num_rows
    out: dict[str, np.ndarray] = {}
    lens, listed, flat = _lists(table)
    out["n_tokens"] = pa.array(lens.astype(np.int32), mask=~listed)  # no token arrays: unknown, not 0
    mask = trained_mask(table)
    if mask is not None:  # statistics over the trained tokens only: the others' values left out, as missing ones
        flat = {name: (_only_trained(vals, offsets, mask), offsets, valid)
                for name, (vals, offsets, valid) in flat.items()}
        lens = _trained_counts(lens, mask)
    out["n_trained_tokens"] = pa.array(lens.astype(np.int32), mask=~listed)
    nan = np.full(rows, np.nan)
    if "logprobs" in flat:
        s, n = _segment(*flat["logprobs"][:2])
        out["logprob_mean"] = _mean(s, n)
    if "logprobs" in flat and "ref_logprobs" in flat:
        (lp, lo, _), (rp, ro, _) = flat["logprobs"], flat["ref_logprobs"]
        if np.array_equal(lo, ro):
            lr = np.subtract(lp, rp, out=_doubles(len(lp), 0), dtype=np.float64)
            offs = lo
        else:  # some rows differ in length: each row's first min(len) positions paired
            m = np.minimum(np.diff(lo), np.diff(ro))
            offs = np.concatenate([[0], np.cumsum(m)])
            row = np.repeat(np.arange(len(m)), m)
            pos = np.arange(offs[-1]) - offs[row]
            lr = np.subtract(lp[lo[row] + pos], rp[ro[row] + pos], dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            # exp(lr) - 1 - lr as expm1(lr) - lr: the first form loses every digit for |lr| < 1e-7 (a confident
            # token), even below 0. In place: one array, not three
            kl = np.expm1(lr, out=_doubles(len(lr), 1))
            kl -= lr
        s, n = _segment(lr, offs)
        out["log_ratio_mean"], out["log_ratio_sum"] = _mean(s, n), np.where(n > 0, s, np.nan)
        s, n = _segment(kl, offs)
        out["kl_mean"], out["kl_sum"] = _mean(s, n), np.where(n > 0, s, np.nan)
    if "values" in flat:
        s, n = _segment(*flat["values"][:2])
        out["value_mean"] = _mean(s, n)
    if "token_rewards" in flat:
        s, n = _segment(*flat["token_rewards"][:2])
        out["token_reward_sum"] = np.where(n > 0, s, np.nan)
    for name in SAMPLE_METRICS:
        out.setdefault(name, nan)
    return out


def trained_mask(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(mask values, offsets, which rows have a mask) of a table's ``trained`` column; None where no row has one (a
    log of response tokens: every token is trained)."""
    if "trained" not in table.column_names or table["trained"].null_count == table.num_rows:
        return None
    arr = table["trained"].combine_chunks()
    if arr.offset:
        arr = pa.concat_arrays([arr])
    offsets = arr.offsets.to_numpy()
    values = arr.values.slice(offsets[0], offsets[-1] - offsets[0]).fill_null(False)
    return (values.to_numpy(zero_copy_only=False).astype(bool), offsets - offsets[0],
            ~arr.is_null().to_numpy(zero_copy_only=False))


def _only_trained(vals: np.ndarray, offsets: np.ndarray, mask: tuple) -> np.ndarray:
    """``vals`` (a list column's values, rows at ``offsets``) with NaN at the tokens not trained: those the mask says
    are not, and in a row with a mask, those past its end; a row without one is trained whole."""
    tvals, toffs, has = mask
    rows = len(offsets) - 1
    row = np.repeat(np.arange(rows), np.diff(offsets))
    pos = np.arange(len(vals)) - offsets[:-1][row]
    masked = has[:rows][row] if len(has) >= rows else np.zeros(len(vals), bool)
    inside = masked & (pos < np.diff(toffs)[row])
    keep = ~masked
    keep[inside] = tvals[toffs[:-1][row[inside]] + pos[inside]]
    return np.where(keep, vals, np.nan)


def _trained_counts(lens: np.ndarray, mask: tuple) -> np.ndarray:
    """The trained tokens among each row's first ``lens`` (its token count); a row without a mask: all of them."""
    tvals, toffs, has = mask
    c = np.concatenate([[0], np.cumsum(tvals)])
    upto = toffs[:-1] + np.minimum(np.diff(toffs), lens)
    return np.where(has, c[upto] - c[toffs[:-1]], lens)


def with_reductions(table: pa.Table) -> pa.Table:
    """``table`` with the per-sample reductions of its token lists, after ``response_chars`` (readers leave
    them out: the cache adds them in its writing thread, off the parsing path)."""
    at = table.schema.get_field_index("response_chars") + 1 or table.num_columns
    for name, values in per_sample(table).items():
        table = table.add_column(at, name, pa.array(values, from_pandas=True))
        at += 1
    return table


def per_token_sql(prefix: str = "") -> str:
    """SELECT-list expressions for one unnested token row (columns logprob, ref_logprob)."""
    p = prefix
    # in double precision, as per_sample does: a float32 difference would round log_ratio (and kl) differently
    lr = f"({p}logprob::DOUBLE - {p}ref_logprob::DOUBLE)"
    # DuckDB has no expm1: near 0, where exp(lr) - 1 - lr cancels, its Taylor series (exact to ~1e-11 there)
    taylor = f"{lr} * {lr} * (0.5 + {lr} * ({1 / 6!r} + {lr} * ({1 / 24!r} + {lr} * {1 / 120!r})))"
    return (f"{lr} AS log_ratio, "
            f"CASE WHEN abs({lr}) < 1e-3 THEN {taylor} ELSE exp({lr}) - 1 - {lr} END AS kl, "
            f"exp({p}logprob) AS prob, exp({p}ref_logprob) AS ref_prob")
