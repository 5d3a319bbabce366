"""The checks of a transformed chunk: every problem of its records reported (by line), bad values emptied, records
without a step dropped, and the rest shaped as a part (the common columns, custom fields by their stored names).

Flags come from the SQL (``_p_*``, ``_v_*``); Python only touches the bad rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.custom_columns import FIRST_LINES, listed_column, number_text, stored_column
from rlviz_widgets._ingest.metrics import ARRAYS
from rlviz_widgets._ingest.mismatch_metrics import FIGURES
from rlviz_widgets._ingest.readers.jsonl.arrow import count_literal, mask, per_row
from rlviz_widgets._ingest.readers.jsonl.keyscan import LONG_KEY
from rlviz_widgets._ingest.readers.jsonl.sql import key_path
from rlviz_widgets._ingest.readers.mismatch_fields import taken
from rlviz_widgets._ingest.readers.options import NUMBER_FIELDS
from rlviz_widgets._ingest.readers.sequence import SEQUENCE_COLUMNS
from rlviz_widgets._ingest.readers.turns import ANSWER_SPAN, TURN_COLUMNS
from rlviz_widgets._problems import short as _short
from rlviz_widgets._sql import literal

DEFAULT_PAD_TOKEN = "<PAD>"  # open_run's pad_token: stripped from the texts shown
# a format's own counts of ``response_chars`` and ``response_pad_chars`` (null: counted here), made as it read the
# responses (messages.c's, while they were in its cache): not stored
RESPONSE_CHARS, RESPONSE_PAD_CHARS = "_response_chars", "_response_pad_chars"
NUMBERS, TEXTS, OBJECTS = "\x00n", "\x00s", "\x00o"  # a custom field's numbers, texts, lists or objects: kept apart
# for ``batches.split``
_JSON_KINDS = {"OBJECT": "an object", "ARRAY": "a list", "BOOLEAN": "a boolean", "BIGINT": "a number",
               "UBIGINT": "a number", "DOUBLE": "a number"}


@dataclass(frozen=True)
class Naming:
    """What the checks need of a format: the file's key of each common field, and how messages name it."""

    fields: Mapping[str, str]  # common field -> the record key holding it
    shown: Mapping[str, str]  # ... as messages name it
    texts: Mapping[str, str]  # text field -> the key it is read from as it is
    text_steps: bool  # steps written as strings are no news
    token_kind: str  # what a token list holds ("token ids", "strings")
    tokens_required: bool  # the response is read from the tokens: a record without them is reported


def check(con: duckdb.DuckDBPyConnection, t: pa.Table, keys: set[str], problems: list[list], odd: np.ndarray,
          naming: Naming, apart: bool = False) -> pa.Table | None:
    """The problems of a transformed chunk (``raw`` registered) reported, its bad values emptied, its records
    without a step dropped. ``odd``: the lines where a text field may not be a string; ``apart``: the lines are of
    several chunks (``batches``), whose custom fields' numbers and texts are kept apart for ``batches.split``."""
    line = t["line"].to_numpy()
    step_ok = mask(pc.is_valid(t["step"]))
    _step_reports(t, line, step_ok, naming, problems)
    _text_reports(con, t, line, step_ok, odd, naming.texts, problems)
    _format_reports(t, line, step_ok, problems)
    _number_reports(t, line, step_ok, naming.shown, problems)
    cols = {f: _checked_array(con, t, f, line, step_ok, keys, naming, problems) for f in ("tokens", *ARRAYS)}
    _length_reports(cols, line, step_ok, naming.shown, problems)
    for f, col in cols.items():
        t = t.set_column(t.schema.get_field_index(f), f, col)
    if not step_ok.all():
        t = t.filter(pa.array(step_ok))
    if t.num_rows == 0:
        return None
    out = _common_columns(t)
    _unnamed_reports(con, t, keys, problems)
    first_lines = _custom_columns(t, out, problems, apart)
    for f in ("tokens", *ARRAYS, *SEQUENCE_COLUMNS):
        if f in t.column_names:  # (the sequence columns: only where the format reads whole sequences)
            out[f] = t[f]
    out |= taken(t)  # the mismatch and entropy fields (issue 32), where the format reads them
    out |= {c: t[c] for c in FIGURES if c in t.column_names}  # their per-sample figures, where made ahead (derive)
    return pa.table(out).replace_schema_metadata({FIRST_LINES: json.dumps(first_lines)})


