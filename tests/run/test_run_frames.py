"""The frames of a Run checked against the test's own numpy/pandas computations over the JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import traitlets
from conftest import POEM, README_RECORD, f32, read_records, write_lines

import rlviz_widgets
from rlviz_widgets import _groups as groups

QS = (0.05, 0.25, 0.5, 0.75, 0.95)
TOKEN_ARRAY_COLUMNS = {"response_tokens", "tokens", "logprobs", "ref_logprobs", "values", "token_rewards"}
SAMPLE_COLUMNS = {"sample_id", "step", "prompt", "response", "reward", "ref_response", "ref_reward", "reward_gap",
                  "ground_truth", "n_tokens", "log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "value_mean",
                  "file", "line", "id"}
TOKEN_COLUMNS = {"sample_id", "position", "token", "logprob", "ref_logprob", "log_ratio", "kl", "prob", "ref_prob",
                 "value", "token_reward"}


def expected_sample(rec: dict) -> dict:
    """Per-sample reductions computed here from the JSON (token arrays are stored as float32)."""
    lp, rp = f32(rec["logprobs"]), f32(rec["ref_logprobs"])
    lr = lp - rp
    kl = np.exp(lr) - 1 - lr
    return {"n_tokens": len(rec["response_tokens"]), "log_ratio_mean": lr.mean(), "log_ratio_sum": lr.sum(),
            "kl_mean": kl.mean(), "kl_sum": kl.sum(), "value_mean": f32(rec["values"]).mean(),
            "logprob_mean": lp.mean(), "token_reward_sum": f32(rec["token_rewards"]).sum()}


def stats(values: pd.Series) -> dict:
    v = values.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    out = {"mean": v.mean(), "std": v.std(ddof=0), "min": v.min(), "max": v.max()}
    out.update({f"p{round(q * 100):02d}": np.quantile(v, q) for q in QS})
    return out


@pytest.fixture(scope="module")
def poem_run(tmp_path_factory):
    import warnings

    import rlviz_widgets

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real file is clean: no warning at all
        run = rlviz_widgets.open_run(POEM, cache_dir=tmp_path_factory.mktemp("poem_cache"), progress=False)
    recs = read_records([POEM])
    return run, pd.DataFrame(recs)


@pytest.fixture
def synth(synth_logs, open_run):
    folder, files = synth_logs(steps=4, samples_per_step=12, tokens=10, ranks=2, step_gap=10)
    recs = read_records(files)
    return open_run(folder), files, recs


# -- real data --------------------------------------------------------------------------------------------------
def test_poem_samples_match_the_json(poem_run):
    run, js = poem_run
    s = run.samples
    assert len(s) == len(js) == 3000
    assert not (set(s.columns) & TOKEN_ARRAY_COLUMNS)
    assert SAMPLE_COLUMNS <= set(s.columns)
    s = s.sort_values("line").reset_index(drop=True)
    assert s["line"].tolist() == list(range(1, 3001))
    assert s["step"].tolist() == js["step"].tolist()
    np.testing.assert_array_equal(s["reward"], js["reward"])
    np.testing.assert_array_equal(s["ref_reward"], js["ref_reward"])
    np.testing.assert_array_equal(s["reward_gap"], js["reward"] - js["ref_reward"])
    assert s["prompt"].tolist() == js["prompt"].tolist()
    assert s["response"].tolist() == js["response"].tolist()  # no <PAD> in this file; <EOD> is not the pad
    assert s["ref_response"].tolist() == js["ref_response"].tolist()
    assert s["n_tokens"].isna().all() and s["kl_mean"].isna().all()  # a sample-level log: no token metrics


def test_poem_steps_match_pandas(poem_run):
    run, js = poem_run
    steps = run.steps
    assert steps["step"].tolist() == list(range(0, 2400, 100))
    assert steps["samples"].tolist() == [128] * 23 + [56]
    js["reward_gap"] = js["reward"] - js["ref_reward"]
    for col in ("reward", "ref_reward", "reward_gap"):
        for step, grp in js.groupby("step"):
            row = steps.set_index("step").loc[step]
            for stat, want in stats(grp[col]).items():
                assert row[f"{col}_{stat}"] == pytest.approx(want, rel=1e-9, abs=1e-12), (col, step, stat)
    # pandas' own groupby agrees (population std)
    g = js.groupby("step")["reward"]
    np.testing.assert_allclose(steps["reward_mean"], g.mean(), rtol=1e-12)
    np.testing.assert_allclose(steps["reward_std"], g.std(ddof=0), rtol=1e-9)
    np.testing.assert_allclose(steps["reward_p50"], g.median(), rtol=1e-12)
    assert steps["kl_mean"].isna().all() and steps["length_mean"].isna().all()


def test_poem_histogram_has_shared_edges_and_all_samples(poem_run):
    run, js = poem_run
    bins = 20
    h = run.reward_histogram("reward", bins=bins)
    assert list(h.columns) == ["step", "bin", "bin_start", "bin_end", "count"]
    lo, hi = js["reward"].min(), js["reward"].max()
    width = (hi - lo) / bins
    # one edge set for every step
    edges = h.groupby("bin")["bin_start"].nunique()
    assert (edges == 1).all()
    np.testing.assert_allclose(h["bin_start"], lo + h["bin"] * width)
    np.testing.assert_allclose(h["bin_end"] - h["bin_start"], width)
    assert h["bin"].between(0, bins - 1).all()
    # counts sum to the sample count of each step, and of the run
    assert h.groupby("step")["count"].sum().tolist() == run.steps["samples"].tolist()
    assert h["count"].sum() == 3000
    # and equal the test's own binning of the JSON
    b = np.minimum(np.floor((js["reward"].to_numpy() - lo) / width), bins - 1).astype(int)
    want = pd.DataFrame({"step": js["step"], "bin": b}).value_counts().sort_index()
    got = h.set_index(["step", "bin"])["count"].sort_index()
    assert got.to_dict() == want.to_dict()
    # np.histogram on the same edges gives the same totals
    counts, _ = np.histogram(js["reward"], bins=bins, range=(lo, hi))
    assert counts.sum() == h["count"].sum()


def test_readme_record_pad_stripped_and_reductions(open_run):
    run = open_run(README_RECORD)
    rec = json.loads(README_RECORD.read_text())
    s = run.samples.iloc[0]
    assert "<PAD>" in rec["prompt"] and "<PAD>" in rec["response"]
    assert s["prompt"] == rec["prompt"].replace("<PAD>", "")
    assert s["response"] == rec["response"].replace("<PAD>", "")
    assert s["step"] == 4 and s["reward"] == 0.0
    assert s["n_tokens"] == 13  # the longest array: response_tokens
    exp = expected_sample(rec)  # 12 values: the 13th token has none
    for k in ("log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "value_mean"):
        assert s[k] == pytest.approx(exp[k], rel=1e-9, abs=1e-15), k
    assert pd.isna(s["ref_reward"]) and pd.isna(s["reward_gap"])


# -- synthetic data ---------------------------------------------------------------------------------------------
def test_synth_samples_columns_and_values(synth):
    run, files, recs = synth
    s = run.samples
    assert len(s) == len(recs) == 48
    assert SAMPLE_COLUMNS <= set(s.columns)
    assert "acc" in s.columns  # every other scalar field becomes a column
    assert not (set(s.columns) & TOKEN_ARRAY_COLUMNS)
    assert run.columns == list(s.columns)
    by_loc = {(r["_file"], r["_line"]): r for r in recs}
    for row in s.to_dict("records"):
        rec = by_loc[(row["file"], row["line"])]
        assert row["step"] == rec["step"]
        assert row["reward"] == rec["reward"] and row["ref_reward"] == rec["ref_reward"]
        assert row["reward_gap"] == pytest.approx(rec["reward"] - rec["ref_reward"], rel=1e-12, abs=1e-12)
        assert row["ground_truth"] == rec["ground_truth"]
        assert row["acc"] == rec["acc"]
        assert row["prompt"] == rec["prompt"].replace("<PAD>", "")
        assert row["response"] == rec["response"].replace("<PAD>", "")
        assert row["ref_response"] == rec["ref_response"]
        for k, v in expected_sample(rec).items():
            assert row[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_synth_steps_match_pandas(synth):
    run, files, recs = synth
    df = pd.DataFrame([{**{"step": r["step"], "reward": r["reward"], "ref_reward": r["ref_reward"],
                           "reward_gap": r["reward"] - r["ref_reward"]}, **expected_sample(r)} for r in recs])
    steps = run.steps.set_index("step")
    assert steps.index.tolist() == [0, 10, 20, 30]
    assert steps["samples"].tolist() == df.groupby("step").size().tolist() == [12] * 4
    mapping = {"reward": "reward", "ref_reward": "ref_reward", "reward_gap": "reward_gap", "kl": "kl_mean",
               "log_ratio": "log_ratio_mean", "length": "n_tokens"}
    for out, col in mapping.items():
        for step, grp in df.groupby("step"):
            for stat, want in stats(grp[col]).items():
                assert steps.loc[step, f"{out}_{stat}"] == pytest.approx(want, rel=1e-9, abs=1e-12), (out, step, stat)
    # the KL grows over training in the synthetic log (a sanity check of the generator and the reduction)
    assert steps["kl_mean"].iloc[-1] > steps["kl_mean"].iloc[0]


def test_synth_histogram_any_column(synth):
    run, files, recs = synth
    for column, bins in (("reward", 7), ("kl_mean", 5), ("reward_gap", 1)):
        h = run.reward_histogram(column, bins=bins)
        assert h.groupby("step")["count"].sum().tolist() == [12] * 4
        assert h.groupby("bin")["bin_start"].nunique().eq(1).all()
        vals = run.samples[column]
        assert h["bin_start"].min() == pytest.approx(vals.min())
        assert h["bin_end"].max() == pytest.approx(vals.max())
    with pytest.raises(KeyError):
        run.reward_histogram("no_such_column")
    with pytest.raises(ValueError):
        run.reward_histogram("reward", bins=0)


def test_tokens_rows_and_derived_metrics(synth):
    run, files, recs = synth
    s = run.samples
    by_loc = {(r["_file"], r["_line"]): r for r in recs}
    picked = s.iloc[[5, 0, 31]]  # from both rank files, in a chosen order
    ids = picked["sample_id"].tolist()
    t = run.tokens(ids)
    assert TOKEN_COLUMNS <= set(t.columns)
    assert list(dict.fromkeys(t["sample_id"])) == ids  # in the order asked for
    for row in picked.itertuples():
        rec = by_loc[(row.file, row.line)]
        tt = t[t["sample_id"] == row.sample_id]
        n = len(rec["response_tokens"])
        assert len(tt) == n == row.n_tokens
        assert tt["position"].tolist() == list(range(n))
        assert tt["token"].tolist() == rec["response_tokens"]
        lp, rp = f32(rec["logprobs"]), f32(rec["ref_logprobs"])
        np.testing.assert_allclose(tt["logprob"], lp, rtol=0, atol=0)
        np.testing.assert_allclose(tt["ref_logprob"], rp, rtol=0, atol=0)
        np.testing.assert_allclose(tt["value"], f32(rec["values"]), rtol=0, atol=0)
        np.testing.assert_allclose(tt["token_reward"], f32(rec["token_rewards"]), rtol=0, atol=0)
        np.testing.assert_allclose(tt["log_ratio"], lp - rp, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(tt["kl"], np.exp(lp - rp) - 1 - (lp - rp), rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(tt["prob"], np.exp(lp), rtol=1e-12)
        np.testing.assert_allclose(tt["ref_prob"], np.exp(rp), rtol=1e-12)
        assert (tt["kl"] >= 0).all()
        # the tokens frame reduces to the samples frame
        assert tt["kl"].mean() == pytest.approx(row.kl_mean, rel=1e-9)
        assert tt["log_ratio"].sum() == pytest.approx(row.log_ratio_sum, rel=1e-9, abs=1e-12)
    one = run.tokens(int(ids[0]))
    assert one["sample_id"].unique().tolist() == [ids[0]]
    assert len(run.tokens([])) == 0 and list(run.tokens([]).columns) == list(t.columns)  # no rows, the same columns
    assert list(run.held_tokens([10 ** 15]).columns) == list(t.columns)  # a view's id the run let go: no rows


def test_reductions_with_samples_lacking_token_arrays(open_run, tmp_path):
    """Records without token arrays (or with empty ones, or without the optional values) mixed in, in any order:
    each sample's reductions are those of its own tokens. A run of such records at the end of a batch once
    cut the last values off the sample before them."""
    rng = np.random.default_rng(7)
    folder = tmp_path / "mixed"
    folder.mkdir()
    recs = []
    for i in range(400):
        rec = {"prompt": f"p{i}", "response": f"r{i}", "reward": float(i % 5), "step": i // 40}
        kind = rng.integers(0, 4)
        if kind:  # 0: a sample-level record, no arrays at all
            n = int(rng.integers(0, 6)) if kind == 1 else int(rng.integers(1, 6))
            rec["response_tokens"] = [f"t{j}" for j in range(n)]
            rec["logprobs"] = rng.normal(-1, 0.5, n).tolist()
            rec["ref_logprobs"] = rng.normal(-1, 0.5, n).tolist()
            if kind == 3:
                rec["values"] = rng.normal(0, 1, n).tolist()
                rec["token_rewards"] = rng.normal(0, 1, n).tolist()
        recs.append(rec)
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = open_run(folder).samples.sort_values("line")
    assert len(s) == len(recs)
    for rec, row in zip(recs, s.itertuples()):
        if not rec.get("logprobs"):
            assert np.isnan(row.logprob_mean) and np.isnan(row.kl_sum)
            continue
        lp, rp = f32(rec["logprobs"]), f32(rec["ref_logprobs"])
        lr = lp - rp
        assert row.n_tokens == len(lp)
        assert row.logprob_mean == pytest.approx(lp.mean(), rel=1e-9)
        assert row.log_ratio_sum == pytest.approx(lr.sum(), rel=1e-9, abs=1e-12)
        assert row.kl_sum == pytest.approx((np.exp(lr) - 1 - lr).sum(), rel=1e-9, abs=1e-12)
        if "values" in rec:
            assert row.value_mean == pytest.approx(f32(rec["values"]).mean(), rel=1e-9, abs=1e-12)
            assert row.token_reward_sum == pytest.approx(f32(rec["token_rewards"]).sum(), rel=1e-9, abs=1e-12)
        else:
            assert np.isnan(row.value_mean) and np.isnan(row.token_reward_sum)


def test_sql_over_samples_and_tokens(synth):
    run, files, recs = synth
    per_step = run.sql("SELECT step, count(*) AS n, avg(reward) AS r FROM samples GROUP BY step ORDER BY step")
    steps = run.steps
    assert per_step["n"].tolist() == steps["samples"].tolist()
    np.testing.assert_allclose(per_step["r"], steps["reward_mean"], rtol=1e-12)
    n_tok = run.sql("SELECT count(*) AS n FROM tokens")["n"].iloc[0]
    assert n_tok == sum(len(r["response_tokens"]) for r in recs) == run.samples["n_tokens"].sum()
    joined = run.sql("""SELECT s.sample_id, avg(t.kl) AS kl FROM tokens t JOIN samples s USING (sample_id)
                        GROUP BY s.sample_id ORDER BY s.sample_id""")
    np.testing.assert_allclose(joined["kl"], run.samples.sort_values("sample_id")["kl_mean"], rtol=1e-9)
    top = run.sql("SELECT sample_id, reward FROM samples WHERE step = ? ORDER BY reward DESC LIMIT 3", [20])
    want = sorted((r["reward"] for r in recs if r["step"] == 20), reverse=True)[:3]
    assert top["reward"].tolist() == want


# -- options ----------------------------------------------------------------------------------------------------
def test_pad_token_options(synth_logs, open_run, tmp_path):
    folder, files = synth_logs(steps=1, samples_per_step=4, ranks=1)
    recs = read_records(files)
    default = open_run(folder).samples.sort_values("line")
    assert not default["prompt"].str.contains("<PAD>").any()
    assert not default["response"].str.contains("<PAD>").any()
    assert default["prompt"].tolist() == [r["prompt"].replace("<PAD>", "") for r in recs]
    kept = open_run(folder, pad_token=None).samples.sort_values("line")
    assert kept["prompt"].tolist() == [r["prompt"] for r in recs]
    assert kept["response"].tolist() == [r["response"] for r in recs]
    other = open_run(folder, pad_token="<|endoftext|>").samples.sort_values("line")
    assert other["response"].tolist() == [r["response"].replace("<|endoftext|>", "") for r in recs]
    # response_chars is the length of the response as shown (it counted the pad tokens stripped from it)
    for frame in (default, kept, other):
        assert frame["response_chars"].tolist() == frame["response"].str.len().tolist()
    assert (kept["response_chars"] > default["response_chars"]).all()
    # the tokens frame shows the tokens as logged
    t = open_run(folder).tokens(default["sample_id"].iloc[0])
    assert t["token"].iloc[-1] == "<|endoftext|>"


def test_system_prompt_end(synth_logs, open_run):
    folder, files = synth_logs(steps=1, samples_per_step=4, ranks=1)
    recs = read_records(files)
    s = open_run(folder, system_prompt_end="<|im_end|>").samples.sort_values("line")
    assert s["prompt"].tolist() == [r["prompt"].split("<|im_end|>")[-1] for r in recs]
    assert s["prompt"].str.startswith("Question").all()
    # a marker that is absent keeps the whole prompt (pads still stripped)
    s = open_run(folder, system_prompt_end="<no marker>").samples.sort_values("line")
    assert s["prompt"].tolist() == [r["prompt"].replace("<PAD>", "") for r in recs]


@pytest.mark.parametrize("marker", ["\n\n", "aa", "abab", "<|im_end|>", "é·é"])
def test_system_prompt_end_cuts_at_the_last_of_overlapping_markers(tmp_path, open_run, marker):
    """Text up to the marker's LAST occurrence is dropped, as the README says: with "\n\n" and "SYS\n\n\nQ" that is
    "Q". The prompt was cut at the last of the occurrences found left to right without overlap ("\nQ")."""
    prompts = [f"SYS{marker}{marker[-1]}Q", f"S{marker * 3}{marker[:-1]}x{marker}{marker[1:]}Q", "no marker",
               f"{marker}", f"é{marker}{marker[1:]}{marker[1:]}", f"{marker[:-1]}Q", f"S{marker}{marker[-2:]}Q"]
    recs = [{"step": 0, "prompt": p, "response": "r", "reward": 1.0} for p in prompts]
    s = open_run(_write_records(tmp_path / "logs", recs), system_prompt_end=marker).samples.sort_values("line")
    assert s.prompt.tolist() == [p[p.rfind(marker) + len(marker):] if marker in p else p for p in prompts]


def test_after_last_is_rfind():
    """The SQL of the cut against Python's rfind on random texts over a small alphabet (markers overlap often)."""
    import random

    import duckdb

    from rlviz_widgets.run._views import after_last as _after_last

    rng, con = random.Random(5), duckdb.connect()
    for _ in range(300):
        marker = "".join(rng.choice("ab\né") for _ in range(rng.randint(1, 4)))
        texts = ["".join(rng.choice("ab\né") for _ in range(rng.randint(0, 12))) for _ in range(20)]
        got = con.execute(f"SELECT {_after_last('t', marker)} FROM unnest(?) AS u(t)", [texts]).fetchall()
        assert [g for (g,) in got] == [t[t.rfind(marker) + len(marker):] if marker in t else t for t in texts]


