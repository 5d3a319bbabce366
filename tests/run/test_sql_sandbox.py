"""run.sql runs user SQL in a sandbox the engine enforces (issue 31): a DuckDB instance of its own per query that
holds the run's data as registered Arrow objects, with file access, extensions and settings turned off and the
configuration locked. Each attempt below is refused, or harmless; none writes a file; the run answers after it."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from rlviz_widgets.run.runset import RunSet
from tests.conftest import folder_fingerprint

REFUSED = "run.sql runs in a sandbox"


def _log(folder: Path, name: str = "r.jsonl", steps: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    recs = [{"step": s, "prompt": f"p{s}.{i}", "response": f"r{s}.{i}", "reward": float(i),
             "response_tokens": ["a", "b", "c"], "logprobs": [-0.5, -1.0, -0.25], "ref_logprobs": [-0.4, -1.1, -0.2]}
            for s in range(steps) for i in range(2)]
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _attempts(out: Path, logs: Path, part: str, exported: Path) -> list[tuple[str, str]]:
    """(query, "refused" or "harmless"): writes, file reads, attaches, extensions, settings, internal tables."""
    return [
        # writes
        (f"COPY samples TO '{out}/a.csv'", "refused"),
        (f"COPY (SELECT 42 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)", "refused"),
        (f"COPY (PIVOT samples ON step USING count(*)) TO '{out}/pv.csv'", "refused"),
        (f"COPY (PIVOT (SELECT content c, 1 k FROM read_text('/etc/passwd')) ON k USING first(c)) TO '{out}/p.csv'",
         "refused"),
        (f"EXPORT DATABASE '{out}/exported'", "refused"),
        (f"/* note */ EXPLAIN ANALYZE COPY samples TO '{logs}/b.csv'", "refused"),
        (f"COPY samples TO '{logs}/c.parquet' (FORMAT parquet)", "refused"),
        # reads of other files
        ("SELECT * FROM read_text('/etc/passwd')", "refused"),
        ("SELECT * FROM read_csv('/etc/passwd')", "refused"),
        ("SELECT * FROM glob('/etc/*')", "refused"),
        (f"SELECT * FROM read_parquet('{part}')", "refused"),
        ("WITH f AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM f", "refused"),
        ("SELECT * FROM samples WHERE prompt IN (SELECT content FROM read_text('/etc/hostname'))", "refused"),
        ("PIVOT (SELECT content c, 1 k FROM read_text('/etc/passwd')) ON k USING first(c)", "refused"),
        (f"FROM parquet_metadata('{part}')", "refused"),
        ("SELECT * FROM 'http://127.0.0.1:9/x.csv'", "refused"),
        # databases and extensions
        (f"ATTACH '{out}/db.duckdb' AS f", "refused"),
        ("ATTACH ':memory:' AS m", "harmless"),  # memory of the sandbox's own, gone with it
        ("INSTALL httpfs", "refused"),
        ("LOAD httpfs", "refused"),
        ("CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", "refused"),
        # settings
        ("SET enable_external_access = true", "refused"),
        ("RESET enable_external_access", "refused"),
        ("SET lock_configuration = false", "refused"),
        ("SET memory_limit = '1GB'", "refused"),
        (f"PRAGMA profile_output = '{out}/prof.txt'", "refused"),
        (f"PRAGMA import_database('{exported}')", "refused"),
        # the run's own tables and views: out of reach (the sandbox's are its own, one call long)
        ("CREATE OR REPLACE TABLE _nums AS PIVOT (SELECT 1 k, 2 v) ON k USING first(v)", "error"),  # a view there
        ("CREATE OR REPLACE VIEW _nums AS SELECT 1 AS k, 2 AS v", "harmless"),
        ("DROP VIEW samples", "harmless"),
        ("CREATE OR REPLACE TEMP VIEW samples AS SELECT 1 AS x", "harmless"),
        ("EXPLAIN ANALYZE DROP VIEW tokens", "harmless"),
        ("SELECT count(*) FROM _nums", "harmless"),  # the sandbox's own view of the numbers (steps_sql reads it)
        ("SELECT count(*) FROM _tokens_0_1", "refused"),  # no such table: a name of the run's, not the sandbox's
        # several statements
        (f"SELECT 1; COPY samples TO '{out}/m.csv'", "one statement"),
        ("SELECT 1; DROP VIEW samples", "one statement"),
    ]


@pytest.fixture
def world(tmp_path, open_run):
    logs = _log(tmp_path / "logs")
    run = open_run(logs)
    out = tmp_path / "out"
    out.mkdir()
    exported = tmp_path / "exported"  # import_database would run these
    exported.mkdir()
    (exported / "schema.sql").write_text("DROP VIEW samples;\n")
    (exported / "load.sql").write_text(f"COPY (SELECT 1) TO '{out}/written.csv';\n")
    return tmp_path, logs, run, out, exported


def _normal(run) -> None:
    assert run.sql("SELECT count(*) AS n FROM samples").n.tolist() == [6]
    assert run.sql("SELECT count(*) AS n FROM tokens").n.tolist() == [18]
    assert run.n_samples == 6 and len(run.samples) == 6


def test_every_attempt_is_refused_or_harmless_and_writes_nothing(world):
    tmp_path, logs, run, out, exported = world
    part = run.relations.parts()[0][1]
    home = Path.home() / ".duckdb"
    before, home_before = folder_fingerprint(tmp_path), folder_fingerprint(home) if home.exists() else {}
    attempts = _attempts(out, logs, part, exported)
    assert len(attempts) >= 25
    for query, outcome in attempts:
        if outcome == "refused":
            with pytest.raises(ValueError, match=REFUSED) as err:
                run.sql(query)
            assert isinstance(err.value, PermissionError), query
        elif outcome == "error":  # an error of the query's own, in the sandbox
            with pytest.raises(duckdb.Error):
                run.sql(query)
        elif outcome == "one statement":
            with pytest.raises(ValueError, match="one statement at a time; 2 were given"):
                run.sql(query)
        else:
            run.sql(query)
        assert folder_fingerprint(tmp_path) == before, query
        _normal(run)
    assert folder_fingerprint(tmp_path) == before
    assert (folder_fingerprint(home) if home.exists() else {}) == home_before  # no extension installed


def test_an_internal_table_replaced_by_the_user_leaves_the_run_as_it_was(world):
    """``CREATE OR REPLACE TABLE _nums AS PIVOT ...`` made run.n_samples 1 and every search fail."""
    _, _, run, _, _ = world
    run.sql("CREATE OR REPLACE VIEW _nums AS SELECT 1 AS k, 2 AS v")
    assert run.n_samples == 6 and run.histograms(["reward"], where="step > 0")["count"].sum() == 4
    assert run.sql("SELECT count(*) AS n FROM samples").n.tolist() == [6]


def test_what_the_user_makes_lasts_one_call(world):
    _, _, run, _, _ = world
    run.sql("CREATE OR REPLACE TEMP VIEW samples AS SELECT 1 AS x")
    run.sql("DROP VIEW tokens")
    _normal(run)
    assert run.sql("SELECT sum(reward) AS r FROM samples").r.tolist() == [3.0]


def test_the_sandbox_sees_what_the_run_sees(world):
    _, _, run, _, _ = world
    got = run.sql("SELECT * FROM samples")
    want = run.samples
    assert list(got.columns) == list(want.columns) and got.equals(want)
    toks = run.sql("SELECT * FROM tokens ORDER BY sample_id, position").reset_index(drop=True)
    with run.con as con:
        mine = con.execute("SELECT * FROM tokens ORDER BY sample_id, position").df()
    assert list(toks.columns) == list(mine.columns) and toks.equals(mine)
    assert run.sql("SELECT count(*) AS n FROM samples WHERE step = ?", [1]).n.tolist() == [2]


def test_a_runset_sql_runs_in_the_sandbox_too(tmp_path, open_run):
    rs = RunSet({"a": open_run(_log(tmp_path / "a")), "b": open_run(_log(tmp_path / "b", steps=2))})
    before = folder_fingerprint(tmp_path)
    for query in (f"COPY (PIVOT samples ON run USING count(*)) TO '{tmp_path}/x.csv'",
                  "SELECT * FROM read_text('/etc/passwd')", "INSTALL httpfs", "SET threads = 1"):
        with pytest.raises(ValueError, match=REFUSED):
            rs.sql(query)
    rs.sql("CREATE OR REPLACE VIEW _nums AS SELECT 1 AS k")
    assert folder_fingerprint(tmp_path) == before
    got = rs.sql("SELECT run, count(*) AS n FROM samples GROUP BY run ORDER BY run")
    assert got.values.tolist() == [["a", 6], ["b", 4]] and rs.n_samples == 10
    assert rs.sql("SELECT count(*) AS n FROM tokens").n.tolist() == [30]
    assert rs.sql("SELECT * FROM samples").equals(rs.samples)
