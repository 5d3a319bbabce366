"""Bad input: every fault located (file, line, kind), good neighbours kept, ONE warning per open / refresh."""

from __future__ import annotations

import json
import linecache
import random
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import README_RECORD, write_lines

import rlviz_widgets
from rlviz_widgets import LogWarning
from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._synth import make_record

RNG = random.Random(7)


def rec(step: int, i: int, changes: dict | None = None, **more) -> dict:
    r = make_record(RNG, step, i, 6, progress=0.5)
    r.update(changes or {}, **more)
    return r


def without(r: dict, key: str) -> dict:
    r = dict(r)
    del r[key]
    return r


def open_recording(source, cache_dir, **kw):
    """Open and return (run, the LogWarnings issued)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = rlviz_widgets.open_run(source, cache_dir=cache_dir, progress=False, **kw)
    return run, [w for w in caught if issubclass(w.category, LogWarning)]


@pytest.fixture
def faulty(tmp_path):
    """A log folder with every fault; returns (folder, {name: path}, expected problems, kept lines of bad.jsonl)."""
    folder = tmp_path / "logs"
    inf_lp = rec(0, 4)
    inf_lp["logprobs"][2] = float("inf")
    short_values = rec(1, 10)
    short_values["values"] = short_values["values"][:-2]
    non_utf8 = json.dumps(rec(1, 11)).encode().replace(b"Question", b"Qu\xff\xfeestion")
    lines = [
        rec(0, 1),                                                   # 1 good
        '{"prompt": "cut", "step": 0, "reward": ',                   # 2 not JSON (a crashed writer)
        rec(0, 3),                                                   # 3 good
        json.dumps(rec(0, 3)).replace('"reward": ', '"reward": NaN, "old_reward": ', 1),  # 4 NaN reward
        inf_lp,                                                      # 5 Infinity inside logprobs
        without(rec(0, 5), "step"),                                  # 6 missing step: skipped
        without(rec(0, 6), "reward"),                                # 7 missing reward: kept, empty
        rec(1, 7, reward="high"),                                    # 8 reward of the wrong type
        rec(1, 8, {"step": "one"}),                                       # 9 step of the wrong type: skipped
        rec(1, 9, logprobs="abc"),                                   # 10 token array of the wrong type
        short_values,                                                # 11 token arrays of unequal length
        non_utf8,                                                    # 12 bytes that are not UTF-8
        "",                                                          # 13 blank line
        "[1, 2, 3]",                                                 # 14 JSON, not an object
        rec(1, 12),                                                  # 15 good
        rec(1, 13, ref_reward=float("-inf")),                        # 16 -Infinity ref_reward
        rec(1, 14, {"step": "1"}),                                        # 17 step as a string: read as 1
    ]
    bad = write_lines(folder / "bad.jsonl", lines)
    with open(bad, "ab") as f:  # 18: a job still writing its last line
        f.write(json.dumps(rec(1, 15)).encode()[:40])
    good = write_lines(folder / "good.jsonl", [rec(0, 100), rec(1, 101), rec(1, 102)])
    empty = write_lines(folder / "sub" / "empty.jsonl", [])
    b, e = str(bad.resolve()), str(empty.resolve())
    expected = {
        (b, 2, "malformed_json"), (b, 4, "nan"), (b, 5, "nan"), (b, 6, "missing_step"), (b, 7, "missing_reward"),
        (b, 8, "wrong_type"), (b, 9, "wrong_type"), (b, 10, "wrong_type"), (b, 11, "length_mismatch"),
        (b, 12, "non_utf8"), (b, 13, "empty_line"), (b, 14, "not_an_object"), (b, 16, "nan"), (b, 17, "wrong_type"),
        (b, 18, "incomplete_last_line"), (e, 0, "empty_file"),
    }
    kept = [1, 3, 4, 5, 7, 8, 10, 11, 12, 15, 16, 17]
    return folder, {"bad": bad, "good": good, "empty": empty}, expected, kept


def located(run) -> set[tuple[str, int, str]]:
    p = run.problems
    return set(zip(p["file"], p["line"].astype(int), p["kind"]))


def test_every_fault_is_located(faulty, cache_dir):
    folder, files, expected, kept = faulty
    run, warned = open_recording(folder, cache_dir)
    p = run.problems
    assert list(p.columns) == ["file", "line", "kind", "message"]
    assert located(run) == expected
    assert len(p) == len(expected)  # each fault counted once
    assert p["message"].str.len().gt(0).all()
    # exactly one warning, summing them all up
    assert len(warned) == 1
    msg = str(warned[0].message)
    assert f"{len(expected)} problem(s) in 2 file(s)" in msg
    assert "malformed json" in msg and "incomplete last line" in msg and "empty file" in msg


def test_good_neighbours_are_kept(faulty, cache_dir):
    folder, files, expected, kept = faulty
    run, _ = open_recording(folder, cache_dir)
    s = run.samples
    bad = s[s["file"] == str(files["bad"].resolve())].set_index("line")
    assert bad.index.tolist() == kept
    assert len(s[s["file"] == str(files["good"].resolve())]) == 3
    assert run.steps["samples"].tolist() == [5 + 1, 7 + 2]  # steps 0, 1: bad.jsonl + good.jsonl
    # values left empty, not invented
    assert np.isnan(bad.loc[4, "reward"]) and np.isnan(bad.loc[7, "reward"]) and np.isnan(bad.loc[8, "reward"])
    assert np.isnan(bad.loc[16, "ref_reward"]) and np.isnan(bad.loc[16, "reward_gap"])
    assert bad.loc[17, "step"] == 1
    assert "\ufffd" in bad.loc[12, "prompt"]
    assert np.isnan(bad.loc[10, "kl_mean"])  # no logprobs: no KL
    # a NaN token value is left empty; the sample's means use the other tokens
    t = run.tokens(bad.loc[5, "sample_id"])
    assert np.isnan(t["logprob"].iloc[2]) and np.isnan(t["kl"].iloc[2])
    assert t["logprob"].drop(index=2).notna().all()
    assert bad.loc[5, "kl_mean"] == pytest.approx(t["kl"].mean(skipna=True), rel=1e-9)
    # unequal arrays: the missing values are empty, the rest kept
    t = run.tokens(bad.loc[11, "sample_id"])
    assert len(t) == 6 and t["value"].isna().tolist() == [False] * 4 + [True] * 2
    assert t["logprob"].notna().all()


def test_problems_survive_the_cache_and_warn_once(faulty, cache_dir):
    folder, files, expected, kept = faulty
    first, _ = open_recording(folder, cache_dir)
    again, warned = open_recording(folder, cache_dir)  # every file from the cache
    assert located(again) == expected
    assert len(warned) == 1
    # located at the caller's open_run line (here, open_recording), not inside the package
    assert warned[0].filename == __file__ and "open_run(" in linecache.getline(__file__, warned[0].lineno)
    assert again.samples.drop(columns=[]).equals(first.samples)


def test_refresh_warns_once_about_new_problems_only(faulty, cache_dir):
    folder, files, expected, kept = faulty
    run, _ = open_recording(folder, cache_dir)
    with open(files["good"], "ab") as f:
        f.write(b"not json at all\n" + json.dumps(rec(2, 200)).encode() + b"\n" + b'{"step": 2}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run.refresh() is True
    warned = [w for w in caught if issubclass(w.category, LogWarning)]
    assert len(warned) == 1
    assert warned[0].filename == __file__ and "run.refresh()" in linecache.getline(__file__, warned[0].lineno)
    assert "4 problem(s) in 1 file(s)" in str(warned[0].message)  # line 6 lacks prompt, response and reward
    g = str(files["good"].resolve())
    assert located(run) == expected | {(g, 4, "malformed_json"), (g, 6, "missing_reward"), (g, 6, "missing_field")}
    assert run.samples.query("file == @g")["line"].tolist() == [1, 2, 3, 5, 6]
    # nothing new: no warning at all
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run.refresh() is False
    assert not [w for w in caught if issubclass(w.category, LogWarning)]


def test_clean_log_has_no_problem_and_no_warning(synth_logs, cache_dir):
    folder, _ = synth_logs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = rlviz_widgets.open_run(folder, cache_dir=cache_dir, progress=False)
    assert run.problems.empty and list(run.problems.columns) == ["file", "line", "kind", "message"]


def test_readme_record_13_tokens_12_values(cache_dir):
    run, warned = open_recording(README_RECORD, cache_dir)
    r = json.loads(README_RECORD.read_text())
    assert len(r["response_tokens"]) == 13 and len(r["logprobs"]) == 12
    assert located(run) == {(str(README_RECORD.resolve()), 1, "length_mismatch")}
    assert len(warned) == 1
    t = run.tokens(run.samples["sample_id"])
    assert len(t) == 13
    assert t["token"].tolist() == r["response_tokens"]
    metrics = ["logprob", "ref_logprob", "log_ratio", "kl", "prob", "ref_prob", "value", "token_reward"]
    assert t[metrics].iloc[12].isna().all()  # the trailing <PAD> has no values
    assert t[metrics].iloc[:12].notna().all().all()
    np.testing.assert_allclose(t["logprob"].iloc[:12], np.float32(r["logprobs"]), rtol=0)
    np.testing.assert_allclose(t["value"].iloc[:12], np.float32(r["values"]), rtol=0)


def test_token_arrays_with_null_and_wrong_items(tmp_path, cache_dir):
    r1 = rec(0, 1)
    r1["values"][1] = None
    r2 = rec(0, 2)
    r2["token_rewards"] = {"not": "a list"}
    f = write_lines(tmp_path / "logs" / "x.jsonl", [r1, r2, rec(0, 3)])
    run, warned = open_recording(f, cache_dir)
    assert located(run) == {(str(f.resolve()), 1, "wrong_type"), (str(f.resolve()), 2, "wrong_type")}
    assert len(warned) == 1 and len(run.samples) == 3
    t = run.tokens(run.samples.sort_values("line")["sample_id"].iloc[0])
    assert t["value"].isna().tolist() == [False, True, False, False, False, False]


def test_only_bad_lines_and_empty_file_still_open(tmp_path, cache_dir):
    folder = tmp_path / "logs"
    write_lines(folder / "a.jsonl", ["garbage", "", "{\"step\": \"x\"}"])
    write_lines(folder / "b.jsonl", [])
    run, warned = open_recording(folder, cache_dir)
    assert run.samples.empty and run.steps.empty and run.n_samples == 0
    a, b = str((folder / "a.jsonl").resolve()), str((folder / "b.jsonl").resolve())
    assert located(run) == {(a, 1, "malformed_json"), (a, 2, "empty_line"), (a, 3, "wrong_type"),
                            (b, 0, "empty_file")}
    assert len(warned) == 1
    assert isinstance(run.reward_histogram("reward"), pd.DataFrame) and run.reward_histogram("reward").empty


def test_byte_order_mark_and_crlf_lines_are_read(tmp_path, cache_dir):
    recs = [rec(0, i) for i in range(3)]
    body = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    bom = tmp_path / "logs" / "bom.jsonl"
    bom.parent.mkdir()
    bom.write_bytes(b"\xef\xbb\xbf" + body)
    (tmp_path / "logs" / "crlf.jsonl").write_bytes(body.replace(b"\n", b"\r\n"))
    run, warned = open_recording(tmp_path / "logs", cache_dir)
    assert run.problems.empty and not warned
    s = run.samples
    for name in ("bom.jsonl", "crlf.jsonl"):
        mine = s[s["file"].str.endswith(name)].sort_values("line")
        assert mine["line"].tolist() == [1, 2, 3]
        assert mine["reward"].tolist() == [r["reward"] for r in recs]
    # a file of one line, opened by a byte order mark and without a newline: a finished record (it was taken for
    # one still being written, and skipped until a newline came)
    one = tmp_path / "one"
    one.mkdir()
    (one / "x.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(recs[0]).encode())
    run, warned = open_recording(one, cache_dir)
    assert run.problems.empty and not warned and run.samples.reward.tolist() == [recs[0]["reward"]]


def test_steps_beyond_64_bits_are_reported_and_big_ones_exact(tmp_path, cache_dir):
    """A step past the 64-bit range once made DuckDB refuse the whole chunk (the open crashed); one past 2**53
    was rounded through a double."""
    f = write_lines(tmp_path / "logs" / "x.jsonl", [
        rec(0, 0, {"step": 2 ** 70}), rec(0, 1, {"step": 2 ** 53 + 1}), rec(0, 2, {"step": 2 ** 63 - 1}),
        rec(0, 3, {"step": -2 ** 64}), rec(0, 4, {"step": "9007199254740993"}), rec(0, 5)])
    run, warned = open_recording(f, cache_dir)
    p = str(f.resolve())
    assert located(run) == {(p, 1, "wrong_type"), (p, 4, "wrong_type"), (p, 5, "wrong_type")}  # 5: a string
    assert "1180591620717411303424" in run.problems.sort_values("line")["message"].iloc[0]
    assert run.samples.sort_values("line")["step"].tolist() == [2 ** 53 + 1, 2 ** 63 - 1, 2 ** 53 + 1, 0]
    assert len(warned) == 1


@pytest.mark.parametrize("where", ["top", "nested"])
def test_keys_differing_only_in_case_or_empty(tmp_path, cache_dir, where):
    """DuckDB's JSON transform takes a struct, whose field names ignore case and may not be empty: a ``Prompt``
    beside ``prompt``, an ``Acc`` beside ``acc`` or a ``""`` key once made it refuse every record (even inside
    a nested object, which is never read)."""
    odd = {"Prompt": "other", "acc": 1, "Acc": 2, "": 3}
    recs = [rec(0, i, odd if where == "top" else {"meta": odd}) for i in range(3)] + [rec(0, 3)]
    f = write_lines(tmp_path / "logs" / "x.jsonl", recs)
    run, _ = open_recording(f, cache_dir, pad_token=None)
    s = run.samples.sort_values("line")
    assert len(s) == 4
    assert s["prompt"].tolist() == [r["prompt"] for r in recs]
    p = str(f.resolve())
    if where == "top":
        assert located(run) == {(p, n, "unnamed_field") for n in (1, 2, 3)} | {(p, 1, "renamed_field")}
        assert s["acc"].tolist()[:3] == [1, 1, 1]
        # Acc and Prompt keep their own columns (DuckDB's names ignore case: "Acc" may not be "acc")
        renamed = [c for c in s.columns if c.startswith("Acc_")]
        assert len(renamed) == 1 and s[renamed[0]].tolist()[:3] == [2, 2, 2]
        assert s["Prompt_"].tolist()[:3] == ["other"] * 3
    else:
        assert run.problems.empty


def test_odd_keys_and_nesting_are_reported_not_fatal(tmp_path, cache_dir):
    """A key with a lone surrogate escape (no key DuckDB can read) and a line nested past Python's parser are
    each reported; the lines around them are kept."""
    good = [json.dumps(rec(0, i)) for i in range(3)]
    surrogate = good[0][:-1] + ', "k\\ud800": 1}'
    deep = "[" * 3000 + "]" * 3000
    f = write_lines(tmp_path / "logs" / "x.jsonl", [good[0], surrogate, good[1], deep, good[2]])
    run, warned = open_recording(f, cache_dir)
    p = str(f.resolve())
    assert located(run) == {(p, 2, "malformed_json"), (p, 4, "malformed_json")}
    assert run.samples["line"].sort_values().tolist() == [1, 3, 5]
    assert len(warned) == 1


def test_keys_found_after_any_whitespace_and_colliding_names_kept(tmp_path, cache_dir):
    """Custom fields with tabs or several blanks before the colon were not found (their values silently gone);
    two keys whose cleaned names are one (``a b`` and ``a-b``) each keep their values, one renamed and
    reported; names in other scripts stay readable."""
    r = rec(0, 0)
    body = json.dumps(r)[:-1] + ', "em"\t: 0.5, "f1"    : 0.7, "a b": 1, "a-b": 2, "ü": 3, "準確": 4}'
    f = write_lines(tmp_path / "logs" / "x.jsonl", [body, rec(0, 1)])
    run, _ = open_recording(f, cache_dir)
    s = run.samples.sort_values("line").iloc[0]
    assert (s["em"], s["f1"], s["a_b"], s["ü"], s["準確"]) == (0.5, 0.7, 1, 3, 4)
    renamed = [c for c in run.samples.columns if c.startswith("a_b_")]
    assert len(renamed) == 1 and s[renamed[0]] == 2
    assert located(run) == {(str(f.resolve()), 1, "renamed_field")}
    assert "'a-b'" in run.problems["message"].iloc[0]


def test_a_field_named_like_a_column_of_the_runs_own_is_kept_and_reported(tmp_path, cache_dir):
    """A record's own ``kl_mean``, ``file`` or ``Reward`` was kept as ``kl_mean_``, ``file_``, ``Reward_`` without a
    word: a user reading ``kl_mean`` got the run's per-token KL mean, not their field. Each is now reported once,
    where it first is, naming the column it is kept as."""
    own = {"kl_mean": 7.0, "file": "a.txt", "Reward": 2.5}
    f = write_lines(tmp_path / "logs" / "x.jsonl", [rec(0, 0), rec(0, 1, own), rec(0, 2, {"kl_mean": 8.0})])
    run, _ = open_recording(f, cache_dir)
    s = run.samples.sort_values("line")
    assert s["kl_mean_"].tolist()[1:] == [7.0, 8.0] and s["file_"].iloc[1] == "a.txt" and s["Reward_"].iloc[1] == 2.5
    assert located(run) == {(str(f.resolve()), 2, "renamed_field")}
    messages = sorted(run.problems["message"])
    assert len(messages) == 3
    assert "'kl_mean' is kept as column kl_mean_ (the run has a column kl_mean of its own)" in messages[2]
    assert "'Reward' is kept as column Reward_ (the run has a column reward of its own)" in messages[0]


def test_a_custom_field_keeps_its_column_across_refreshes_files_and_runs(tmp_path, cache_dir):
    """Colliding names were settled per chunk of lines: "a-b" was column a_b_<hash> beside "a b" in one refresh's
    lines and a_b in the next one's (merged into "a b"'s values); "Hit" alone in a second file was merged into
    the first file's "hit". A field now has one column for the whole run, whatever each chunk holds."""
    log = write_lines(tmp_path / "logs" / "x.jsonl", [rec(0, 0, {"a b": 1, "a-b": 2, "hit": 3, "Hit": 4})])
    run, _ = open_recording(log, cache_dir)
    with open(log, "a") as f:
        f.write(json.dumps(rec(1, 1, {"a-b": 20, "Hit": 40})) + "\n")
    run.refresh()
    renamed = {c[:4]: c for c in run.columns if c.startswith(("a_b_", "Hit_"))}
    assert set(renamed) == {"a_b_", "Hit_"}
    s = run.samples.sort_values("line")
    assert s["a_b"].tolist()[0] == 1 and pd.isna(s["a_b"].tolist()[1])
    assert s[renamed["a_b_"]].tolist() == [2, 20] and s[renamed["Hit_"]].tolist() == [4, 40]
    assert s["hit"].tolist()[0] == 3 and pd.isna(s["hit"].tolist()[1])
    # the same named afresh (a cold cache and a warm one), and one page of rows from the cache parts alike
    for cache in (tmp_path / "cold", cache_dir):
        again, _ = open_recording(log, cache)
        assert again.columns == run.columns
        pd.testing.assert_frame_equal(again.samples, s.reset_index(drop=True), check_dtype=False)
        assert again.rows([int(s["sample_id"].iloc[1])])[renamed["Hit_"]].tolist() == [40]

    # two files: "Hit" alone in b.jsonl is the column of "Hit" in a.jsonl, not a.jsonl's "hit"
    a = write_lines(tmp_path / "two" / "a.jsonl", [rec(0, 0, {"hit": 1, "Hit": 2})])
    b = write_lines(tmp_path / "two" / "b.jsonl", [rec(0, 1, {"Hit": 20})])
    run, _ = open_recording(tmp_path / "two", cache_dir)
    s = run.samples.sort_values("file")
    hit_ = [c for c in run.columns if c.startswith("Hit_")]
    assert len(hit_) == 1 and s[hit_[0]].tolist() == [2, 20] and s["hit"].isna().tolist() == [False, True]
    assert located(run) == {(str(a.resolve()), 1, "renamed_field"), (str(b.resolve()), 1, "renamed_field")}
    # a page of rows from the file without "hit": that column is empty there (numbers still), not an error
    page = run.rows([int(s["sample_id"].iloc[1])])
    assert page["hit"].isna().all() and page["hit"].dtype == "float64"

    # two runs side by side, each without a collision, together with one: the set names them apart
    c = write_lines(tmp_path / "c" / "c.jsonl", [rec(0, 2, {"hit": 5})])
    d = write_lines(tmp_path / "d" / "d.jsonl", [rec(0, 3, {"Hit": 6})])
    rc, _ = open_recording(c, cache_dir)
    rd, _ = open_recording(d, cache_dir)
    assert "hit" in rc.columns and "Hit" in rd.columns and rc.problems.empty and rd.problems.empty
    both = rlviz_widgets.RunSet({"c": rc, "d": rd})
    s = both.samples.sort_values("run")
    hit_ = [c for c in both.columns if c.startswith("Hit_")]
    assert len(hit_) == 1 and s[hit_[0]].isna().tolist() == [True, False] and s["hit"].isna().tolist() == [False, True]
    assert located(both) == {(str(d.resolve()), 1, "renamed_field")}