@pytest.mark.parametrize("cap", [1, 5, 7])
def test_max_samples_per_step_keeps_exactly_n(synth_logs, open_run, cap):
    folder, files = synth_logs(steps=3, samples_per_step=12, ranks=3)
    run = open_run(folder, max_samples_per_step=cap)
    s = run.samples
    assert s.groupby("step").size().tolist() == [cap] * 3
    assert run.steps["samples"].tolist() == [cap] * 3
    assert run.n_samples == 3 * cap
    # the first ones, in line order across the rank files
    order = [str(p.resolve()) for p in files]
    full = open_run(folder).samples
    full["rank"] = full["file"].map(order.index)
    want = full.sort_values(["line", "rank"]).groupby("step").head(cap)
    assert sorted(s["sample_id"]) == sorted(want["sample_id"])
    # the histogram and the tokens view follow the cap
    assert run.reward_histogram("reward", 4)["count"].sum() == 3 * cap
    assert run.sql("SELECT count(DISTINCT sample_id) AS n FROM tokens")["n"].iloc[0] == 3 * cap
    assert run.sql("SELECT count(*) AS n FROM tokens")["n"].iloc[0] == s["n_tokens"].sum()


def test_cap_larger_than_step_and_invalid(synth_logs, open_run):
    folder, files = synth_logs(steps=2, samples_per_step=4, ranks=2)
    assert open_run(folder, max_samples_per_step=100).steps["samples"].tolist() == [4, 4]
    with pytest.raises(ValueError):
        open_run(folder, max_samples_per_step=0)


