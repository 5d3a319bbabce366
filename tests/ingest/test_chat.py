"""Chat-shaped logs (issue 29): TRL conversational completions, NeMo-RL train and val files, generic OpenAI-chat
JSON lines."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pyarrow.parquet as pq
from chat_formats import write_nemo_chat, write_openai_chat, write_trl_chat
from formats import FakeTokenizer, write_trl

import rlviz_widgets


def _open(source, cache_dir, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = rlviz_widgets.open_run(source, cache_dir=cache_dir, progress=False, **kw)
    return run, [str(w.message) for w in caught]


def _groups(s: pd.DataFrame) -> list[int]:
    """Group sizes, in order of first appearance."""
    return s.groupby("group_id", sort=False).size().tolist()


def test_trl_conversational_completions(tmp_path, cache_dir):
    truth = write_trl_chat(tmp_path / "out", prompts=2, n=4)
    schema = pq.read_schema(tmp_path / "out" / "completions" / "completions_00040.parquet")
    assert str(schema.field("prompt").type) == "list<element: struct<role: string, content: string>>"
    assert "tool_calls" in str(schema.field("completion").type)  # the union of the file's keys
    for fmt in ("auto", "trl"):
        run, warned = _open(tmp_path / "out", cache_dir / fmt, format=fmt)
        s = run.samples.sort_values("line").reset_index(drop=True)
        assert run.problems.empty and not warned
        assert s["prompt"].tolist() == [t["prompt"] for t in truth]
        assert s["response"].tolist() == [t["response"] for t in truth]
        assert s["answer"].tolist() == [t["answer"] for t in truth]
        assert _groups(s) == [4, 4]
        assert "answer" not in run.sql("DESCRIBE _nums")["column_name"].tolist()


def test_trl_images_show_as_placeholders(tmp_path, cache_dir):
    truth = write_trl_chat(tmp_path / "out", prompts=1, n=1, images=True)
    run, _ = _open(tmp_path / "out", cache_dir, format="trl")
    s = run.samples.sort_values("line")
    assert s["prompt"].tolist() == [t["prompt"] for t in truth]
    assert s["prompt"].iloc[0].endswith("── user ──\n[image]\nWhat is 6*7?")
    # the image is not kept: said, by row (nothing dropped)
    assert run.problems[["line", "kind", "message"]].values.tolist() == [
        [1, "image", "message 1 (user) holds 1 image part(s): shown as [image]"]]


def test_trl_string_files_read_as_before(tmp_path, cache_dir):
    rows = write_trl(tmp_path / "out", steps=(5,), prompts=2, n=2)
    run, _ = _open(tmp_path / "out", cache_dir, format="trl")
    s = run.samples.sort_values("line")
    assert s["prompt"].tolist() == [r["prompt"] for r in rows] and s["response"].tolist() == [r["completion"]
                                                                                                for r in rows]
    assert "answer" not in s.columns and run.problems.empty


def test_trl_bad_messages_are_located_and_kept(tmp_path, cache_dir):
    import pandas as pd

    folder = tmp_path / "out" / "completions"
    folder.mkdir(parents=True)
    table = {"step": [1, 1, 1],
             "prompt": [[{"role": "user", "content": "hi"}]] * 3,
             "completion": [[{"role": "assistant", "content": None}],
                            [{"role": None, "content": "who?"}],
                            [{"role": "critic", "content": "<b>no</b>"}]],
             "accuracy_reward": [1.0, 0.0, 1.0], "advantage": [0.0, 0.0, 0.0]}
    pd.DataFrame(table).to_parquet(folder / "completions_00001.parquet")
    run, _ = _open(tmp_path / "out", cache_dir, format="trl")
    got = run.problems[["line", "kind", "message"]].values.tolist()
    assert got == [[1, "missing_field", "message 1 (assistant) has no content: shown empty"],
                   [2, "missing_field", "message 1 has no role: shown as ?"],
                   [3, "unknown_role", 'message 1 has the role "critic": shown as written']]
    s = run.samples.sort_values("line")
    assert len(s) == 3 and s["response"].tolist() == ["", "── ? ──\nwho?", "── critic ──\n<b>no</b>"]


def test_nemo_train_response_is_the_trained_message(tmp_path, cache_dir):
    truth = write_nemo_chat(tmp_path / "logs", step=3, prompts=9, n=4)
    run, _ = _open(tmp_path / "logs", cache_dir, format="nemo", tokenizer=FakeTokenizer())
    s = run.samples.sort_values("line").reset_index(drop=True)
    assert s["prompt"].tolist() == [t["prompt"] for t in truth]
    assert s["response"].tolist() == [t["response"] for t in truth]
    assert s["answer"].tolist() == [t["answer"] for t in truth]
    assert _groups(s) == [4] * 9
    assert s["reward"].tolist() == [t["reward"] for t in truth]
    assert run.problems.empty


def test_nemo_val_files(tmp_path, cache_dir):
    train = write_nemo_chat(tmp_path / "logs", step=3, prompts=2, n=2)
    val = write_nemo_chat(tmp_path / "logs", step=3, prompts=3, n=2, val=True)
    run, _ = _open(tmp_path / "logs", cache_dir / "folder", format="nemo")  # a folder: the training samples
    assert len(run.samples) == len(train) and len(run.files) == 1
    for fmt in ("nemo", "auto"):
        run, _ = _open(str(tmp_path / "logs" / "val_data_step*.jsonl"), cache_dir / fmt, format=fmt)
        s = run.samples.sort_values("line").reset_index(drop=True)
        assert run.format == "nemo" and run.problems.empty
        assert s["prompt"].tolist() == [t["prompt"] for t in val]
        assert s["response"].tolist() == [t["response"] for t in val]
        assert s["answer"].tolist() == [t["answer"] for t in val]
        assert _groups(s) == [2, 2, 2]
        t = run.turns(s["sample_id"].tolist())
        assert t.groupby("sample_id", sort=False).role.apply(list).tolist() == [
            ["user", "assistant", "environment"]] * 6
        assert t[t.role == "assistant"].text.tolist() == [v["answer"] for v in val]
        assert t.trained.tolist() == [False, True, False] * 6 and t.start.isna().all()


def test_nemo_val_bad_messages_are_located_and_kept(tmp_path, cache_dir):
    write_nemo_chat(tmp_path / "logs", step=1, prompts=1, n=2, val=True)
    f = tmp_path / "logs" / "val_data_step1.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[0]["content"][0][2] = {"role": "judge", "content": "ok"}
    del recs[1]["content"][0][1]["role"]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run, _ = _open(f, cache_dir, format="nemo")
    assert run.problems[["line", "kind", "message"]].values.tolist() == [
        [1, "unknown_role", 'message 2 has the role "judge": shown as written'],
        [2, "missing_field", "message 1 has no role: shown as ?"]]
    s = run.samples.sort_values("line")
    assert len(s) == 2 and s["response"].iloc[0] == "The sum is 0\n── judge ──\nok"
    assert s["prompt"].iloc[1].endswith("── ? ──\nThe sum is 1\n── environment ──\nEnvironment: incorrect")


def _check_images_only(run, truth: list[dict]) -> None:
    """The only problems: the image parts (not kept), on the lines of the samples asking about an image."""
    lines = [i + 1 for i, t in enumerate(truth) if "[image]" in t["prompt"]]
    assert run.problems[["line", "kind", "message"]].values.tolist() == [
        [n, "image", "message 1 (user) holds 1 image part(s): shown as [image]"] for n in lines]


def _check_truth(s: pd.DataFrame, truth: list[dict]) -> None:
    for col in ("prompt", "response", "answer", "reward", "step"):
        assert s[col].tolist() == [t[col] for t in truth], col
    assert s["group_id"].tolist() == [t["group"] for t in truth]


def test_openai_chat_lines(tmp_path, cache_dir):
    truth = write_openai_chat(tmp_path / "logs", steps=(1, 2), prompts=2)
    for fmt in ("auto", "chat"):
        run, warned = _open(tmp_path / "logs", cache_dir / fmt, format=fmt)
        s = run.samples.sort_values("line").reset_index(drop=True)
        assert run.format == "chat" and all("image" in w for w in warned)
        _check_images_only(run, truth)
        _check_truth(s, truth)
        assert s.groupby(["step", "group_id"]).size().tolist() == [3, 3, 3, 3]
        assert s["source"].tolist() == ["web"] * 12  # other scalar fields stay custom columns
        assert "messages" not in s.columns


def test_openai_chat_columns_mapping(tmp_path, cache_dir):
    truth = write_openai_chat(tmp_path / "logs", steps=(7,), prompts=1, reward_key="score")
    run, warned = _open(tmp_path / "logs", cache_dir, format="chat", columns={"reward": "score"})
    s = run.samples.sort_values("line").reset_index(drop=True)
    assert all("image" in w for w in warned)
    _check_images_only(run, truth)
    _check_truth(s, truth)


def test_openai_chat_bad_messages_are_located_and_kept(tmp_path, cache_dir):
    folder = tmp_path / "logs"
    folder.mkdir()
    user = {"role": "user", "content": "hi"}
    said = {"role": "assistant", "content": "a"}
    bad_call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{query: oops"}}]}
    recs = [{"step": 1, "reward": 0.0, "messages": [user, said, {"content": "who?"}]},
            {"step": 1, "reward": 0.0, "messages": [user, {"role": "assistant"}]},
            {"step": 1, "reward": 0.0, "messages": [user, said, {"role": "critic", "content": "meh"}]},
            {"step": 1, "reward": 0.0, "messages": [user, bad_call]},
            {"step": 1, "reward": 0.0, "messages": "hello"},
            {"step": 1, "reward": 0.0}]
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run, _ = _open(folder, cache_dir, format="chat")
    assert run.problems[["line", "kind", "message"]].values.tolist() == [
        [1, "missing_field", "message 2 has no role: shown as ?"],
        [2, "missing_field", "message 1 (assistant) has no content: shown empty"],
        [3, "unknown_role", 'message 2 has the role "critic": shown as written'],
        [4, "wrong_type", 'message 1: the arguments of the tool call "search" are not valid JSON: shown as written'],
        [5, "wrong_type", "messages is not a list of messages: prompt and response left empty"],
        [6, "missing_field", "no messages: prompt and response left empty"]]
    s = run.samples.sort_values("line")
    s = s.astype(object).where(s.notna(), None)
    assert s["prompt"].tolist() == ["hi"] * 4 + [None, None]
    assert s["response"].tolist() == ["a\n── ? ──\nwho?", "", "a\n── critic ──\nmeh", "search({query: oops)", None,
                                      None]
    assert s["answer"].tolist() == ["a", "", "a", "search({query: oops)", None, None]


def test_openai_chat_payloads_stay_plain_text(tmp_path, cache_dir):
    """Markup in a tool argument, a role and a tool name comes back exactly as written: no escaping here (the
    widgets show text)."""
    x = "<img src=x onerror=alert(1)>"
    folder = tmp_path / "logs"
    folder.mkdir()
    call = {"id": "c1", "type": "function", "function": {"name": f"tool{x}", "arguments": json.dumps({"q": x})}}
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": f"judge{x}", "content": f"</script>{x}"}]
    (folder / "a.jsonl").write_text(json.dumps({"step": 0, "reward": 1.0, "messages": messages}) + "\n")
    run, _ = _open(folder, cache_dir)
    s = run.samples
    assert run.format == "chat"
    assert s["response"].iloc[0] == f'tool{x}({{"q": "{x}"}})\n── judge{x} ──\n</script>{x}'
    assert run.problems["kind"].tolist() == ["unknown_role"]


def test_trl_reasoning_and_several_calls_in_one_turn(tmp_path, cache_dir):
    """TRL's parsed messages: ``reasoning_content`` beside the content, two calls in one assistant message (no ids;
    their arguments a struct of the union of the file's argument names), results by name."""
    folder = tmp_path / "out" / "completions"
    folder.mkdir(parents=True)
    completion = [{"role": "assistant", "content": "", "reasoning_content": "two lookups",
                   "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"k": "a"}}},
                                  {"type": "function", "function": {"name": "put", "arguments": {"v": 1}}}]},
                  {"role": "tool", "name": "get", "content": "1"}, {"role": "tool", "name": "put", "content": "ok"},
                  {"role": "assistant", "content": "done", "reasoning_content": "all set"}]
    pd.DataFrame({"step": [2], "prompt": [[{"role": "user", "content": "go"}]], "completion": [completion],
                  "r": [1.0], "advantage": [0.0]}).to_parquet(folder / "completions_00002.parquet")
    run, warned = _open(tmp_path / "out", cache_dir)
    assert run.problems.empty and not warned
    s = run.samples
    assert s["response"].iloc[0] == ('<think>\ntwo lookups\n</think>\nget({"k": "a"})\nput({"v": 1})\n── tool ──\n1\n'
                                     '── tool ──\nok\n── assistant ──\n<think>\nall set\n</think>\ndone')
    assert s["answer"].iloc[0] == "done" and s["n_tool_calls"].iloc[0] == 2 and s["n_turns"].iloc[0] == 5
    t = run.turns().astype(object).where(run.turns().notna(), None)
    assert t[["turn", "role", "text", "tool_name", "tool_arguments", "reasoning"]].values.tolist() == [
        [0, "user", "go", None, None, None],
        [1, "assistant", "", "get", '{"k": "a"}', "two lookups"], [1, "assistant", None, "put", '{"v": 1}', None],
        [2, "tool", "1", "get", None, None], [3, "tool", "ok", "put", None, None],
        [4, "assistant", "done", None, None, "all set"]]