def _step_reports(t: pa.Table, line: np.ndarray, step_ok: np.ndarray, naming: Naming, problems: list[list]) -> None:
    """The step: required; a string is read (and reported, unless the format writes it so)."""
    step = naming.shown["step"]
    for i in np.flatnonzero(mask(pc.is_valid(t["_p_step"]))).tolist():
        kind, value = t["_p_step"][i].as_py(), _short(t["_v_step"][i].as_py())
        if not step_ok[i]:
            problems.append([int(line[i]), "missing_step", f"no {step}: record skipped"] if kind == "missing" else
                            [int(line[i]), "wrong_type", f"{step} is {value}, not an integer: record skipped"])
        elif kind == "VARCHAR" and not naming.text_steps:
            problems.append([int(line[i]), "wrong_type", f"{step} is the string {value}: read as a number"])


def _text_reports(con: duckdb.DuckDBPyConnection, t: pa.Table, line: np.ndarray, step_ok: np.ndarray,
                  odd: np.ndarray, texts: Mapping[str, str], problems: list[list]) -> None:
    """Prompt and response missing, where the format reads them from a field (in every chunk alike: a refresh may
    read only records without it); text fields given as another JSON value (the transform made it its JSON text)."""
    for f in ("prompt", "response"):
        if f in texts:
            for i in np.flatnonzero(mask(t[f].is_null()) & step_ok).tolist():
                problems.append([int(line[i]), "missing_field", f"no {texts[f]}: left empty"])
    odd = odd[np.isin(odd, line[step_ok])]
    if not len(odd) or not texts:
        return
    types = ", ".join(f"json_type(j, {literal(key_path(k))})" for k in texts.values())
    for n, *kinds in con.execute(f"SELECT line, {types} FROM raw WHERE line IN "
                                 f"({', '.join(map(str, odd.tolist()))}) ORDER BY line").fetchall():
        for key, kind in zip(texts.values(), kinds):
            if kind not in (None, "VARCHAR", "NULL"):
                problems.append([n, "wrong_type", f"{_short(key)} is {_JSON_KINDS.get(kind, kind)}, "
                                                  "not text: shown as its JSON"])


def _format_reports(t: pa.Table, line: np.ndarray, step_ok: np.ndarray, problems: list[list]) -> None:
    """What a format's own checks found (``_reports``: "kind|message" per row)."""
    if "_reports" not in t.column_names:
        return
    reports = t["_reports"]
    for i in np.flatnonzero(mask(pc.greater(pc.list_value_length(reports), 0)) & step_ok).tolist():
        for r in reports[i].as_py():
            kind, _, message = r.partition("|")
            problems.append([int(line[i]), kind, message])


def _number_reports(t: pa.Table, line: np.ndarray, step_ok: np.ndarray, shown: Mapping[str, str],
                    problems: list[list]) -> None:
    """reward, ref_reward (and advantage, where it is a plain value): kept empty when missing or bad."""
    for f in (*NUMBER_FIELDS, "advantage"):
        if f"_p_{f}" not in t.column_names:
            continue
        flags = t[f"_p_{f}"]
        flagged = mask(pc.is_valid(flags)) & step_ok
        if f != "reward":  # only a missing reward is reported: most logs have no ref_reward (or advantage)
            flagged &= ~mask(pc.equal(flags, "missing"))
        for i in np.flatnonzero(flagged).tolist():
            kind, value = flags[i].as_py(), t[f"_v_{f}"][i].as_py()
            key = shown[f]
            if kind == "missing":
                problems.append([int(line[i]), "missing_reward", f"no {key}: left empty"])
            elif kind == "type":
                problems.append([int(line[i]), "wrong_type", f"{key} is {_short(value)}, not a number: left empty"])
            else:
                problems.append([int(line[i]), "nan", f"{key} is {value}: left empty"])


