"""The quick answers the RunView asks for (issue 32's benchmark) give the numbers the slower ones gave: the chart's
step figures (``steps_of``: only the figures drawn, kept while the views stay), a sorted page's ids (a top-k) and
its rows (numbers from memory, texts from the cache parts), on prime-rl exports and an RL Logging Board log, after a
change of the mismatch rule and after a followed run grows."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import rlviz_widgets as rw
from rlviz_widgets import _chart_data as cd
from rlviz_widgets import _table_source
from rlviz_widgets._mismatch import STEP_FIGURES, MismatchRule
from rlviz_widgets._sql import mean_sql, std_sql
from rlviz_widgets._synth import write_log
from rlviz_widgets._table_source import TableSource
from rlviz_widgets.run._queries import QUANTILES, STAT_COLUMNS
from tests.prime_formats import write_prime

SORT = "mismatch_log_ratio_abs_max"


def old_steps_sql(run: rw.Run, starts: list[int] | None = None) -> str:
    """The steps query as it was before ``steps_of``: the five quantiles of a column unpacked from one list, each
    mismatch figure's p95 and p99 by a ``quantile_cont`` of its own (a frozen reference)."""
    src = "_nums"
    if starts is not None:
        listed = "[" + ", ".join(map(str, starts)) + "]"
        src = (f"(SELECT x.* EXCLUDE (step), b.first AS step FROM (SELECT * FROM _nums) x "
               f"ASOF JOIN (SELECT unnest({listed}) AS first) b ON x.step >= b.first)")
    aggs, order = [], []
    for out, col in STAT_COLUMNS.items():
        aggs += [f"{mean_sql(col)} AS {out}_mean", f"{std_sql(col)} AS {out}_std", f"min({col}) AS {out}_min",
                 f"max({col}) AS {out}_max", f"quantile_cont({col}, {list(QUANTILES)}) AS _q_{out}"]
        order += [f"{out}_{s}" for s in ("mean", "std", "min", "max", *(f"p{round(q * 100):02d}" for q in QUANTILES))]
    unpack = ", ".join(f"_q_{out}[{k + 1}] AS {out}_p{round(q * 100):02d}"
                       for out in STAT_COLUMNS for k, q in enumerate(QUANTILES))
    kinds = set(run.columns)
    present = [f for f in STEP_FIGURES if f in kinds]
    for name in present:
        aggs += [f'{mean_sql(name)} AS "{name}"', f'quantile_cont("{name}", 0.95) AS "{name}_p95"',
                 f'quantile_cont("{name}", 0.99) AS "{name}_p99"']
        order += [f'"{name}"', f'"{name}_p95"', f'"{name}_p99"']
    if "masked_fraction" in present:
        has = '"n_trained_tokens" > 0'
        more = {"masked_sequences_fraction": f"avg((masked_tokens > 0)::INT) FILTER (WHERE {has})",
                "rule_masked_sequences_fraction": f"avg((rule_masked_tokens > 0)::INT) FILTER (WHERE {has})",
                "masked_token_fraction": 'sum(masked_tokens) / nullif(sum("n_trained_tokens"), 0)::DOUBLE',
                "mask_disagreements": "sum(mask_disagreements)"}
        aggs += [f'{sql} AS "{name}"' for name, sql in more.items()]
        order += [f'"{name}"' for name in more]
    return (f"SELECT step, samples, {', '.join(order)} FROM (SELECT *, {unpack} FROM ("
            f"SELECT step, count(*) AS samples, {', '.join(aggs)} FROM {src} GROUP BY step)) ORDER BY step")


def open_quiet(path, cache) -> rw.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rw.open_run(path, cache_dir=cache, progress=False)


def check_steps(run: rw.Run) -> None:
    """``steps``, ``steps_of`` (asked first, and again once ``steps`` is known) and the chart's datasets, exactly as
    the old query gives them."""
    old = run.query_frame(old_steps_sql(run))
    fields = [c for c in old.columns if c in cd.STEP_FIELDS]  # in the steps frame's order
    assert run.step_fields == list(old.columns[2:])
    assert "mismatch_kl_mean" not in old or set(cd.panels(run)) == {"mismatch", "entropy"}
    first = run.steps_of(cd.STEP_FIELDS)  # before ``steps``: a query of its own
    pd.testing.assert_frame_equal(first, old[["step", "samples", *fields]], check_exact=True)
    again = run.steps_of(cd.STEP_FIELDS)
    pd.testing.assert_frame_equal(again, first, check_exact=True)
    pd.testing.assert_frame_equal(run.steps[list(old.columns)], old, check_exact=True)
    pd.testing.assert_frame_equal(run.steps_of(cd.STEP_FIELDS), first, check_exact=True)  # from ``steps`` now
    data = cd.run_datasets(run, bins=10, band=1.0, zero_shift=False, has_ref=False)
    pd.testing.assert_frame_equal(data["steps"], cd.steps_frame(old), check_exact=True)
    pd.testing.assert_frame_equal(data["curves"], cd.curves_frame(old), check_exact=True)
    starts = run.step_values[::2]
    buckets = run.query_frame(run.steps_sql(starts=starts, fields=cd.STEP_FIELDS))
    # the sums of an ASOF join's rows: in the order it gives them, which the columns it carries may change (the old
    # query's own figures moved in the last digit from one open of a run to the next)
    pd.testing.assert_frame_equal(buckets, run.query_frame(old_steps_sql(run, starts))[["step", "samples", *fields]],
                                  check_exact=False, rtol=1e-13)


