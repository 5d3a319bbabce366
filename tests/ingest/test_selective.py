"""A per-step cap and a step range skip the lines they leave out, unread: the frames are those a full read gives."""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import write_lines
from formats import write_nemo, write_verl

import rlviz_widgets
from rlviz_widgets._ingest.readers import rlb as rlbmod
from rlviz_widgets._ingest.readers.jsonl.linesteps import NO_STEP, line_steps
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._synth import make_record


def steps_of(lines: list[str], key: str = "step", **options) -> list:
    out = line_steps(pa.array([line + "\n" for line in lines], pa.large_string()), key, **options)
    return [None if s == NO_STEP else int(s) for s in out]


def test_a_lines_step_is_told_from_its_bytes_only_when_certain():
    lines = {
        '{"step": 3, "a": 1}': 3,
        '{"a": 1, "step":-8}': -8,
        '{"a": "x\\"{", "step" :  10 }': 10,  # a brace in a string, blanks around the colon
        '{"a": "{", "b": "}}", "step": 6}': 6,
        '{"a": "x\\\\", "b": "{", "step": 7}': 7,  # an escaped backslash ends the string before the brace's
        '{"a": {"x": 4}, "step": 5}': 5,  # an object before the key, closed
        '{"a": [{"x": 1}, {"y": {}}], "step": 0}': 0,
        '{"p": "say \\"step\\": 9", "step": 2}': 2,  # the key's bytes in a string: not a key
        '{"a": {"step": 4}, "b": 2}': None,  # nested, not the record's step
        '{"a": [{"step": 1}], "step": 11}': None,  # the key's bytes twice: the parser decides
        '{"step": 1, "step": 2}': None,  # a duplicate key: the parser decides which counts
        '{"step": 3.0}': None,
        '{"step": "3"}': None,
        '{"step": 1e3}': None,
        '{"step": 012}': None,  # not JSON
        '{"step": 5': None,  # half a record
        '  {"step": 1}': None,  # indented: sorted out by the parser
        '{"st\\u0065p": 4}': None,  # an escaped key
        '{"st\\u0065p": 0, "step": 5}': None,  # the same key twice, once escaped: the parser reads the first
        '{"\\u0073tep": 1, "x": 2}': None,
        '{"step"   : 0, "step": 5}': None,  # three blanks before a colon
        '{"step"   : 7}': 7,
        '{"r": "a\\n", "step": 5}': 5,  # an escape in a value just before the key
        '{"a\\"": 1, "step": 2}': 2,
        '{"steps": 4, "a_step": 5}': None,
        '{"a": "x\\": {", "step": 3}': 3,  # a brace in a string after what looks like a key
        '{"a": {"q": "\\\\"}, "step": 4}': 4,  # an object closed, holding an escaped backslash
        '{"a": {"q": "\\\\", "step": 5}}': None,
        '{"t": "' + "z" * 200 + '", "a": {"x": "}"}, "step": 8}': 8,  # told from the shorter side: after the key
        '{"t": "' + "z" * 200 + '", "a": {"x": 1, "step": 9}}': None,
        '{"t": "' + "z" * 200 + '", "a": {"x": 1}, "step": 10, "u": "}}{"}': 10,
        '{"step": 123456789012345678}': 123456789012345678,
        '{"step": 1234567890123456789}': None,  # past 18 digits: the parser reads it exactly
    }
    assert steps_of(list(lines)) == list(lines.values())
    for line, step in lines.items():  # a step told is the one a JSON parser reads (the first key of duplicates)
        if step is not None:
            assert json.loads(line, object_pairs_hook=lambda kv: dict(reversed(kv)))["step"] == step, line
    for line, step in lines.items():  # each alone (the search runs over a chunk's shared buffer)
        assert steps_of([line]) == [step], line
    # the format's own step key
    assert steps_of(['{"global_step": 12, "step": 3}'], "global_step") == [12]
    assert steps_of(['{"ştep": 12}'], "ştep") == [12]
    assert steps_of(['{"a\\"b": 12}'], 'a"b') == [None]