def test_a_run_opened_again_names_its_fields_as_before(tmp_path, cache_dir):
    """Keys met in another order while a run was followed ("Hit", then "hit") were named otherwise by the next
    open (which sorts them): "Hit" held one field in the notebook before a restart and another after (DuckDB's
    names ignore case). The names are kept in the cache for the same logs' next open."""
    log = write_lines(tmp_path / "logs" / "x.jsonl", [rec(0, 0, {"Hit": 1})])
    run, _ = open_recording(log, cache_dir)
    with open(log, "a") as f:
        f.write(json.dumps(rec(0, 1, {"hit": 2})) + "\n")
    run.refresh()
    assert "Hit" in run.columns and [c for c in run.columns if c.startswith("hit_")]
    again, _ = open_recording(log, cache_dir)
    assert again.columns == run.columns
    pd.testing.assert_frame_equal(again.samples, run.samples)
    cold, _ = open_recording(log, tmp_path / "other_cache")  # no names kept there: sorted, "hit" first
    assert "hit" in cold.columns and [c for c in cold.columns if c.startswith("Hit_")]


def test_auto_format_looks_past_a_bad_first_record(tmp_path, cache_dir):
    f = write_lines(tmp_path / "logs" / "rank0.jsonl", [{}, rec(0, 1), rec(0, 2)])
    run, _ = open_recording(tmp_path / "logs", cache_dir)
    assert len(run.samples) == 2
    assert located(run) == {(str(f.resolve()), 1, "missing_step")}


