"""prime-rl token exports (draft, not registered yet): ``{output_dir}/token_exports/step_{N}/rank_{R}.jsonl``, or
``{output_dir}/{run_id}/token_exports/step_{N}/...`` (v0.6–v0.8 multi-run), one JSON line per packed sequence.

Five key sets (``docs/mismatch-sources.md`` §1), told apart by their keys, never by ``schema_version`` (always 1).
Every per-token list covers the whole sequence: prompt, turns, tool results. What is read:

- the step: ``export_step`` where the record has it (it names the folder), else ``step``; the folder's ``step_{N}``
  for a line without either;
- per token (the issue-32 names): ``token_ids``, ``trained`` (``loss_mask``), ``inference_logprob``,
  ``trainer_logprob``, ``entropy``, ``token_advantage`` (``advantage`` in ``run.tokens()``), the logged
  ``mismatch_kl``, ``log_importance_ratio``, ``importance_ratio``, ``prob_delta``, ``is_masked``,
  ``is_masked_high``, ``is_masked_low``, ``rl_weight``;
- per sample: ``reward`` (v0.6 and before: the per-token ``rewards`` on a trained token), ``advantage`` (the mean
  over trained tokens), ``env_name``, ``run_id``, ``rank``, ``micro_step``, ``micro_sequence_idx``, and
  ``group_id``: the step and a hash of the tokens before the first trained one (the prompt turns, identical for a
  group's members, which prime-rl spreads over ranks and micro batches);
- a step folder without ``STABLE`` (v0.6+) is still being written: ``stable`` is False on its lines, and its cut
  last line is no problem (a finished folder's is).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa

from rlviz_widgets._sql import literal

FILE_PATTERN = r"^rank_\d+\.jsonl$"
STEP_DIR = re.compile(r"^step_(\d+)$")
MARKER = "STABLE"

FLOAT_LISTS = {"inference_logprobs": "inference_logprob", "trainer_logprobs": "trainer_logprob",
               "entropy": "entropy", "advantages": "token_advantage", "mismatch_kl": "mismatch_kl",
               "log_importance_ratio": "log_importance_ratio", "importance_ratio": "importance_ratio",
               "prob_delta": "prob_delta", "rl_weights": "rl_weight"}
BOOL_LISTS = {"loss_mask": "trained", "is_masked": "is_masked", "is_masked_high": "is_masked_high",
              "is_masked_low": "is_masked_low"}
SCALARS = {"schema_version": "BIGINT", "step": "BIGINT", "export_step": "BIGINT", "rank": "BIGINT",
           "micro_step": "BIGINT", "micro_sequence_idx": "BIGINT", "export_sequence_idx": "BIGINT",
           "run_id": "VARCHAR", "env_name": "VARCHAR", "training_mode": "VARCHAR"}
SCHEMA = {**SCALARS, "token_ids": "BIGINT[]", "rewards": "DOUBLE[]", **{k: "FLOAT[]" for k in FLOAT_LISTS},
          **{k: "BOOLEAN[]" for k in BOOL_LISTS}}


def generation(keys: set[str]) -> str | None:
    """The schema generation a record's keys belong to (None: not a prime-rl token export): ``"flat/steps"``
    (e971d905, badd2b0f), ``"v0.6"``, ``"v0.7"`` (v0.7.0, v0.8.0) or ``"main"``."""
    if not {"token_ids", "loss_mask", "inference_logprobs", "trainer_logprobs"} <= keys:
        return None
    if "export_step" in keys:
        return "v0.7" if "rl_weights" in keys else "v0.6"
    return "main" if "rl_weights" in keys else "flat/steps"


def accepts(path: str | Path) -> bool:
    """A rank file of a token export: ``rank_{R}.jsonl`` in ``step_{N}/`` or (first commit) ``token_exports/``."""
    p = Path(path)
    return re.search(FILE_PATTERN, p.name) is not None and (
        STEP_DIR.match(p.parent.name) is not None or p.parent.name == "token_exports")


def folder_step(path: str | Path) -> int | None:
    """The step of a rank file's ``step_{N}`` folder."""
    m = STEP_DIR.match(Path(path).parent.name)
    return int(m.group(1)) if m else None


