"""prime-rl token exports, NeMo-RL train dumps with prev_logprobs and RL Logging Board logs extended with a second
log-prob list, opened as runs: every mismatch figure of run.samples, run.steps and run.tokens() against an
independent numpy computation (tests/run/test_mismatch.py's ``Ref``) of the records as written."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import rlviz_widgets as rw
from rlviz_widgets._ingest.readers import prime
from rlviz_widgets._mismatch import STEP_FIGURES, MismatchRule, TokenColumns
from tests.prime_formats import GENERATIONS, ChatMLTokenizer, nemo_prev_tokens, write_nemo_prev, write_prime
from tests.run.test_mismatch import PRIME, Ref, close, prime_tokens

SAMPLE_FIGURES = ("mismatch_log_ratio_abs_mean", "mismatch_log_ratio_abs_max", "mismatch_kl_mean", "masked_tokens",
                  "masked_fraction", "rule_masked_tokens", "rule_masked_fraction", "sequence_masked",
                  "mask_disagreements", "sequence_ratio", "entropy_mean")
RULES = [MismatchRule(), MismatchRule("token_mask", low=0.5, high=1.5), MismatchRule("geometric_mask", 0.98, 1.02),
         MismatchRule("prob_delta"), MismatchRule("sequence_truncate", high=1.05)]


def open_quiet(path, **kw) -> rw.Run:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rw.open_run(path, cache_dir=path.parent / "cache", **kw)


def by_record(run: rw.Run, written: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """The run's samples and, in their order, the records written (matched by file and line)."""
    s = run.samples
    at = {(str(w["path"]), w["line"]): w for w in written if w["complete"]}
    return s, [at[(f, int(n))] for f, n in zip(s["file"], s["line"])]


def check_samples(s: pd.DataFrame, records: list[dict], rule: MismatchRule, c: TokenColumns = PRIME) -> None:
    t = prime_tokens(records) if c is PRIME else records
    want = Ref(t, c).per_sample(rule)
    for name in SAMPLE_FIGURES:
        got = s[name].astype(float).to_numpy() if name in s else None
        assert got is not None, name
        close(got, [float(want[k][name]) for k in range(len(s))], f"{rule} {name}")


@pytest.mark.parametrize("gen", GENERATIONS)
def test_every_generation_opens_with_exact_figures(tmp_path, gen):
    run_id = "run-a" if gen in ("v0.6", "v0.7") else None
    written = write_prime(tmp_path / "logs", generation=gen, steps=(1, 2, 3), prompts=4, n=4, seed=3, run_id=run_id)
    run = open_quiet(tmp_path / "logs")
    assert run.format == "prime" and len(run.samples) == len(written)
    assert not len(run.problems[run.problems.kind != "no_tokenizer"])
    s, recs = by_record(run, written)
    records = [w["record"] for w in recs]
    assert s["step"].tolist() == [r["step"] for r in records]
    assert s["n_tokens"].tolist() == [len(r["token_ids"]) for r in records]
    assert s["n_trained_tokens"].tolist() == [sum(r["loss_mask"]) for r in records]
    assert set(s["env_name"]) == {"math"} and s["rank"].tolist() == [r["rank"] for r in records]
    rewarded = gen in ("flat", "steps", "v0.6")
    assert s["reward"].tolist() == pytest.approx([w["sample"].reward if rewarded else np.nan for w in recs],
                                                 nan_ok=True)
    np.testing.assert_allclose(s["advantage"], [w["sample"].advantage for w in recs], rtol=1e-6, atol=1e-6)
    for rule in RULES:
        run.mismatch_rule = rule
        check_samples(run.samples.set_index(s.index), records, rule)