def test_nan_in_custom_fields_is_reported_and_left_empty(tmp_path, cache_dir):
    body = json.dumps(rec(0, 0))[:-1] + ', "kl_coef": Infinity, "em": NaN}'
    f = write_lines(tmp_path / "logs" / "x.jsonl", [body, rec(0, 1, {"kl_coef": 0.1, "em": 1})])
    run, warned = open_recording(f, cache_dir)
    s = run.samples.sort_values("line")
    assert s["kl_coef"].isna().tolist() == [True, False] and s["em"].isna().tolist() == [True, False]
    assert sorted(run.problems["message"]) == ["em is NaN: left empty", "kl_coef is Infinity: left empty"]
    assert located(run) == {(str(f.resolve()), 1, "nan")} and len(warned) == 1


def test_missing_text_fields_and_null_tokens_are_reported(tmp_path, cache_dir):
    r2, r3 = without(rec(0, 2), "response"), rec(0, 3)
    r3["response_tokens"][1] = None
    f = write_lines(tmp_path / "logs" / "x.jsonl", [rec(0, 1), r2, r3, without(rec(0, 4), "prompt")])
    run, warned = open_recording(f, cache_dir)
    p = str(f.resolve())
    assert located(run) == {(p, 2, "missing_field"), (p, 3, "wrong_type"), (p, 4, "missing_field")}
    assert len(run.samples) == 4 and len(warned) == 1
    assert "null or invalid token" in run.problems.query("line == 3")["message"].iloc[0]


