"""Widget classes without a browser: their request handlers, validation, errors and state size."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import traitlets
from conftest import call

import rlviz_widgets as rw
from rlviz_widgets._synth import write_log, write_sample_log


def state_bytes(widget) -> int:
    return len(json.dumps({k: v for k, v in widget.get_state().items() if k not in ("_esm", "_css")}, default=str))


@pytest.fixture
def run(tmp_path, open_run):
    write_log(tmp_path / "logs", steps=5, samples_per_step=20, tokens=30, ranks=2, seed=3)
    return open_run(tmp_path / "logs")


def test_token_strip_sends_tokens_and_float32_metrics(run):
    ids = run.samples.sample_id.head(2).tolist()
    strip = rw.TokenStrip(run, ids)
    content, buffers = call(strip, "strips")
    assert content["ok"] is True
    samples = content["result"]["samples"]
    assert [s["sample_id"] for s in samples] == ids
    toks = run.tokens(ids[0])
    assert samples[0]["tokens"] == toks.token.tolist()
    kl = np.frombuffer(bytes(buffers[samples[0]["buffers"]["kl"]]), dtype="<f4")
    np.testing.assert_allclose(kl, toks.kl.to_numpy(), rtol=1e-5, atol=1e-7)
    assert set(samples[0]["buffers"]) == set(strip.metrics)
    assert strip.tokens.equals(run.tokens(ids))


def test_token_strip_answers_stay_small_and_are_not_resent_for_nothing(tmp_path, open_run):
    """A strip answer held every token of every sample (a group of 16 responses of 32k tokens: 22.6 MB; 100k chips
    froze the page for seconds) and each token's whole text; every poll re-sent strips whose samples had not
    changed. An answer holds ~32k tokens, each at most 1,000 characters, and says how many more there are."""
    log = tmp_path / "logs"
    log.mkdir()
    n = 40_000
    long = {"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["x" * 5000] + ["a"] * (n - 1),
            "logprobs": [-0.5] * n, "ref_logprobs": [-0.25] * n}
    (log / "r0.jsonl").write_text(json.dumps(long) + "\n")
    run = open_run(log)
    sid = int(run.samples.sample_id[0])
    strip = rw.TokenStrip(run, [sid])
    read = []  # the token rows fetched for an answer: only what is sent (4M tokens took 3.4 s for 32k sent)
    real = run._tokens_of
    run._tokens_of = lambda ids, limit=None: read.append(len(df := real(ids, limit))) or df
    content, buffers = call(strip, "strips")
    del run._tokens_of
    assert read == [32_768]
    sample = content["result"]["samples"][0]
    assert len(sample["tokens"]) == 32_768 and sample["more"] == n - 32_768
    assert sample["tokens"][0] == "x" * 1000 + "…" and len(buffers[0]) == 4 * 32_768
    assert len(strip.tokens) == n  # the frame has every token
    from rlviz_widgets.widgets.token_strip import _shares

    assert _shares([n, 10]) == [32_758, 10] and _shares([n] * 64) == [1024] * 64  # short ones leave theirs to others
    wide = log.parent / "wide"  # tokens that are whole texts: 32k of 1,000 characters made a 33 MB answer
    wide.mkdir()
    (wide / "r0.jsonl").write_text(json.dumps({**long, "response_tokens": ["y" * 5000] * n}) + "\n")
    wide_run = open_run(wide)
    content, buffers = call(rw.TokenStrip(wide_run, [int(wide_run.samples.sample_id[0])]), "strips")
    sample = content["result"]["samples"][0]
    assert len(sample["tokens"]) == 999 and sample["more"] == n - 999 and len(buffers[0]) == 4 * 999
    assert len(json.dumps(content)) < 1_100_000
    gen = strip.generation
    with open(log / "r0.jsonl", "a") as f:  # another sample: the shown one is unchanged
        f.write(json.dumps({**long, "step": 1, "response_tokens": ["b"] * 10, "logprobs": [-1.0] * 10,
                            "ref_logprobs": [-1.0] * 10}) + "\n")
    assert run.refresh()
    strip.reload()
    assert strip.generation == gen
    (log / "r0.jsonl").write_text(json.dumps({**long, "response_tokens": ["c"] * n}) + "\n")  # rewritten
    assert run.refresh()
    strip.reload()
    assert strip.generation == gen + 1 and call(strip, "strips")[0]["result"]["samples"][0]["tokens"][0] == "c"
    strip.scale_scope = "run"  # limits of the whole run move as it grows: redrawn on every reload
    gen = strip.generation
    strip.reload()
    assert strip.generation == gen + 1


def test_a_strip_is_redrawn_when_its_sample_leaves_a_capped_run(tmp_path, open_run):
    """A per-step cap keeps the first lines of each step: another rank's earlier lines push a shown sample out of
    the run, in a cache part that did not change (found by a review of the redraw check)."""
    log = tmp_path / "logs"
    log.mkdir()

    def rec(tok: str) -> str:
        return json.dumps({"step": 0, "prompt": "p", "response": tok, "reward": 1.0, "response_tokens": [tok, tok],
                           "logprobs": [-0.5, -0.5], "ref_logprobs": [-0.25, -0.25]}) + "\n"

    (log / "a.jsonl").write_text(rec("a0") + rec("a1") + rec("a2"))
    run = open_run(log, max_samples_per_step=2)
    shown = int(run.samples.sample_id.iloc[-1])
    strip = rw.TokenStrip(run, [shown])
    gen = strip.generation
    (log / "b.jsonl").write_text(rec("b0") + rec("b1"))
    assert run.refresh() and shown not in run.samples.sample_id.tolist()
    strip.reload()
    assert strip.generation == gen + 1 and call(strip, "strips")[0]["result"]["samples"] == []


def test_token_strip_domains_and_validation(run):
    strip = rw.TokenStrip(run, run.samples.sample_id.head(1).tolist(), color_by="log_ratio")
    content, _ = call(strip, "domain", metric="log_ratio", scope="run")
    lo, hi = content["result"]["lo"], content["result"]["hi"]
    assert lo == -hi and hi == pytest.approx(run.sql("select quantile_cont(abs(log_ratio), 0.99) q from tokens").q[0])
    content, _ = call(strip, "domain", metric="kl", scope="step", steps=[2])
    assert content["result"]["lo"] == 0 and content["result"]["hi"] == pytest.approx(
        run.sql("select quantile_cont(kl, 0.99) q from tokens where step = 2").q[0])
    assert call(strip, "domain", metric="prob", scope="run")[0]["result"] == {"metric": "prob", "lo": 0.0, "hi": 1.0}
    with pytest.raises(traitlets.TraitError, match="color_by must be one of"):
        strip.color_by = "nope"
    with pytest.raises(traitlets.TraitError, match="metrics is read-only"):  # it names what color_by may be
        strip.metrics = ["nope"]
    assert strip.metrics == run.token_metrics
    with pytest.raises(traitlets.TraitError, match="at most"):
        strip.sample_ids = list(range(100))
    gen = strip.generation
    strip.sample_ids = run.samples.sample_id.tail(1).tolist()
    assert strip.generation == gen + 1 and strip.pinned is None


def test_errors_are_shown_not_swallowed(run):
    strip = rw.TokenStrip(run, [])
    content, _ = call(strip, "domain", metric="nope", scope="run")
    assert content["ok"] is False and "nope" in content["error"]
    assert strip.error.startswith("domain: KeyError")
    content, _ = call(strip, "not_a_method")
    assert content["ok"] is False and "unknown request" in strip.error
    table = rw.SampleTable(run)
    with pytest.raises(traitlets.TraitError, match="where= fails on the samples: .*Conversion Error"):
        table.where = "CAST(prompt AS INTEGER) > 1"  # it binds, and fails on the data: it broke every page after
    assert table.where == "" and not table.error and table.row_count == len(run.samples)


def test_sample_table_pages_sort_search_select(run):
    table = rw.SampleTable(run, height=300)
    samples = run.samples
    assert table.row_count == len(samples)
    names = table.visible_columns
    assert names[:4] == ["id", "sample_id", "step", "reward"] and "prompt" in names and "file" not in names
    gen = table.generation
    table.sort_by, table.sort_desc = "reward", True
    assert table.generation > gen
    page = call(table, "rows", offset=0, limit=10)[0]["result"]
    top = samples.sort_values(["reward", "sample_id"], ascending=[False, True]).head(10)
    assert page["ids"] == top.sample_id.tolist()
    assert [r[names.index("reward")] for r in page["rows"]] == top.reward.tolist()
    assert page["total"] == len(samples) and page["generation"] == table.generation
    table.search = "Question 3:"
    want = samples[samples.prompt.str.contains("Question 3:", regex=False)]
    assert table.row_count == len(want) > 0
    table.selected_ids = want.sample_id.head(2).tolist()
    assert table.selected.sample_id.tolist() == want.sample_id.head(2).tolist()
    assert "response" in table.selected.columns
    with pytest.raises(traitlets.TraitError):
        table.sort_by = "nope"
    # the browser caps its shift-click ranges at the cap the kernel's validator holds, which it is told
    cap = table.get_state()["max_selected"]
    with pytest.raises(traitlets.TraitError, match=f"at most {cap} rows"):
        table.selected_ids = list(range(cap + 1))


def test_sample_table_clips_long_text_and_returns_it_whole(tmp_path):
    df = pd.DataFrame({"sample_id": [10, 11], "reward": [1.0, -2.0], "response": ["x" * 1000, "<img src=x>"]})
    table = rw.SampleTable(df)
    page = call(table, "rows", offset=0, limit=5)[0]["result"]
    col = table.visible_columns.index("response")
    assert len(page["rows"][0][col]) == 300 and page["clipped"][0][col] is True
    assert page["rows"][1][col] == "<img src=x>"  # text travels as text; the front end inserts it with textContent
    assert call(table, "cell", sample_id=10, column="response")[0]["result"]["text"] == "x" * 1000


def test_sample_table_over_frames_of_any_column_types(tmp_path):
    """A DataFrame with a datetime, timedelta, categorical or bytes column could not be shown (each was taken for a
    number: its min cast to DOUBLE failed); a search failed when a searched column held numbers (question ids), only
    NaN (a missing column read back from CSV), or lists."""
    df = pd.DataFrame({"sample_id": [1, 2, 3], "reward": [0.5, -1.0, 2.0],
                       "at": pd.to_datetime(["2024-05-01 10:00", "2024-05-01 10:01", None]),
                       "took": pd.to_timedelta([1.5, 2.0, 3.0], unit="s"),
                       "split": pd.Categorical(["train", "eval", "train"]), "raw": [b"\x00", b"\x01", b"\x02"],
                       "prompt": [4, 5, 44], "response": ["a", "b", "c"], "ref_response": [np.nan] * 3})
    table = rw.SampleTable(df)
    assert table.row_count == 3
    kinds = {c["name"]: c["kind"] for c in table._source.column_info(["reward", "at", "took", "split", "raw"])}
    assert kinds == {"reward": "number", "at": "text", "took": "text", "split": "text", "raw": "text"}
    table.sort_by, table.sort_desc = "split", False
    assert call(table, "rows", offset=0, limit=5)[0]["result"]["ids"] == [2, 1, 3]
    table.sort_by = "at"
    assert call(table, "rows", offset=0, limit=5)[0]["result"]["ids"] == [1, 2, 3]
    raw = call(table, "rows", offset=0, limit=5)[0]["result"]
    assert [r[table.visible_columns.index("raw")] for r in raw["rows"]] == ["\x00", "\x01", "\x02"]  # as text
    table.search = "4"  # the numbers of a prompt column, as text
    assert table.row_count == 2
    table.search = "b"
    assert table.row_count == 1
    words = rw.SampleTable(pd.DataFrame({"response": ["a cat", "bathe", "see the dog"], "reward": [1.0, 2.0, 3.0]}))
    words.search = " the"  # as typed: the leading blank finds a word's start (it was trimmed: 2 rows)
    assert words.row_count == 1
    words.search = "the"
    assert words.row_count == 2
    words.search = "  "  # only blanks: no search
    assert words.row_count == 3 and not words.error
    lists = rw.SampleTable(pd.DataFrame({"tags": [["good", "long"], ["bad"]], "score": [1.0, 2.0]}))
    lists.search = "good"  # no text column but lists: searched as their text
    assert lists.row_count == 1
    infinite = rw.SampleTable(pd.DataFrame({"kl_sum": [float("inf"), -float("inf"), 1.0]}))
    page = call(infinite, "rows", offset=0, limit=5)[0]["result"]  # inf was sent as null: drawn as missing
    at = infinite.visible_columns.index("kl_sum")
    assert [r[at] for r in page["rows"]] == ["Infinity", "-Infinity", 1.0]
    texts = rw.SampleTable(pd.DataFrame({"sample_id": ["a1", "b2"], "prompt": ["p", "q"]}))  # no number column:
    assert texts.row_count == 2 and call(texts, "rows", offset=0, limit=5)[0]["result"]["ids"] == [0, 1]  # it failed
    nothing = rw.SampleTable(pd.DataFrame({"score": [1.0, 2.0]}))
    nothing.search = "x"  # nothing to search in: no row, not an error
    assert nothing.row_count == 0
    with pytest.raises(traitlets.TraitError, match="logging"):
        nothing.where = f"(SELECT count(*) FROM enable_logging(storage='file', storage_path='{tmp_path}')) >= 0"
    assert nothing.where == "" and not list(tmp_path.iterdir())
    with pytest.raises(Exception, match="configuration"):  # settings locked, as a run's
        nothing._source.con.execute("SET threads = 1")


def test_a_table_shows_24_custom_columns_and_others_on_demand(tmp_path, open_run):
    """Every custom field was a shown column: 500 of them made a 100-row page 1 MB and the columns trait 61 KB."""
    log = tmp_path / "logs"
    log.mkdir()
    (log / "r0.jsonl").write_text("".join(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0,
                                                      **{f"m{k:03d}": k + i for k in range(100)}}) + "\n"
                                          for i in range(3)))
    table = rw.SampleTable(open_run(log))
    custom = [c for c in table.visible_columns if c.startswith("m")]
    assert custom == [f"m{k:03d}" for k in range(24)] and "reward" in table.visible_columns
    page = call(table, "rows", offset=0, limit=100)[0]["result"]
    assert len(page["rows"][0]) == len(table.visible_columns) < 40
    table.show_columns(["sample_id", "m099", "reward"])
    assert table.visible_columns == ["sample_id", "m099", "reward"]
    assert call(table, "rows", offset=0, limit=1)[0]["result"]["rows"][0][1] == 99
    table.reload()  # a poll keeps the columns picked
    assert table.visible_columns == ["sample_id", "m099", "reward"]
    with pytest.raises(KeyError, match="no column 'nope'"):
        table.show_columns(["nope"])
    table.show_columns()
    assert [c for c in table.visible_columns if c.startswith("m")] == custom


def test_sample_table_over_frames_with_odd_column_names():
    """A column named "__id" (a JSON key) or holding NUL failed every page (KeyError), and a groupby's agg
    columns (two levels) failed the constructor (BinderException). Agg levels are joined, NUL is written out."""
    odd = rw.SampleTable(pd.DataFrame({"__id": ["a", "b"], "a\x00b": ["t", "u"], "x": [2, 1]}))
    assert odd.visible_columns == ["sample_id", "__id", "a\\x00b", "x"]
    odd.sort_by = "x"
    page = call(odd, "rows", offset=0, limit=5)[0]["result"]
    assert page["ids"] == [1, 0] and page["rows"] == [[1, "b", "u", 1], [0, "a", "t", 2]]
    odd.selected_ids = [1]
    assert odd.selected.to_dict("records") == [{"sample_id": 1, "__id": "b", "a\\x00b": "u", "x": 1}]
    df = pd.DataFrame({"step": [1, 1, 2], "reward": [1.0, 3.0, 5.0]}).groupby("step").agg({"reward": ["mean", "max"]})
    agg = rw.SampleTable(df)
    assert agg.visible_columns == ["sample_id", "step", "reward_mean", "reward_max"]
    assert call(agg, "rows", offset=0, limit=5)[0]["result"]["rows"] == [[0, 1, 2.0, 3.0], [1, 2, 5.0, 5.0]]


def test_a_where_naming_a_text_column_in_another_letter_case(run):
    """``where`` is DuckDB SQL, whose names ignore case: ``PROMPT LIKE ...`` was sent to the numbers-only table
    (a BinderException) by the sample table, the histograms and the step frame."""
    want = run.sql("SELECT count(*) AS n FROM samples WHERE prompt LIKE '%Question 1%'").n[0]
    assert want > 0
    table = rw.SampleTable(run)
    for where in ("PROMPT LIKE '%Question 1%'", "Prompt LIKE '%Question 1%' AND Reward > -1e9"):
        table.where = where
        assert table.row_count == want and call(table, "rows", offset=0, limit=3)[0]["result"]["total"] == want
        assert run.reward_histogram(where=where)["count"].sum() == want
        assert run.histograms(["reward"], where=where)["count"].sum() == want


def test_state_stays_small_on_a_million_samples(tmp_path, open_run):
    write_sample_log(tmp_path / "big", samples=1_000_000, steps=100, ranks=4)
    big = open_run(tmp_path / "big")
    assert big.n_samples == 1_000_000
    table = rw.SampleTable(big)
    table.sort_by = "reward"
    table.selected_ids = table._source.ids(offset=0, limit=1000)
    page = call(table, "rows", offset=500_000, limit=100)[0]["result"]
    assert len(page["ids"]) == 100
    assert state_bytes(table) < 100_000
    frame_table = rw.SampleTable(pd.DataFrame({"reward": np.random.default_rng(0).normal(size=1_000_000)}))
    assert frame_table.row_count == 1_000_000 and state_bytes(frame_table) < 100_000


@pytest.mark.parametrize("ids", [["a", "b", "c"], [5, 5, 6], [0.5, 1.5, 2.5], [2**60 + 1, 2**60 + 2, 2**60 + 3],
                                 pd.array([1, None, 3], dtype="Int64")])
def test_a_frame_whose_sample_ids_cannot_name_rows_is_keyed_by_position(ids):
    """Text ids failed every page (BinderException), duplicates were refused, float ids gave empty pages, and
    ids past 2**53 were rounded by the browser's numbers, so a pick named another row. Such a frame's rows are
    told apart by position; its sample_id is shown as data, a huge integer as its digits."""
    df = pd.DataFrame({"sample_id": ids, "reward": [3.0, 1.0, 2.0]})
    table = rw.SampleTable(df)
    assert table.visible_columns == ["sample_id", "reward"]
    table.sort_by = "reward"
    page = call(table, "rows", offset=0, limit=10)[0]["result"]
    assert page["ids"] == [1, 2, 0] and [r[1] for r in page["rows"]] == [1.0, 2.0, 3.0]
    shown = [r[0] for r in page["rows"]]
    want = [ids[1], ids[2], ids[0]]
    assert shown == [str(v) if isinstance(v, int) and v > 2**53 else (None if pd.isna(v) else v) for v in want]
    table.selected_ids = [page["ids"][0]]
    picked = table.selected
    assert list(picked.columns) == ["sample_id", "reward"] and picked.reward.tolist() == [1.0]
    assert pd.isna(picked.sample_id[0]) if pd.isna(ids[1]) else picked.sample_id[0] == ids[1]
    assert call(table, "cell", sample_id=0, column="reward")[0]["result"]["text"] == "3.0"


def test_a_frames_table_keeps_the_frames_order_until_sorted(run):
    """Unsorted, a table over a DataFrame listed rows by sample_id: neither the frame's order (a frame the user
    sorted showed unsorted) nor the log's (a run's frame listed rank 0's samples of every step first)."""
    df = run.samples.sort_values("reward", ascending=False).head(40)
    table = rw.SampleTable(df)
    assert call(table, "rows", offset=0, limit=40)[0]["result"]["ids"] == df.sample_id.tolist()
    table.where = "reward > 0"
    kept = df[df.reward > 0].sample_id.tolist()
    assert call(table, "rows", offset=0, limit=40)[0]["result"]["ids"] == kept
    table.sort_by = "sample_id"
    assert call(table, "rows", offset=0, limit=40)[0]["result"]["ids"] == sorted(kept)
    for name in ("__frame_row", "rowid", "ROWID"):  # a column of that name (rowid: SQLite exports) hides DuckDB's
        odd = pd.DataFrame({name: [3, 1, 2, 0], "reward": [0.9, 0.5, 0.3, 0.1]}, index=[9, 7, 8, 6])
        table = rw.SampleTable(odd)
        assert call(table, "rows", offset=0, limit=5)[0]["result"]["ids"] == [0, 1, 2, 3]
        assert name in table._source.kinds and table.selected.empty