def test_steps_and_tokens_match_numpy(tmp_path):
    written = write_prime(tmp_path / "logs", generation="v0.7", steps=(1, 2, 3), prompts=4, n=4, seed=5)
    run = open_quiet(tmp_path / "logs", mismatch_rule=MismatchRule("token_mask", low=0.6, high=1.4))
    s, recs = by_record(run, written)
    ref = Ref(prime_tokens([w["record"] for w in recs]))
    per = ref.per_sample(run.mismatch_rule)
    steps = run.steps
    for _, row in steps.iterrows():
        rows = [per[k] for k in range(len(s)) if s["step"][k] == row["step"] and per[k]["trained_tokens"] > 0]
        for name in STEP_FIGURES:
            x = np.asarray([r[name] for r in rows], float)
            close([row[name]], [np.nanmean(x)], name)
            close([row[f"{name}_p95"]], [np.nanpercentile(x, 95)], name)
            close([row[f"{name}_p99"]], [np.nanpercentile(x, 99)], name)
        close([row["masked_sequences_fraction"]], [np.mean([r["masked_tokens"] > 0 for r in rows])], "masked seqs")
    t = run.tokens(s["sample_id"].tolist())
    assert len(t) == len(ref.lr)
    close(t["mismatch_log_ratio"], ref.lr, "log ratio")
    close(t["mismatch_kl"], ref.kl, "kl")
    close(t["prob_delta"], ref.delta, "prob delta")
    close(t["importance_ratio"], ref.ratio, "ratio")
    assert t["rule_masked"].tolist() == ref.rule_tokens(run.mismatch_rule).tolist()
    arrays = run.token_arrays(s["sample_id"][:3].tolist())
    for a in arrays:
        sub = t[t.sample_id == a["sample_id"]]
        assert a["masked"].tolist() == sub["masked"].tolist()
        assert {"mismatch_kl", "entropy", "mismatch_log_ratio", "advantage"} <= set(a["metrics"])
    assert {"mismatch_kl", "entropy", "prob_delta", "inference_logprob"} <= set(run.token_metrics)


def test_rule_changes_live_and_in_sets(tmp_path):
    write_prime(tmp_path / "logs", generation="main", steps=(1, 2), seed=2)
    run = open_quiet(tmp_path / "logs")
    assert run.mismatch_rule == MismatchRule()
    before = run.generation
    run.mismatch_rule = "geometric_mask"
    assert run.generation == before + 1 and run.mismatch_rule.kind == "geometric_mask"
    top = run.samples.sort_values("mismatch_log_ratio_abs_max", ascending=False)
    assert top["mismatch_log_ratio_abs_max"].iloc[0] == run.samples["mismatch_log_ratio_abs_max"].max()
    with pytest.raises(TypeError):
        run.mismatch_rule = 3
    write_prime(tmp_path / "logs2", generation="v0.6", steps=(1, 2), seed=4)
    other = open_quiet(tmp_path / "logs2", mismatch_rule=MismatchRule("token_mask", high=1.2))
    rs = rw.RunSet({"a": run, "b": other})
    assert rs.samples["rule_masked_tokens"].notna().all() and "mismatch_kl_mean" in rs.steps
    by_run = rs.samples.groupby("run")["rule_masked_tokens"].sum()
    assert by_run["b"] == other.samples["rule_masked_tokens"].sum()


def test_chat_turns_with_a_tokenizer(tmp_path):
    write_prime(tmp_path / "logs", generation="main", steps=(1,), seed=1)
    run = open_quiet(tmp_path / "logs", tokenizer=ChatMLTokenizer())
    assert run.problems.empty
    turns = run.turns(run.samples["sample_id"][0])
    assert turns["role"].tolist()[:2] == ["system", "user"] and "assistant" in turns["role"].tolist()
    t = run.tokens(run.samples["sample_id"][0])
    assert t["role"].notna().all() and t.loc[t.trained, "role"].eq("assistant").all()


def test_a_step_being_written(tmp_path):
    """No STABLE: the step is counted and marked in progress, its cut last line no problem; once marked, it is."""
    write_prime(tmp_path / "logs", generation="main", steps=(1, 2), unfinished_step=2)
    run = open_quiet(tmp_path / "logs")
    assert run.problems[run.problems.kind != "no_tokenizer"].empty
    steps = run.steps
    assert steps["in_progress"].tolist() == [False, True] and run.steps_in_progress == [2]
    assert steps["samples"].iloc[1] > 0
    (tmp_path / "logs" / "token_exports" / "step_2" / "STABLE").touch()
    assert run.steps["in_progress"].tolist() == [False, False]