def test_text_fields_that_are_not_strings_are_reported_and_shown_as_json(tmp_path, cache_dir):
    chat = [{"role": "user", "content": 'say "hi"'}]
    f = write_lines(tmp_path / "logs" / "x.jsonl", [
        rec(0, 1, prompt=chat), rec(0, 2, response=5, ref_response=True), rec(0, 3, response={"a": [1, 2]}),
        rec(0, 4, prompt=None, response="a\\b \u00e9\n"), rec(0, 5)])
    run, warned = open_recording(f, cache_dir)
    p = str(f.resolve())
    assert located(run) == {(p, 1, "wrong_type"), (p, 2, "wrong_type"), (p, 3, "wrong_type"),
                            (p, 4, "missing_field")}
    msgs = run.problems.sort_values(["line", "message"])["message"].tolist()
    assert msgs[:4] == ["prompt is a list, not text: shown as its JSON",
                        "ref_response is a boolean, not text: shown as its JSON",
                        "response is a number, not text: shown as its JSON",
                        "response is an object, not text: shown as its JSON"]
    s = run.samples.set_index("line")
    assert json.loads(s.loc[1, "prompt"]) == chat
    assert (s.loc[2, "response"], s.loc[2, "ref_response"], s.loc[3, "response"]) == ("5", "true", '{"a":[1,2]}')
    assert s.loc[4, "response"] == "a\\b \u00e9\n" and pd.isna(s.loc[4, "prompt"])  # strings as they were
    assert len(run.samples) == 5 and len(warned) == 1


