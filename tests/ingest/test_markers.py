"""Turns of token-only sequences found from the chat template's role markers (docs/upstream-writers.md, section 8):
NeMo-Gym rollouts in NeMo-RL train files (every text empty), and the markers of other families."""

from __future__ import annotations

import json

import pandas as pd
from chat_formats import ChatTokenizer, write_nemo_gym

from rlviz_widgets._ingest.readers.markers import NO_TOKENIZER, NOT_FOUND, marker_turns


def test_nemo_gym_turns_come_from_the_template(tmp_path, open_run):
    tok = ChatTokenizer()
    truth = write_nemo_gym(tmp_path / "logs", tok, samples=2)
    run = open_run(tmp_path / "logs", tokenizer=tok)
    assert run.problems.empty
    s = run.samples.sort_values("line").reset_index(drop=True)
    for sid, t in zip(s.sample_id, truth):
        turns = run.turns(int(sid))
        assert list(zip(turns.role, turns.text)) == t["turns"]
        toks = run.tokens(int(sid))
        opens = toks.index[toks.token == "<|im_start|>"].tolist()
        assert turns.start.tolist() == [0, *opens[1:]] and turns.end.tolist() == [*opens[1:], len(toks)]
        assert turns.trained.tolist() == [False, False, True, False, True]
        assert toks.trained.tolist() == [bool(m) for m in t["mask"]]
        for _, r in turns.iterrows():  # each token's turn and role are its span's
            inside = toks.iloc[r.start:r.end]
            assert (inside.turn == r.turn).all() and (inside.role == r.role).all()
    row = s.iloc[0]
    assert row.prompt == "── system ──\nUse tools.\n── user ──\nWhat is 6*7?"
    assert row.answer == "6*7 = 42" and row.response.endswith("── assistant ──\n6*7 = 42")
    assert row.n_turns == 5 and row.n_trained_tokens == sum(truth[0]["mask"])


def test_nemo_gym_without_a_tokenizer_takes_the_mask_runs(tmp_path, open_run):
    tok = ChatTokenizer()
    truth = write_nemo_gym(tmp_path / "logs", tok, samples=1)
    run = open_run(tmp_path / "logs")
    assert run.problems[["line", "kind"]].values.tolist() == [[0, "no_tokenizer"]]
    turns = run.turns(int(run.samples.sample_id.iloc[0]))
    ends = pd.Series(truth[0]["lengths"]).cumsum().tolist()
    assert turns.role.tolist() == ["user", "assistant", "user", "assistant"]
    assert turns.start.tolist() == [0, *ends[:-1]] and turns.end.tolist() == ends
    assert turns.text.iloc[1].startswith("#")  # the ids, as the tokens show them


def test_a_row_without_content_reads_its_turns_from_the_tokens(tmp_path, open_run):
    """A token-only record (the texts not logged): turns from the markers; none found, one turn of role unknown,
    said on its line."""
    tok = ChatTokenizer()
    write_nemo_gym(tmp_path / "logs", tok, samples=2)
    f = tmp_path / "logs" / "train_data_step1.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    del recs[0]["content"]
    del recs[1]["content"]
    plain = tok.encode("no markers here at all")
    recs[1]["token_ids"] = [plain + tok.encode("x") * (len(recs[1]["token_ids"][0]) - len(plain))]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = open_run(f, tokenizer=tok)
    got = run.problems[["line", "kind", "message"]].values.tolist()
    assert got == [[1, "missing_field", "no content: the texts and turns are read from the token ids"],
                   [2, "missing_field", "no content: the texts and turns are read from the token ids"],
                   [2, "template_markers", NOT_FOUND.split("|", 1)[1]]]
    s = run.samples.sort_values("line")
    first, second = (run.turns(int(i)) for i in s.sample_id)
    assert first.role.tolist() == ["system", "user", "assistant", "user", "assistant"]
    assert second.role.tolist() == ["unknown"] and second.start.tolist() == [0]
    assert second.end.tolist() == [len(run.tokens(int(s.sample_id.iloc[1])))]
    assert s.answer.iloc[0] == "6*7 = 42"


def test_the_markers_of_other_families():
    tok = ChatTokenizer()
    llama = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
             "\n\n{}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|>")
    ids = tok.encode(llama)
    turns, reports = marker_turns(ids, None, tok)
    assert not reports
    assert [(t.role, t.text, t.trained) for t in turns] == [("system", "Be kind.", None), ("user", "Hi", None),
                                                            ("assistant", "{}", None), ("ipython", "42", None)]
    assert turns[0].start == 0 and turns[-1].end == len(ids)  # the BOS token is the first turn's
    gemma = tok.encode("<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n")
    turns, _ = marker_turns(gemma, [False] * 8 + [True] * (len(gemma) - 8), tok)
    assert [(t.role, t.text) for t in turns] == [("user", "Hi"), ("assistant", "Hello")]
    assert [t.trained for t in turns] == [False, True]
    turns, reports = marker_turns([5, 6, 7], [False, True, True], None)
    assert reports == [NO_TOKENIZER] and [(t.role, t.start, t.end, t.trained) for t in turns] == [
        ("unknown", 0, 3, True)]