def _checked_array(con: duckdb.DuckDBPyConnection, t: pa.Table, f: str, line: np.ndarray, step_ok: np.ndarray,
                   keys: set[str], naming: Naming, problems: list[list]) -> pa.ChunkedArray:
    """A token array: present but not a list, NaN / Infinity / null values reported (and emptied)."""
    col = t[f]  # chunked as DuckDB made it: joining the chunks would copy every token
    key = naming.fields[f]
    nulls = mask(col.is_null()) & step_ok
    there: list = []
    if key in keys and nulls.any():
        cand = line[nulls].tolist()
        path = literal(key_path(key))
        there = con.execute(f"SELECT line FROM raw WHERE line IN ({', '.join(map(str, cand))}) "
                            f"AND json_exists(j, {path}) AND json_type(j, {path}) <> 'NULL'").fetchall()
        kind = naming.token_kind if f == "tokens" else "numbers"
        problems += [[n, "wrong_type", f"{key} is not a list of {kind}: ignored"] for (n,) in there]
    # the response is its tokens (unless mapped to a text field): none, no text
    if f == "tokens" and naming.tokens_required and nulls.any():
        wrong = {n for (n,) in there}
        problems += [[n, "missing_field", f"no {naming.shown[f]}: the response is left empty"]
                     for n in line[nulls].tolist() if n not in wrong]
    if f != "tokens" and col.null_count < len(col):
        return _clean(col, line, step_ok, naming.shown[f], problems)
    if f == "tokens":
        _null_tokens(col, line, step_ok, naming.shown[f], problems)
    return col


def _length_reports(cols: dict[str, pa.ChunkedArray], line: np.ndarray, step_ok: np.ndarray,
                    shown: Mapping[str, str], problems: list[list]) -> None:
    """Token arrays of one record that differ in length."""
    lens = {f: pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(float) for f, col in cols.items()}
    present = [f for f in cols if cols[f].null_count < len(cols[f])]
    if len(present) <= 1:
        return
    stack = np.vstack([np.nan_to_num(lens[f], nan=-1) for f in present])
    has = stack >= 0
    hi = np.where(has, stack, -np.inf).max(axis=0)
    lo = np.where(has, stack, np.inf).min(axis=0)
    for i in np.flatnonzero((hi != lo) & np.isfinite(hi) & step_ok).tolist():
        desc = ", ".join(f"{shown[f]}={int(lens[f][i])}" for f in present if not np.isnan(lens[f][i]))
        problems.append([int(line[i]), "length_mismatch",
                         f"token arrays differ in length ({desc}): missing values left empty"])


def _common_columns(t: pa.Table) -> dict[str, pa.ChunkedArray | pa.Array]:
    """The part's common columns of the records kept (the token arrays go last, after the custom fields)."""
    reward, ref = t["reward"].to_numpy(zero_copy_only=False), t["ref_reward"].to_numpy(zero_copy_only=False)
    out = {c: t[c] for c in ("line", "step", "prompt", "response", "reward", "ref_response", "ref_reward")}
    out["reward_gap"] = pa.array(reward - ref, pa.float64(), from_pandas=True)
    out["ground_truth"] = t["ground_truth"]
    out["response_chars"] = _counted(t, RESPONSE_CHARS, pc.utf8_length)
    # the characters of default pad tokens in it: the run shows responses without them (``pad_token``)
    out["response_pad_chars"] = _counted(t, RESPONSE_PAD_CHARS, lambda r: pc.multiply(
        count_literal(r, DEFAULT_PAD_TOKEN), len(DEFAULT_PAD_TOKEN)))
    for name in ("group_id", "advantage"):  # optional: only where the log has them
        if t[name].null_count < t.num_rows:
            out[name] = t[name]
    for name in TURN_COLUMNS:  # a chat-shaped log's turns (the writer adds them empty to other parts)
        if name in t.column_names:
            out[name] = t[name]
    if "turns" in out:  # every part with turns has the answers' spans (the run's SQL reads them), null where none
        for name, kind in ANSWER_SPAN.items():
            out[name] = t[name] if name in t.column_names else pa.nulls(t.num_rows, kind)
    return out


