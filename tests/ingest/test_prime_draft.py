"""The prime-rl reader draft (rlviz_widgets/_ingest/readers/prime.py, not registered yet) on every schema generation
of tests/prime_formats.py."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from rlviz_widgets._ingest.readers import prime
from tests.prime_formats import GENERATIONS, ChatMLTokenizer, write_prime

NAMES = {"flat": "flat/steps", "steps": "flat/steps", "v0.6": "v0.6", "v0.7": "v0.7", "main": "main"}


def rank_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl") if prime.accepts(p))


@pytest.mark.parametrize("gen", GENERATIONS)
def test_every_generation_reads_field_for_field(tmp_path, gen):
    run_id = "run-a" if gen in ("v0.6", "v0.7") else None
    written = write_prime(tmp_path, generation=gen, steps=(1, 2), prompts=3, n=4, run_id=run_id)
    by_line = {(str(w["path"]), w["line"]): w for w in written}
    con = duckdb.connect()
    seen = 0
    for path in rank_files(tmp_path):
        t, problems = prime.read_lines(con, path)
        assert problems == []
        rows = t.to_pylist()
        for row in rows:
            w = by_line[(str(path), row["line"])]
            rec, s = w["record"], w["sample"]
            assert prime.generation(set(rec)) == NAMES[gen]
            assert row["step"] == rec["step"] == s.step
            assert row["token_ids"] == rec["token_ids"]
            assert row["trained"] == rec["loss_mask"]
            for theirs, ours in prime.FLOAT_LISTS.items():
                want = rec.get(theirs)
                got = row[ours]
                if want is None:
                    assert got is None
                else:  # float32 in the file: read back exactly
                    assert [None if v is None else float(np.float32(v)) for v in want] == got, theirs
            assert row["env_name"] == "math" and row["rank"] == rec["rank"]
            assert row["run_id"] == run_id
            assert row["n_trained_tokens"] == sum(rec["loss_mask"])
            assert row["reward"] == (s.reward if gen in ("flat", "steps", "v0.6") else None)
            assert row["advantage"] == pytest.approx(s.advantage, rel=1e-6, abs=1e-6)
            assert row["stable"] is True
            seen += 1
    assert seen == len(written)


def test_groups_are_the_prompt_turns_within_a_step(tmp_path):
    written = write_prime(tmp_path, steps=(1, 2), prompts=3, n=4, ranks=3)
    con = duckdb.connect()
    groups: dict[str, set] = {}
    for path in rank_files(tmp_path):
        t, _ = prime.read_lines(con, path)
        for row in t.to_pylist():
            s = next(w["sample"] for w in written if w["path"] == path and w["line"] == row["line"])
            groups.setdefault(row["group_id"], set()).add((s.step, s.group))
    assert all(len(members) == 1 for members in groups.values())  # no group mixes prompts or steps
    assert len(groups) == 2 * 3
    prompt = ChatMLTokenizer().decode(written[0]["record"]["token_ids"][:written[0]["sample"].mask.index(True)])
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")


def test_a_step_being_written(tmp_path):
    """No STABLE: its lines are read as in progress and the cut last line is no problem; with the marker it is."""
    write_prime(tmp_path, generation="main", steps=(1, 2), unfinished_step=2)
    con = duckdb.connect()
    cut = tmp_path / "token_exports" / "step_2" / "rank_1.jsonl"
    assert not cut.read_text().endswith("\n")
    t, problems = prime.read_lines(con, cut)
    assert problems == [] and set(t["stable"].to_pylist()) == {False}
    assert prime.is_stable(tmp_path / "token_exports" / "step_1" / "rank_0.jsonl")
    (cut.parent / "STABLE").touch()
    t2, problems = prime.read_lines(con, cut)
    assert [p[1] for p in problems] == ["bad_json"] and t2.num_rows == t.num_rows


def test_layouts(tmp_path):
    write_prime(tmp_path / "a", generation="v0.6", run_id="r7")
    files = rank_files(tmp_path / "a")
    assert files and all(prime.folder_run_id(p) == "r7" and prime.folder_step(p) in (1, 2) for p in files)
    write_prime(tmp_path / "b", generation="flat")
    flat = rank_files(tmp_path / "b")
    assert [p.name for p in flat] == ["rank_0.jsonl", "rank_1.jsonl"] and prime.folder_step(flat[0]) is None
    assert prime.is_stable(flat[0])
    write_prime(tmp_path / "c", generation="steps")  # no writer of this layout marks steps: complete
    assert all(prime.is_stable(p) for p in rank_files(tmp_path / "c"))
    assert not prime.accepts(tmp_path / "c" / "token_exports" / "step_1" / "notes.jsonl")
    assert prime.generation(set(json.loads((tmp_path / "c" / "token_exports" / "step_1" / "rank_0.jsonl")
                                           .read_text().splitlines()[0]))) == "flat/steps"
    assert prime.generation({"messages"}) is None
