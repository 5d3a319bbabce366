"""Other frameworks' rollout dumps: verl, TRL, open-instruct, NeMo-RL, any JSONL via columns=; format='auto'."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from formats import (
    DecodeOnlyTokenizer,
    FakeTokenizer,
    StrictTokenizer,
    write_nemo,
    write_openinstruct,
    write_trl,
    write_verl,
)

import rlviz_widgets
from rlviz_widgets._ingest.readers.detect import FormatError
from rlviz_widgets._synth import write_log


def _open(source, cache_dir, **kw):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return rlviz_widgets.open_run(source, cache_dir=cache_dir, progress=False, **kw)


# -- verl ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["auto", "verl"])
def test_verl_dump(tmp_path, cache_dir, fmt):
    recs = write_verl(tmp_path / "rollout", steps=(1, 2, 3))
    run = _open(tmp_path / "rollout", cache_dir, format=fmt)
    assert run.format == "verl"
    s = run.samples.sort_values(["step", "line"]).reset_index(drop=True)
    assert len(s) == len(recs) and run.step_values == [1, 2, 3]
    assert s["prompt"].tolist() == [r["input"] for r in recs]
    assert s["response"].tolist() == [r["output"] for r in recs]
    assert np.allclose(s["reward"], [r["score"] for r in recs])
    assert s["ground_truth"].tolist() == [r["gts"] for r in recs]
    assert s["pred"].tolist() == [r["pred"] for r in recs]
    assert s["acc"].tolist() == [float(r["acc"]) for r in recs]  # booleans read as 0/1
    assert s["group_id"].tolist() == [r["uid"] for r in recs]
    assert "uid" not in s.columns and "input" not in s.columns and "score" not in s.columns
    assert s["request_id"].tolist() == [r["request_id"] for r in recs]
    assert run.steps["samples"].tolist() == [6, 6, 6]
    assert run.token_metrics == [] and run.problems.empty


def test_verl_step_from_the_file_name(tmp_path, cache_dir):
    write_verl(tmp_path / "val", steps=(40, 80), with_step=False)
    run = _open(tmp_path / "val", cache_dir)
    assert run.format == "verl" and run.step_values == [40, 80] and run.problems.empty


def test_verl_bad_line_is_located(tmp_path, cache_dir):
    write_verl(tmp_path / "rollout", steps=(1, 2))
    f = tmp_path / "rollout" / "2.jsonl"
    lines = f.read_text().splitlines()
    lines[2] = lines[2][:30]  # a line cut short
    lines[4] = lines[4].replace('"score": ', '"score": "high", "x": ')
    f.write_text("\n".join(lines) + "\n")
    run = _open(tmp_path / "rollout", cache_dir)
    p = run.problems
    bad = p[p.kind == "malformed_json"]
    assert len(bad) == 1 and bad.file.iloc[0] == str(f.resolve()) and bad.line.iloc[0] == 3
    typed = p[p.kind == "wrong_type"]
    assert typed.line.tolist() == [5] and typed.message.iloc[0] == 'score is "high", not a number: left empty'
    assert len(run.samples) == 11  # the cut line is skipped, the bad score left empty


# -- TRL -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["auto", "trl"])
def test_trl_completions(tmp_path, cache_dir, fmt):
    rows = write_trl(tmp_path / "out", steps=(5, 10), prompts=2, n=4)
    run = _open(tmp_path / "out", cache_dir, format=fmt)
    assert run.format == "trl" and run.step_values == [5, 10]
    s = run.samples.sort_values(["step", "line"]).reset_index(drop=True)
    assert s["prompt"].tolist() == [r["prompt"] for r in rows]
    assert s["response"].tolist() == [r["completion"] for r in rows]
    assert np.allclose(s["reward"], [r["accuracy_reward"] + r["format_reward"] for r in rows])
    assert np.allclose(s["accuracy_reward"], [r["accuracy_reward"] for r in rows])
    assert np.allclose(s["advantage"], [r["advantage"] for r in rows])
    assert s["group_id"].tolist() == [f"{r['step']}:{i // 4 % 2}" for i, r in enumerate(rows)]
    assert s["line"].tolist() == list(range(1, 9)) * 2  # rows numbered like lines
    assert run.problems.empty


def test_trl_rewritten_file_is_rebuilt_and_step_from_name(tmp_path, cache_dir):
    import pandas as pd

    write_trl(tmp_path / "out", steps=(3,))
    f = tmp_path / "out" / "completions" / "completions_00003.parquet"
    assert len(_open(tmp_path / "out", cache_dir).samples) == 8
    df = pd.read_parquet(f).drop(columns=["step"]).iloc[:5]
    df.to_parquet(f)
    run = _open(tmp_path / "out", cache_dir)
    assert len(run.samples) == 5 and run.step_values == [3]


# -- open-instruct ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["auto", "openinstruct"])
def test_openinstruct_with_a_tokenizer(tmp_path, cache_dir, fmt):
    recs = write_openinstruct(tmp_path / "traces", steps=(1, 2), prompts=2, n=2)
    run = _open(tmp_path / "traces", cache_dir, format=fmt, tokenizer=FakeTokenizer())
    assert run.format == "openinstruct" and run.step_values == [1, 2]
    assert len(run.files) == 1  # the metadata file beside the shard is not a log
    s = run.samples.sort_values(["step", "line"]).reset_index(drop=True)
    assert len(s) == len(recs)
    assert s["reward"].tolist() == [r["reward"] for r in recs]
    assert np.allclose(s["advantage"], [r["advantage"] for r in recs])
    assert s["group_id"].tolist() == [f"{r['step']}:{r['prompt_idx']}" for r in recs]
    assert s["finish_reason"].tolist() == [r["finish_reason"] for r in recs]
    assert s["ground_truth"].tolist() == [r["ground_truth"] for r in recs]
    assert s["response"].tolist() == [" ".join(f"t{i}" for i in r["response_tokens"]) for r in recs]
    assert s["prompt"].tolist() == [" ".join(f"t{i}" for i in r["prompt_tokens"]) for r in recs]
    assert s["n_tokens"].tolist() == [len(r["response_tokens"]) for r in recs]
    assert np.allclose(s["logprob_mean"], [np.mean(r["logprobs"]) for r in recs], atol=1e-6)
    t = run.tokens(int(s["sample_id"].iloc[0]))
    assert t["token"].tolist() == [f"Ġt{i}" for i in recs[0]["response_tokens"]]
    assert np.allclose(t["logprob"], recs[0]["logprobs"], atol=1e-6)
    assert "prompt_tokens" not in s.columns and "request_info" not in s.columns


def test_openinstruct_ids_without_a_tokenizer(tmp_path, cache_dir):
    recs = write_openinstruct(tmp_path / "traces", steps=(1,))
    run = _open(tmp_path / "traces", cache_dir)
    s = run.samples.sort_values("line").reset_index(drop=True)
    assert s["response"].iloc[0] == " ".join(f"#{i}" for i in recs[0]["response_tokens"])
    t = run.tokens(int(s["sample_id"].iloc[0]))
    assert t["token"].tolist() == [f"#{i}" for i in recs[0]["response_tokens"]]
    # a tokenizer with only decode(): each id decoded on its own; another cache entry than without one
    run2 = _open(tmp_path / "traces", cache_dir, tokenizer=DecodeOnlyTokenizer())
    t2 = run2.tokens(int(s["sample_id"].iloc[0]))
    assert t2["token"].tolist() == [f"<{i}>" for i in recs[0]["response_tokens"]]
    assert run2.samples.sort_values("line")["response"].iloc[0] == "".join(
        f"<{i}>" for i in recs[0]["response_tokens"])


# -- NeMo-RL ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["auto", "nemo"])
def test_nemo_train_data(tmp_path, cache_dir, fmt):
    truth = write_nemo(tmp_path / "logs" / "exp_001", steps=(1, 2, 3))
    write_nemo(tmp_path / "logs" / "exp_001", steps=(3,), name="val_data_step", seed=9)  # validation: not train
    run = _open(tmp_path / "logs", cache_dir, format=fmt, tokenizer=FakeTokenizer())
    assert run.format == "nemo" and run.step_values == [1, 2, 3] and len(run.files) == 3
    s = run.samples.sort_values(["step", "line"]).reset_index(drop=True)
    assert len(s) == len(truth)
    assert s["reward"].tolist() == [t["reward"] for t in truth]
    assert np.allclose(s["advantage"], [t["advantage"] for t in truth], atol=1e-6)
    assert s["prompt"].tolist() == [t["prompt"] for t in truth]
    assert s["response"].tolist() == [t["response"] for t in truth]
    assert s["n_trained_tokens"].tolist() == [len(t["response_ids"]) for t in truth]
    assert s["n_tokens"].tolist() == s["input_lengths"].tolist()  # the whole sequence: prompt and response
    assert s["idx"].tolist() == [float(i) for i in [0, 1, 2, 3] * 3]
    assert "input_lengths" in s.columns and "token_ids" not in s.columns
    # groups: the prompt's text within a step, the same id for each of its responses
    for (step, _), members in s.assign(g=[t["prompt_group"] for t in truth]).groupby(["step", "g"]):
        assert members["group_id"].nunique() == 1 and members["group_id"].iloc[0].startswith(f"{step}:")
    assert s["group_id"].nunique() == 6
    t = run.tokens(int(s["sample_id"].iloc[1]))
    trained = t[t["trained"]]
    assert trained["token"].tolist() == [f"Ġt{i}" for i in truth[1]["response_ids"]]
    assert np.allclose(trained["logprob"], truth[1]["logprobs"], atol=1e-6)
    assert (trained["role"] == "assistant").all() and (t[~t["trained"]]["role"] == "user").all()
    assert s["logprob_mean"].iloc[1] == pytest.approx(np.mean(np.float32(truth[1]["logprobs"])))  # trained only
    assert run.problems.empty


def test_nemo_without_tokenizer_shows_ids(tmp_path, cache_dir):
    truth = write_nemo(tmp_path / "logs", steps=(7,))
    run = _open(tmp_path / "logs" / "train_data_step7.jsonl", cache_dir)
    sid = int(run.samples.sort_values("line")["sample_id"].iloc[0])
    assert run.step_values == [7]
    t = run.tokens(sid)
    assert t[t["trained"]]["token"].tolist() == [f"#{i}" for i in truth[0]["response_ids"]]


# -- any JSONL via columns= ------------------------------------------------------------------
def _custom(folder):
    folder.mkdir(parents=True, exist_ok=True)
    recs = [{"iteration": it, "question": f"q{q}", "answer": f"a{q}{k}", "score": q + k / 10, "qid": f"{it}-{q}",
             "judge": "ok"} for it in (0, 1) for q in range(2) for k in range(2)]
    (folder / "dump.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs


def test_columns_mapping_on_any_jsonl(tmp_path, cache_dir):
    recs = _custom(tmp_path / "mine")
    with pytest.raises(FormatError) as err:
        _open(tmp_path / "mine", cache_dir)
    msg = str(err.value)
    assert "iteration, judge, qid, question, score" in msg and "format=" in msg and "columns=" in msg
    run = _open(tmp_path / "mine", cache_dir, columns={"prompt": "question", "response": "answer", "reward": "score",
                                                       "step": "iteration", "group_id": "qid"})
    s = run.samples.sort_values(["step", "line"]).reset_index(drop=True)
    assert run.format == "columns" and run.step_values == [0, 1]
    assert s["prompt"].tolist() == [r["question"] for r in recs]
    assert s["response"].tolist() == [r["answer"] for r in recs]
    assert np.allclose(s["reward"], [r["score"] for r in recs])
    assert s["group_id"].tolist() == [r["qid"] for r in recs]
    assert s["judge"].tolist() == ["ok"] * 8 and "question" not in s.columns and "score" not in s.columns
    with pytest.raises(ValueError, match="not a common column"):
        _open(tmp_path / "mine", cache_dir, columns={"rewardz": "score"})


@pytest.mark.parametrize("name, step", [("rollouts_120.jsonl", 120), ("7.jsonl", 7), ("iter-3.jsonl", 3),
                                        ("rollout_rank3.jsonl", None), ("shard_02.jsonl", None),
                                        ("dump_step4_rank1.jsonl", 4), ("gpu1.jsonl", None), ("dump.jsonl", None),
                                        ("rank 3.jsonl", None), ("run-2024-05-01.jsonl", None), ("step 5.jsonl", 5)])
def test_columns_takes_a_file_names_number_as_the_step_unless_it_names_a_rank(tmp_path, cache_dir, name, step):
    """Records without a step: the number ending the file name is their step, unless a word before it says it counts
    ranks, shards, parts...: rollout_rank3.jsonl (the README's own naming) put every record at step 3, silently."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / name).write_text(json.dumps({"question": "q", "answer": "a", "score": 1.0}) + "\n")
    run = _open(tmp_path / "d", cache_dir, columns={"prompt": "question", "response": "answer", "reward": "score"})
    if step is None:
        assert run.n_samples == 0 and run.problems.kind.tolist() == ["missing_step"]
    else:
        assert run.step_values == [step] and len(run.problems) == 0


def test_columns_override_a_detected_format(tmp_path, cache_dir):
    recs = write_verl(tmp_path / "rollout", steps=(1,))
    run = _open(tmp_path / "rollout", cache_dir, columns={"ground_truth": "pred"})
    assert run.format == "verl"
    s = run.samples.sort_values("line")
    assert s["ground_truth"].tolist() == [r["pred"] for r in recs] and "pred" not in s.columns
    assert "gts" in s.columns  # no longer mapped: a custom column


# -- RL Logging Board schema: groups and advantage ---------------------------------------------
def test_rlb_uid_and_advantage(tmp_path, cache_dir):
    write_log(tmp_path / "grpo", steps=2, samples_per_step=8, tokens=4, ranks=1, group_size=4)
    f = next((tmp_path / "grpo").glob("*.jsonl"))
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    for i, r in enumerate(recs):
        r["advantage"] = i / 10
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _open(tmp_path / "grpo", cache_dir)
    assert run.format == "rlb"
    s = run.samples.sort_values("line")
    assert s["group_id"].tolist() == [r["uid"] for r in recs] and "uid" not in s.columns
    assert np.allclose(s["advantage"], [r["advantage"] for r in recs])


def test_rlb_group_index(tmp_path, cache_dir):
    recs = [{"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "group_index": i // 2} for i in range(4)]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = _open(tmp_path / "logs", cache_dir).samples.sort_values("line")
    assert s["group_id"].tolist() == ["0", "0", "1", "1"] and "group_index" not in s.columns


def test_rlb_without_groups_has_no_group_columns(tmp_path, cache_dir):
    write_log(tmp_path / "ppo", steps=2, samples_per_step=4, tokens=4, ranks=1)
    cols = _open(tmp_path / "ppo", cache_dir).columns
    assert "group_id" not in cols and "advantage" not in cols


# -- detection -------------------------------------------------------------------------------
def test_mixed_formats_are_refused_clearly(tmp_path, cache_dir):
    write_verl(tmp_path / "mix" / "verl", steps=(1,))
    write_log(tmp_path / "mix" / "rlb", steps=1, samples_per_step=2, tokens=2, ranks=1)
    with pytest.raises(FormatError) as err:
        _open(tmp_path / "mix", cache_dir)
    msg = str(err.value)
    assert "rlb: 1 file(s)" in msg and "verl: 1 file(s)" in msg and "format=" in msg
    # forcing one format reads that format's files only
    run = _open(tmp_path / "mix", cache_dir, format="verl")
    assert len(run.files) == 1 and len(run.samples) == 6


def test_a_long_first_line_is_detected_without_parsing_its_floats(tmp_path, monkeypatch):
    """A first line past LONG_LINE is read by DuckDB for its keys (json.loads made a Python float of every token:
    seconds for a 100 MB line, on every open, warm too); every format is told the same either way."""
    from rlviz_widgets._ingest.readers import detect as detectmod

    write_verl(tmp_path / "verl", steps=(1,))
    write_nemo(tmp_path / "nemo", steps=(1,))
    write_openinstruct(tmp_path / "oi", steps=(1,))
    write_log(tmp_path / "rlb", steps=1, samples_per_step=2, tokens=2, ranks=1)
    folders = ["verl", "nemo", "oi", "rlb"]
    before = [detectmod.detect(tmp_path / f) for f in folders]
    assert before == ["verl", "nemo", "openinstruct", "rlb"]
    calls = []
    real = json.loads
    monkeypatch.setattr(detectmod.json, "loads", lambda t, *a, **k: calls.append(len(t)) or real(t, *a, **k))
    monkeypatch.setattr(detectmod, "LONG_LINE", 0)  # every line "long"
    assert [detectmod.detect(tmp_path / f) for f in folders] == before
    assert calls == []
    # a line DuckDB refuses (a lone surrogate) or with a key twice (json.loads reads the last value, DuckDB the
    # first) still goes to json.loads; a line of no object gives no record
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "a.jsonl").write_text('[1]\n{"prompt": "\\ud800", "response": "r", "step": 0}\n')
    assert detectmod.detect(tmp_path / "odd") == "rlb" and len(calls) == 2
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / "a.jsonl").write_text(
        '{"prompt": [1, 2], "prompt": "p", "response": "r", "prompt_idx": 1, "response_tokens": [1], "step": 0}\n')
    calls.clear()
    assert detectmod.detect(tmp_path / "twice") == "rlb" and len(calls) == 1  # texts: not open-instruct's ids


def test_unknown_format_name(tmp_path, cache_dir):
    write_verl(tmp_path / "rollout", steps=(1,))
    with pytest.raises(ValueError, match="unknown format 'verll'; known: auto, rlb, verl"):
        _open(tmp_path / "rollout", cache_dir, format="verll")


def test_chunk_query_is_bound_once_per_cursor_and_reads_the_raw_of_the_time(monkeypatch):
    """The chunk query's view, and the relation over it, are made once per cursor: the next chunk runs the same
    relation (binding it again cost ~6 ms a chunk), which reads the ``raw`` registered when it runs. Another
    cursor makes its own; a view dropped meanwhile is made again."""
    import duckdb
    import pyarrow as pa

    from rlviz_widgets._ingest.readers.jsonl import sql as rlb

    monkeypatch.setattr(rlb, "_VIEWS", {})
    db = duckdb.connect()
    cur = db.cursor()
    cur.register("raw", pa.table({"x": [1, 2, 3]}))
    sql = "SELECT x * 2 AS y FROM raw"
    assert rlb._query(cur, sql)["y"].to_pylist() == [2, 4, 6]
    ((name, rel),) = rlb._VIEWS[id(cur)][1].items()
    cur.unregister("raw")
    cur.register("raw", pa.table({"x": [7, 8]}))  # the next chunk
    assert rlb._query(cur, sql)["y"].to_pylist() == [14, 16]
    assert rlb._VIEWS[id(cur)][1][name] is rel  # not made again
    other = db.cursor()
    other.register("raw", pa.table({"x": [5]}))
    assert rlb._query(other, sql)["y"].to_pylist() == [10]
    assert rlb._VIEWS[id(other)][1][name] is not rel
    cur.execute(f"DROP VIEW {name}")
    assert rlb._query(cur, sql)["y"].to_pylist() == [14, 16]
    # a new cursor with a closed one's id (CPython reuses the memory of freed objects): the closed one's relations
    # fail ("connection closed"); what is made for the new one is its own
    cur.close()
    third = db.cursor()
    third.register("raw", pa.table({"x": [4]}))
    rlb._VIEWS[id(third)] = rlb._VIEWS.pop(id(cur))
    assert rlb._query(third, sql)["y"].to_pylist() == [8]
    assert rlb._VIEWS[id(third)][0] is third

    class Closed:
        def to_arrow_table(self):
            raise duckdb.ConnectionException("Connection Error: Connection has already been closed")

    rlb._VIEWS[id(third)][1][name] = Closed()  # a relation that fails for its cursor's sake: made again
    assert rlb._query(third, sql)["y"].to_pylist() == [8]


# -- bad input in other formats ----------------------------------------------------------------
NO_TOKENIZER = "token ids without tokenizer=: shown as #id (line 0: the file as a whole)"


def _problems(run) -> list[list]:
    return run.problems[["line", "kind", "message"]].values.tolist()


def _spelled(problems) -> list[list]:
    """``problems`` without the one of a file of token ids read without a tokenizer (tested on its own)."""
    return [p for p in problems.values.tolist() if p[1] != "no_tokenizer"]


@pytest.mark.parametrize("tok", [None, FakeTokenizer(), DecodeOnlyTokenizer(), StrictTokenizer()],
                         ids=["none", "convert", "decode", "strict"])
def test_openinstruct_bad_token_ids_are_reported_never_handed_to_the_tokenizer(tmp_path, cache_dir, tok):
    recs = write_openinstruct(tmp_path / "traces", steps=(1,), prompts=2, n=2)
    shard = tmp_path / "traces" / "grpo_run_rollouts_000000.jsonl"
    bad = [dict(recs[0], response_tokens=[101, None, 102], logprobs=[-1.0, -1.0, -1.0]),
           dict(recs[1], response_tokens=[101, -5, 2**70], logprobs=[-1.0, -1.0, -1.0]),
           dict(recs[2], prompt_tokens=[11, None, 12], advantage=float("nan")),
           dict(recs[3], response_tokens=[101, 5000], logprobs=[-1.0, -1.0])]  # 5000: past StrictTokenizer's vocab
    shard.write_text("".join(json.dumps(r) + "\n" for r in bad))
    run = _open(tmp_path / "traces", cache_dir, tokenizer=tok)
    assert len(run.samples) == 4
    unspelled = [p for p in _problems(run) if p[1] == "no_tokenizer"]  # said once for the file, line 0
    assert unspelled == ([[0, "no_tokenizer", NO_TOKENIZER]] if tok is None else [])
    assert [p for p in _problems(run) if p[1] != "no_tokenizer"] == [
                              [1, "wrong_type", "response_tokens has 1 null or invalid token(s): shown empty"],
                              [2, "wrong_type", "response_tokens has 2 null or invalid token(s): shown empty"],
                              [3, "wrong_type", "prompt_tokens holds null or invalid token ids: shown as \ufffd"],
                              [3, "nan", "advantage is NaN: left empty"]]
    s = run.samples.set_index("line")
    assert s.loc[1, "n_tokens"] == 3 and "\ufffd" in s.loc[1, "response"] and "\ufffd" in s.loc[3, "prompt"]
    toks = run.tokens(int(s.loc[2, "sample_id"]))["token"].tolist()
    assert pd.isna(toks[1]) and pd.isna(toks[2]) and toks[0] != toks[1]
    if isinstance(tok, StrictTokenizer):  # an id it refuses is shown by number
        assert run.tokens(int(s.loc[4, "sample_id"]))["token"].tolist() == ["w101", "#5000"]


def test_trl_half_written_empty_and_odd_files(tmp_path, cache_dir):
    import pandas as pd

    write_trl(tmp_path / "out", steps=(5,), prompts=2, n=2)
    folder = tmp_path / "out" / "completions"
    good = folder / "completions_00005.parquet"
    data = good.read_bytes()
    (folder / "completions_00006.parquet").write_bytes(data[: len(data) // 2])  # TRL still writing it
    pd.DataFrame({"step": pd.Series([], dtype=str), "prompt": pd.Series([], dtype=str)}).to_parquet(
        folder / "completions_00007.parquet")
    pd.DataFrame({"step": ["8", "8", "eight"], "prompt": [[{"role": "user", "content": "hi"}]] * 3,
                  "completion": ["a", "b", "c"], "accuracy_reward": [1.0, 0.0, 1.0],
                  "completion_length": [12, 40, 7], "advantage": [0.5, float("inf"), -0.5]}).to_parquet(
        folder / "completions_00008.parquet")
    run = _open(tmp_path / "out", cache_dir)
    by_file = {f.rsplit("_", 1)[-1]: sorted(map(tuple, g[["line", "kind"]].values.tolist()))
               for f, g in run.problems.groupby("file")}
    assert by_file == {"00006.parquet": [(0, "unreadable")], "00007.parquet": [(0, "empty_file")],
                       "00008.parquet": [(2, "nan"), (3, "wrong_type")]}  # a chat prompt is read as text
    s = run.samples[run.samples["step"] == 8].sort_values("line")
    assert s["line"].tolist() == [1, 2]  # "eight" is no step: skipped, reported
    assert s["reward"].tolist() == [1.0, 0.0]  # the integer column beside the reward is not a reward
    assert s["completion_length"].tolist() == [12, 40] and s["group_id"].tolist() == ["8:0", "8:0"]
    assert s["prompt"].tolist() == ["hi"] * 2 and s["response"].tolist() == ["a", "b"]
    assert len(run.samples[run.samples["step"] == 5]) == 4 and "step is the string" not in run.problems.to_string()


def test_openinstruct_step_written_as_text_keeps_its_group(tmp_path, cache_dir):
    recs = write_openinstruct(tmp_path / "traces", steps=(1,), prompts=1, n=2)
    shard = tmp_path / "traces" / "grpo_run_rollouts_000000.jsonl"
    shard.write_text(json.dumps(dict(recs[0], step="1")) + "\n" + json.dumps(recs[1]) + "\n")
    run = _open(tmp_path / "traces", cache_dir)
    assert run.samples["group_id"].tolist() == ["1:0", "1:0"]


def test_a_tokenizer_with_added_tokens_gets_its_own_cache(tmp_path, cache_dir):
    class Tok(FakeTokenizer):
        vocab_size = 150  # as Hugging Face counts it: without the added tokens

        def __init__(self, added):
            self.added = added

        def convert_ids_to_tokens(self, ids):
            return [self.added.get(i, f"Ġt{i}") for i in ids]

    recs = write_openinstruct(tmp_path / "traces", steps=(1,), prompts=1, n=1)
    shard = tmp_path / "traces" / "grpo_run_rollouts_000000.jsonl"
    shard.write_text(json.dumps(dict(recs[0], response_tokens=[101, 150, 151], logprobs=[-1.0] * 3)) + "\n")
    base = _open(tmp_path / "traces", cache_dir, tokenizer=Tok({}))
    tuned = _open(tmp_path / "traces", cache_dir, tokenizer=Tok({150: "<|pad|>", 151: "<|tool|>"}))
    assert base.tokens(base.samples["sample_id"])["token"].tolist() == ["Ġt101", "Ġt150", "Ġt151"]
    assert tuned.tokens(tuned.samples["sample_id"])["token"].tolist() == ["Ġt101", "<|pad|>", "<|tool|>"]
    again = _open(tmp_path / "traces", cache_dir, tokenizer=Tok({}))
    assert again.samples["response"].tolist() == base.samples["response"].tolist()


def test_nemo_values_not_shaped_as_nemo_writes_them_are_reported(tmp_path, cache_dir):
    write_nemo(tmp_path / "logs", steps=(1,), prompts=2, n=4)
    f = tmp_path / "logs" / "train_data_step1.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    width = len(recs[4]["token_ids"][0])
    recs[1]["rewards"] = [0.25, 0.75]
    recs[2]["rewards"] = 0.5
    recs[3]["rewards"] = [None]
    recs[4]["token_loss_mask"] = [recs[4]["token_loss_mask"][0][:-1]]
    recs[5]["token_ids"] = recs[5]["token_ids"][0]
    recs[6]["content"] = [None]
    recs[7]["generation_logprobs"] = recs[7]["generation_logprobs"] * 2  # a batch of two rows: the first is read
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _open(tmp_path / "logs", cache_dir, tokenizer=FakeTokenizer())
    assert _problems(run) == [
        [2, "wrong_type", "rewards holds 2 values, not one: the first is read"],
        [3, "wrong_type", "rewards is not a batch of one (a one-item list): read as it is"],
        [4, "missing_reward", "no rewards: left empty"],
        [5, "length_mismatch", f"token_loss_mask has {width - 1} values for {width} token ids: the trained tokens "
                               "may be off"],
        [6, "wrong_type", "token_ids is not a batch of one list of numbers: ignored"],
        [7, "missing_field", "no response text in content: left empty"],
        [7, "template_markers", "no chat-template role markers (ChatML, Llama 3, Gemma, Phi-3, GLM, DeepSeek, "
                                "gpt-oss, Cohere) found in the tokens: they are one turn of role unknown"],
        [8, "wrong_type", "generation_logprobs holds 2 rows, not one: the first is read"]]
    s = run.samples.set_index("line")
    assert s.loc[2, "reward"] == 0.25 and s.loc[3, "reward"] == 0.5 and len(s) == 8
    first = [lp for lp, m in zip(recs[7]["generation_logprobs"][0], recs[7]["token_loss_mask"][0]) if m]
    assert s.loc[8, "logprob_mean"] == pytest.approx(np.mean(np.float32(first)))  # its first row's


def test_openinstruct_prompt_fields_of_another_type_are_reported(tmp_path, cache_dir):
    recs = write_openinstruct(tmp_path / "traces", steps=(1,), prompts=2, n=2)
    recs[0]["prompt_idx"] = "0"
    recs[1]["prompt_tokens"] = "hello"
    recs[2]["prompt_tokens"] = [11, -1]
    shard = tmp_path / "traces" / "grpo_run_rollouts_000000.jsonl"
    shard.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _open(tmp_path / "traces", cache_dir, tokenizer=FakeTokenizer())
    assert _problems(run) == [[1, "wrong_type", 'prompt_idx is "0", not an integer: no group'],
                              [2, "wrong_type", "prompt_tokens is not a list of token ids: the prompt is left empty"],
                              [3, "wrong_type", "prompt_tokens holds null or invalid token ids: shown as \ufffd"]]
    s = run.samples.set_index("line")
    assert pd.isna(s.loc[1, "group_id"]) and pd.isna(s.loc[2, "prompt"]) and s.loc[3, "prompt"] == "t11\ufffd"
    assert s.loc[4, "prompt"] == "t11 t12 t14" and s.loc[4, "group_id"] == "1:1"


def test_a_folder_whose_files_the_format_names_otherwise_says_so(tmp_path, cache_dir):
    write_nemo(tmp_path / "logs", steps=(3,))
    (tmp_path / "logs" / "train_data_step3.jsonl").rename(tmp_path / "logs" / "3.jsonl")
    with pytest.raises(rlviz_widgets.NoLogsError, match=r"its 1 \*\.jsonl file\(s\) \(e\.g\. 3\.jsonl\) are named "
                                                          "otherwise; open a file by its path"):
        _open(tmp_path / "logs", cache_dir, format="nemo")
    by_path = _open(tmp_path / "logs" / "3.jsonl", cache_dir, format="nemo")  # read; its step is in no name
    assert by_path.problems["kind"].tolist() == ["missing_step"] * 4


def test_nemo_nan_advantages_and_id_messages(tmp_path, cache_dir):
    write_nemo(tmp_path / "logs", steps=(1,), prompts=1, n=2)
    f = tmp_path / "logs" / "train_data_step1.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[0]["advantages"][0][recs[0]["token_loss_mask"][0].index(1)] = float("nan")  # at a response token
    recs[1]["advantages"][0][0] = float("nan")  # at a prompt token: not averaged
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _open(tmp_path / "logs", cache_dir, tokenizer=FakeTokenizer())
    assert _problems(run) == [[1, "nan", "advantages holds NaN/Infinity at response tokens: the advantage is left "
                                         "empty"]]
    assert pd.isna(run.samples.set_index("line").loc[1, "advantage"])
    recs = write_openinstruct(tmp_path / "traces", steps=(1,), prompts=1, n=1)
    shard = tmp_path / "traces" / "grpo_run_rollouts_000000.jsonl"
    shard.write_text(json.dumps(dict(recs[0], response_tokens=5)) + "\n")
    assert _problems(_open(tmp_path / "traces", cache_dir)) == [
        [1, "wrong_type", "response_tokens is not a list of token ids: ignored"]]


@pytest.mark.parametrize("large", [False, True])
def test_count_literal_counts_as_count_substring(large):
    """The pad-token count of the responses (a numpy search) gives what Arrow's count_substring gives: matches at
    either end of a text, none across two texts, nulls kept, sliced and chunked arrays, text that is not ASCII."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from rlviz_widgets._ingest.readers.jsonl.arrow import count_literal

    texts = ["", "<PAD>", "<PAD><PAD>x<PAD>", "a<PA", "D>b", None, "<<PAD>>", "é<PAD>ü<PAD", "PAD>", "<P<PAD>",
             "no pad here", "<PAD" * 3, "ab<PAD>", None, "<PAD>"]
    typ = pa.large_string() if large else pa.string()
    arr = pa.array(texts, typ)
    for a in (arr, arr.slice(3), arr.slice(2, 9), arr.slice(5, 0), pa.chunked_array([arr.slice(0, 4), arr.slice(4)]),
              pa.array([None, None], typ), pa.array([], typ)):
        want, got = pc.count_substring(a, "<PAD>"), count_literal(a, "<PAD>")
        assert got.type == want.type
        assert got.to_pylist() == want.to_pylist()
    assert count_literal(arr, "<PAD>").to_pylist()[:4] == [0, 1, 3, 0]
    # a needle whose matches may overlap is counted by count_substring itself
    assert count_literal(pa.array(["aaaa"], typ), "aa").to_pylist() == [2]


def test_an_rlb_log_with_a_prompt_idx_is_read_as_rlb(tmp_path, open_run):
    """A prompt_idx (a group id the README lists) with text prompt and response: taken for open-instruct, the
    token strings read as ids, the texts lost."""
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "rollout_rank0.jsonl"
    recs = [{"prompt": "What is 2+2?", "response": f"It is {k}", "reward": 1.0 - k % 2, "step": 0, "prompt_idx": 0,
             "response_tokens": ["It", "Ġis", f"Ġ{k}"], "logprobs": [-0.1, -0.2, -0.3]} for k in (4, 5)]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for source in (log, log.parent):
        run = open_run(source)
        assert run.format == "rlb" and run.samples.response.tolist() == ["It is 4", "It is 5"]
        assert run.tokens(run.samples.sample_id.tolist()).token.tolist()[:3] == ["It", "Ġis", "Ġ4"]
        assert run.problems.empty


def test_trl_odd_columns(tmp_path, open_run):
    """A reward function named t (the SQL's row alias: every row came out empty), and a float16 reward column
    (DuckDB reads none: the open failed, the good file beside it lost too)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "completions"
    out.mkdir()
    pq.write_table(pa.table({"step": ["1", "1"], "prompt": ["p", "p"], "completion": ["a", "b"],
                             "t": [0.5, 0.25], "advantage": [0.7, -0.7]}), out / "completions_00001.parquet")
    pq.write_table(pa.table({"step": ["2"], "prompt": ["p"], "completion": ["c"],
                             "accuracy": pa.array(np.array([1.0], np.float16)), "advantage": [0.0]}),
                   out / "completions_00002.parquet")
    run = open_run(out)
    s = run.samples.sort_values(["step", "line"])
    assert s.response.tolist() == ["a", "b", "c"] and s.reward.tolist() == [0.5, 0.25, 1.0]
    assert run.problems.empty


def test_a_second_format_past_the_sampled_files_is_still_found(tmp_path):
    """Detection read the first records of 64 files: 70 verl step files then an open-instruct shard opened as
    verl, the open-instruct samples dropped without a word (3 verl files gave the error)."""
    from rlviz_widgets._ingest.readers.detect import FormatError, detect

    write_verl(tmp_path / "a_verl", steps=range(1, 71), prompts=1, n=1)
    write_openinstruct(tmp_path / "b_oi", steps=(1,))
    with pytest.raises(FormatError, match="more than one format"):
        detect(tmp_path)


def test_a_missing_response_is_reported_in_every_format(tmp_path, open_run):
    """open-instruct without response_tokens (or prompt_tokens) and NeMo-RL without content left the texts empty
    without a word (verl and TRL said so). NeMo's messages name the file's own keys (rewards, not reward)."""
    oi = tmp_path / "oi"
    write_openinstruct(oi, steps=(1,), prompts=1, n=3)
    shard = oi / "grpo_run_rollouts_000000.jsonl"
    recs = [json.loads(x) for x in shard.read_text().splitlines()]
    del recs[0]["response_tokens"]
    recs[1]["response_tokens"] = None
    del recs[2]["prompt_tokens"]
    shard.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = _spelled(open_run(oi).problems[["line", "kind", "message"]])
    assert got == [[1, "missing_field", "no response_tokens: the response is left empty"],
                   [2, "missing_field", "no response_tokens: the response is left empty"],
                   [3, "missing_field", "no prompt_tokens: the prompt is left empty"]]
    for r in recs:  # the response mapped to a text field: no tokens is no missing response
        r["text"] = "an answer"
    shard.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = open_run(oi, columns={"response": "text"}, cache_dir=tmp_path / "c2").problems.kind.tolist()
    assert got == ["missing_field", "no_tokenizer"]  # only the prompt_tokens of line 3 (and the file's ids)
    nemo = tmp_path / "nemo"
    write_nemo(nemo, steps=(1,), prompts=1, n=2)
    step1 = nemo / "train_data_step1.jsonl"
    recs = [json.loads(x) for x in step1.read_text().splitlines()]
    del recs[0]["content"]
    recs[1]["generation_logprobs"][0][-1] = float("nan")
    step1.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = open_run(nemo).problems[["line", "kind", "message"]].values.tolist()
    assert [1, "missing_field", "no content: the texts and turns are read from the token ids"] in got
    assert [1, "template_markers", "token ids without tokenizer=: shown as #id, the turns not found (one turn, "
                                   "unknown)"] in got
    assert any(p[0] == 2 and p[2].startswith("generation_logprobs has") for p in got), got


def test_a_nemo_dump_without_a_loss_mask_finds_the_response_by_its_logprobs(tmp_path, open_run):
    """Older NeMo-RL logs no token_loss_mask (nor token_ids): NeMo writes 0.0 at each position of
    generation_logprobs it did not sample, so the trained tokens are the others. With neither a mask nor
    log-probs, every token counts as trained, and each such line says so."""
    truth = write_nemo(tmp_path / "nemo", steps=(1,), prompts=1, n=2)
    f = tmp_path / "nemo" / "train_data_step1.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    for r in recs:  # as the older versions write them
        for k in ("token_loss_mask", "token_ids", "advantages", "sample_loss_mask"):
            del r[k]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = open_run(tmp_path / "nemo")
    assert run.problems.empty
    s = run.samples.sort_values("line")
    assert s.n_trained_tokens.tolist() == [len(t["logprobs"]) for t in truth]
    for sid, t in zip(s.sample_id, truth):
        toks = run.tokens(sid)
        np.testing.assert_allclose(toks[toks.trained].logprob, t["logprobs"], rtol=1e-6)
    recs[1] = {**json.loads(json.dumps(recs[1])), "token_ids": [[7] * recs[1]["input_lengths"][0]]}
    del recs[1]["generation_logprobs"]
    recs[0]["generation_logprobs"] = [[0.0] * len(recs[0]["generation_logprobs"][0])]  # a model sure of every token
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = _spelled(open_run(tmp_path / "nemo").problems[["line", "kind", "message"]])
    assert got == [[1, "missing_field", "no token_loss_mask, and every generation log-prob is 0.0: no token is "
                                        "counted as trained (the response cannot be told from the prompt)"],
                   [2, "missing_field", "no token_loss_mask: every token is counted as trained (the prompt's too), "
                                        "and the advantage is their mean"]]


def test_verl_dumps_of_the_same_steps_in_two_folders_are_reported(tmp_path, open_run):
    """verl's rollout and validation dumps are both {step}.jsonl: opened from their parent, their samples were
    merged into the same steps without a word."""
    write_verl(tmp_path / "dumps" / "rollouts", steps=(1, 2), prompts=1, n=2)
    write_verl(tmp_path / "dumps" / "validation", steps=(2,), prompts=1, n=2, seed=1)
    run = open_run(tmp_path / "dumps")
    p = run.problems
    assert p.kind.tolist() == ["same_step_file"] and p.file.iloc[0].endswith("validation/2.jsonl")
    assert "rollouts/2.jsonl" in p.message.iloc[0] and len(run.samples) == 6  # still read: the user decides
    assert open_run(tmp_path / "dumps" / "rollouts").problems.empty


def test_a_verl_dump_whose_first_record_lacks_a_text_is_still_verl(tmp_path, cache_dir):
    """A first record without ``output`` (an empty generation) made the folder RL Logging Board's: every record
    then lacked its prompt, response and reward; with another file, the formats disagreed and the open failed."""
    from rlviz_widgets._ingest.readers.detect import detect

    logs = tmp_path / "rollouts"
    logs.mkdir()
    recs = [{"input": "q0", "gts": "4", "score": 0.0, "step": 5}] + [
        {"input": f"q{i}", "output": f"a{i}", "gts": "4", "score": 1.0, "step": 5} for i in (1, 2)]
    (logs / "5.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert detect(logs) == "verl"
    (logs / "6.jsonl").write_text(json.dumps(dict(recs[1], step=6)) + "\n")
    assert detect(logs) == "verl"
    run = _open(logs, cache_dir)
    s = run.samples.sort_values(["step", "line"])
    assert s.prompt.tolist() == ["q0", "q1", "q2", "q1"] and s.reward.tolist() == [0.0, 1.0, 1.0, 1.0]
    assert run.problems.kind.tolist() == ["missing_field"]


def test_nemo_messages_that_are_not_text_are_reported(tmp_path, cache_dir):
    """NeMo content whose messages are numbers was shown as JSON text without a report (the other formats report
    it); chat dicts (val files) are read as messages."""
    logs = tmp_path / "logs"
    logs.mkdir()
    recs = [{"content": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]], "rewards": [1.0]},
            {"content": [["q", 5]], "rewards": [1.0]},
            {"content": [["q", "fine"]], "rewards": [1.0]},
            {"content": ["only the response"], "rewards": [1.0]}]
    (logs / "train_data_step4.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _open(logs, cache_dir, format="nemo")
    assert _problems(run) == [[2, "wrong_type", "response is a number, not text: shown as its JSON"]]
    s = run.samples.set_index("line")
    assert s.loc[1, "prompt"] == "q" and s.loc[1, "response"] == "a" and s.loc[1, "answer"] == "a"
    assert s.loc[2, "response"] == "5" and s.loc[3, "response"] == "fine"
    assert s.loc[4, "response"] == "only the response"


def test_a_verl_validation_dump_reads_without_a_word(tmp_path, open_run):
    """verl's validation dumps repeat the score as a reward-extra key "reward": every file got a renamed_field
    problem, and every open a LogWarning, for a dump as verl writes it. The key is kept as the column reward_."""
    recs = write_verl(tmp_path / "validation", steps=(10,), prompts=1, n=2)
    f = tmp_path / "validation" / "10.jsonl"
    f.write_text("".join(json.dumps(dict(r, reward=r["score"])) + "\n" for r in recs))
    run = open_run(tmp_path / "validation")
    assert run.problems.empty and run.format == "verl"
    s = run.samples.sort_values("line")
    assert s.reward.tolist() == s.reward_.tolist() == [r["score"] for r in recs]
    f.write_text("".join(json.dumps(dict(r, reward=r["score"], response="x")) + "\n" for r in recs))
    p = open_run(tmp_path / "validation").problems  # other renames still said
    assert p.kind.tolist() == ["renamed_field"] and "field 'response' is kept as column response_" in p.message[0]


def test_spell_ids_with_and_without_a_tokenizer():
    """Ids as ``#id`` without a tokenizer (Arrow spells them) and through one with it; a null or negative id is a
    null token either way, a null row a null list, and a sliced column keeps its rows."""
    import pyarrow as pa

    from rlviz_widgets._ingest.readers.tokens import spell_ids

    col = pa.array([[5, None, -1], None, [], [70000, 5]], pa.list_(pa.int64())).slice(0)
    assert spell_ids(col, None).to_pylist() == [["#5", None, None], None, [], ["#70000", "#5"]]
    assert spell_ids(col.slice(3), None).to_pylist() == [["#70000", "#5"]]

    class Vocab:
        def convert_ids_to_tokens(self, ids):
            return [f"t{i}" if i < 1000 else None for i in ids]

    assert spell_ids(col, Vocab()).to_pylist() == [["t5", None, None], None, [], ["#70000", "t5"]]