def test_layouts_and_detection(tmp_path):
    write_prime(tmp_path / "a", generation="v0.6", run_id="r7")
    files = sorted(p for p in (tmp_path / "a").rglob("*.jsonl") if prime.accepts(p))
    assert files and all(prime.folder_run_id(p) == "r7" and prime.folder_step(p) in (1, 2) for p in files)
    assert open_quiet(tmp_path / "a").format == "prime"
    write_prime(tmp_path / "b", generation="flat")
    assert prime.folder_step(tmp_path / "b" / "token_exports" / "rank_0.jsonl") is None
    run = open_quiet(tmp_path / "b")
    assert sorted(run.samples["step"].unique()) == [1, 2]
    (tmp_path / "b" / "token_exports" / "notes.jsonl").write_text("{}\n")
    assert not prime.accepts(tmp_path / "b" / "token_exports" / "notes.jsonl")
    assert prime.generation({"messages"}) is None


def test_nemo_prev_logprobs(tmp_path):
    records = write_nemo_prev(tmp_path / "logs", prompts=3, n=4)
    run = open_quiet(tmp_path / "logs")
    s = run.samples.sort_values("line").reset_index(drop=True)
    rows = nemo_prev_tokens(records)
    t = pa.table({k: pa.array(v, pa.float32() if "logprob" in k else None) for k, v in rows.items()})
    c = TokenColumns()
    for rule in (MismatchRule(), MismatchRule("token_mask", low=0.9, high=1.1)):
        run.mismatch_rule = rule
        got = run.samples.sort_values("line").reset_index(drop=True)
        want = Ref(t, c).per_sample(rule)
        for name in ("mismatch_log_ratio_abs_mean", "mismatch_log_ratio_abs_max", "mismatch_kl_mean",
                     "rule_masked_tokens", "masked_tokens", "sequence_ratio"):
            close(got[name].astype(float), [float(want[k][name]) for k in range(len(s))], name)
    skipped = write_nemo_prev(tmp_path / "skip", skipped=True)
    assert skipped and "mismatch_kl_mean" not in open_quiet(tmp_path / "skip").samples