def test_step_range(synth_logs, open_run):
    folder, files = synth_logs(steps=6, samples_per_step=4, ranks=2, step_gap=10)
    assert open_run(folder, steps=(10, 30)).step_values == [10, 20, 30]
    assert open_run(folder, steps=(35, None)).step_values == [40, 50]
    assert open_run(folder, steps=(None, 0)).step_values == [0]
    assert open_run(folder, steps=(9.5, 30.5)).step_values == [10, 20, 30]  # not cut to (9, 30)
    run = open_run(folder, steps=(20, 40), max_samples_per_step=3)
    assert run.steps["step"].tolist() == [20, 30, 40]
    assert run.steps["samples"].tolist() == [3, 3, 3]
    assert set(run.sql("SELECT DISTINCT step FROM tokens")["step"]) == {20, 30, 40}
    h = run.reward_histogram("reward", 5)
    assert sorted(h["step"].unique()) == [20, 30, 40] and h["count"].sum() == 9


def test_a_filtered_histogram_keeps_or_zooms_its_edges_as_documented(synth):
    """``reward_histogram(where=)`` counts the kept rows on the whole run's edges (it lines up with the unfiltered
    one); ``histograms(where=)`` spans what its filter keeps."""
    run, _, _ = synth
    vals = run.samples["reward"]
    cut = float(vals.median())
    kept = vals[vals > cut]
    whole, filtered = run.reward_histogram(bins=6), run.reward_histogram(bins=6, where=f"reward > {cut!r}")
    assert filtered["count"].sum() == len(kept)
    edges = dict(zip(whole["bin"], whole["bin_start"]))
    assert all(edges.get(b, s) == s for b, s in zip(filtered["bin"], filtered["bin_start"]))
    assert filtered["bin_end"].max() == pytest.approx(vals.max())
    zoomed = run.histograms(["reward"], bins=6, where=f"reward > {cut!r}")
    assert zoomed["count"].sum() == len(kept)
    assert zoomed["bin_start"].min() == pytest.approx(kept.min())
    assert zoomed["bin_end"].max() == pytest.approx(kept.max())


def test_histograms_of_a_text_column_or_fractional_bins_say_so(poem_run):
    run, _ = poem_run
    for call in (lambda: run.reward_histogram("prompt"), lambda: run.histograms(["reward", "response"])):
        with pytest.raises(ValueError, match="not a numeric column; numeric columns: step, .*reward"):
            call()
    for bad in (2.5, "3", True):
        with pytest.raises(TypeError, match="whole number"):
            run.reward_histogram("reward", bins=bad)
    with pytest.raises(ValueError, match="from 1 to"):
        run.histograms(["reward"], bins=0)
    assert run.reward_histogram("reward", bins=np.int64(4))["bin"].max() == 3
    with pytest.raises(KeyError, match="no_such_column"):  # a misspelt name; a common column a log lacks is left out
        run.histograms(["reward", "no_such_column"], bins=4)


def test_bad_ids_columns_and_scopes_are_named(open_run):
    run = open_run(README_RECORD)
    sid = int(run.samples["sample_id"][0])
    for bad in ("12", 1.5, None, [sid, "x"], True):
        with pytest.raises(TypeError, match="sample ids are whole numbers"):
            run.tokens(bad)
    assert len(run.tokens(np.array([sid], dtype=float))) == len(run.tokens(sid)) > 0  # ids from a float column
    with pytest.raises(KeyError, match="no column 'nope' in samples"):
        run.rows([sid], ["reward", "nope"])
    for scope, steps in (("zz", None), ("step", None)):
        with pytest.raises(ValueError, match="'run', or 'step' with the steps"):
            run.token_domain("kl", scope, steps)
    assert run.token_domain("kl", "step", [int(run.samples["step"][0])]) == run.token_domain("kl", "run", [0])


