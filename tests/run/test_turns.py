"""Conversations as data (issue 29): ``run.turns``, the samples' ``n_turns`` / ``n_tool_calls`` /
``n_trained_tokens``, tokens over the whole sequence with ``turn`` / ``role`` / ``trained``, statistics over trained
tokens only; logs without message structure unchanged but for two synthesized turns."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from chat_formats import XSS, agent_turns, write_agent_chat, write_nemo_chat, write_openai_chat, write_trl_chat
from conftest import f32, read_records

import rlviz_widgets
from rlviz_widgets._table_source import TableSource

TURN_COLUMNS = ["sample_id", "turn", "role", "text", "tool_name", "tool_arguments", "tool_call_id", "start", "end",
                "trained", "reasoning"]


def _plain(df: pd.DataFrame) -> list[dict]:
    """Rows as dicts, missing values as None (pandas gives NaN, NA or None by column type)."""
    return [{k: (None if v is None or (not isinstance(v, str) and pd.isna(v)) else v) for k, v in r.items()}
            for r in df.to_dict("records")]


def test_generic_chat_turns_round_trip_as_plain_text(tmp_path, open_run):
    """Two tool calls in one assistant turn: one row each, sharing the turn number; markup in a tool argument, a
    role name and a tool name comes back exactly as written."""
    write_agent_chat(tmp_path / "logs", samples=3)
    run = open_run(tmp_path / "logs")
    s = run.samples.sort_values("line").reset_index(drop=True)
    assert run.format == "chat"
    assert run.problems[["line", "kind"]].values.tolist() == [[n, "unknown_role"] for n in (1, 2, 3)]
    assert s["n_turns"].tolist() == [7] * 3 and s["n_tool_calls"].tolist() == [2] * 3
    assert s["n_trained_tokens"].isna().all()  # no tokens in the log
    t = run.turns()
    assert t.columns.tolist() == TURN_COLUMNS
    for k, sid in enumerate(s["sample_id"]):
        rows = _plain(t[t.sample_id == sid].drop(columns="sample_id"))
        assert rows == agent_turns(k)
    assert f"{XSS}</script>" in json.loads(t.tool_arguments.dropna().iloc[0])["q"]
    assert s["answer"].tolist() == [f"Answer {k}." for k in range(3)]
    assert s["response"].iloc[0].endswith(f"── critic{XSS} ──\nok\n── assistant ──\n<think>\nthink first\n</think>\n"
                                          "Answer 0.")
    # the order asked, and one sample's turns
    one = run.turns([int(s.sample_id.iloc[2]), int(s.sample_id.iloc[0])])
    assert one.sample_id.drop_duplicates().tolist() == [s.sample_id.iloc[2], s.sample_id.iloc[0]]
    with pytest.raises(KeyError):
        run.turns([12345])


def test_search_where_and_sort_use_the_conversation(tmp_path, open_run):
    """Search covers every turn's text (prompt and response hold them all, tool results and calls too); where= and
    sorting can use n_turns, n_tool_calls and n_trained_tokens."""
    write_openai_chat(tmp_path / "logs", steps=(1,), prompts=2)
    run = open_run(tmp_path / "logs")
    src = TableSource.from_run(run)
    s = run.samples.set_index("sample_id")
    for needle in ("18C, cloudy", "to_fahrenheit", "You can call tools", "Converting."):  # tool result, call, ...
        found = src.ids(search=needle)
        assert len(found) and all(needle in s.loc[i, "prompt"] + s.loc[i, "response"] for i in found)
    assert set(src.ids(where="n_tool_calls > 0")) == set(s.index[s.n_tool_calls > 0])
    assert src.ids(sort_by="n_turns", desc=True)[:2] == s.sort_values("n_turns", ascending=False).index[:2].tolist()
    steps = run.steps_sql(where="n_turns >= 7")
    assert run.query_frame(steps)["samples"].tolist() == [2]


def test_trl_conversational_turns(tmp_path, open_run):
    """TRL writes no call ids: a tool result carries the tool's name instead."""
    write_trl_chat(tmp_path / "out", prompts=1, n=2)
    run = open_run(tmp_path / "out")
    s = run.samples.sort_values("line")
    assert s.n_turns.tolist() == [3, 5] and s.n_tool_calls.tolist() == [0, 1]
    t = _plain(run.turns(int(s.sample_id.iloc[1])).drop(columns="sample_id"))
    assert [(r["turn"], r["role"], r["text"], r["tool_name"], r["tool_arguments"], r["trained"]) for r in t] == [
        (0, "system", "Use the tools.", None, None, False), (1, "user", "What is 6*7?", None, None, False),
        (2, "assistant", "", "multiply", '{"a": 6, "b": 7}', True), (3, "tool", "42", "multiply", None, False),
        (4, "assistant", "6*7 = 43", None, None, True)]