def _records(n_steps=4, per_step=10, seed=0):
    rng = random.Random(seed)
    return [make_record(rng, s, i, 6, progress=s / n_steps) for s in range(n_steps) for i in range(per_step)]


def _open(source, cache, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rlviz_widgets.open_run(source, cache_dir=cache, progress=False, **options)


def _same_as_a_full_read(source, tmp_path, **options):
    """(the run opened with the options on a fresh cache, the same options over a cache of every line)."""
    k = len(list(tmp_path.glob("cache*")))
    part = _open(source, tmp_path / f"cache{k}", **options)
    _open(source, tmp_path / f"cache{k + 1}", **{o: options[o] for o in ("format",) if o in options})
    full = _open(source, tmp_path / f"cache{k + 1}", **options)
    assert full.skipped_lines == 0
    key = ["step", "line", "file"]
    pd.testing.assert_frame_equal(part.samples.sort_values(key).reset_index(drop=True),
                                  full.samples.sort_values(key).reset_index(drop=True))
    pd.testing.assert_frame_equal(part.steps, full.steps)
    ids = part.samples["sample_id"].tolist()
    pd.testing.assert_frame_equal(part.tokens(ids), full.tokens(ids))
    return part, full


@pytest.fixture
def parsed(monkeypatch):
    """Every line number the JSON parser is given, per file (across the run's opens)."""
    seen: list[int] = []
    real = rlbmod.RLBReader._parse

    def spy(self, con, chunk, steps):
        seen.extend(chunk.numbers.tolist())
        return real(self, con, chunk, steps)

    monkeypatch.setattr(rlbmod.RLBReader, "_parse", spy)
    return seen


def test_the_cap_skips_the_lines_past_it_unread(tmp_path, parsed):
    recs = _records(4, 10)
    write_lines(tmp_path / "logs" / "r0.jsonl", recs)
    part = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=3)
    assert sorted(parsed) == [s * 10 + i + 1 for s in range(4) for i in range(3)]  # the first 3 lines of each step
    assert part.skipped_lines == 28 and part.files["skipped"].tolist() == [28]
    assert "lines skipped unread (past the per-step cap or out of the step range): 28" in part.summary()
    assert part.steps["samples"].tolist() == [3] * 4
    # reopened: from its cache, nothing parsed
    parsed.clear()
    again = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=3)
    assert parsed == [] and again.skipped_lines == 28
    _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=3)


def test_the_step_range_skips_the_steps_outside_it(tmp_path, parsed):
    write_lines(tmp_path / "logs" / "r0.jsonl", _records(5, 4))
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, steps=(1.5, 3))
    assert part.step_values == [2, 3]
    assert parsed[:9] == [*range(9, 17), 1]  # the first open parsed steps 2 and 3 only, then the full read began
    assert part.skipped_lines == 12
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, steps=(3, None), max_samples_per_step=1)
    assert part.step_values == [3, 4] and part.skipped_lines == 18