def test_the_cap_keeps_the_same_samples_whatever_order_a_cache_first_saw_the_files(synth_logs, tmp_path):
    folder, files = synth_logs(steps=2, samples_per_step=8, ranks=2)
    rank1 = sorted(files)[1]

    def kept(cache):
        run = rlviz_widgets.open_run(folder, cache_dir=cache, progress=False, max_samples_per_step=3)
        return sorted(zip(run.samples["file"], run.samples["line"]))

    rlviz_widgets.open_run(rank1, cache_dir=tmp_path / "c1", progress=False)  # rank1 numbered first here
    assert kept(tmp_path / "c1") == kept(tmp_path / "c0")
    assert [Path(f).name for f, _ in kept(tmp_path / "c1")][:2] == ["rollout_rank0.jsonl"] * 2


def test_tokens_and_rows_hold_only_the_runs_samples(synth_logs, tmp_path):
    folder, _ = synth_logs(steps=3, samples_per_step=4, ranks=1)
    whole = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "c", progress=False)
    part = rlviz_widgets.open_run(folder, cache_dir=tmp_path / "c", progress=False, steps=(1, 2),
                                  max_samples_per_step=2)
    ids = whole.samples["sample_id"].tolist()  # ids from another Run of the same logs
    held = part.samples["sample_id"].tolist()
    assert len(held) == 4 and set(held) < set(ids)
    # the first file of a cache is number 1, not 0: no sample id is a bare line number (a row position passed)
    assert min(ids) > rlviz_widgets.run._views.ID_STRIDE
    with pytest.raises(KeyError, match="not samples of this run: 3 "):
        whole.tokens(3)
    # asked by the user: an id the run does not hold is a KeyError naming it (it was left out in silence)
    for call in (part.rows, part.tokens):
        with pytest.raises(KeyError, match=rf"not samples of this run: {ids[0]}, {ids[1]}, .*\(sample ids are"):
            call(ids)
        with pytest.raises(KeyError, match=r"not samples of this run: 3 \(sample ids are values of"):
            call([held[0], 3])  # a row position where an id was due
    assert part.rows(held[::-1])["sample_id"].tolist() == held[::-1]
    # a view's ids (kept while its run changed): the run's are given, the others left out
    assert part.held_rows(ids)["sample_id"].tolist() == held
    assert sorted(set(part.held_tokens(ids)["sample_id"])) == held
    assert [a["sample_id"] for a in part.token_arrays(ids[::-1])] == held[::-1]
    rs = rlviz_widgets.RunSet({"part": part})
    assert rs.held_rows(ids)["sample_id"].tolist() == rs.samples["sample_id"].tolist()
    with pytest.raises(KeyError, match="not samples of this run"):
        rs.rows(ids)
    strip = rlviz_widgets.TokenStrip(part, [held[0], ids[0]])
    assert strip.error.startswith("sample_ids: not samples of this run: " + str(ids[0]))
    for huge in (2**63, 2**64):  # past a BIGINT: DuckDB's ConversionException escaped (from a view's selection too)
        with pytest.raises(KeyError, match=f"not samples of this run: {huge} "):
            part.tokens([huge])
        assert part.held_rows([held[0], huge])["sample_id"].tolist() == [held[0]]
    strip.sample_ids = held[:2]
    assert strip.error == "" and sorted(set(strip.tokens["sample_id"])) == held[:2]


def test_rows_keep_the_order_asked_and_ids_asked_twice(synth_logs, open_run):
    folder, _ = synth_logs(steps=2, samples_per_step=3, ranks=1)
    run = open_run(folder)
    a, b, c = run.samples["sample_id"].tolist()[:3]
    assert run.rows([c, a, c, b])["sample_id"].tolist() == [c, a, c, b]


def test_per_sample_reductions_own_their_results():
    """The reductions reuse scratch arrays from part to part: what one part got is not changed by the next, and
    every value is the float64 reference (float32 lists, rows of different lengths, empty and null rows)."""
    import pyarrow as pa

    from rlviz_widgets._ingest.metrics import per_sample

    rng = np.random.default_rng(3)

    def part(rows: int):
        lens = rng.integers(0, 40, rows)
        lp = [rng.normal(-1, 0.5, n).astype(np.float32).tolist() for n in lens]
        rp = [(np.asarray(x, np.float32) + rng.normal(0, 0.1, len(x)).astype(np.float32)).tolist() for x in lp]
        vals = [rng.normal(0, 1, n).astype(np.float32).tolist() for n in lens]
        lp[1] = rp[1] = vals[1] = None
        f32 = pa.list_(pa.float32())
        return pa.table({"logprobs": pa.array(lp, f32), "ref_logprobs": pa.array(rp, f32),
                         "values": pa.array(vals, f32)}), lp, rp, vals

    small, big = part(50), part(400)
    first = per_sample(small[0])
    kept = {k: np.array(v, dtype=float) for k, v in first.items()}
    per_sample(big[0])
    again = per_sample(small[0])
    for k in kept:
        np.testing.assert_array_equal(np.array(first[k], dtype=float), kept[k], err_msg=k)
        np.testing.assert_array_equal(np.array(again[k], dtype=float), kept[k], err_msg=k)
    _, lp, rp, vals = small
    for i in range(50):
        if not lp[i]:
            assert np.isnan(kept["kl_mean"][i]) and np.isnan(kept["value_mean"][i])
            continue
        lr = np.asarray(lp[i], np.float32).astype(np.float64) - np.asarray(rp[i], np.float32).astype(np.float64)
        kl = np.exp(lr) - 1 - lr
        assert kept["log_ratio_sum"][i] == pytest.approx(lr.sum(), rel=1e-12, abs=1e-12)
        assert kept["kl_mean"][i] == pytest.approx(kl.mean(), rel=1e-9, abs=1e-15)
        assert kept["value_mean"][i] == pytest.approx(np.asarray(vals[i], np.float32).astype(np.float64).mean(),
                                                      rel=1e-12, abs=1e-12)


def test_per_sample_sums_are_each_rows_own():
    """A part with a null logprob (non-finite values: the masked path) and one huge KL, and rows whose logprobs
    and ref_logprobs differ in length: every sample's sums are its own tokens' (running totals over the part,
    subtracted at row ends, made every later sample's kl_sum 0 after the KL of 2e17)."""
    import pyarrow as pa

    from rlviz_widgets._ingest.metrics import per_sample

    rng = np.random.default_rng(5)
    rows = 300
    lp = [rng.normal(-1, 0.3, 20).astype(np.float32).tolist() for _ in range(rows)]
    rp = [(np.asarray(x, np.float32) + rng.normal(0, 0.05, 20).astype(np.float32)).tolist() for x in lp]
    lp[3][4] = None  # a null value: the part takes the masked path
    rp[10][0] = -40.0  # lr = 40 or so: kl ~ 2e17
    rp[20] = rp[20][:15]  # unequal lengths: the first 15 paired
    lp[30] = lp[30][:9]
    f32 = pa.list_(pa.float32())
    out = per_sample(pa.table({"logprobs": pa.array(lp, f32), "ref_logprobs": pa.array(rp, f32)}))
    for i in range(rows):
        a = np.array([np.nan if v is None else v for v in lp[i]], np.float32).astype(np.float64)
        b = np.asarray(rp[i], np.float32).astype(np.float64)
        m = min(len(a), len(b))
        lr = a[:m] - b[:m]
        lr = lr[np.isfinite(lr)]
        kl = np.exp(lr) - 1 - lr
        assert out["kl_sum"][i] == pytest.approx(kl.sum(), rel=1e-12), i
        assert out["kl_mean"][i] == pytest.approx(kl.mean(), rel=1e-12), i
        assert out["log_ratio_sum"][i] == pytest.approx(lr.sum(), rel=1e-12, abs=1e-13), i
        assert out["logprob_mean"][i] == pytest.approx(np.nanmean(a), rel=1e-12), i


