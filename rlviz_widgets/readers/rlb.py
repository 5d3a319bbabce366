"""RL Logging Board's JSONL schema (also what its OpenRLHF and verl integrations write).

``parse`` turns one chunk of raw lines into one Arrow table in the common columns (scalar
fields, per-sample token reductions, and the token arrays as float32 lists) plus the
problems it found, each located by line. The JSON is parsed by DuckDB (C++, both cores);
Python only triages odd lines and runs vectorized numpy over the arrays.
"""

from __future__ import annotations

import json
import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..lines import Chunk, line_bytes
from ..metrics import ARRAYS, per_sample
from .jsonkeys import candidate_keys

TEXT_FIELDS = ("prompt", "response", "ref_response")
NUMBER_FIELDS = ("reward", "ref_reward")
KNOWN = {*TEXT_FIELDS, *NUMBER_FIELDS, *ARRAYS, "step", "response_tokens", "ground_truth"}
# common column names; a custom field with one of these names is kept with a trailing "_"
RESERVED = KNOWN | {"sample_id", "file", "line", "n_tokens", "response_chars", "reward_gap", "file_no", "tokens",
                    "log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "logprob_mean", "value_mean",
                    "token_reward_sum"}
NUMERIC = "('DOUBLE', 'BIGINT', 'UBIGINT')"
_SAFE = re.compile(r"[^0-9A-Za-z_]+")
_BRACE = ord("{")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def extra_column(key: str) -> str:
    """The samples column a custom scalar field lands in."""
    name = _SAFE.sub("_", key).strip("_") or "field"
    return name + "_" if name in RESERVED else name