def _counted(t: pa.Table, given: str, count) -> pa.ChunkedArray:
    """``count(t["response"])``, taken from the format's column ``given`` where it counted (null elsewhere, and
    where there is no response), of the type ``count`` gives."""
    texts = t["response"]
    if given not in t.column_names or t[given].null_count == t.num_rows:
        return count(texts)
    kind = count(texts.slice(0, 0)).type
    have = t[given].cast(kind)
    if have.null_count > texts.null_count:  # rows the format left (it counts every response it read)
        have = pc.coalesce(have, count(texts))
    return have


def _unnamed_reports(con: duckdb.DuckDBPyConnection, t: pa.Table, keys: set[str], problems: list[list]) -> None:
    """Fields no column can be named after, in the records kept (as every other check of a field: a record skipped
    for its step gets that report alone, in whatever chunk it is read; these look at every raw line, which a chunk
    of only skipped ones never does)."""
    if "" not in keys and LONG_KEY not in keys:
        return
    held = set(t["line"].to_numpy().tolist())
    if "" in keys:  # a field with an empty name
        there = con.execute("SELECT line FROM raw WHERE list_contains(json_keys(j), '')").fetchall()
        problems += [[n, "unnamed_field", "a field with an empty name: its value is not kept"]
                     for (n,) in there if n in held]
    if LONG_KEY in keys:  # names too long to be read from the bytes: the lines with a long key not read
        found = [k for k in keys if len(k) > 10000]  # (64 KB written is 10,923 bytes or more once unescaped)
        there = con.execute("SELECT line FROM raw WHERE list_bool_or(list_transform(json_keys(j), "
                            "lambda k: strlen(k) > 10000 AND NOT list_contains(?, k)))", [found]).fetchall()
        problems += [[n, "unnamed_field", "a field whose name is longer than 64 KB: its value is not kept"]
                     for (n,) in there if n in held]


def _custom_columns(t: pa.Table, out: dict, problems: list[list], apart: bool) -> dict[str, int]:
    """The custom fields (``_n_``, ``_s_``, ``_f_``, ``_o_`` of each key) added to ``out`` by their stored names;
    returns each key's first line with a value."""
    kept = t["line"].to_numpy()  # the lines of the records kept
    first_lines = {}
    for name in t.column_names:
        if not name.startswith("_n_"):
            continue
        key = name[3:]
        nums, strs = t[name], t["_s_" + key]
        for i in np.flatnonzero(mask(t["_f_" + key].is_valid())).tolist():
            value = _short(t["_f_" + key][i].as_py())
            problems.append([int(kept[i]), "nan", f"{_short(key)} is {value}: left empty"])
        if nums.null_count == len(nums) and strs.null_count == len(strs):
            # no scalar value here: lists or objects (a problem if another part holds numbers or text:
            # the run tells, ``listed_column``), or a key candidate that is not one
            objects = t["_o_" + key]
            if objects.null_count < len(objects):
                out[listed_column(key)] = objects
            continue
        if apart:  # chunks parsed together: each chunk's values are settled on their own (``batches.split``)
            out[stored_column(key) + NUMBERS], out[stored_column(key) + TEXTS] = nums, strs
            out[stored_column(key) + OBJECTS] = t["_o_" + key]
            continue
        problems += non_scalars(key, t["_o_" + key], kept)
        values = scalar_values(nums, strs)
        # stored under a name made of the key alone; the run names the column (``column_names``)
        out[stored_column(key)] = values
        first_lines[key] = int(kept[np.flatnonzero(mask(values.is_valid()))[0]])
    return first_lines