def test_an_overflowing_kl_makes_the_samples_kl_infinite(tmp_path, open_run):
    """A log-ratio past ~709.8 (a reference logprob of a masked logit) makes the token's k3 KL infinite:
    the sample's kl_mean and kl_sum were 0 (the token left out as if missing), while tokens() showed inf."""
    import json

    (tmp_path / "logs").mkdir()
    recs = [{"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a", "b"],
             "logprobs": [-0.1, -0.1], "ref_logprobs": [-0.1, -800.0]},
            {"step": 0, "prompt": "p", "response": "r", "reward": 2.0, "response_tokens": ["a", "b"],
             "logprobs": [-0.5, None], "ref_logprobs": [-0.4, -0.3]}]
    (tmp_path / "logs" / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = open_run(tmp_path / "logs")
    s = run.samples.sort_values("line")
    assert np.isinf(s.kl_mean.iloc[0]) and np.isinf(s.kl_sum.iloc[0])
    assert np.isinf(run.tokens([int(s.sample_id.iloc[0])]).kl).any()
    lr = float(np.float32(-0.5)) - float(np.float32(-0.4))  # the second sample: its null logprob left out
    assert s.kl_mean.iloc[1] == pytest.approx(np.exp(lr) - 1 - lr, rel=1e-9)
    assert np.isinf(run.steps.kl_max.iloc[0])


def _write_records(folder, recs):
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def test_histograms_of_values_whose_range_overflows_a_double(tmp_path, open_run):
    """Rewards of -1e308 and 1e308: the bin width was inf, pasted into the SQL as the word inf (a Binder error)."""
    recs = [{"step": s, "prompt": "p", "response": "r", "reward": r} for s, r in ((0, -1e308), (0, 0.5), (1, 1.0),
                                                                                   (1, 1e308))]
    run = open_run(_write_records(tmp_path / "logs", recs))
    h = run.reward_histogram("reward", bins=4)
    assert h["count"].sum() == 4 and np.isfinite(h[["bin_start", "bin_end"]].to_numpy()).all()
    assert h.bin_start.min() == -1e308 and h.bin_end.max() == 1e308
    assert sorted(h.bin) == [0, 2, 2, 3]  # -1e308 | 0.5 and 1.0 just past the middle edge (0) | 1e308
    hs = run.histograms(["reward"], bins=1)
    assert hs["count"].sum() == 4 and (hs.bin == 0).all() and np.isfinite(hs.bin_end).all()
    with pytest.raises(ValueError, match="bins must be from 1 to 2147483647"):
        run.reward_histogram("reward", bins=2**31)
    # their spread: finite, as numpy gives it (DuckDB 1.5 raised "out of range", 2.0 gave NaN)
    st = run.steps.set_index("step")
    want = [np.std(np.array(v) * 2.0**-600) * 2.0**600 for v in ([-1e308, 0.5], [1.0, 1e308])]  # ~5e307
    assert st["reward_std"].tolist() == pytest.approx(want, rel=1e-12)
    g = groups.groups(run).set_index("step")
    assert g["reward_std"].tolist() == pytest.approx(want, rel=1e-12)


def test_histograms_of_values_whose_range_underflows_a_double(tmp_path, open_run):
    """Rewards of 0, 5e-324 and 1e-323 (subnormal): the bin width was 0, every value fell in the last bin, and the
    edges were [0, 0], the maximum outside them. Such values are scaled by a power of two first (exact)."""
    recs = [{"step": 0, "prompt": "p", "response": "r", "reward": r} for r in (0.0, 5e-324, 1e-323)]
    run = open_run(_write_records(tmp_path / "logs", recs))
    h = run.reward_histogram("reward", bins=30).sort_values("bin")
    assert h.bin.tolist() == [0, 15, 29] and h["count"].tolist() == [1, 1, 1]
    assert h.bin_start.iloc[0] == 0.0 and h.bin_end.iloc[-1] == 1e-323
    assert (h.bin_start <= h.bin_end).all()  # edges as doubles can hold them: a 30th of 1e-323 is not one
    hs = run.histograms(["reward"], bins=2)
    assert sorted(hs.bin) == [0, 1] and hs["count"].sum() == 3


@pytest.mark.parametrize("options, error", [
    ({"steps": (30, 10)}, "the first step is after the last"),
    ({"steps": (15,)}, r"steps must be \(first, last\)"),
    ({"steps": 15}, r"steps must be \(first, last\)"),
    ({"steps": "10"}, r"steps must be \(first, last\)"),
    ({"steps": (float("nan"), None)}, "each end a number or None"),
    ({"max_samples_per_step": 2.5}, "must be a whole number"),
    ({"max_samples_per_step": "3"}, "must be a whole number"),
    ({"max_samples_per_step": 0}, "at least 1"),
    ({"system_prompt_end": 5}, r"system_prompt_end= takes text \(or None\), not 5"),
    ({"pad_token": 1}, r"pad_token= takes text \(or None\), not 1"),
])
def test_bad_options_are_refused_before_anything_is_read(synth_logs, open_run, cache_dir, options, error):
    """A reversed step range gave an empty run without a word; (15,) failed with an unpacking error after every
    file had been parsed into the cache; a cap of 2.5 kept 2."""
    folder, _ = synth_logs()
    with pytest.raises((ValueError, TypeError), match=error):
        open_run(folder, **options)
    assert not any(cache_dir.rglob("*.parquet"))


def test_an_option_that_keeps_nothing_or_changes_nothing_is_said(tmp_path):
    """A step range past the run gave an empty run, a misspelt system_prompt_end marker left every prompt whole,
    and columns= naming a field no record has left its column empty, without a word (but a problem per record):
    each is now an OptionWarning at the user's line (once, at the first open)."""
    import warnings

    folder = _write_records(tmp_path / "logs", [{"step": s, "prompt": f"sys<|end|>q{s}", "response": "r",
                                                  "reward": 1.0} for s in (0, 1)])

    def said(logs=folder, cache="cache", **options) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = rlviz_widgets.open_run(logs, cache_dir=tmp_path / cache, progress=False, **options)
            run.refresh()
        assert all(w.filename == __file__ for w in caught)
        return [str(w.message) for w in caught if issubclass(w.category, rlviz_widgets.OptionWarning)]

    assert said(steps=(5, 9)) == ["steps=(5, 9) keeps no sample of these logs (2 samples of other steps)"]
    assert said(cache="full") == []  # a cache of every line: the steps it holds are known
    assert said(cache="full", steps=(5, None)) == [
        "steps=(5, None) keeps no sample of these logs (2 samples of other steps; their steps run 0..1)"]
    empty = tmp_path / "empty" / "r.jsonl"
    empty.parent.mkdir()
    empty.write_text("")
    assert said(empty, steps=(5, 9)) == []  # the log is empty, not the range wrong (a run followed from its start)
    renamed = _write_records(tmp_path / "it", [{"iteration": s, "prompt": "p", "response": "r", "reward": 1.0}
                                               for s in (0, 1)])
    assert said(renamed, columns={"step": "iteration"}, steps=(5, 9)) == [  # the range, not the mapping
        "steps=(5, 9) keeps no sample of these logs (2 samples of other steps)"]
    assert said(system_prompt_end="<|eot|>") == [
        "system_prompt_end='<|eot|>' occurs in none of the 2 prompts: they are kept whole"]
    assert said(system_prompt_end="<|end|>", steps=(1, 9)) == [] and said() == []
    assert said(columns={"reward": "score", "prompt": "prompt", "ground_truth": "gt"}) == [
        "columns= maps 'reward' to 'score', which no record holds a value of: reward is empty (a misspelt field?)",
        "columns= maps 'ground_truth' to 'gt', which no record holds a value of: ground_truth is empty (a misspelt "
        "field?)"]
    assert said(columns={"step": "global_step"}) == [
        "columns= maps 'step' to 'global_step', which no record holds a value of: every record was skipped (a "
        "misspelt field?)"]


def test_the_system_prompt_is_cut_before_pads_are_stripped(tmp_path, open_run):
    """Llama 3 pads with <|eot_id|>, which also ends the system turn: stripped first, the marker was never found."""
    prompt = "<|start_header_id|>system<|end_header_id|>Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>2+2?"
    folder = _write_records(tmp_path / "logs", [{"step": 0, "prompt": prompt, "response": "4<|eot_id|>",
                                                  "reward": 1.0}])
    run = open_run(folder, pad_token="<|eot_id|>", system_prompt_end="<|eot_id|>")
    s = run.samples
    assert s.prompt.tolist() == ["<|start_header_id|>user<|end_header_id|>2+2?"] and s.response.tolist() == ["4"]


def test_histogram_columns_and_sql_statements_are_checked(tmp_path, open_run):
    """A set's text column run was listed as numeric (its histogram failed inside DuckDB); histograms() of a
    misspelt column returned nothing; run.sql('') raised AttributeError and run.sql('drop view samples') broke
    the run."""
    from rlviz_widgets.run.runset import RunSet

    a = _write_records(tmp_path / "a", [{"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "acc": 1.0}])
    b = _write_records(tmp_path / "b", [{"step": 0, "prompt": "p", "response": "r", "reward": 2.0, "acc": "yes"}])
    rs = RunSet({"A": open_run(a), "B": open_run(b)})
    with pytest.raises(ValueError, match="'run': not a numeric column") as err:
        rs.reward_histogram("run")
    assert "run," not in str(err.value).split("numeric columns:")[1]
    with pytest.raises(KeyError, match="rewrad"):
        rs.histograms(["rewrad"])
    assert rs.histograms(["advantage"]).empty  # a common column these logs lack is left out
    run = rs.runs["A"]
    for query in ("", "-- a comment"):
        with pytest.raises(ValueError, match="no SQL statement"):
            run.sql(query)
    run.sql("DROP VIEW samples")  # the sandbox's own view, for the one call
    with pytest.raises(ValueError, match="one statement at a time"):
        run.sql("SELECT 1; CREATE TABLE t AS SELECT 1")
    run.sql("EXPLAIN ANALYZE DROP VIEW samples")
    with pytest.raises(Exception, match="runs in a sandbox|not an? table"):  # the sandbox's _nums is a view
        run.sql("COPY _nums FROM '/nonexistent.csv'")
    assert len(run.samples) == 1 and run.sql("SELECT count(*) AS n FROM samples").n.tolist() == [1]
    assert len(run.sql("EXPLAIN SELECT * FROM samples")) > 0 and len(run.sql("EXPLAIN ANALYZE SELECT 1")) > 0
    assert run.sql("PIVOT samples ON step USING count(*)").shape[0] == 1  # a MULTI statement to DuckDB
    assert "reward" in run.sql("CALL pragma_table_info('samples')")["name"].tolist()


def test_sql_cannot_write_into_the_log_folder_by_a_comment_or_a_setting(tmp_path, open_run):
    """A comment before EXPLAIN ANALYZE hid the statement it runs from the guard (a COPY wrote into the log folder,
    a DROP VIEW broke the run); a CALL of enable_logging made DuckDB write its log there on every later query."""
    import hashlib

    logs = _write_records(tmp_path / "logs", [{"step": 0, "prompt": "p", "response": "r", "reward": 1.0}])

    def folder() -> dict:
        return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in logs.rglob("*") if p.is_file()}

    before = folder()
    run = open_run(logs)
    for query in (f"/* note */ EXPLAIN ANALYZE COPY samples TO '{logs}/a.csv'",
                  f"-- note\nEXPLAIN ANALYZE COPY samples TO '{logs}/b.csv'",
                  f"EXPLAIN /* x */ ANALYZE COPY samples TO '{logs}/c.csv'",
                  f"EXPLAIN (ANALYZE) COPY samples TO '{logs}/d.csv'",
                  f"EXPLAIN (FORMAT json, ANALYZE) COPY samples TO '{logs}/e.csv'",
                  "/* a /* nested */ comment */ EXPLAIN ANALYZE DROP VIEW samples"):
        if "DROP" in query:
            run.sql(query)  # the sandbox's own view
            continue
        with pytest.raises(ValueError, match="runs in a sandbox"):
            run.sql(query)
    for query in (f"CALL enable_logging(storage='file', storage_path='{logs}')",
                  f"SELECT * FROM Enable_Logging (storage='file', storage_path='{logs}')"):
        with pytest.raises(ValueError, match="runs in a sandbox"):
            run.sql(query)
    try:  # refused by DuckDB 2.0's lock; DuckDB 1.5 lets it by, and it only prints (profile_output is locked)
        run.sql("PRAGMA enable_profiling")
    except ValueError as e:
        assert "runs in a sandbox" in str(e)
    with pytest.raises(duckdb.Error, match="configuration"):  # and the settings are locked (DuckDB 2.0: so is
        run.relations.cursors.db.execute("SET threads = 1")  # enable_logging, which DuckDB 1.5 lets by)
    # a pragma that runs SQL of its own: import_database runs a folder's schema.sql and load.sql
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "schema.sql").write_text("DROP VIEW samples;\n")
    (exported / "load.sql").write_text(f"COPY (SELECT 1) TO '{logs}/written.csv';\n")
    for query in (f"PRAGMA import_database('{exported}')", f"/* x */ pragma Import_Database('{exported}')",
                  "PRAGMA copy_database('memory', 'other')"):
        # (DuckDB 1.5 gives the statements the pragma would run: refused for what they are)
        if "copy_database" in query:  # into no database there is: an error of the query's own (1.5: two statements)
            with pytest.raises((duckdb.Error, ValueError)):
                run.sql(query)
            continue
        with pytest.raises(ValueError, match="runs in a sandbox|one statement at a time"):  # (1.5: its statements)
            run.sql(query)
    assert run.sql("PRAGMA show_tables")["name"].tolist() and len(run.sql("PRAGMA table_info('samples')")) > 5
    assert run.sql("SELECT count(*) AS n FROM samples").n.tolist() == [1] and len(run.samples) == 1
    assert len(run.sql("/* plan */ EXPLAIN ANALYZE SELECT '--' AS a, 'it''s /* not */ a comment' AS b")) > 0
    assert folder() == before


def test_a_where_binds_as_a_whole_and_is_one_condition(tmp_path, open_run):
    """``histograms(where="step = 0 OR step = 1")`` was added as ``isfinite(reward) AND step = 0 OR step = 1``:
    a sample of step 1 without a reward was counted in the last bin. And a ``where`` could end the statement and
    start another (``1=1; COPY ...``) in the histograms, the step frame and the sample table."""
    recs = [{"step": s, "prompt": "p", "response": "r", "reward": None if i == 0 else float(i)}
            for s in (0, 1) for i in range(3)]
    logs = _write_records(tmp_path / "logs", recs)
    run = open_run(logs)
    for where in ("step = 0 OR step = 1", "step = 0 OR step = 1 -- both steps"):
        h = run.histograms(["reward"], bins=2, where=where)
        assert h.groupby("step")["count"].sum().tolist() == [2, 2]
        assert run.reward_histogram(bins=2, where=where).groupby("step")["count"].sum().tolist() == [2, 2]
    sneaky = f"true); COPY (SELECT 1) TO '{logs}/x.csv'; SELECT (1"
    for call in (lambda: run.histograms(["reward"], where=sneaky), lambda: run.reward_histogram(where=sneaky),
                 lambda: run.sql(run.steps_sql(sneaky))):
        with pytest.raises(ValueError, match="one SQL condition"):
            call()
    table = rlviz_widgets.SampleTable(run)
    with pytest.raises(traitlets.TraitError, match="one SQL condition"):
        table.where = sneaky  # refused, the table as it was
    assert table.where == "" and not table.error and table.row_count == 6
    with pytest.raises(ValueError, match="not a SQL condition"):
        run.histograms(["reward"], where="reward >")
    for call in (lambda w: run.histograms(["reward"], where=w), lambda w: run.reward_histogram(where=w)):
        with pytest.raises(ValueError, match="parentheses balanced"):  # wrapped, it undid isfinite(reward) AND
            call("false) OR (true")
    assert sorted(p.name for p in logs.iterdir()) == ["r.jsonl"]


def test_a_where_naming_no_column_or_not_text_is_refused_in_our_words(tmp_path, open_run):
    """A misspelt column in where= raised DuckDB's BinderException showing our own SQL (``FROM _nums WHERE
    isfinite("reward") AND (stepp > 30``); a table took it and failed on every page after; where=5 raised
    AttributeError."""
    logs = _write_records(tmp_path / "logs", [{"step": s, "prompt": "p", "response": "r", "reward": 1.0}
                                              for s in (0, 1)])
    run = open_run(logs)
    calls = (lambda w: run.reward_histogram(where=w), lambda w: run.histograms(where=w), run.steps_sql)
    for call in calls:
        with pytest.raises(ValueError, match=r"^where= is no condition over the samples' columns: 'stepp > 0' "
                                             r"\(Binder Error: .*\"stepp\"[^\n]*\)$"):
            call("stepp > 0")
        with pytest.raises(TypeError, match="where= takes a SQL condition as text"):
            call(5)
    assert run.reward_histogram(where="step > 0")["count"].sum() == 1
    table = rlviz_widgets.SampleTable(run)
    with pytest.raises(traitlets.TraitError, match="no condition over the samples' columns"):
        table.where = "stepp > 0"
    assert table.where == "" and table.row_count == 2 and not table.error
    table.where = "step > 0"
    assert table.row_count == 1


def test_sql_runs_one_query_given_as_text(tmp_path, open_run):
    """``run.sql("select 1; select 2")`` gave the last result alone, in silence; run.sql(123) raised
    "object of type 'int' has no len()"; refusals named DuckDB's statement kinds (MULTI, LOAD for INSTALL)."""
    run = open_run(_write_records(tmp_path / "logs", [{"step": 0, "prompt": "p", "response": "r", "reward": 1.0}]))
    with pytest.raises(ValueError, match="one statement at a time; 2 were given"):
        run.sql("SELECT 1; SELECT 2")
    with pytest.raises(TypeError, match="run.sql takes SQL as text"):
        run.sql(123)
    with pytest.raises(ValueError, match="runs in a sandbox"):
        run.sql("INSTALL httpfs")
    assert run.sql("SELECT 1 AS x;").x.tolist() == [1]


def test_a_log_with_only_reference_logprobs_has_their_probabilities(tmp_path, open_run):
    """``ref_prob = exp(ref_logprob)`` was given only when the log also had ``logprobs``; the token view and the
    strip's metrics now have it with ``ref_logprobs`` alone (and ``prob`` with ``logprobs`` alone, as before)."""
    import math

    for field, metric in (("ref_logprobs", "ref_prob"), ("logprobs", "prob")):
        logs = _write_records(tmp_path / field, [{"step": 0, "prompt": "p", "response": "ab", "reward": 1.0,
                                                  "response_tokens": ["a", "b"], field: [-1.0, -2.0]}])
        run = open_run(logs)
        assert metric in run.token_metrics and "kl" not in run.token_metrics
        t = run.tokens(run.samples["sample_id"])
        assert t[metric].tolist() == pytest.approx([math.exp(-1.0), math.exp(-2.0)])
        assert run.sql(f"SELECT {metric} FROM tokens ORDER BY position")[metric].tolist() == t[metric].tolist()


def test_lenient_option_values_that_mean_one_thing(synth_logs, open_run):
    """A cap of 2.0 (or 1e3) is a whole number; an infinite end of steps= is an open one (it failed after every
    file had been parsed); Decimal and Fraction ends are numbers."""
    from decimal import Decimal
    from fractions import Fraction

    folder, _ = synth_logs()
    assert open_run(folder, max_samples_per_step=2.0).steps.samples.tolist() == [2, 2, 2, 2]
    assert open_run(folder, max_samples_per_step=1e3).steps.samples.tolist() == [12, 12, 12, 12]
    assert open_run(folder, steps=(2, float("inf"))).step_values == [2, 3]
    assert open_run(folder, steps=(float("-inf"), np.float64(1))).step_values == [0, 1]
    assert open_run(folder, steps=(Decimal(1), Fraction(5, 2))).step_values == [1, 2]


def test_an_infinite_end_on_the_far_side_keeps_no_step(synth_logs, open_run):
    """steps=(inf, None) is "from step +inf on": no step. It kept every step (any infinite end was taken as an
    open one), as did (None, -inf); so were ends past the 64-bit steps on that side. The near side stays open."""
    folder, _ = synth_logs()
    inf = float("inf")
    for steps in [(inf, None), (inf, inf), (None, -inf), (-inf, -inf), (1e30, None), (None, -1e30), (2**64, 2**65)]:
        run = open_run(folder, steps=steps)
        assert run.step_values == [] and run.n_samples == 0, steps
    assert open_run(folder, steps=(-inf, inf)).step_values == [0, 1, 2, 3]
    assert open_run(folder, steps=(-1e30, 1e30)).step_values == [0, 1, 2, 3]


def test_an_empty_response_has_zero_tokens_not_an_unknown_count(tmp_path, open_run):
    """response_tokens: [] (a response of no tokens) gave n_tokens <NA>, left out of the step's mean length;
    a record without any token array still has no count."""
    recs = [{"step": 0, "prompt": "p", "response": "abc", "reward": 1.0, "response_tokens": ["a", "b", "c"],
             "logprobs": [-0.1, -0.2, -0.3]},
            {"step": 0, "prompt": "p", "response": "", "reward": 0.0, "response_tokens": [], "logprobs": []},
            {"step": 0, "prompt": "p", "response": "x", "reward": 0.5}]
    run = open_run(_write_records(tmp_path / "logs", recs))
    s = run.samples.sort_values("line")
    assert s.n_tokens.tolist()[:2] == [3, 0] and pd.isna(s.n_tokens.iloc[2])
    assert run.steps.length_mean.tolist() == [1.5]


def test_a_where_naming_a_custom_text_column(tmp_path, open_run):
    """A custom text field (``source``) is a column of ``samples`` but not of the numbers kept in memory: a
    ``where`` naming it, in any letter case, failed with a BinderException in the histograms and the step frame."""
    log = tmp_path / "log"
    log.mkdir()
    with open(log / "r0.jsonl", "w") as f:
        for i in range(20):
            f.write(json.dumps({"step": i // 5, "prompt": f"p{i}", "response": "r", "reward": i / 10,
                                "source": "a" if i % 2 else "b", "profile": 1.0}) + "\n")
    run = open_run(log)
    want = run.samples.query("source == 'a'")
    for where in ("source = 'a'", "Source = 'a' AND profile > 0", '"SOURCE" = \'a\''):
        assert run.reward_histogram(where=where)["count"].sum() == len(want)
        assert run.histograms(["reward"], where=where)["count"].sum() == len(want)
        steps = run.sql(run.steps_sql(where=where))
        assert steps["samples"].tolist() == want.groupby("step").size().tolist()
        assert np.allclose(steps["reward_mean"], want.groupby("step")["reward"].mean())


def _one_file_log(tmp_path, records: list[dict]) -> Path:
    """A log of one file holding ``records`` (prompt, response and step filled in where missing)."""
    log = tmp_path / "log"
    log.mkdir()
    with open(log / "r0.jsonl", "w") as f:
        for i, rec in enumerate(records):
            f.write(json.dumps({"step": 0, "prompt": "p", "response": f"r{i}", **rec}) + "\n")
    return log


def _rewards_log(tmp_path, rewards) -> Path:
    return _one_file_log(tmp_path, [{"reward": r} for r in rewards])


def test_means_of_huge_finite_values_stay_finite(tmp_path, open_run):
    """The mean of -1e308, -1e308, 1 is about -6.7e307; avg() summed them in a double and gave -inf (below the
    step's min), in the steps frame and in the GRPO groups."""
    run = open_run(_rewards_log(tmp_path, [-1e308, -1e308, 1.0]))
    want = (-1e308 / 3) * 2 + 1 / 3
    assert run.steps["reward_mean"][0] == pytest.approx(want)
    assert groups.groups(run)["reward_mean"][0] == pytest.approx(want)
    assert run.steps["reward_min"][0] <= run.steps["reward_mean"][0] <= run.steps["reward_max"][0]


@pytest.mark.parametrize("rewards,bins", [([-1e20, -1.0, 1e20], 2), ([-1e308, -1e-3, 5.0, 1e308], 2),
                                          ([-1e20, -1.0, 0.0, 3.0, 1e20], 7), ([-9e15, 0.0, 123456.789], 3),
                                          ([1e16, 1e16 + 2], 30), ([-1e300, -1e300 * (1 - 2**-50)], 30)])
def test_every_value_lies_within_its_bins_edges(tmp_path, open_run, rewards, bins):
    """A value's bin was floor((v - lo) / width), rounded: (-1 + 1e20) / 1e20 is 1.0, so -1 was counted in the
    bin [0, 1e20]. Counts now agree with numpy.histogram over the same edges."""
    run = open_run(_rewards_log(tmp_path, rewards))
    for h in (run.reward_histogram(bins=bins), run.histograms(["reward"], bins=bins)):
        edges = np.append(h["bin_start"].to_numpy(), h["bin_end"].to_numpy()[-1]) if len(h) == bins else None
        for _, row in h.iterrows():
            last = row.bin == bins - 1
            inside = [r for r in rewards if row.bin_start <= r < row.bin_end or (last and r == row.bin_end)]
            assert row["count"] == len(inside), (row.to_dict(), rewards)
        if edges is not None:
            assert h["count"].tolist() == np.histogram(rewards, edges)[0].tolist()
        assert h["bin_end"].max() >= max(rewards)  # not short of it (lo + bins * width rounds)
        assert (h["bin_start"] < h["bin_end"]).all()  # a width under an ulp gave bins of no width


@pytest.mark.parametrize("value", [1e16, -1e308, 1.7976931348623157e308, 3.0])
def test_all_equal_values_get_a_bin_of_positive_width(tmp_path, open_run, value):
    """All values equal: bins of width 1, but 1e16 + 1 is 1e16, so the bin had zero width (not drawn)."""
    run = open_run(_rewards_log(tmp_path, [value] * 3))
    for h in (run.reward_histogram(bins=4), run.histograms(["reward"], bins=4)):
        assert h["count"].sum() == 3
        row = h[h["count"] > 0].iloc[0]
        assert row.bin_start < row.bin_end and np.isfinite(row.bin_end)
        assert row.bin_start <= value <= row.bin_end


def test_sums_where_huge_values_cancel_keep_the_small_ones(tmp_path, open_run):
    """A masked position filled with float32's lowest in one array only gives log-ratios of -3e38 and +3e38 in one
    response: summed by reduceat's unrolled loop, the small terms were absorbed into the huge partial sums and the
    sample's log_ratio_sum was 0, while tokens() showed terms summing to -5.25."""
    log = tmp_path / "log"
    log.mkdir()
    lp, rp = [-3e38, -1.5, -3.0, -3.25, 0.75], [-0.5, -3e38, -1.25, 0.75, 0.25]
    others = [{"logprobs": [-1.0, -2.0], "ref_logprobs": [-1.5, -1.0]}] * 3
    recs = [*others[:2], {"logprobs": lp, "ref_logprobs": rp}, others[2]]
    with open(log / "r0.jsonl", "w") as f:
        for i, arrays in enumerate(recs):
            f.write(json.dumps({"step": 0, "prompt": "p", "response": f"r{i}", "reward": 1.0,
                                "response_tokens": [f"t{j}" for j in range(len(arrays["logprobs"]))],
                                "values": [1e20, 1.0, -1e20][:len(arrays["logprobs"])], **arrays}) + "\n")
    run = open_run(log)
    s = run.samples.sort_values("line").reset_index(drop=True)
    tokens = run.tokens(s["sample_id"].tolist())
    for row in s.itertuples():
        lr = tokens[tokens.sample_id == row.sample_id]["log_ratio"].to_numpy()
        assert row.log_ratio_sum == math.fsum(lr) and row.log_ratio_mean == pytest.approx(math.fsum(lr) / len(lr))
    assert s["log_ratio_sum"][2] == pytest.approx(-5.25)
    assert s["value_mean"][2] == pytest.approx(1 / 3, rel=1e-6)  # 1e20, 1, -1e20 (float32): the 1 kept
    assert s["log_ratio_sum"][0] == pytest.approx(-0.5)


def _steps_log(tmp_path, steps, **fields) -> Path:
    return _one_file_log(tmp_path, [{"step": s, "reward": 10.0 * s, **fields} for s in steps])


def test_bucketed_histograms_filter_on_the_samples_own_steps(tmp_path, open_run):
    """With max_steps, a where on step was applied to the bucket's first step: step 3 passed "step <= 2" (its
    bucket is named 2) and was counted outside the edges; "step = 1" matched no bucket and raised IndexError."""
    run = open_run(_steps_log(tmp_path, [0, 1, 2, 3]))
    h = run.histograms(["reward"], bins=2, where="step <= 2", max_steps=2)
    assert h["count"].sum() == 3 and h["bin_end"].max() == 20.0
    assert h.groupby("step")["count"].sum().to_dict() == {0: 2, 2: 1}
    h = run.histograms(["reward"], bins=2, where="step = 1", max_steps=2)
    assert h[["step", "step_end", "count"]].values.tolist() == [[0, 2, 1]]
    assert run.histograms(["reward"], bins=2, where="step > 99", max_steps=2).empty


def test_the_last_steps_bar_ends_past_its_steps(tmp_path, open_run):
    """The last bucket (steps 9 and 100, after an evaluation-like gap) ended at 12: step 100 was drawn over
    [9, 12). It ends a typical gap past the run's last step now, bucketed or not."""
    run = open_run(_steps_log(tmp_path, [*range(10), 100]))
    h = run.histograms(["reward"], max_steps=5)
    assert h.groupby("step")["step_end"].first().to_dict() == {0: 3, 3: 6, 6: 9, 9: 101}
    h = run.histograms(["reward"])
    assert h.groupby("step")["step_end"].first().to_dict() == {**{s: s + 1 for s in range(9)}, 9: 100, 100: 101}


def test_kl_of_confident_tokens_is_never_negative(tmp_path, open_run):
    """exp(r) - 1 - r loses every digit for |r| < 1e-7 (log-probs of confident tokens): a kl of -1.4e-45 came
    out, and noise instead of r**2 / 2."""
    lp, rp = [-1e-07, 1.5e-45, -0.3, -2e-4], [-2e-07, 0.0, -0.1, -1e-4]
    run = open_run(_steps_log(tmp_path, [0], logprobs=lp, ref_logprobs=rp, response_tokens=list("abcd")))
    t = run.tokens(run.samples.sample_id.tolist())
    r = f32(lp).astype(np.float64) - f32(rp).astype(np.float64)
    want = np.array([math.expm1(x) - x if abs(x) > 1e-3 else x * x / 2 + x ** 3 / 6 + x ** 4 / 24 for x in r])
    assert (t["kl"] >= 0).all() and np.allclose(t["kl"], want, rtol=1e-8, atol=0)
    s = run.samples.iloc[0]
    assert s.kl_sum >= 0 and s.kl_sum == pytest.approx(want.sum(), rel=1e-8)


def test_the_last_bin_ends_exactly_at_the_largest_value(tmp_path, open_run):
    """lo + bins * width can round below the largest value: the last edge is that value itself."""
    rewards = [0.2, 0.5, 0.9]
    assert 0.2 + 3 * ((0.9 - 0.2) / 3) < 0.9  # the case: the widths' sum falls short
    write_lines(tmp_path / "logs" / "r0.jsonl",
                [{"step": 0, "prompt": "p", "response": f"r{i}", "reward": r} for i, r in enumerate(rewards)])
    run = open_run(tmp_path / "logs")
    for h in (run.reward_histogram(bins=3), run.histograms(["reward"], bins=3)):
        last = h[h["bin"] == 2].iloc[0]
        assert last["bin_end"] == 0.9
        assert last["bin_start"] <= 0.9 <= last["bin_end"]
        assert h["count"].sum() == 3


def test_samples_interleave_rank_files_by_step_then_line(tmp_path, open_run):
    folder = tmp_path / "logs"
    for rank in range(2):
        write_lines(folder / f"rollout_rank{rank}.jsonl",
                    [{"step": s, "prompt": "p", "response": f"{rank}-{s}-{i}", "reward": 1.0}
                     for s in range(2) for i in range(2)])
    s = open_run(folder).samples
    assert s["response"].tolist() == ["0-0-0", "1-0-0", "0-0-1", "1-0-1", "0-1-0", "1-1-0", "0-1-1", "1-1-1"]