def test_bad_lines_among_the_first_are_made_up_for(tmp_path, parsed):
    """The first N lines of a step may hold fewer than N samples: the next lines are read until N are."""
    recs = _records(3, 8)
    lines: list = [dict(r) for r in recs]
    lines[0] = '{"step": 0, "prompt": "broken'  # not JSON, its step readable
    lines[1] = {**recs[1], "reward": "high"}  # a reward of the wrong type: a sample, its reward empty
    lines[2] = {**recs[2], "step": 0.5}  # no whole step: no sample (the bytes do not tell it: parsed)
    lines[8] = {**recs[8], "step": 1.0}  # read as 1 (the bytes do not tell it: parsed)
    lines[9] = {**recs[9], "step": "1"}  # a string step: read as 1 (and said)
    write_lines(tmp_path / "logs" / "r0.jsonl", lines)
    _open(tmp_path / "logs", tmp_path / "first", max_samples_per_step=3)
    first = sorted(set(parsed))
    assert first == [1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 17, 18, 19]  # line 5 made up for lines 1 and 3
    part, full = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=3)
    assert part.steps["samples"].tolist() == [3, 3, 3]
    assert sorted(part.samples.query("step == 0")["line"]) == [2, 4, 5]
    assert sorted(part.samples.query("step == 1")["line"]) == [9, 10, 11]
    # the bad lines it read are reported as a full read reports them
    seen = {(p.line, p.kind) for p in part.problems.itertuples()}
    assert seen == {(p.line, p.kind) for p in full.problems.itertuples() if p.line in first}
    assert {1, 2, 3, 10} <= {line for line, _ in seen}


def test_a_cap_over_several_files_keeps_the_first_by_line_then_path(tmp_path):
    rng = random.Random(3)
    for r in range(3):  # steps interleaved, of uneven lengths, and a file whose steps go back
        steps = [0, 0, 1, 0, 2, 1, 1, 2, 2, 0] if r != 1 else [2, 2, 1, 0, 0, 0, 1]
        write_lines(tmp_path / "logs" / f"rank{r}.jsonl",
                    [make_record(rng, s, i, 5, progress=0.5) for i, s in enumerate(steps)])
    for cap in (1, 2, 3, 5):
        part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=cap)
        assert part.steps["samples"].max() == cap


def test_a_grown_file_is_read_on_with_the_counts_it_had(tmp_path, parsed):
    path = tmp_path / "logs" / "r0.jsonl"
    recs = _records(4, 6)
    write_lines(path, recs[:9])  # step 1 half written
    run = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=4)
    assert run.steps["samples"].tolist() == [4, 3]
    write_lines(path, recs)
    parsed.clear()
    assert run.refresh()
    assert sorted(parsed) == [10, 13, 14, 15, 16, 19, 20, 21, 22]  # step 1's fourth, then 4 of each new step
    assert run.steps["samples"].tolist() == [4, 4, 4, 4]
    reopened = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=4)
    pd.testing.assert_frame_equal(reopened.samples, run.samples)
    # grown again, opened anew: the counts come from the cache's parts
    write_lines(path, recs + _records(5, 6, seed=1)[-6:])
    parsed.clear()
    _, full = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=4)
    parsed.clear()
    grown = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=4)
    assert sorted(parsed) == [25, 26, 27, 28]
    pd.testing.assert_frame_equal(grown.steps, full.steps)


def test_a_cache_of_every_line_serves_a_capped_open(tmp_path, parsed):
    lines: list = _records(2, 5)
    lines[8] = '{"step": 1, "prompt": "cut'
    write_lines(tmp_path / "logs" / "r0.jsonl", lines)
    _open(tmp_path / "logs", tmp_path / "c")
    parsed.clear()
    run = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    assert parsed == [] and run.skipped_lines == 0
    assert run.problems["line"].tolist() == [9]  # every line was checked
    fresh = _open(tmp_path / "logs", tmp_path / "c2", max_samples_per_step=2)
    assert fresh.problems.empty and fresh.skipped_lines == 6  # line 9 was skipped, unread


def test_small_files_parsed_together_are_capped_each(tmp_path, parsed):
    """A folder of small files (a file per step): their chunks are parsed in one query, each cut first."""
    write_verl(tmp_path / "verl", steps=range(1, 7), prompts=2, n=3)
    part, _ = _same_as_a_full_read(tmp_path / "verl", tmp_path, max_samples_per_step=2)
    assert part.steps["samples"].tolist() == [2] * 6 and part.skipped_lines == 6 * 4