def test_a_frames_index_holding_data_is_shown_and_an_empty_frame_has_its_columns():
    """The frame's index was dropped: a groupby's keys (rw.SampleTable(df.groupby("step").mean())) and a
    describe()'s labels were not shown. An empty frame showed no column at all (empty numeric columns are hidden,
    and in a frame without rows every one is)."""
    df = pd.DataFrame({"step": [0, 0, 1], "reward": [0.1, 0.3, 0.7], "tag": ["a", "b", "a"]})
    per_step = rw.SampleTable(df.groupby("step")[["reward"]].mean())
    assert per_step.visible_columns == ["sample_id", "step", "reward"]
    assert per_step.shown[["step", "reward"]].values.tolist() == [[0, 0.2], [1, 0.7]]
    assert "index" in rw.SampleTable(df.describe()).visible_columns
    by_two = rw.SampleTable(df.groupby(["step", "tag"])[["reward"]].sum())
    assert by_two.visible_columns == ["sample_id", "step", "reward", "tag"]  # the usual columns first
    assert rw.SampleTable(df[df.reward > 0.2]).visible_columns == ["sample_id", "step", "reward", "tag"]  # positions
    empty = rw.SampleTable(pd.DataFrame({"x": pd.Series([], dtype=float), "t": pd.Series([], dtype=str)}))
    assert empty.visible_columns == ["sample_id", "x", "t"] and empty.row_count == 0