def test_text_fields_not_strings_found_in_any_spacing_only_where_they_are(tmp_path, cache_dir):
    body = '"step": 0, "reward": 1.0, "response_tokens": ["a"], "logprobs": [-0.5]'
    f = write_lines(tmp_path / "logs" / "x.jsonl", [
        '{"prompt":5,"response":"r",' + body + '}', '{"prompt" :\t\t\t [1], "response": "r",' + body + '}',
        '{"prompt": "says \\"response\\": 5 and \\"response\\":[1]", "response": "ok",' + body + '}',
        '{"prompt": null, "response": "x",' + body + '}', '{"prompt": "p", "response": -1e3,' + body + '}'])
    run, _ = open_recording(f, cache_dir)
    p = run.problems
    assert sorted(zip(p["line"], p["message"])) == [
        (1, "prompt is a number, not text: shown as its JSON"), (2, "prompt is a list, not text: shown as its JSON"),
        (4, "no prompt: left empty"), (5, "response is a number, not text: shown as its JSON")]
    assert run.samples.set_index("line").loc[5, "response"] == "-1000.0"


def test_text_fields_not_strings_in_other_formats(tmp_path, cache_dir):
    folder = tmp_path / "verl"
    write_lines(folder / "3.jsonl", [{"input": ["a", "b"], "output": "o", "score": 1.0, "step": 3},
                                     {"input": "i", "output": "o", "score": 0.0, "step": 3}])
    run, _ = open_recording(folder, cache_dir, format="verl")
    assert run.problems[["line", "message"]].values.tolist() == [[1, "input is a list, not text: shown as its JSON"]]
    mapped = write_lines(tmp_path / "m" / "x.jsonl", [{"q": 7, "a": "x", "reward": 1.0, "step": 0}])
    run, _ = open_recording(mapped, cache_dir, columns={"prompt": "q", "response": "a"})
    assert run.problems["message"].tolist() == ["q is a number, not text: shown as its JSON"]


def test_records_without_prompt_or_response_are_reported_however_they_are_read(tmp_path, cache_dir):
    f = write_lines(tmp_path / "logs" / "x.jsonl", [rec(0, 1)])
    run, _ = open_recording(f, cache_dir)
    with open(f, "a") as out:  # a refresh reads only records without a response
        out.write(json.dumps(without(rec(0, 2), "response")) + "\n" + json.dumps(without(rec(0, 3), "response")) + "\n")
    run.refresh()
    want = [(2, "missing_field"), (3, "missing_field")]
    assert sorted(zip(run.problems["line"], run.problems["kind"])) == want
    warm, _ = open_recording(f, cache_dir)
    assert sorted(zip(warm.problems["line"], warm.problems["kind"])) == want


def test_a_field_whose_name_is_too_long_to_read_is_reported(tmp_path, cache_dir):
    f = write_lines(tmp_path / "logs" / "x.jsonl", [
        rec(0, 1, **{"k" * 70000: 5}), rec(0, 2, **{"\u00e9" * 40000: 6}),  # written as \\u00e9: 240 KB
        rec(0, 3, **{"x" * 20000: 7}), rec(0, 4)])
    f.write_text(f.read_text().replace("\u00e9", "\\u00e9"))
    run, warned = open_recording(f, cache_dir)
    assert run.problems[["line", "kind"]].values.tolist() == [[1, "unnamed_field"], [2, "unnamed_field"]]
    assert "name is longer than 64 KB" in run.problems["message"][0] and len(warned) == 1
    assert len(run.samples) == 4 and run.samples.set_index("line").loc[3, "x" * 20000] == 7  # long, but read


def test_custom_integers_past_2_53_keep_every_digit(tmp_path, cache_dir):
    body = '"step": 0, "prompt": "p", "response": "r", "reward": 1.0'
    f = write_lines(tmp_path / "logs" / "x.jsonl", [
        f'{{{body}, "hash": 18446744073709551615, "seed": 9007199254740993, "n": 7}}',
        f'{{{body}, "hash": 18446744073709551614, "seed": 12, "n": 1e3}}'])
    run, warned = open_recording(f, cache_dir)
    s = run.samples.sort_values("line")
    assert s["hash"].tolist() == ["18446744073709551615", "18446744073709551614"]  # not 1.8446744073709552e19
    assert s["seed"].tolist() == ["9007199254740993", "12.0"]  # a field of exact and other numbers: as text
    assert s["n"].tolist() == [7.0, 1000.0] and not warned


def test_text_fields_not_strings_after_any_run_of_blanks(tmp_path, cache_dir):
    body = '"step": 0, "reward": 1.0, "response": "r"'
    f = write_lines(tmp_path / "logs" / "x.jsonl", ['{"prompt"   : 5, ' + body + '}',
                                                     '{"prompt"\t\t\t\t: [1], ' + body + '}',
                                                     '{"prompt"    :    "ok", ' + body + '}'])
    run, _ = open_recording(f, cache_dir)
    assert run.problems[["line", "kind"]].values.tolist() == [[1, "wrong_type"], [2, "wrong_type"]]


def test_a_token_value_past_float32_is_reported_as_such(tmp_path, open_run):
    """-1e39 in a logprob array (finite JSON, past float32) was reported as a 'null or non-numeric value'."""
    import json

    (tmp_path / "logs").mkdir()
    rec = {"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a", "b"],
           "logprobs": [-0.5, -1e39]}
    (tmp_path / "logs" / "r.jsonl").write_text(json.dumps(rec) + "\n")
    run = open_run(tmp_path / "logs")
    msg = run.problems.query("kind == 'wrong_type'")["message"].tolist()
    assert msg == ["logprobs has 1 null, non-numeric or out-of-range value(s) (arrays are float32, to ±3.4e38): "
                   "left empty"]
    assert run.tokens(run.samples.sample_id.tolist()).logprob.isna().tolist() == [False, True]