def test_a_format_whose_step_is_the_file_name_skips_by_it(tmp_path):
    write_nemo(tmp_path / "nemo", steps=range(1, 6), prompts=2, n=3)
    part, _ = _same_as_a_full_read(tmp_path / "nemo", tmp_path, max_samples_per_step=2, steps=(2, 4))
    assert part.step_values == [2, 3, 4] and part.skipped_lines == 2 * 6 + 3 * 4


def test_nothing_to_skip_reads_as_a_full_read(tmp_path):
    write_lines(tmp_path / "logs" / "r0.jsonl", _records(3, 4))
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=10, steps=(None, 1e30))
    assert part.skipped_lines == 0 and len(part.samples) == 12


def test_no_step_key_in_some_lines_of_a_named_step_file(tmp_path):
    """verl names files by step; a record's own step wins over the name, and a record without one takes it."""
    rng = random.Random(5)
    recs = [make_record(rng, 3, i, 4, progress=0.5) for i in range(6)]
    for r in recs[::2]:
        del r["step"]
    recs[1]["step"] = 9
    write_lines(tmp_path / "logs" / "3.jsonl", recs)
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, format="columns", max_samples_per_step=2)
    assert part.steps["samples"].tolist() == [2, 1]
    assert np.array_equal(part.step_values, [3, 9])


def test_a_named_step_files_lines_without_a_step_are_capped_alike_however_read(tmp_path):
    """verl: a line without "step" takes the file name's. It counted as of that step only when no line of its chunk
    named a step (a line appended alone); read with others, it was parsed as of no known step and a later line of
    the step was parsed too (its problem reported), so a grown log and a fresh open differed."""
    lines = [json.dumps({"input": "a", "output": "b", "score": 1.0, "step": 35}),
             json.dumps({"input": "a", "output": "b", "score": 2.0}),
             json.dumps({"output": "b", "score": 3.0, "step": 35})]
    log = tmp_path / "logs" / "35.jsonl"
    write_lines(log, lines)
    fresh = _open(log.parent, tmp_path / "fresh", format="verl", max_samples_per_step=2)
    write_lines(log, lines[:1])
    grown = _open(log.parent, tmp_path / "grown", format="verl", max_samples_per_step=2)
    for line in lines[1:]:
        with open(log, "a") as f:
            f.write(line + "\n")
        grown.refresh()
    for run in (fresh, grown):
        assert sorted(run.samples.line) == [1, 2] and run.skipped_lines == 1 and len(run.problems) == 0
    assert steps_of(['{"a": 1}', '{"a": "step"}', '{"step": 2.0}', '{"s\\u0074ep": 2}'], no_key=-1) == \
        [-1, -1, None, None]


def test_a_last_line_without_its_newline(tmp_path):
    recs = _records(2, 4)
    write_lines(tmp_path / "a" / "r0.jsonl", recs, newline_at_end=False)  # a finished record, no newline
    part, _ = _same_as_a_full_read(tmp_path / "a", tmp_path, max_samples_per_step=2, steps=(1, 1))
    assert part.samples["line"].tolist() == [5, 6]
    write_lines(tmp_path / "b" / "r0.jsonl", recs[:3])
    with open(tmp_path / "b" / "r0.jsonl", "a") as f:
        f.write('{"step": 0, "prompt": "half writ')  # a job still writing: said, read once complete
    run = _open(tmp_path / "b", tmp_path / "c", max_samples_per_step=4)
    assert run.problems["kind"].tolist() == ["incomplete_last_line"]
    write_lines(tmp_path / "b" / "r0.jsonl", recs)
    assert run.refresh() and run.steps["samples"].tolist() == [4, 4] and run.problems.empty


