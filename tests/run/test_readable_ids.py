"""Readable sample ids: the ``id`` column ("rank0.jsonl:12", a set's "baseline/rank0.jsonl:12") beside sample_id,
shown first in the table and in the detail pane, and found by the table's search."""

from __future__ import annotations

import json

import pytest
from conftest import call, write_lines

import rlviz_widgets as rw
from rlviz_widgets.run._views import short_names
from rlviz_widgets.run.runset import RunSet


def records(n: int, tag: str = "") -> list[dict]:
    return [{"step": k // 2, "prompt": f"q{tag}{k}", "response": f"a{k}", "reward": float(k)} for k in range(n)]


def test_ids_of_a_one_file_run(tmp_path, open_run):
    write_lines(tmp_path / "logs" / "rank0.jsonl", records(12))
    run = open_run(tmp_path / "logs")
    s = run.samples
    assert s.id.tolist() == [f"rank0.jsonl:{line}" for line in range(1, 13)]  # lines count from 1
    assert s.id.tolist() == [f"rank0.jsonl:{line}" for line in s.line] and run.columns[-1] == "id"
    assert run.sql("select id from samples order by line").id.tolist() == s.id.tolist()  # the sandbox has it too
    sid = int(s.sample_id.iloc[4])
    assert run.rows([sid]).id.tolist() == ["rank0.jsonl:5"]  # a page's rows: read by row group, not from the view
    assert run.sql("select sample_id from samples where id = 'rank0.jsonl:5'").sample_id.tolist() == [sid]
    with run.cursor() as cur:  # text: kept out of the numbers in memory, which the brushes read
        nums = [c for (c,) in cur.execute("SELECT column_name FROM (DESCRIBE _nums)").fetchall()]
    assert "id" not in nums and "sample_id" in nums and "line" in nums
    assert run.histograms(["reward"], 4, where="id = 'rank0.jsonl:5'")["count"].sum() == 1  # a where may name it


def test_ids_tell_apart_files_of_one_name_in_two_folders(tmp_path, open_run):
    logs = tmp_path / "logs"
    write_lines(logs / "a" / "rank0.jsonl", records(3, "a"))
    write_lines(logs / "b" / "rank0.jsonl", records(3, "b"))
    write_lines(logs / "b" / "12.jsonl", records(2, "c"))  # a file per step (verl, NeMo): its name stays short
    run = open_run(logs)
    s = run.samples
    assert s.id.is_unique and len(s) == 8
    by_prompt = dict(zip(s.prompt, s.id))
    assert by_prompt["qa0"] == "a/rank0.jsonl:1" and by_prompt["qb2"] == "b/rank0.jsonl:3"
    assert by_prompt["qc1"] == "12.jsonl:2"
    assert run.sql("select count(distinct id) n from samples").n[0] == 8


def test_short_names_take_as_many_folders_as_tell_files_apart():
    names = short_names(["/x/a/r.jsonl", "/y/a/r.jsonl", "/x/b/r.jsonl", "/x/s.jsonl", "/x/a/./t.jsonl"])
    assert names == {"/x/a/r.jsonl": "x/a/r.jsonl", "/y/a/r.jsonl": "y/a/r.jsonl", "/x/b/r.jsonl": "x/b/r.jsonl",
                     "/x/s.jsonl": "s.jsonl", "/x/a/./t.jsonl": "t.jsonl"}
    assert short_names(["/p/q/r.jsonl", "/p/z/r.jsonl"]) == {"/p/q/r.jsonl": "q/r.jsonl", "/p/z/r.jsonl": "z/r.jsonl"}


def test_a_set_names_the_run_in_each_id(tmp_path, open_run):
    write_lines(tmp_path / "a" / "rank0.jsonl", records(4))
    write_lines(tmp_path / "b" / "rank0.jsonl", records(6))
    rs = RunSet({"baseline": open_run(tmp_path / "a"), "kl0.05": open_run(tmp_path / "b")})
    s = rs.samples
    assert s.id.is_unique and (s.id == s.run + "/rank0.jsonl:" + s.line.astype(str)).all()
    assert rs.sql("select id from samples where run = 'kl0.05' order by line").id.tolist()[-1] == "kl0.05/rank0.jsonl:6"
    sid = int(s.sample_id[s.id == "baseline/rank0.jsonl:2"].iloc[0])
    assert rs.rows([sid]).id.tolist() == ["baseline/rank0.jsonl:2"]
    table = rw.SampleTable(rs)
    assert table.visible_columns[:3] == ["id", "run", "sample_id"]
    table.search = "rank0.jsonl:2"  # the line in both runs
    assert table.row_count == 2
    table.search = "baseline/rank0.jsonl:2"
    assert table.row_count == 1 and table.shown.sample_id.tolist() == [sid]


def test_the_table_shows_the_id_first_and_finds_a_sample_by_it(tmp_path, open_run):
    write_lines(tmp_path / "logs" / "rank0.jsonl", records(130))
    run = open_run(tmp_path / "logs")
    table = rw.SampleTable(run)
    assert table.visible_columns[:3] == ["id", "sample_id", "step"]
    assert table.columns[0] == {"name": "id", "kind": "text"}
    page = call(table, "rows", offset=0, limit=3)[0]["result"]
    assert [r[0] for r in page["rows"]] == ["rank0.jsonl:1", "rank0.jsonl:2", "rank0.jsonl:3"]
    want = run.samples.set_index("id").sample_id
    table.search = "rank0.jsonl:12"  # the whole id: not lines 120..129
    assert table.row_count == 1 and table.shown.sample_id.tolist() == [want["rank0.jsonl:12"]]
    table.search = "RANK0.JSONL:7 "  # as a search of text: any letter case; blanks around an id left out
    assert table.shown.sample_id.tolist() == [want["rank0.jsonl:7"]]
    table.search = "jsonl"  # a piece of an id finds nothing: texts are searched as before
    assert table.row_count == 0
    table.search = "q12"  # prompts still are (q12, q120..q129)
    assert table.row_count == 11
    table.search = ""
    table.sort_by = "id"  # a text column: sorted as text
    assert call(table, "rows", offset=0, limit=2)[0]["result"]["rows"][0][0] == "rank0.jsonl:1"
    table.where = "id = 'rank0.jsonl:3'"
    assert table.row_count == 1


def test_a_frame_with_an_id_column_is_searched_by_it_whole(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"id": ["q-1", "q-12"], "prompt": ["a", "b"], "reward": [1.0, 2.0]})
    table = rw.SampleTable(df)
    assert table.visible_columns[0] == "id"
    table.search = "q-1"
    assert table.shown.id.tolist() == ["q-1"]
    plain = rw.SampleTable(pd.DataFrame({"id": ["q-1", "q-12"], "reward": [1.0, 2.0]}))
    plain.search = "q-1"  # no prompt, response or ref_response: every text column is searched for the text
    assert plain.row_count == 2


def test_a_field_named_id_keeps_its_values_under_id_(tmp_path, open_run, cache_dir):
    logs = tmp_path / "logs"
    write_lines(logs / "r0.jsonl", [{**r, "id": f"task-{k}"} for k, r in enumerate(records(3))])
    run = open_run(logs)
    s = run.samples
    assert s.id_.tolist() == ["task-0", "task-1", "task-2"] and s.id.tolist() == ["r0.jsonl:1", "r0.jsonl:2",
                                                                                   "r0.jsonl:3"]
    run.close()
    kept = list((cache_dir / "column_names").glob("*.json"))
    assert kept and all(json.loads(f.read_text()) == {"id": "id_"} for f in kept)
    for f in kept:  # a names file that gave the field the plain name (kept before the run had an id of its own)
        f.write_text(json.dumps({"id": "id"}))
    again = open_run(logs).samples
    assert again.id_.tolist() == ["task-0", "task-1", "task-2"] and again.id.tolist()[0] == "r0.jsonl:1"
    assert all(json.loads(f.read_text()) == {"id": "id_"} for f in kept)


@pytest.mark.parametrize("runs", [1, 2])
def test_the_detail_pane_names_the_sample_by_its_id_first(tmp_path, cache_dir, runs):
    for k in range(runs):
        write_lines(tmp_path / f"r{k}" / "rank0.jsonl", records(6))
    source = tmp_path / "r0" if runs == 1 else {"base": tmp_path / "r0", "kl": tmp_path / "r1"}
    view = rw.RunView(source, cache_dir=cache_dir, progress=False)
    name = "rank0.jsonl:4" if runs == 1 else "kl/rank0.jsonl:4"
    sid = int(view.run.sql(f"select sample_id from samples where id = '{name}'").sample_id[0])
    view.table.selected_ids = [sid]
    facts = view.detail["facts"]
    assert facts[0] == ["id", name]
    assert ["sample", str(sid)] in facts  # the API's id is still there