def test_a_run_gives_the_texts_and_turns_of_each_record(tmp_path, cache_dir):
    """Plain and odd records in one file: the run's texts and turns are each record's messages read alone; tool
    call arguments that are JSON text are shown as the model wrote them."""
    from rlviz_widgets._ingest.readers.chat import messages_chat
    from rlviz_widgets._ingest.readers.turns import turn_rows

    def call(i, name, args):
        return {"id": i, "type": "function", "function": {"name": name, "arguments": args}}

    plain = [
        [{"role": "user", "content": "q"}],
        [{"role": "system", "content": ""}, {"role": "user", "content": "é 数据 \\n x"},
         {"role": "assistant", "content": None, "tool_calls": [call("a", "f", '{"x":  [1, 2]}'), call("b", "g", "{}")]},
         {"role": "tool", "tool_call_id": "a", "name": "f", "content": "1"}, {"role": "tool", "tool_call_id": "b",
                                                                            "content": ""},
         {"role": "assistant", "content": "done", "reasoning_content": "hm"}],
        [{"role": "assistant", "content": "only an answer", "thinking": "t"}, {"role": "user", "content": "more?"}],
        [{"role": "developer", "content": "d"}, {"role": "environment", "content": "e"}],
    ]
    odd = [[{"role": "user", "content": [{"type": "text", "text": "parts"}]}, {"role": "assistant", "content": "a"}],
           [{"role": "user", "content": "q"}, {"role": "assistant", "content": None,
                                               "tool_calls": [call("c", "h", "not json")]}],
           [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "name": 5}]]
    records = plain + odd
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps({"step": 1, "reward": 0.0, "messages": m}) + "\n"
                                            for m in records))
    run, _ = _open(folder, cache_dir, format="chat")
    s = run.samples.sort_values("line").reset_index(drop=True)
    s = s.astype(object).where(s.notna(), None)
    t = run.turns()
    for k, (messages, sid) in enumerate(zip(records, s.sample_id)):
        py = messages_chat(messages)
        assert (s.prompt[k], s.response[k], s.answer[k]) == (py.prompt, py.response, py.answer), k
        got = t[t.sample_id == sid].drop(columns="sample_id").astype(object)
        got = got.where(got.notna(), None).to_dict("records")
        assert got == turn_rows(py.turns), k
        assert s.n_turns[k] == len(messages) and s.n_tool_calls[k] == sum(len(x.calls) for x in py.turns)
    assert run.problems[["line", "kind"]].values.tolist() == [[6, "wrong_type"]]
    assert 'f({"x":  [1, 2]})\ng({})' in s.response[1]