def check_pages(run: rw.Run, monkeypatch) -> None:
    """Pages sorted either way and in the log's order, on either side of the top-k's end, as a full sort gives them,
    with rows as the samples view has them."""
    monkeypatch.setattr(_table_source, "TOP_ROWS", 7)
    source = TableSource.from_run(run)
    cols = ["id", "sample_id", "step", SORT, "masked_fraction", "reward", "prompt", "response"]
    cols = [c for c in cols if c in source.kinds]
    n = run.n_samples
    for sort_by, desc in ((SORT if SORT in source.kinds else "reward", True), ("reward", False), ("", False)):
        order = (f'"{sort_by}" {"DESC" if desc else "ASC"} NULLS LAST, sample_id' if sort_by else
                 "step, line, file_no")
        full = [i for (i,) in run.query_frame(f"SELECT sample_id FROM _nums ORDER BY {order}").itertuples(index=False)]
        source.invalidate()
        for offset, limit in ((0, 5), (3, 4), (5, 10), (0, 5), (n - 3, 10)):
            page = source.page(offset, limit, cols, sort_by=sort_by, desc=desc)
            assert page["ids"] == full[offset:offset + limit], (sort_by, offset)
            ids = page["ids"]
            want = run.query_frame(f"SELECT {', '.join(cols)} FROM samples WHERE sample_id IN "
                                   f"({', '.join(map(str, ids)) or 'NULL'})").set_index("sample_id").loc[ids]
            got = run.rows(ids, cols).set_index("sample_id")
            pd.testing.assert_frame_equal(got, want[[c for c in cols if c != "sample_id"]], check_exact=True)
        source.invalidate()
        assert source.ids(sort_by=sort_by, desc=desc) == full  # every row: a full sort
    ids = full[:4]
    for pick in (["reward", "prompt", "reward"], ["prompt"], ["step", "sample_id"], None):  # numbers, texts, both
        want = run.query_frame(f"SELECT * FROM samples WHERE sample_id IN ({', '.join(map(str, ids))})"
                               ).set_index("sample_id", drop=False).loc[ids].reset_index(drop=True)
        pd.testing.assert_frame_equal(run.rows(ids, pick), want[pick] if pick else want, check_exact=True)


@pytest.mark.parametrize("generation", ["main", "v0.6"])
def test_prime_figures_and_pages_as_before(tmp_path, monkeypatch, generation):
    write_prime(tmp_path / "logs", generation=generation, steps=(1, 2, 3), prompts=4, n=4, seed=7)
    run = open_quiet(tmp_path / "logs", tmp_path / "cache")
    check_steps(run)
    check_pages(run, monkeypatch)
    for rule in (MismatchRule("token_mask", low=0.7, high=1.3), "geometric_mask", MismatchRule()):
        kept = run.steps_of(cd.STEP_FIELDS)
        run.mismatch_rule = rule  # every figure worked out again: nothing kept from the rule before
        assert run.steps_of(cd.STEP_FIELDS) is not kept
        check_steps(run)
    check_pages(run, monkeypatch)


def test_a_followed_run_that_grows(tmp_path, monkeypatch):
    write_prime(tmp_path / "logs", steps=(1, 2), prompts=3, n=4, seed=1)
    run = open_quiet(tmp_path / "logs", tmp_path / "cache")
    before = run.steps_of(cd.STEP_FIELDS)
    source = TableSource.from_run(run)
    first = source.ids(sort_by=SORT, desc=True, limit=3)
    write_prime(tmp_path / "more", steps=(3,), prompts=3, n=4, seed=2)
    (tmp_path / "more" / "token_exports" / "step_3").rename(tmp_path / "logs" / "token_exports" / "step_3")
    assert run.refresh()
    after = run.steps_of(cd.STEP_FIELDS)
    assert after.step.tolist() == [1, 2, 3] and before.step.tolist() == [1, 2]
    check_steps(run)
    source.invalidate()  # as the table's reload
    full = run.query_frame(f"SELECT sample_id FROM _nums ORDER BY {SORT} DESC NULLS LAST, sample_id").sample_id
    assert source.ids(sort_by=SORT, desc=True, limit=3) == full[:3].tolist() and len(full) == 36 and len(first) == 3
    check_pages(run, monkeypatch)


def test_other_logs_as_before(tmp_path, monkeypatch):
    write_log(tmp_path / "logs", steps=6, samples_per_step=10, tokens=8, ranks=2, seed=2)
    run = open_quiet(tmp_path / "logs", tmp_path / "cache")
    assert not {"mismatch_kl_mean", "masked_fraction"} & set(run.step_fields)
    assert cd.panels(run) == ()
    check_steps(run)
    check_pages(run, monkeypatch)
    write_log(tmp_path / "logs2", steps=4, samples_per_step=5, tokens=8, ranks=1, seed=3)
    rs = rw.RunSet({"a": run, "b": open_quiet(tmp_path / "logs2", tmp_path / "cache")})
    per_run = cd.step_stats(rs, 1000)
    for name, r in rs.runs.items():
        pd.testing.assert_frame_equal(per_run[name], r.query_frame(old_steps_sql(r))[per_run[name].columns],
                                      check_exact=True)