def test_a_table_with_chosen_columns_reloads_after_a_column_left(tmp_path, open_run):
    """A table shown with columns=[..., "acc"] raised KeyError ("no column 'acc'") on reload once a rewritten log
    file no longer had the field."""
    log = tmp_path / "log"
    log.mkdir()
    f = log / "r0.jsonl"
    f.write_text("".join(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "acc": 0.5}) + "\n"
                         for _ in range(3)))
    run = open_run(log)
    table = rw.SampleTable(run, columns=["sample_id", "reward", "acc"])
    f.write_text(json.dumps({"step": 0, "prompt": "p", "response": "r", "reward": 2.0}) + "\n")
    assert run.refresh()
    table.reload()
    assert table.visible_columns == ["sample_id", "reward"] and table.row_count == 1


def test_a_strip_of_a_run_without_token_strings_says_nothing_more(tmp_path, open_run):
    """Token metrics without token strings draw no chips: "40 more tokens, not sent" under an empty strip was wrong."""
    rec = {"step": 0, "prompt": "p", "response": "r", "reward": 1.0,
           "logprobs": [-0.1] * 40, "ref_logprobs": [-0.2] * 40}
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "r.jsonl").write_text((json.dumps(rec) + "\n") * 2)
    run = open_run(tmp_path / "logs")
    content, _ = call(rw.TokenStrip(run, run.samples.sample_id.tolist()), "strips")
    assert [(s["tokens"], s["more"]) for s in content["result"]["samples"]] == [([], 0), ([], 0)]