class RLBReader:
    """Records with prompt/response/reward/step and optional token arrays."""

    name = "rlb"

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> tuple[pa.Table | None, list[list]]:
        problems: list[list] = []
        raw = pa.table({"line": chunk.numbers, "j": chunk.lines})
        odd = np.flatnonzero(chunk.first_bytes != _BRACE)
        if len(odd):  # blank, indented or not an object: sort those out first
            raw = _repair(raw, odd, problems)
        for attempt in range(3):
            if raw.num_rows == 0:
                return None, problems
            # small batches: DuckDB parses them on every core
            con.register("raw", pa.Table.from_batches(raw.to_batches(max_chunksize=128)))
            keys = candidate_keys(raw["j"])
            extras = sorted(k for k in keys if k not in KNOWN)
            try:
                table = self._transform(con, extras)
                break
            except (duckdb.Error, UnicodeDecodeError):
                # some lines are not JSON (or not UTF-8): locate them; keep what can be kept
                bad = np.array([n for (n,) in con.execute("SELECT line FROM raw WHERE NOT json_valid(j)").fetchall()])
                idx = np.searchsorted(raw["line"].to_numpy(), bad)
                raw = _repair(raw, idx, problems, strict=attempt > 0)
        else:
            raise RuntimeError("could not isolate the malformed lines")  # pragma: no cover
        table = self._check(con, table, keys, problems)
        con.unregister("raw")
        return table, problems

    def _transform(self, con: duckdb.DuckDBPyConnection, extras: list[str]) -> pa.Table:
        schema = {f: "VARCHAR" for f in TEXT_FIELDS}
        schema.update({f: "JSON" for f in (*NUMBER_FIELDS, "step", "ground_truth", *extras)})
        schema["response_tokens"] = "VARCHAR[]"
        schema.update({f: "FLOAT[]" for f in ARRAYS})  # logged from float32/bf16 tensors: float32 keeps every digit

        def number(f: str) -> str:
            # _p_{f}: what is wrong (NULL when fine), _v_{f}: the bad value, for the message
            # TRY_CAST: DuckDB computes a cast shared by several expressions on every row ("high"::DOUBLE fails)
            ok = f"json_type(r.{f}) IN {NUMERIC} AND isfinite(TRY_CAST(r.{f} AS DOUBLE))"
            bad = (f"CASE WHEN json_type(r.{f}) IS NULL THEN 'missing' WHEN json_type(r.{f}) = 'NULL' THEN NULL "
                   f"WHEN json_type(r.{f}) IN {NUMERIC} THEN 'nan' ELSE 'type' END")
            return (f"CASE WHEN {ok} THEN TRY_CAST(r.{f} AS DOUBLE) END AS {f}, CASE WHEN NOT ({ok}) OR r.{f} IS NULL "
                    f"THEN {bad} END AS _p_{f}, CASE WHEN NOT ({ok}) THEN r.{f}::VARCHAR END AS _v_{f}")

        extra_sel = "".join(
            f""", CASE WHEN json_type(r.{_q(k)}) IN {NUMERIC} THEN r.{_q(k)}::DOUBLE
                       WHEN json_type(r.{_q(k)}) = 'BOOLEAN' THEN r.{_q(k)}::BOOLEAN::DOUBLE END AS {_q('_n_' + k)},
                  CASE WHEN json_type(r.{_q(k)}) = 'VARCHAR' THEN r.{_q(k)}->>'$' END AS {_q('_s_' + k)}"""
            for k in extras)
        return con.sql(f"""
            SELECT line,
                   CASE WHEN json_type(r.step) IN ('BIGINT', 'UBIGINT') THEN r.step::BIGINT
                        WHEN json_type(r.step) = 'DOUBLE'
                             AND TRY_CAST(r.step AS DOUBLE) = round(TRY_CAST(r.step AS DOUBLE))
                             THEN TRY_CAST(TRY_CAST(r.step AS DOUBLE) AS BIGINT)
                        WHEN json_type(r.step) = 'VARCHAR' THEN TRY_CAST(r.step->>'$' AS BIGINT) END AS step,
                   CASE WHEN json_type(r.step) IS NULL OR json_type(r.step) = 'NULL' THEN 'missing'
                        WHEN json_type(r.step) NOT IN ('BIGINT', 'UBIGINT') THEN json_type(r.step) END AS _p_step,
                   CASE WHEN json_type(r.step) NOT IN ('BIGINT', 'UBIGINT') THEN r.step::VARCHAR END AS _v_step,
                   r.prompt, r.response, {number('reward')}, r.ref_response, {number('ref_reward')},
                   CASE json_type(r.ground_truth) WHEN 'VARCHAR' THEN r.ground_truth->>'$' WHEN 'NULL' THEN NULL
                        ELSE r.ground_truth::VARCHAR END AS ground_truth,
                   r.response_tokens AS tokens, {', '.join(f'r.{_q(f)}' for f in ARRAYS)} {extra_sel}
            FROM (SELECT line, json_transform(j, {_lit(json.dumps(schema))}) AS r FROM raw)""").to_arrow_table()

    def _check(self, con, t: pa.Table, keys: list[str], problems: list[list]) -> pa.Table | None:
        line = t["line"].to_numpy()
        # step: required (flags come from SQL; Python only touches the bad rows)
        step_ok = _mask(pc.is_valid(t["step"]))
        for i in np.flatnonzero(_mask(pc.is_valid(t["_p_step"]))).tolist():
            kind, value = t["_p_step"][i].as_py(), _short(t["_v_step"][i].as_py())
            if not step_ok[i]:
                problems.append([int(line[i]), "missing_step", "no step: record skipped"] if kind == "missing" else
                                [int(line[i]), "wrong_type", f"step is {value}, not an integer: record skipped"])
            elif kind == "VARCHAR":
                problems.append([int(line[i]), "wrong_type", f"step is the string {value}: read as a number"])
        # reward, ref_reward: kept empty when missing or bad
        for f in NUMBER_FIELDS:
            flags = t[f"_p_{f}"]
            for i in np.flatnonzero(_mask(pc.is_valid(flags)) & step_ok).tolist():
                kind, value = flags[i].as_py(), t[f"_v_{f}"][i].as_py()
                if kind == "missing":
                    if f == "reward":
                        problems.append([int(line[i]), "missing_reward", "no reward: left empty"])
                elif kind == "type":
                    problems.append([int(line[i]), "wrong_type", f"{f} is {_short(value)}, not a number: left empty"])
                else:
                    problems.append([int(line[i]), "nan", f"{f} is {value}: left empty"])
        # token arrays: present but not a list, NaN / Infinity / null values, unequal lengths
        cols = {}
        lens = {}
        for f in ("tokens", *ARRAYS):
            col = t[f].combine_chunks()
            key = "response_tokens" if f == "tokens" else f
            nulls = _mask(col.is_null()) & step_ok
            if key in keys and nulls.any():
                cand = line[nulls].tolist()
                there = con.execute(f"SELECT line FROM raw WHERE line IN ({', '.join(map(str, cand))}) "
                                    f"AND json_exists(j, '$.{key}') AND json_type(j, '$.{key}') <> 'NULL'").fetchall()
                kind = "strings" if f == "tokens" else "numbers"
                problems += [[n, "wrong_type", f"{key} is not a list of {kind}: ignored"] for (n,) in there]
            if f != "tokens" and col.null_count < len(col):
                col = self._clean(col, line, step_ok, key, problems)
            cols[f] = col
            lens[f] = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(float)
        present = [f for f in cols if cols[f].null_count < len(cols[f])]
        if len(present) > 1:
            stack = np.vstack([np.nan_to_num(lens[f], nan=-1) for f in present])
            has = stack >= 0
            hi = np.where(has, stack, -np.inf).max(axis=0)
            lo = np.where(has, stack, np.inf).min(axis=0)
            for i in np.flatnonzero((hi != lo) & np.isfinite(hi) & step_ok).tolist():
                desc = ", ".join(f"{'response_tokens' if f == 'tokens' else f}={int(lens[f][i])}"
                                 for f in present if not np.isnan(lens[f][i]))
                problems.append([int(line[i]), "length_mismatch",
                                 f"token arrays differ in length ({desc}): missing values left empty"])
        for f, col in cols.items():
            t = t.set_column(t.schema.get_field_index(f), f, col)
        if not step_ok.all():
            t = t.filter(pa.array(step_ok))
        if t.num_rows == 0:
            return None
        reduced = per_sample(t)
        reward, ref = t["reward"].to_numpy(zero_copy_only=False), t["ref_reward"].to_numpy(zero_copy_only=False)
        out = {c: t[c] for c in ("line", "step", "prompt", "response", "reward", "ref_response", "ref_reward")}
        out["reward_gap"] = pa.array(reward - ref, pa.float64(), from_pandas=True)
        out["ground_truth"] = t["ground_truth"]
        out["response_chars"] = pc.utf8_length(t["response"])
        for name, values in reduced.items():
            out[name] = pa.array(values, from_pandas=True)
        for name in t.column_names:
            if name.startswith("_n_"):
                key = name[3:]
                nums, strs = t[name], t["_s_" + key]
                if nums.null_count == len(nums) and strs.null_count == len(strs):
                    continue  # no scalar value here (lists, objects, or a key candidate that is not one)
                if strs.null_count == len(strs):
                    out[extra_column(key)] = nums
                elif nums.null_count == len(nums):
                    out[extra_column(key)] = strs
                else:  # mixed: keep everything as text
                    out[extra_column(key)] = pc.coalesce(strs, pc.cast(nums, pa.string()))
        for f in ("tokens", *ARRAYS):
            out[f] = t[f]
        return pa.table(out)

    def _clean(self, col: pa.Array, line: np.ndarray, step_ok: np.ndarray, key: str, problems: list[list]) -> pa.Array:
        """NaN / Infinity become missing values; every affected line is reported."""
        vals = col.values.to_numpy(zero_copy_only=False)
        bad = ~np.isfinite(vals)  # nulls come out as NaN too
        if not bad.any():
            return col
        offsets = col.offsets.to_numpy()
        nulls = _mask(col.values.is_null())
        cb = np.concatenate([[0], np.cumsum(bad)])
        cn = np.concatenate([[0], np.cumsum(nulls)])
        nbad = cb[offsets[1:]] - cb[offsets[:-1]]
        nnull = cn[offsets[1:]] - cn[offsets[:-1]]
        for i in np.flatnonzero((nbad > 0) & step_ok).tolist():
            k_nan, k_null = int(nbad[i] - nnull[i]), int(nnull[i])
            if k_nan:
                problems.append([int(line[i]), "nan", f"{key} has {k_nan} NaN/Infinity value(s): left empty"])
            if k_null:
                problems.append([int(line[i]), "wrong_type",
                                 f"{key} has {k_null} null or non-numeric value(s): left empty"])
        clean = pa.array(np.where(bad, np.nan, vals), type=col.type.value_type, mask=bad)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), clean, mask=col.is_null())


