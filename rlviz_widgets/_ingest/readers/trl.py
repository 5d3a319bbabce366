"""TRL's completions (GRPO / RLOO with ``log_completions=True``): ``completions/completions_{step:05d}.parquet``.

One row per completion: ``step`` (written as text), ``prompt``, ``completion``, one column per
reward function (named after it), ``advantage`` (and in some versions ``mode`` or extra columns).
A whole file is read at once (one cache part per file, rebuilt if the file changes; a file that is
not readable Parquet yet, half-written, is reported and read when it changes). ``reward`` is the
sum of the reward-function columns, the float columns (TRL logs them from float tensors; integer
columns beside them are counts or ids), with TRL's default weights of 1 (a function that returned
None for a sample is left out), unless the file has a ``reward`` column (or ``columns={"reward":
...}`` names one); each column stays as a custom column. Consecutive rows sharing a prompt form
a GRPO group, named ``"{step}:{k}"``. Rows are numbered from 1 like lines, so problems are located by row.
"""

from __future__ import annotations

import copy
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rlviz_widgets._ingest.lines import Chunk
from rlviz_widgets._ingest.readers.base import Parsed
from rlviz_widgets._ingest.readers.chat import ANSWER, conversation, read_message
from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader
from rlviz_widgets._ingest.readers.options import name_accepted, name_step
from rlviz_widgets._ingest.readers.turns import Turn, turn_columns, with_turn_columns
from rlviz_widgets._problems import short as _short

NOT_REWARDS = {"step", "prompt", "completion", "advantage", "mode", "group_id", "line"}
# the rows, once written as JSON lines, are records of this format: every check is the JSON-lines reader's
ROWS = JsonlFormat(name="trl", file_pattern=r"^completions_\d+\.parquet$", step_pattern=r"completions_(\d+)\.parquet$",
                   renames={"response": "completion"}, text_steps=True)