def folder_run_id(path: str | Path) -> str | None:
    """The folder above ``token_exports``: the run id in the v0.6–v0.8 multi-run layout
    (``{run_id}/token_exports/step_{N}/rank_{R}.jsonl``), the output dir's name in the single-run one (the records'
    ``run_id``, null for a single run, tells them apart). A name to show a run by, not a column."""
    p = Path(path)
    exports = p.parent.parent if folder_step(p) is not None else p.parent
    return exports.parent.name if exports.name == "token_exports" else None


def is_stable(path: str | Path) -> bool:
    """Whether the rank file's step folder is complete (``STABLE`` written after every rank flushed). The first two
    unreleased layouts have no marker: their folders are taken as complete."""
    p = Path(path)
    if folder_step(p) is None:
        return True
    return (p.parent / MARKER).exists() or not _marks_steps(p.parent.parent)


def _marks_steps(exports: Path) -> bool:
    """Whether any step folder of the export has a marker (a v0.6+ writer)."""
    return any((d / MARKER).exists() for d in exports.glob("step_*"))


def sample_sql(path: str | Path) -> dict[str, str]:
    """Column -> SQL over the parsed record ``r``: the per-sample columns."""
    first = "list_position(r.loss_mask, true)"
    trained_adv = "list_where(r.advantages, r.loss_mask)"
    from_folder = folder_step(path)
    step = f"coalesce(r.export_step, r.step, {'NULL' if from_folder is None else from_folder})"
    prompt = f"list_slice(r.token_ids, 1, coalesce({first}, len(r.token_ids) + 1) - 1)"
    return {
        "step": f"{step}::BIGINT",
        "reward": "list_where(r.rewards, r.loss_mask)[1]::DOUBLE",
        "advantage": f"list_avg(list_filter({trained_adv}, lambda a: isfinite(a)))::DOUBLE",
        "group_id": f"{step}::VARCHAR || ':' || md5({prompt}::VARCHAR)[:12]",
        "env_name": "r.env_name",
        "run_id": "r.run_id",  # the record's: the folder above token_exports is a run id only in multi-run
        "rank": "r.rank", "micro_step": "r.micro_step", "micro_sequence_idx": "r.micro_sequence_idx",
        "export_sequence_idx": "r.export_sequence_idx",
        "n_tokens": "len(r.token_ids)",
        "n_trained_tokens": "len(list_filter(r.loss_mask, lambda m: m))",
    }


def token_sql() -> dict[str, str]:
    """Column -> SQL over ``r``: the per-token list columns in the issue-32 names (NULL lists for absent keys)."""
    out = {"token_ids": "r.token_ids"}
    out |= {ours: f"r.{theirs}" for theirs, ours in BOOL_LISTS.items()}
    out |= {ours: f"r.{theirs}" for theirs, ours in FLOAT_LISTS.items()}
    return out


def read_lines(con: duckdb.DuckDBPyConnection, path: str | Path) -> tuple[pa.Table, list[list]]:
    """A whole rank file as one row per record (``sample_sql`` and ``token_sql`` columns, ``line``, ``stable``)
    and its problems ``[line, kind, message]``. A draft of what the line pipeline will do by chunks: a line that
    does not parse is a problem, but the cut last line of a step still being written."""
    stable = is_stable(path)
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    cut = not text.endswith("\n") and bool(text)
    problems, good = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if cut and n == len(lines) and not stable:
            continue  # being written: read on the next refresh
        good.append((n, line))
    raw = pa.table({"line": [n for n, _ in good], "json": [x for _, x in good]})
    con.register("raw_prime", raw)
    cols = {**sample_sql(path), **token_sql()}
    select = ", ".join(f"{sql} AS {name}" for name, sql in cols.items())
    schema = literal("{" + ", ".join(f'"{k}": "{v}"' for k, v in SCHEMA.items()) + "}")
    bad = con.sql("SELECT line FROM raw_prime WHERE NOT json_valid(json)").fetchall()
    problems += [[n, "bad_json", "not a JSON record (a cut line?): skipped"] for (n,) in bad]
    t = con.sql(f"SELECT line, {select}, {stable} AS stable FROM (SELECT line, json_transform(json, {schema}) AS r "
                f"FROM raw_prime WHERE json_valid(json)) ORDER BY line").fetch_arrow_table()
    con.unregister("raw_prime")
    return t, problems
