"""TRL's completions (GRPO / RLOO with ``log_completions=True``): ``completions/completions_{step:05d}.parquet``.

One row per completion: ``step``, ``prompt``, ``completion``, one column per reward function
(named after it), ``advantage`` (and in some versions ``mode`` or extra columns). A whole file
is read at once (one cache part per file, rebuilt if the file changes). ``reward`` is the sum of
the reward-function columns (TRL's default weights of 1; a function that returned None for a
sample is left out), unless the file has a ``reward`` column; each function's column stays as a
custom column. Consecutive rows sharing a prompt form a GRPO group, named ``"{step}:{k}"``.
Rows are numbered from 1 like lines, so problems are located by row.
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..lines import Chunk
from .rlb import RLBReader

NOT_REWARDS = {"step", "prompt", "completion", "advantage", "mode", "group_id", "line"}


class TRLReader(RLBReader):
    name = "trl"
    suffixes = (".parquet",)
    file_pattern = r"^completions_\d+\.parquet$"
    step_pattern = r"completions_(\d+)\.parquet$"
    whole_file = True
    rows_read = 0

    def fields(self) -> dict[str, str]:
        return {**super().fields(), "response": "completion", **self.columns}

    def parse_file(self, con: duckdb.DuckDBPyConnection, path: str | os.PathLike):
        """The whole file in the common columns, via the JSON-lines path (so every check is shared)."""
        t = pq.read_table(path)
        self.rows_read = t.num_rows
        if t.num_rows == 0:
            return None, []
        t = self.prepare(t)
        con.register("_trl", t)
        try:
            lines = con.sql("SELECT to_json(t)::VARCHAR AS j FROM _trl t").to_arrow_table()["j"]
        finally:
            con.unregister("_trl")
        lines = pc.cast(lines.combine_chunks(), pa.large_string())
        chunk = Chunk(lines, np.arange(1, t.num_rows + 1, dtype=np.int64),
                      np.full(t.num_rows, ord("{"), dtype=np.uint8), 0, 0)
        return self.parse(con, chunk)

    def prepare(self, t: pa.Table) -> pa.Table:
        """Step as an integer (from the file name if missing), the summed reward, the groups."""
        n = t.num_rows
        f = self.fields()
        if "step" not in t.column_names and self.file_step is not None:
            t = t.append_column("step", pa.array(np.full(n, self.file_step, dtype=np.int64)))
        elif "step" in t.column_names and pa.types.is_string(t.schema.field("step").type):
            t = t.set_column(t.schema.get_field_index("step"), "step", pc.cast(t["step"], pa.int64(), safe=False))
        if f["reward"] not in t.column_names:
            rewards = [c for c in t.column_names if c not in NOT_REWARDS | set(f.values())
                       and (pa.types.is_floating(t.schema.field(c).type) or pa.types.is_integer(t.schema.field(c).type)
                            or pa.types.is_boolean(t.schema.field(c).type))]
            if rewards:
                vals = np.vstack([t[c].to_numpy(zero_copy_only=False).astype(float) for c in rewards])
                has = np.isfinite(vals).any(axis=0)
                total = np.where(has, np.nansum(vals, axis=0), np.nan)
                t = t.append_column(f["reward"], pa.array(total, pa.float64(), from_pandas=True))
        if "group_id" not in self.columns and f["prompt"] in t.column_names and "group_id" not in t.column_names:
            prompts = t[f["prompt"]].to_pylist()
            steps = t["step"].to_pylist() if "step" in t.column_names else [self.file_step] * n
            groups, k = [], -1
            for i in range(n):
                if i == 0 or prompts[i] != prompts[i - 1] or steps[i] != steps[i - 1]:
                    k += 1
                groups.append(f"{steps[i]}:{k}")
            t = t.append_column("group_id", pa.array(groups, pa.string()))
        keep = [c for c in t.column_names if not (pa.types.is_nested(t.schema.field(c).type)
                                                    or pa.types.is_binary(t.schema.field(c).type))]
        return t.select(keep)  # images and other nested columns are not shown