def test_token_strip_sends_the_loss_mask_and_turn_starts_of_a_whole_sequence(tmp_path, open_run):
    """Issue 29: a NeMo-RL train file holds the whole sequence (prompt, answer, environment); the strip gets the
    loss mask as bytes and each turn's start with its role, as the run's tokens have them. A log of response
    tokens sends neither (it draws as it did)."""
    from chat_formats import write_nemo_chat

    write_nemo_chat(tmp_path / "nemo", prompts=2, n=2)
    run = open_run(tmp_path / "nemo")
    sid = int(run.samples.sample_id.iloc[0])
    content, buffers = call(rw.TokenStrip(run, [sid]), "strips")
    (sample,) = content["result"]["samples"]
    toks = run.tokens(sid)
    trained = np.frombuffer(bytes(buffers[sample["flags"]["trained"]]), dtype=np.uint8)
    np.testing.assert_array_equal(trained, toks.trained.to_numpy(dtype=np.uint8))
    assert 0 < trained.sum() < len(trained)
    firsts = toks.drop_duplicates("turn")
    assert sample["turns"] == [{"start": int(p), "role": r} for p, r in zip(firsts.index - toks.index[0],
                                                                            firsts.role, strict=True)]
    assert [t["role"] for t in sample["turns"]] == ["user", "assistant", "environment"]

    write_log(tmp_path / "plain", steps=1, samples_per_step=2, tokens=8, seed=1)
    plain = open_run(tmp_path / "plain")
    content, _ = call(rw.TokenStrip(plain, plain.samples.sample_id.tolist()), "strips")
    assert all("flags" not in s and "turns" not in s for s in content["result"]["samples"])