def write_rlb(path, extra: dict | None = None, n: int = 6) -> list[dict]:
    rng = np.random.default_rng(0)
    recs = []
    for i in range(n):
        k = 5 + i
        lp = (-rng.uniform(0, 2, k)).astype(np.float32)
        rec = {"step": i // 3, "prompt": "p", "response": "r" * k, "reward": 1.0,
               "response_tokens": [f"t{j}" for j in range(k)], "logprobs": lp.tolist()}
        for key in extra or {}:
            rec[key] = (lp + rng.normal(0, 0.1, k)).astype(np.float32).tolist() if key != "entropy" else \
                rng.uniform(0, 2, k).astype(np.float32).tolist()
        recs.append(rec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs


@pytest.mark.parametrize("trainer_key", ["old_logprobs", "rollout_logprobs"])
def test_rlb_extended_schema(tmp_path, trainer_key):
    recs = write_rlb(tmp_path / "logs" / "run.jsonl", {trainer_key: 1, "entropy": 1})
    run = open_quiet(tmp_path / "logs")
    s = run.samples.sort_values("line").reset_index(drop=True)
    other = {"old_logprobs": ("logprobs", "old_logprobs"), "rollout_logprobs": ("rollout_logprobs", "logprobs")}
    inf_key, tr_key = other[trainer_key]
    rows = {"sample_id": [], "inference_logprob": [], "trainer_logprob": [], "trained": [], "entropy": []}
    for sid, r in enumerate(recs):
        k = len(r["logprobs"])
        rows["sample_id"] += [sid] * k
        rows["inference_logprob"] += r[inf_key]
        rows["trainer_logprob"] += r[tr_key]
        rows["entropy"] += r["entropy"]
        rows["trained"] += [True] * k
    t = pa.table({k: pa.array(v, pa.float32() if k not in ("sample_id", "trained") else None)
                  for k, v in rows.items()})
    want = Ref(t, TokenColumns(entropy="entropy")).per_sample(MismatchRule())
    for name in ("mismatch_log_ratio_abs_max", "mismatch_kl_mean", "entropy_mean", "rule_masked_tokens"):
        close(s[name].astype(float), [float(want[k][name]) for k in range(len(s))], name)
    assert "logprob" in run.token_metrics and "mismatch_kl" in run.token_metrics


def test_logs_without_the_fields_get_no_new_columns(tmp_path):
    write_rlb(tmp_path / "logs" / "run.jsonl", {"entropy": 1})  # entropy alone: a list nothing reads as such
    run = open_quiet(tmp_path / "logs")
    new = {"mismatch_kl_mean", "masked_tokens", "rule_masked_tokens", "mismatch_log_ratio_abs_max"}
    assert not new & set(run.samples.columns) and not new & set(run.steps.columns)
    assert "inference_logprob" not in run.tokens(run.samples["sample_id"][0])
    assert "in_progress" not in run.steps


def test_columns_maps_the_fields(tmp_path):
    recs = write_rlb(tmp_path / "logs" / "dump_step1.jsonl", {"sampler_lp": 1, "ent": 1})
    run = open_quiet(tmp_path / "logs", format="columns",
                     columns={"inference_logprob": "sampler_lp", "trainer_logprob": "logprobs", "entropy": "ent"})
    s = run.samples.sort_values("line").reset_index(drop=True)
    lr = [np.asarray(r["logprobs"], np.float64) - np.asarray(r["sampler_lp"], np.float32).astype(np.float64)
          for r in recs]
    close(s["mismatch_log_ratio_abs_max"], [np.abs(x).max() for x in lr], "abs max")
    close(s["entropy_mean"], [np.mean(np.asarray(r["ent"], np.float32).astype(float)) for r in recs], "entropy")


def test_id_words_split_at_the_first_trained_token():
    """Without a tokenizer the prompt and response are the ids before and from the first trained one as ``#id``
    words: the same texts as SQL's slicing and joining of the lists (null ids left out, a mask shorter or longer
    than the ids, a row without a mask or ids), on random rows."""
    import duckdb

    from rlviz_widgets._ingest.readers.prime import id_words

    rng = np.random.default_rng(5)
    ids, masks = [], []
    for _ in range(400):
        n = int(rng.integers(0, 8))
        ids.append(None if rng.random() < 0.05 else
                   [None if rng.random() < 0.1 else int(rng.integers(0, 10**6)) for _ in range(n)])
        m = n + int(rng.integers(-2, 3))
        masks.append(None if rng.random() < 0.05 else [bool(rng.random() < 0.4) for _ in range(max(m, 0))])
    t = pa.table({"ids": pa.array(ids, pa.list_(pa.int64())), "m": pa.array(masks, pa.list_(pa.bool_()))})
    cut = "coalesce(list_position(m, true), len(ids) + 1)"

    def words(x):
        return f"array_to_string(list_transform({x}, lambda i: '#' || i), ' ')"

    want = duckdb.connect().sql(f"SELECT {words(f'ids[:{cut} - 1]')}, {words(f'ids[{cut}:]')} FROM t").fetchall()
    prompt, response, spelled = id_words(t["ids"], t["m"])
    assert list(zip(prompt.to_pylist(), response.to_pylist())) == want
    from rlviz_widgets._ingest.readers.tokens import spell_ids

    t = t.set_column(0, "ids", pa.array([None if r is None else [None if i is None else (-i if i % 7 == 0 else i)
                                                                 for i in r] for r in ids], pa.list_(pa.int64())))
    assert id_words(t["ids"], t["m"])[2].to_pylist() == spell_ids(t["ids"], None).to_pylist()  # negative: null