def _clean(col: pa.ChunkedArray, line: np.ndarray, step_ok: np.ndarray, key: str,
           problems: list[list]) -> pa.ChunkedArray:
    """NaN / Infinity become missing values; every affected line is reported."""
    out, at = [], 0
    for chunk in col.chunks:
        n = len(chunk)
        out.append(_clean_chunk(chunk, line[at:at + n], step_ok[at:at + n], key, problems))
        at += n
    return pa.chunked_array(out, type=col.type)


def _clean_chunk(col: pa.Array, line: np.ndarray, step_ok: np.ndarray, key: str, problems: list[list]) -> pa.Array:
    offsets = col.offsets.to_numpy()
    values = col.values.slice(offsets[0], offsets[-1] - offsets[0])
    offsets = offsets - offsets[0]
    vals = values.to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(vals)  # nulls come out as NaN too
    if not bad.any():
        return col
    nulls = mask(values.is_null())
    nbad, nnull = per_row(bad, offsets), per_row(nulls, offsets)
    for i in np.flatnonzero((nbad > 0) & step_ok).tolist():
        k_nan, k_null = int(nbad[i] - nnull[i]), int(nnull[i])
        if k_nan:
            problems.append([int(line[i]), "nan", f"{key} has {k_nan} NaN/Infinity value(s): left empty"])
        if k_null:
            problems.append([int(line[i]), "wrong_type",
                             f"{key} has {k_null} null, non-numeric or out-of-range value(s) (arrays are float32, "
                             f"to ±3.4e38): left empty"])
    clean = pa.array(np.where(bad, np.nan, vals), type=col.type.value_type, mask=bad)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), clean, mask=col.is_null())


def _null_tokens(col: pa.ChunkedArray, line: np.ndarray, step_ok: np.ndarray, key: str, problems: list[list]) -> None:
    """Report the records whose token list holds nulls (shown as empty tokens)."""
    at = 0
    for chunk in col.chunks:
        if chunk.values.null_count:  # the usual case costs one look at a count
            offsets = chunk.offsets.to_numpy()
            counts = per_row(mask(chunk.values.is_null()), offsets)
            for i in np.flatnonzero(counts > 0).tolist():
                if step_ok[at + i]:
                    problems.append([int(line[at + i]), "wrong_type",
                                     f"{key} has {int(counts[i])} null or invalid token(s): shown empty"])
        at += len(chunk)


def non_scalars(key: str, kinds: pa.ChunkedArray | pa.Array, lines: np.ndarray) -> list[list]:
    """The reports of a field holding numbers or text whose value in some records is a list or an object (``kinds``:
    its first character there, "[" or "{"): no column cell can hold it, so it is left empty."""
    return [[int(lines[i]), "wrong_type", non_scalar_message(key, kinds[i].as_py())]
            for i in np.flatnonzero(mask(kinds.is_valid())).tolist()]


def non_scalar_message(key: str, kind: str) -> str:
    """The report of a custom field holding a list (``kind`` "[") or an object ("{") where elsewhere it holds numbers
    or text: made here for a part that holds both, and by the run for parts apart."""
    return f"{_short(key)} is {'a list' if kind == '[' else 'an object'} here, a number or text elsewhere: left empty"


def scalar_values(nums: pa.ChunkedArray, strs: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """A custom field's column: its numbers, its texts, or (a field mixing both) everything as text."""
    if strs.null_count == len(strs):
        return nums
    if nums.null_count == len(nums):
        return strs
    return pc.coalesce(strs, number_text(nums))