def test_a_run_of_bad_lines_costs_a_few_parses_not_one_per_line(tmp_path, monkeypatch):
    calls = []
    real = rlbmod.RLBReader._parse
    monkeypatch.setattr(rlbmod.RLBReader, "_parse", lambda self, con, chunk, steps: calls.append(
        set(chunk.numbers.tolist())) or real(self, con, chunk, steps))
    rng = random.Random(4)
    lines: list = ['{"step": 0, "prompt": "cut'] * 100 + [make_record(rng, 0, i, 4, progress=0.5) for i in range(5)]
    write_lines(tmp_path / "logs" / "r0.jsonl", lines)
    part = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    assert part.samples["line"].tolist() == [101, 102]
    assert len(calls) <= 9  # lines added 2, 2, 4, 8, ... per round (it was one round per 2 lines: 50 rounds),
    # and one parse without the lines past the cap the last round took: they count as skipped, as line by line
    assert part.skipped_lines == 3 and calls[-1] == set(range(1, 103))


def test_a_cap_past_any_count_is_no_cap(tmp_path):
    write_lines(tmp_path / "logs" / "r0.jsonl", _records(2, 3))
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=1e20)
    assert len(part.samples) == 6 and part.skipped_lines == 0


def test_a_bad_line_then_a_skipped_one_then_one_parsed_anyway(tmp_path):
    """Only the samples before a step's first skipped line count: a sample after it (a line whose step the bytes do
    not tell, parsed anyway) does not make up for a bad line before it."""
    recs = _records(2, 6, seed=1)
    lines: list = [dict(r) for r in recs]
    lines[0] = '{"step": 0, "prompt": "broken'
    lines[4] = {**recs[4], "step": 0.0}
    write_lines(tmp_path / "logs" / "r0.jsonl", lines)
    part, _ = _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=3)
    assert sorted(part.samples.query("step == 0")["line"]) == [2, 3, 4]


_BROKEN = '{"step": 1, "prompt": "broken'
_GOOD = '{"step": 1, "prompt": "p", "response": "r", "reward": 3}'


@pytest.mark.parametrize("cap, lines, parsed_lines", [
    # a step the bytes do not tell (1.0), then one they do: line 2 was parsed when both were in one chunk (its
    # problem reported, its field a column), skipped when line 1 had been read before (a grown log, small chunks)
    (1, ['{"step": 1.0, "prompt": "p", "response": "r", "reward": 1}',
         '{"step": 1, "prompt": "p", "response": true, "reward": 2, "acc": 0.5}'], [1, 2]),
    # a bad line made up for by the line after the skipped one or not, by how the lines fell
    (2, ['{"step": 1.0, "prompt": "p", "response": "r", "reward": 1}', _BROKEN, _GOOD, _GOOD], [1, 2, 3, 4]),
    # four bad lines: the rounds parsing more lines (1, 2, 4... times as many as missing) went past the first
    # sample when the lines were in one chunk (line 6's NaN reported, line 7's field a column)
    (1, [_BROKEN] * 4 + [_GOOD, _GOOD.replace("3}", "NaN}"), _GOOD.replace("3}", '3, "zzz": 1.5}'), _GOOD],
     [1, 2, 3, 4, 5]),
])
def test_lines_parsed_under_a_cap_do_not_depend_on_how_the_file_was_read(tmp_path, monkeypatch, cap, lines,
                                                                          parsed_lines):
    """A line whose step its bytes do not tell is parsed whatever the cap, and does not count towards it; no line
    of a step is parsed past its cap of samples: which lines are parsed (so the problems reported, the columns, the
    lines skipped) is the same whether the file was read in one chunk, in chunks of one line, or line by line as a
    job wrote it."""
    log = tmp_path / "logs" / "r.jsonl"
    log.parent.mkdir()
    log.write_text("".join(line + "\n" for line in lines))
    whole = _open(log.parent, tmp_path / "whole", max_samples_per_step=cap)
    log.write_text("")
    grown = _open(log.parent, tmp_path / "grown", max_samples_per_step=cap)
    for line in lines:
        with open(log, "a") as f:
            f.write(line + "\n")
        grown.refresh()
    for name in ("CHUNK_BYTES", "FIRST_CHUNK_BYTES", "LAST_CHUNK_BYTES"):
        monkeypatch.setattr(cachemod.linereader, name, 64)
    small = _open(log.parent, tmp_path / "small", max_samples_per_step=cap)
    for run in (whole, grown, small):
        assert run.skipped_lines == len(lines) - len(parsed_lines)
        assert sorted(run.problems.line) == sorted(whole.problems.line) and run.columns == whole.columns
        pd.testing.assert_frame_equal(run.samples.drop(columns="sample_id"), whole.samples.drop(columns="sample_id"))