def test_a_list_or_object_in_a_field_of_numbers_is_reported(tmp_path, open_run, monkeypatch):
    """A custom field holding numbers or text, but a list or an object in some records: those values were left
    empty without a word. A field that only ever holds lists (no column) is not reported. Small files parsed
    together report the same as parsed one by one."""
    import json

    from rlviz_widgets._store import cache as cachemod

    base = {"prompt": "p", "response": "r", "reward": 1.0, "meta": [1, 2]}
    values = [0.5, [1, 2], "text", {"a": 1}]
    logs = tmp_path / "logs"
    logs.mkdir()
    for k in range(3):  # three small files, parsed in one batch
        (logs / f"rank{k}.jsonl").write_text(
            "".join(json.dumps(dict(base, step=k, acc=v)) + "\n" for v in values))
    want = [[2, "wrong_type", "acc is a list here, a number or text elsewhere: left empty"],
            [4, "wrong_type", "acc is an object here, a number or text elsewhere: left empty"]]
    for batch in (cachemod.BATCH_BYTES, 0):  # 0: every file parsed on its own
        monkeypatch.setattr(cachemod, "BATCH_BYTES", batch)
        run = open_run(logs, cache_dir=tmp_path / f"cache{batch}")
        p = run.problems
        for k in range(3):
            assert p[p.file.str.endswith(f"rank{k}.jsonl")][["line", "kind", "message"]].values.tolist() == want
        acc = run.samples.sort_values(["step", "line"]).acc.tolist()[:4]
        assert acc[0] == "0.5" and acc[2] == "text" and pd.isna(acc[1]) and pd.isna(acc[3])
        assert "meta" not in run.columns