def test_the_table_shows_turns_and_tool_calls_where_a_log_has_conversations(tmp_path, open_run):
    """Issue 29: n_turns, n_tool_calls and n_trained_tokens are table columns where they say something (more than
    two turns, a tool call, tokens outside the loss mask), sortable and usable in where=; a single-turn log's
    table is as it was."""
    from chat_formats import write_agent_chat, write_nemo_chat

    write_agent_chat(tmp_path / "agent")
    agent_run = open_run(tmp_path / "agent")
    agent = rw.SampleTable(agent_run)
    assert {"n_turns", "n_tool_calls"} <= set(agent.visible_columns)
    agent.sort_by, agent.sort_desc = "n_tool_calls", True
    content, _ = call(agent, "rows", offset=0, limit=10)
    col = [c["name"] for c in agent.columns].index("n_tool_calls")
    calls = [r[col] for r in content["result"]["rows"]]
    assert calls == sorted(calls, reverse=True) and calls[0] > 0
    agent.where = "n_tool_calls >= 2"
    assert agent.row_count == (agent_run.samples.n_tool_calls >= 2).sum() > 0

    write_nemo_chat(tmp_path / "nemo", prompts=2, n=2)
    nemo = rw.SampleTable(open_run(tmp_path / "nemo"))
    assert {"n_turns", "n_trained_tokens"} <= set(nemo.visible_columns)
    assert "n_tool_calls" not in nemo.visible_columns

    write_log(tmp_path / "plain", steps=1, samples_per_step=4, tokens=8, seed=1)
    plain = rw.SampleTable(open_run(tmp_path / "plain"))
    assert not {"n_turns", "n_tool_calls", "n_trained_tokens"} & set(plain.visible_columns)