def test_a_file_of_many_chunks_carries_its_counts_from_chunk_to_chunk(tmp_path, monkeypatch, parsed):
    for name, size in (("CHUNK_BYTES", 4000), ("FIRST_CHUNK_BYTES", 2000), ("LAST_CHUNK_BYTES", 1500)):
        monkeypatch.setattr(cachemod.linereader, name, size)
    monkeypatch.setattr(cachemod, "BATCH_BYTES", 1000)
    calls = []
    real = rlbmod.RLBReader._parse
    monkeypatch.setattr(rlbmod.RLBReader, "_parse", lambda self, con, chunk, steps: calls.append(1) or real(
        self, con, chunk, steps))
    write_lines(tmp_path / "logs" / "r0.jsonl", _records(3, 40))
    part = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    assert (tmp_path / "logs" / "r0.jsonl").stat().st_size > 15 * 4000  # each step over several chunks
    assert part.skipped_lines == 120 - 6 and len(calls) <= 6  # only chunks holding a step's first 2 lines parsed
    _same_as_a_full_read(tmp_path / "logs", tmp_path, max_samples_per_step=2)


def test_a_capped_open_leaves_the_names_of_later_full_opens_alone(tmp_path):
    recs = _records(2, 3)
    recs[1]["score"] = 0.5  # skipped by a cap of 1
    recs[3]["Score"] = 0.25  # kept: the capped open sees no other spelling
    write_lines(tmp_path / "logs" / "r0.jsonl", recs)
    assert "Score" in _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=1).samples
    after = _open(tmp_path / "logs", tmp_path / "c").samples.columns
    fresh = _open(tmp_path / "logs", tmp_path / "fresh").samples.columns
    assert sorted(c for c in after if c.lower().startswith("score")) == \
        sorted(c for c in fresh if c.lower().startswith("score"))


def test_a_cache_of_a_few_lines_of_every_line_does_not_serve_a_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(cachemod, "REUSE_GROWTH_BYTES", 1000)
    path = tmp_path / "logs" / "r0.jsonl"
    recs = _records(4, 40)
    write_lines(path, recs[:4])
    _open(tmp_path / "logs", tmp_path / "c")  # every line, of a log that then grew 40 times
    write_lines(path, recs)
    part = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    assert part.skipped_lines == 160 - 8  # its own cache: the log's growth was not read whole
    write_lines(path, recs + _records(5, 40)[-2:])  # little growth: the cache of every line serves
    assert _open(tmp_path / "logs", tmp_path / "c2").skipped_lines == 0
    assert _open(tmp_path / "logs", tmp_path / "c2", max_samples_per_step=2).skipped_lines == 0


def test_a_followed_capped_run_keeps_its_own_cache(tmp_path):
    path = tmp_path / "logs" / "r0.jsonl"
    recs = _records(4, 10)
    write_lines(path, recs[:20])
    run = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    _open(tmp_path / "logs", tmp_path / "c")  # another Run reads every line meanwhile
    write_lines(path, recs)
    assert run.refresh()
    assert run.skipped_lines == 40 - 8  # read on through its own cache, not switched to the other
    full = _open(tmp_path / "logs", tmp_path / "c", max_samples_per_step=2)
    pd.testing.assert_frame_equal(run.steps, full.steps)