def test_a_list_in_a_field_that_holds_numbers_in_another_part_is_reported(tmp_path, cache_dir):
    """A custom field holding numbers in one file (or part), and only lists or objects in the lines of another
    part: those were left empty without a word, the report being made only where a part held both. Now the run
    reports them wherever the numbers are, on a warm cache too, and a refresh that brings the numbers in says so."""
    row = {"prompt": "p", "response": "r", "reward": 1.0}
    logs = tmp_path / "logs"
    write_lines(logs / "r0.jsonl", [dict(row, step=0, acc=0.5)])
    write_lines(logs / "r1.jsonl", [dict(row, step=0, acc=[1, 2]), dict(row, step=1, acc={"a": 1})])
    # a last line without its newline is parsed on its own: a part of its own
    write_lines(logs / "r2.jsonl", [dict(row, step=0, acc=1.5), dict(row, step=1, acc=[3])], newline_at_end=False)
    want = [["r1.jsonl", 1, "acc is a list here, a number or text elsewhere: left empty"],
            ["r1.jsonl", 2, "acc is an object here, a number or text elsewhere: left empty"],
            ["r2.jsonl", 2, "acc is a list here, a number or text elsewhere: left empty"]]

    def reported(run):
        p = run.problems.query("kind == 'wrong_type'")
        return sorted([f.rsplit("/", 1)[-1], n, m] for f, n, m in p[["file", "line", "message"]].values.tolist())

    for _ in range(2):  # an empty cache, then a warm one
        run, warned = open_recording(logs, cache_dir)
        assert reported(run) == want
        assert "3 wrong type" in str(warned[0].message)
        assert run.samples.acc.isna().sum() == 3

    # numbers only in a file that comes later: the lists read before are reported then
    lists = tmp_path / "lists"
    write_lines(lists / "r1.jsonl", [dict(row, step=0, acc=[1, 2])])
    run, _ = open_recording(lists, cache_dir)
    assert run.problems.empty and "acc" not in run.samples.columns  # a field of lists only: no column
    write_lines(lists / "r3.jsonl", [dict(row, step=0, acc=2.0)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.refresh()
    assert reported(run) == [["r1.jsonl", 1, "acc is a list here, a number or text elsewhere: left empty"]]
    assert any("1 wrong type" in str(w.message) for w in caught)


def test_bytes_that_are_not_utf8_on_a_last_line_without_newline_are_reported(tmp_path, cache_dir):
    """The last line of a file, complete but without its newline, was decoded with replacement before it was
    parsed: its bytes that are not UTF-8 were shown as \ufffd without a report."""
    line = json.dumps(rec(1, 0)).encode().replace(b"Question", b"Qu\xff\xfeestion")
    for name, data in (("with", line + b"\n"), ("without", line)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "r.jsonl").write_bytes(data)
        run, _ = open_recording(tmp_path / name, cache_dir)
        assert run.problems[["line", "kind"]].values.tolist() == [[1, "non_utf8"]], name
        assert "Qu\ufffd\ufffdestion" in run.samples.prompt[0]


def test_a_text_field_that_is_not_a_string_is_reported_under_a_key_spelled_with_escapes(tmp_path, cache_dir):
    """``"\\u0070rompt"`` is the key ``prompt`` to a JSON parser: its list was shown as JSON text, but only the
    literal spelling was looked for to report it."""
    for i, key in enumerate(("prompt", "\\u0070rompt", "pro\\u006dpt", "\\ud835\\udc29rompt")):
        d = tmp_path / f"logs{i}"
        write_lines(d / "x.jsonl", ['{"step": 0, "' + key + '": [{"role": "user", "content": "hi"}], "response": '
                                    '"r", "reward": 1.0, "acc": 1}'])
        run, _ = open_recording(d, cache_dir)
        problems = run.problems[["line", "kind", "message"]].values.tolist()
        if i < 3:
            assert problems == [[1, "wrong_type", "prompt is a list, not text: shown as its JSON"]], key
            assert run.samples.prompt[0] == '[{"role":"user","content":"hi"}]'
        else:  # another key (a mathematical p): a custom field of lists, no column; no prompt
            assert problems == [[1, "missing_field", "no prompt: left empty"]]


def test_a_key_written_twice_in_a_record_is_reported(tmp_path, open_run, monkeypatch):
    """A record holding a key twice at its top (a writer's bug): the first value is read, the other was lost
    without a word. Reported wherever it is, in any spelling; a key repeated inside a nested object is not."""
    from rlviz_widgets._store import cache as cachemod

    lines = ['{"step": 0, "prompt": "p", "response": "r", "reward": 1.0, "acc": 1, "acc": 2}',
             '{"step": 0, "prompt": "p", "response": "r", "reward": 2.0, "meta": {"acc": 1, "acc": 2}, "acc": 3}',
             '{"step": 1, "st\\u0065p": 2, "prompt": "p", "response": "r", "reward": 3.0}',
             '{"step": 1, "prompt": "p", "response": "r", "reward": 4.0, "reward" : 5.0, "acc": 4}',
             '{"step": 1, "ref_logprobs": [0.5], "logprobs": [0.25], "prompt": "p", "response": "r", "reward": 6.0}']
    want = [[1, "duplicate_key", "acc is written 2 times: its first value is read"],
            [3, "duplicate_key", "step is written 2 times: its first value is read"],
            [4, "duplicate_key", "reward is written 2 times: its first value is read"]]
    write_lines(tmp_path / "logs" / "x.jsonl", lines)
    write_lines(tmp_path / "logs" / "y.jsonl", lines)  # small files parsed together, then one by one
    for batch in (cachemod.BATCH_BYTES, 0):
        monkeypatch.setattr(cachemod, "BATCH_BYTES", batch)
        for options in ({}, {"max_samples_per_step": 5}):  # a cap's reader reads a doubled step key too
            run = open_run(tmp_path / "logs", cache_dir=tmp_path / f"cache{batch}{len(options)}", **options)
            p = run.problems.sort_values(["file", "line"])
            assert p[p.file.str.endswith("x.jsonl")][["line", "kind", "message"]].values.tolist() == want
            s = run.samples[run.samples.file.str.endswith("x.jsonl")].sort_values("line")
            assert s.reward.tolist() == [1.0, 2.0, 3.0, 4.0, 6.0] and s.step.tolist() == [0, 0, 1, 1, 1]
            assert s.acc.tolist()[:2] == [1.0, 3.0]


def _transform_sql(tmp_path, cache_dir, monkeypatch, n_keys: int) -> str:
    """The SQL a log with ``n_keys`` custom keys is transformed with (each is still a column of its own)."""
    from rlviz_widgets._ingest.readers.jsonl import sql as rlb

    seen: list[str] = []
    query = rlb._query
    monkeypatch.setattr(rlb, "_query", lambda con, sql: seen.append(sql) or query(con, sql))
    keys = [f"rubric/item_{k:04d}" for k in range(n_keys)]
    recs = [rec(0, i, {k: i + j / 10 for j, k in enumerate(keys)}) for i in range(3)]
    run, _ = open_recording(write_lines(tmp_path / f"k{n_keys}" / "x.jsonl", recs), cache_dir)
    s = run.samples.sort_values("line")
    assert s[keys[-1].replace("/", "_")].tolist() == [i + (n_keys - 1) / 10 for i in range(3)]
    assert len(seen) == 1
    return seen[0]


def test_the_transform_sql_does_not_grow_per_custom_key(tmp_path, cache_dir, monkeypatch):
    """~20 SQL expressions per custom key made DuckDB's planning superlinear in the keys (its common-subexpression
    pass): 100 lines of 1,000 keys took 108 s to open. The custom values are now one list per record sorted out
    by a fixed set of lambdas: a key adds its name to the SQL, no expression (few keys: a struct field, many:
    a map of each record, looked up by name in Python)."""
    sql = {n: _transform_sql(tmp_path, cache_dir, monkeypatch, n) for n in (4, 40, 400)}
    assert sql[4].count("CASE") == sql[40].count("CASE")
    assert sql[400].count("CASE") <= sql[4].count("CASE") + 2  # the map's own (a record holding a key twice)
    assert (len(sql[40]) - len(sql[4])) / 36 < 60  # its name, once (in the struct) or twice (path, name)
    assert (len(sql[400]) - len(sql[4])) / 396 < 80


@pytest.mark.parametrize("wide", [False, True])
def test_custom_fields_read_alike_from_a_struct_or_a_map(tmp_path, cache_dir, monkeypatch, wide):
    """Many custom keys are read from a map of each record (``WIDE_EXTRAS``), a few from the transform's struct:
    the two give the same columns and problems, whatever the values (numbers, texts, booleans, nulls, NaN,
    lists, big integers, names in another case, keys written twice, keys only some records hold)."""
    from rlviz_widgets._ingest.readers.jsonl import sql as rlb

    monkeypatch.setattr(rlb, "WIDE_EXTRAS", -1 if wide else 10 ** 6)
    body = '"step": 0, "prompt": "p", "response": "r", "reward": 1.0'
    lines = [f'{{{body}, "acc": 1, "Acc": "x", "Prompt": "P", "big": 18446744073709551615, "mix": [1], '
             f'"t": true, "nan": NaN, "q\\"k": 2, "": 5, "sparse_0": 1}}',
             f'{{{body}, "acc": 2.5, "big": 3, "mix": "s", "t": null, "nan": 1, "dup": 1, "dup": 2, "sparse_1": "a"}}',
             f'{{{body}, "acc": null, "Acc": 4, "mix": 7, "t": false, "nan": -Infinity, "obj": {{"a": 1}}}}']
    run, _ = open_recording(write_lines(tmp_path / "logs" / "x.jsonl", lines), cache_dir)
    s = run.samples.sort_values("line")
    got = json.loads(s.drop(columns=["prompt", "response"]).to_json(orient="columns"))
    got = {c: list(v.values()) for c, v in got.items()}
    renamed = [c for c in got if c.startswith("Acc_")]
    assert len(renamed) == 1 and got.pop(renamed[0]) == ["x", None, "4.0"]
    assert {c: got[c] for c in ("acc", "Prompt_", "big", "mix", "t", "nan", "q_k", "dup", "sparse_0", "sparse_1")} == {
        "acc": [1.0, 2.5, None], "Prompt_": ["P", None, None], "big": ["18446744073709551615", "3.0", None],
        "mix": [None, "s", "7.0"], "t": [1.0, None, 0.0], "nan": [None, 1.0, None], "q_k": [2.0, None, None],
        "dup": [None, 1.0, None], "sparse_0": [1.0, None, None], "sparse_1": [None, "a", None]}
    assert "obj" not in got  # objects only: no column
    assert sorted(zip(run.problems["line"], run.problems["kind"])) == [
        (1, "nan"), (1, "renamed_field"), (1, "renamed_field"), (1, "unnamed_field"), (1, "wrong_type"),
        (2, "duplicate_key"), (3, "nan")]


def test_records_past_pythons_parser_limits_are_kept_and_checked(tmp_path, cache_dir):
    """Lines that open with a blank or a byte order mark are re-read by Python's json, whose limits DuckDB has not
    (nesting ~1,000 deep, integers of 4,300 digits): such records were dropped as malformed, and a key written twice
    in one went unreported. A custom integer past 1e308 is kept as its digits, not called NaN."""
    rec = b'{"step": 0, "prompt": "p", "response": "r", "reward": 1.0'
    deep = b"[" * 1100 + b"]" * 1100
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(b"\n".join([
        b" " + rec + b', "deep": ' + deep + b"}",  # 1: a blank first
        b"\t" + rec + b', "h": ' + b"7" * 5000 + b"}",  # 2
        rec + b', "acc": 1, "acc": 2, "deep": ' + deep + b"}",  # 3: a key twice, nested deep
        rec + b', "acc": 1, "acc": 2, "h": ' + b"7" * 5000 + b"}",  # 4: a key twice, 5,000 digits
        rec + b', "big": ' + b"9" * 400 + b"}",  # 5: past any float: kept as text
        rec + b', "f": 1' + b"0" * 400 + b".5}",  # 6: a float past 1e308: Infinity, said briefly
        b" " + rec + b', "deep": ' + deep,  # 7: nested deep, and not closed: no JSON
    ]) + b"\n")
    (folder / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + rec + b', "h": ' + b"7" * 5000 + b"}\n")  # a BOM first
    run, _ = open_recording(folder, cache_dir)
    s = run.samples
    assert sorted(zip(s["file"].map(lambda f: f.rsplit("/", 1)[-1]), s["line"])) == \
        [("a.jsonl", n) for n in range(1, 7)] + [("b.jsonl", 1)]
    a = str((folder / "a.jsonl").resolve())
    assert located(run) == {(a, 3, "duplicate_key"), (a, 4, "duplicate_key"), (a, 6, "nan"), (a, 7, "malformed_json")}
    assert s[(s["file"] == a) & (s["line"] == 5)]["big"].item() == "9" * 400
    nan = run.problems.query("kind == 'nan'")["message"].item()
    assert nan.startswith("f is 1000") and len(nan) < 80


def test_a_record_skipped_for_its_step_gets_that_report_alone_however_it_is_read(tmp_path):
    """A record without a step is skipped with one report; an empty key in it was reported too by a cold open (its
    chunk kept other records) but not by a refresh reading it alone: the two reads differed."""
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "x.jsonl"
    good = b'{"step": 0, "prompt": "p", "response": "r", "reward": 1.0}\n'
    bad = b'{"prompt": "p", "response": "r", "reward": 1.0, "": 1}\n'
    log.write_bytes(good)
    grown, _ = open_recording(folder, tmp_path / "c1")
    with log.open("ab") as f:
        f.write(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert grown.refresh() is True
    cold, _ = open_recording(folder, tmp_path / "c2")
    for run in (grown, cold):
        assert run.problems[["line", "kind"]].values.tolist() == [[2, "missing_step"]]
        assert run.samples["line"].tolist() == [1]


def test_a_line_that_is_no_object_is_said_to_be_what_it_is(tmp_path, cache_dir):
    """The re-read of odd lines takes integers of any length: a bare number is still called a number (JSON's
    words, not Python's int and str)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    rec = b'{"step": 0, "prompt": "p", "response": "r", "reward": 1.0}'
    (folder / "x.jsonl").write_bytes(b"\n".join([rec, b"5", b" 7", b"9" * 5000, b'"s"', rec]) + b"\n")
    run, _ = open_recording(folder, cache_dir)
    said = run.problems.set_index("line")["message"].to_dict()
    assert said == {2: "a JSON number, not an object: skipped", 3: "a JSON number, not an object: skipped",
                    4: "a JSON number, not an object: skipped", 5: "a JSON string, not an object: skipped"}
    assert run.samples["line"].tolist() == [1, 6]


def test_a_warning_from_no_users_line_points_at_the_package(tmp_path):
    """A refresh run by an event loop or a widget's callback has no user's line above it: the warning points at
    the package's caller of ``warn``, not into asyncio or threading."""
    fake = Path(problemsmod.__file__).with_name("_fake_caller.py")  # a file of the package (never written)
    code = compile("def call(warn, problems):\n    warn(problems)\n", str(fake), "exec")
    space: dict = {}
    exec(code, space)
    problems = [problemsmod.Problem("f", 1, "nan", "x is NaN")]
    with warnings.catch_warnings(record=True) as caught:  # (the filters are process-wide: the thread's are these)
        warnings.simplefilter("always")
        t = threading.Thread(target=space["call"], args=(problemsmod.warn, problems))  # above it: threading.py
        t.start()
        t.join()
    assert len(caught) == 1 and caught[0].filename == str(fake) and caught[0].lineno == 2
    # called from the user's code, the same function points at the user's line
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        space["call"](problemsmod.warn, problems)
    assert got[0].filename == __file__


def test_a_record_without_a_step_and_with_infinite_logprobs_gets_one_report(tmp_path, open_run):
    """A record skipped for its step is not also reported for what it holds."""
    rng = random.Random(0)
    good, bad = (make_record(rng, 0, i, 6, progress=0.5) for i in range(2))
    del bad["step"]
    bad["logprobs"][1] = float("inf")
    write_lines(tmp_path / "logs" / "x.jsonl", [good, bad])
    run = open_run(tmp_path / "logs")
    assert run.problems[["line", "kind"]].values.tolist() == [[2, "missing_step"]]
    assert run.samples["line"].tolist() == [1]


def test_messages_name_the_files_own_keys_and_json_kinds(tmp_path, cache_dir):
    """columns=: a step message names the file's key (``it``), not ours; a line that is no object says its JSON
    kind (null, array), not Python's; a mapped field whose values are all of the wrong type is not called
    misspelt."""
    write_lines(tmp_path / "logs" / "l.jsonl", [{"it": 0, "q": "a", "r": "x", "s": "0.1"},
                                                {"it": "x", "q": "a", "r": "x", "s": 0.2},
                                                {"q": "a", "r": "x", "s": 0.3}, "[1, 2]", "null"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = rlviz_widgets.open_run(tmp_path / "logs", cache_dir=cache_dir, progress=False,
                                     columns={"prompt": "q", "response": "r", "reward": "s", "step": "it"})
    got = run.problems[["line", "kind", "message"]].values.tolist()
    assert got == [[1, "wrong_type", 's is "0.1", not a number: left empty'],
                   [2, "wrong_type", 'it is "x", not an integer: record skipped'],
                   [3, "missing_step", "no it: record skipped"],
                   [4, "not_an_object", "a JSON array, not an object: skipped"],
                   [5, "not_an_object", "a JSON null, not an object: skipped"]]
    option = [str(w.message) for w in caught if issubclass(w.category, rlviz_widgets.OptionWarning)]
    assert option == ["columns= maps 'reward' to 's', whose values are all of the wrong type (see the LogWarning): "
                      "reward is empty"]