def test_nemo_train_tokens_cover_the_whole_sequence(tmp_path, open_run):
    """A NeMo-RL train file: tokens of the prompt, the response and the environment's answer, each with its turn,
    role and mask; turns with their spans; statistics over the trained tokens only."""
    truth = write_nemo_chat(tmp_path / "logs", prompts=2, n=2)
    run = open_run(tmp_path / "logs")
    assert run.problems.kind.tolist() == ["no_tokenizer"]  # said once for the file (tokens shown as #id)
    s = run.samples.sort_values("line").reset_index(drop=True)
    recs = [{k: (v[0] if isinstance(v, list) else v) for k, v in r.items()}
            for r in read_records([tmp_path / "logs" / "train_data_step3.jsonl"])]
    for sid, rec, t in zip(s.sample_id, recs, truth):
        n, mask = rec["input_lengths"], rec["token_loss_mask"]
        toks = run.tokens(int(sid))
        assert len(toks) == n and toks.trained.tolist() == [bool(m) for m in mask[:n]]
        gen = f32(rec["generation_logprobs"][:n])
        np.testing.assert_allclose(toks.logprob, gen, rtol=1e-6)
        trained = gen[np.array(mask[:n], bool)]
        row = s[s.sample_id == sid].iloc[0]
        assert row.n_tokens == n and row.n_trained_tokens == len(trained) and row.n_turns == 3
        assert row.logprob_mean == pytest.approx(trained.mean())  # not diluted by the prompt's 0.0
        turns = _plain(run.turns(int(sid)))
        first, last = mask.index(1), n - mask[:n][::-1].index(1)
        assert [(r["role"], r["start"], r["end"], r["trained"]) for r in turns] == [
            ("user", 0, first, False), ("assistant", first, last, True), ("environment", last, n, False)]
        assert [r["text"] for r in turns] == [t["prompt"], t["answer"], t["response"].split("\n")[-1]]
        assert toks.turn.tolist() == [0] * first + [1] * (last - first) + [2] * (n - last)
        assert toks.role.tolist() == ["user"] * first + ["assistant"] * (last - first) + ["environment"] * (n - last)
    # per-step statistics from the per-sample ones: over trained tokens too; "length" is the trained tokens'
    steps = run.steps
    assert steps.length_mean.iloc[0] == pytest.approx(s.n_trained_tokens.mean())


def test_logs_without_turns_get_two_and_keep_their_numbers(synth_logs, open_run):
    """A single-turn log: the prompt (user, turn 0) and the response (assistant, turn 1, over the response tokens);
    every token of the response turn, trained; the statistics as they were (test_run_frames checks them)."""
    folder, files = synth_logs(steps=2, samples_per_step=4, tokens=6)
    run = open_run(folder)
    s = run.samples.sort_values(["step", "line", "file"]).reset_index(drop=True)
    assert s.n_turns.tolist() == [2] * 8 and s.n_tool_calls.tolist() == [0] * 8
    assert s.n_trained_tokens.tolist() == s.n_tokens.tolist()
    sid = int(s.sample_id.iloc[0])
    t = _plain(run.turns(sid))
    assert [(r["turn"], r["role"], r["text"], r["start"], r["end"], r["trained"]) for r in t] == [
        (0, "user", s.prompt.iloc[0], None, None, False),
        (1, "assistant", s.response.iloc[0], 0, int(s.n_tokens.iloc[0]), True)]
    toks = run.tokens(sid)
    assert toks.columns.tolist()[:6] == ["sample_id", "step", "position", "turn", "role", "trained"]
    assert (toks.turn == 1).all() and (toks.role == "assistant").all() and toks.trained.all()
    assert len(run.turns()) == 2 * len(s)
    arrays = run.token_arrays([sid])[0]
    assert arrays["turn"].tolist() == [1] * len(toks) and arrays["trained"].all()
    assert arrays["role"] == ["assistant"] * len(toks)


def test_a_set_of_runs_has_their_turns(tmp_path, cache_dir):
    write_agent_chat(tmp_path / "a", samples=2)
    write_openai_chat(tmp_path / "b", steps=(1,), prompts=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = rlviz_widgets.RunSet.open({"agent": tmp_path / "a", "weather": tmp_path / "b"}, cache_dir=cache_dir,
                                       progress=False)
    t = rs.turns()
    assert t.columns.tolist() == ["run", *TURN_COLUMNS]
    assert t.groupby("run").size().to_dict() == {"agent": 16, "weather": 13}
    sid = int(rs.samples.query("run == 'weather'").sample_id.iloc[0])
    assert set(rs.turns([sid]).run) == {"weather"}


def test_bad_messages_are_turns_as_written(tmp_path, open_run):
    """A message without role or content, an unknown role, an image part: reported by line, kept as turns."""
    folder = tmp_path / "logs"
    folder.mkdir()
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}},
                                             {"type": "text", "text": "what is it?"}]},
                {"content": "no role"}, {"role": "assistant"}, {"role": "judge", "content": "fine"}]
    (folder / "a.jsonl").write_text(json.dumps({"step": 0, "reward": 1.0, "messages": messages}) + "\n")
    run = open_run(folder)
    assert run.problems[["line", "kind"]].values.tolist() == [[1, "image"], [1, "missing_field"],
                                                               [1, "missing_field"], [1, "unknown_role"]]
    t = run.turns()
    assert list(zip(t.role, t.text, t.trained)) == [("user", "[image]\nwhat is it?", False), ("?", "no role", False),
                                                    ("assistant", "", True), ("judge", "fine", False)]


def test_a_loss_mask_shorter_than_the_tokens_keeps_every_token(tmp_path, open_run):
    """The tokens past the end of a short mask are kept, untrained; the line says so."""
    write_nemo_chat(tmp_path / "logs", prompts=1, n=2)
    f = tmp_path / "logs" / "train_data_step3.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    n = recs[0]["input_lengths"][0]
    recs[0]["token_loss_mask"] = [recs[0]["token_loss_mask"][0][:n - 4]]  # cuts into the response
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = open_run(f)
    kinds = run.problems[["line", "kind"]].values.tolist()
    assert [1, "length_mismatch"] in kinds
    s = run.samples.sort_values("line")
    toks = run.tokens(int(s.sample_id.iloc[0]))
    assert len(toks) == n and not toks.trained.iloc[n - 4:].any()
    assert s.n_trained_tokens.iloc[0] == sum(recs[0]["token_loss_mask"][0])