class TRLReader:
    """TRL's completion files, each read whole (a ``FileReader``)."""

    suffixes = (".parquet",)
    whole_file = True

    def __init__(self, columns: dict[str, str] | None = None, tokenizer=None):
        self.rows = JsonlReader(columns, tokenizer, format=ROWS)  # reads the rows once written as JSON lines
        self.columns, self.tokenizer, self.name = self.rows.columns, tokenizer, self.rows.name
        self.file_pattern, self.step_pattern, self.own_renames = ROWS.file_pattern, ROWS.step_pattern, ROWS.own_renames
        self.file_step: int | None = None
        self.rows_read = 0

    def fields(self) -> dict[str, str]:
        return self.rows.fields()

    def accepts(self, path: str | os.PathLike) -> bool:
        return name_accepted(self.file_pattern, path)

    def name_step(self, name: str) -> int | None:
        return name_step(self.step_pattern, name)

    def step_key(self) -> None:
        """None: a file is read whole, no line is skipped unparsed."""
        return None

    def for_file(self, path: str | os.PathLike) -> TRLReader:
        bound = copy.copy(self)
        bound.rows = self.rows.for_file(path)
        bound.file_step = bound.rows.file_step
        return bound

    def parse_file(self, con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> Parsed:
        """The whole file in the common columns, via the JSON-lines reader (so every check is shared)."""
        try:
            t = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:  # half-written (TRL's write is not atomic) or not Parquet
            self.rows_read = 0
            return None, [[0, "unreadable", "not a readable Parquet file, skipped until it changes: "
                           f"{_short(str(e), 120)} (line 0: the file as a whole)"]]
        self.rows_read = t.num_rows
        if t.num_rows == 0:
            return None, [[0, "empty_file", "the file holds no rows (line 0: the file as a whole)"]]
        t, chat_problems, turns = self.conversations(self.completed(t))
        # half floats widened: DuckDB reads no float16 (a reward column written from a half-precision tensor)
        for i, f in enumerate(t.schema):
            if pa.types.is_float16(f.type):
                t = t.set_column(i, f.name, t.column(i).cast(pa.float32()))
        row = "t"  # the rows' alias: a column of that name (a reward function "t") would be taken for the row
        while row.lower() in {c.lower() for c in t.column_names}:
            row += "_"
        con.register("_trl", t)
        try:
            lines = con.sql(f"SELECT to_json({row})::VARCHAR AS j FROM _trl {row}").to_arrow_table()["j"]
        except duckdb.Error as e:  # a column type DuckDB cannot read: the file is reported, the others read
            return None, [[0, "unreadable", f"a column DuckDB cannot read: {_short(str(e), 120)} "
                                            "(line 0: the file as a whole)"]]
        finally:
            con.unregister("_trl")
        lines = pc.cast(lines.combine_chunks(), pa.large_string())
        chunk = Chunk(lines, np.arange(1, t.num_rows + 1, dtype=np.int64),
                      np.full(t.num_rows, ord("{"), dtype=np.uint8), 0, 0)
        parsed, problems = self.rows.parse(con, chunk)
        if parsed is not None and turns is not None:  # the rows kept (by line: row k is line k + 1)
            kept = parsed["line"].to_numpy() - 1
            parsed = with_turn_columns(parsed, turn_columns([turns[k] for k in kept.tolist()]))
        return parsed, sorted(problems + chat_problems, key=lambda p: p[0])

    def conversations(self, t: pa.Table) -> tuple[pa.Table, list[list], list[list[Turn]] | None]:
        """``t`` with message-list prompts and completions (TRL >= 1.15, conversational datasets) as texts, and
        the last assistant turn as ``answer``; the problems of their messages, by row; each row's turns (None for
        a file of texts: the run makes them from the texts)."""
        f = self.rows.fields()
        cols = [c for c in (f["prompt"], f["response"]) if c in t.column_names]
        if not any(pa.types.is_list(t.schema.field(c).type) or pa.types.is_large_list(t.schema.field(c).type)
                   for c in cols):
            return t, [], None
        n = t.num_rows
        prompts = t[f["prompt"]].to_pylist() if f["prompt"] in t.column_names else [None] * n
        completions = t[f["response"]].to_pylist() if f["response"] in t.column_names else [None] * n
        texts, problems, turns = {"prompt": [], "response": [], ANSWER: []}, [], []
        for i, (p, c) in enumerate(zip(prompts, completions)):
            reports: list[str] = []
            before = _turns(p, "user", reports, 0)
            chat = conversation(before + _turns(c, "assistant", reports, len(before)), len(before), reports)
            texts["prompt"].append(chat.prompt)
            texts["response"].append(chat.response if c is not None else None)
            texts[ANSWER].append(chat.answer)
            problems += [[i + 1, *r.split("|", 1)] for r in reports]
            turns.append(chat.turns)
        for key, col in (("prompt", f["prompt"]), ("response", f["response"])):
            if col in t.column_names:
                t = t.set_column(t.schema.get_field_index(col), col, pa.array(texts[key], pa.string()))
        if ANSWER not in t.column_names:  # a column of the log's own (an extra logged column) is kept
            t = t.append_column(ANSWER, pa.array(texts[ANSWER], pa.string()))
        return t, problems, turns

    def completed(self, t: pa.Table) -> pa.Table:
        """Step as an integer (from the file name if missing), the summed reward, the groups."""
        f = self.rows.fields()
        if "step" not in t.column_names and self.file_step is not None:
            t = t.append_column("step", pa.array(np.full(t.num_rows, self.file_step, dtype=np.int64)))
        # the step stays as written (TRL writes it as text): the shared checks read it, and report what is no step
        if f["reward"] not in t.column_names:
            t = _with_reward(t, f)
        if "group_id" not in self.columns and f["prompt"] in t.column_names and "group_id" not in t.column_names:
            t = t.append_column("group_id", pa.array(_groups(t, f["prompt"], self.file_step), pa.string()))
        texts = {f["prompt"], f["response"]}  # nested ones (chat messages) are shown as JSON, and reported
        keep = [c for c in t.column_names if c in texts or not (pa.types.is_nested(t.schema.field(c).type)
                                                                 or pa.types.is_binary(t.schema.field(c).type))]
        return t.select(keep)  # images and other nested columns are not shown


def _turns(value, role: str, reports: list[str], start: int) -> list[Turn]:
    """A prompt or completion as turns: a message list's messages (numbered from ``start`` in reports), a text as
    one turn of ``role``."""
    if value is None:
        return []
    if isinstance(value, list):
        return [read_message(m, start + i, reports) for i, m in enumerate(value)]
    return [Turn(role, str(value))]


def _with_reward(t: pa.Table, f: dict[str, str]) -> pa.Table:
    """``t`` with the sum of its reward functions' columns as the reward, if it has any. TRL's reward functions are
    logged as floats (torch); integer columns are counts or ids beside them."""
    rewards = [c for c in t.column_names if c not in NOT_REWARDS | set(f.values())
               and pa.types.is_floating(t.schema.field(c).type)]
    if not rewards:
        return t
    vals = np.vstack([t[c].to_numpy(zero_copy_only=False).astype(float) for c in rewards])
    has = np.isfinite(vals).any(axis=0)
    total = np.where(has, np.nansum(vals, axis=0), np.nan)
    return t.append_column(f["reward"], pa.array(total, pa.float64(), from_pandas=True))


def _groups(t: pa.Table, prompt: str, file_step: int | None) -> list[str]:
    """Each row's GRPO group: consecutive rows sharing a prompt (and a step), named ``"{step}:{k}"``."""
    n = t.num_rows
    prompts = t[prompt].to_pylist()
    steps = [_step_name(s, file_step) for s in (t["step"].to_pylist() if "step" in t.column_names else [None] * n)]
    groups, k = [], -1
    for i in range(n):
        if i == 0 or prompts[i] != prompts[i - 1] or steps[i] != steps[i - 1]:
            k += 1
        groups.append(f"{steps[i]}:{k}")
    return groups


def _step_name(step, file_step: int | None) -> str:
    """A row's step as its group name begins: ``5`` for 5, 5.0 or "5"; the file name's step when it has none."""
    if step is None or (isinstance(step, float) and not np.isfinite(step)):
        return str(file_step)
    try:
        v = float(step)
    except (TypeError, ValueError):
        return str(step)
    return str(int(v)) if np.isfinite(v) and v == int(v) else str(step)