def _repair(raw: pa.Table, idx, problems: list[list], strict: bool = False) -> pa.Table:
    """Re-read the lines at ``idx`` in Python: fix what can be fixed, report and drop the rest."""
    idx = sorted(set(int(i) for i in idx))
    col = raw["j"].combine_chunks()
    nums = raw["line"].to_numpy()
    keep = np.ones(raw.num_rows, dtype=bool)
    fixed_lines, fixed_texts = [], []
    for i in idx:
        n, b = int(nums[i]), line_bytes(col, i)
        keep[i] = False
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            text = b.decode("utf-8", errors="replace")
            problems.append([n, "non_utf8", "bytes that are not UTF-8: shown as \ufffd"])
        text = text.strip().lstrip("\ufeff")  # a UTF-8 byte order mark (Windows tools) opens some files
        if not text:
            problems.append([n, "empty_line", "blank line"])
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            problems.append([n, "malformed_json", _json_error(text)])
            continue
        if not isinstance(obj, dict):
            problems.append([n, "not_an_object", f"a JSON {type(obj).__name__}, not an object: skipped"])
        elif strict:
            problems.append([n, "malformed_json", f"not valid JSON for DuckDB: {_short(text, 60)!r}"])
        else:
            fixed_lines.append(n)
            fixed_texts.append(text)
    out = raw.filter(pa.array(keep))
    if fixed_lines:
        fixed = pa.table({"line": pa.array(fixed_lines, pa.int64()), "j": pa.array(fixed_texts, pa.large_string())})
        out = pa.concat_tables([out, fixed]).sort_by("line")
    return out


def _mask(arr) -> np.ndarray:
    """A pyarrow boolean array as a numpy bool array (nulls false), without a Python loop."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _short(v, n: int = 40) -> str:
    s = str(v)
    return s if len(s) <= n else s[:n] + "…"


def _json_error(text: str) -> str:
    """A precise reason, from Python's parser (only ever run on the few bad lines)."""
    try:
        json.loads(text)
    except ValueError as e:
        return f"not valid JSON ({e}): {_short(text.strip(), 60)!r}"
    return f"not valid JSON: {_short(text.strip(), 60)!r}"
