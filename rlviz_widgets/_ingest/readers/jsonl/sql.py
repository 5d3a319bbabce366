"""The DuckDB side of a JSON-lines parse: where each common field is read from (``record_spec``), the one
``json_transform`` query of a chunk (``transform``), and its custom values split into columns.

The scalar fields come out of json_transform as JSON text and are sorted out with string operations:
json_type() would parse every value again, several times per field and row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.metrics import ARRAYS
from rlviz_widgets._ingest.readers.jsonl.arrow import mask
from rlviz_widgets._ingest.readers.jsonl.format import JsonlFormat
from rlviz_widgets._ingest.readers.jsonl.keyscan import LONG_KEY
from rlviz_widgets._ingest.readers.mismatch_fields import helper
from rlviz_widgets._ingest.readers.options import MISMATCH_FIELDS, NUMBER_FIELDS, TEXT_FIELDS
from rlviz_widgets._sql import ident, literal

WIDE_EXTRAS = 256  # more custom keys than this in a chunk: read from a map of each record, not a struct of them all
Spec = tuple[dict[str, str], dict[str, str | None], set[str]]  # (json_transform schema, SQL per field, keys used)


def _num(x: str) -> str:
    return f"TRY_CAST({x} AS DOUBLE)"


def json_number(v: str) -> str:
    """A JSON value as a DOUBLE (NULL unless a finite number or a boolean)."""
    x = f"({v})::VARCHAR"
    return (f"CASE WHEN isfinite({_num(x)}) THEN {_num(x)} WHEN {x} = 'true' THEN 1.0::DOUBLE "
            f"WHEN {x} = 'false' THEN 0.0::DOUBLE END")


def json_text(v: str) -> str:
    """A JSON value as text (strings unquoted, NULL for null)."""
    return text_of(f"({v})::VARCHAR")


def text_of(x: str) -> str:
    """``json_text`` of a value already given as its JSON text."""
    return f"CASE WHEN starts_with({x}, '\"') THEN {x}::JSON->>'$' WHEN {x} <> 'null' THEN {x} END"


def reports_sql(cases: list[str]) -> str:
    """SQL: the ``kind|message`` strings of ``cases`` (CASE expressions, NULL when fine) that are not NULL, as a
    list: a format's own checks, read by the checks from the ``_reports`` column."""
    return f"list_filter([{', '.join(cases)}], lambda x: x IS NOT NULL)"


def key_path(key: str) -> str:
    """A JSON path naming one top-level key (DuckDB's ``$."..."``, inner quotes escaped)."""
    return '$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def field_ref(key: str) -> str:
    """SQL: the transformed record's field ``key``."""
    return f"r.{ident(key)}"


def record_spec(fmt: JsonlFormat, fields: Mapping[str, str], mapped: set[str], keys: set[str]) -> Spec:
    """(json_transform schema, SQL per common field over ``r``, record keys used) for a chunk with ``keys``."""
    f = fields
    schema = {f[c]: "VARCHAR" for c in TEXT_FIELDS}
    schema.update({f[c]: "JSON" for c in (*NUMBER_FIELDS, "step", "ground_truth", "advantage")})
    schema[f["tokens"]] = "VARCHAR[]"
    schema.update({f[c]: "FLOAT[]" for c in ARRAYS})  # logged from float32/bf16 tensors: float32 keeps every digit
    ex: dict[str, str | None] = {c: field_ref(f[c]) for c in (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth",
                                                               "tokens", *ARRAYS)}
    ex["advantage"] = json_number(field_ref(f["advantage"]))
    ex["advantage_raw"] = field_ref(f["advantage"])  # a plain JSON value: checked (and reported) like reward
    used = set(schema)
    groups = [f["group_id"]] if "group_id" in f else [k for k in fmt.group_keys if k in keys]
    schema.update({k: "JSON" for k in groups})
    ex["group_id"] = json_text(f"coalesce({', '.join(field_ref(k) for k in groups)})") if groups else \
        "NULL::VARCHAR"
    used |= (set(fmt.group_keys) | set(groups)) - set(fmt.kept_group_keys)
    _mismatch_spec(schema, ex, used, f, mapped, keys)
    if fmt.adjust is not None:
        fmt.adjust(schema, ex, used, f, mapped)
    return schema, ex, used


def _mismatch_spec(schema: dict[str, str], ex: dict[str, str | None], used: set[str], f: Mapping[str, str],
                   mapped: set[str], keys: set[str]) -> None:
    """The sampler's and the trainer's log-probs and the entropy (``mismatch_fields``), where a chunk has one of the
    log-prob lists (``columns=`` or, in RL Logging Board's schema as users extend it, ``rollout_logprobs`` /
    ``old_logprobs``, the other side then ``logprobs``); else an ``entropy`` field stays the custom field it is."""
    have = [c for c in MISMATCH_FIELDS if c in mapped or f[c] in keys]
    if not {"inference_logprob", "trainer_logprob"} & set(have):
        return
    schema.update({f[c]: "FLOAT[]" for c in have})
    used.update(f[c] for c in have)
    refs = {c: field_ref(f[c]) if c in have else None for c in MISMATCH_FIELDS}
    own = field_ref(f["logprobs"])  # the one side a log gives beside the other
    ex[helper("inference_logprob")] = refs["inference_logprob"] or f"CASE WHEN {refs['trainer_logprob']} IS NOT " \
                                                                   f"NULL THEN {own} END"
    ex[helper("trainer_logprob")] = refs["trainer_logprob"] or f"CASE WHEN {refs['inference_logprob']} IS NOT " \
                                                               f"NULL THEN {own} END"
    if refs["entropy"]:
        ex[helper("entropy")] = refs["entropy"]


def transform(con: duckdb.DuckDBPyConnection, spec: Spec, keys: set[str], unwrap: Callable[[str], str] | None,
              file_steps: bool, given: Mapping[str, str] | None = None) -> tuple[pa.Table, set[str]]:
    """The lines registered as ``raw`` in the common columns (with the checks' flags ``_p_*``, ``_v_*``) and their
    custom fields as columns; and the record keys the common columns used. ``file_steps``: a record without a step
    takes its file name's (``fs``). ``given``: record key -> the column of ``raw`` holding its value, read already
    (lists read in C): the record ``r`` takes it from there, not from the JSON."""
    schema, ex, used = spec
    direct, by_path = split_extras(schema, sorted(k for k in keys if k not in used))
    extras = sorted(direct + by_path)
    # The custom fields' values come out as one list per record, sorted out by lambdas and split into columns
    # in Python (``extra_columns``): the same SQL for any number of keys. SQL per key made DuckDB's planning
    # superlinear (common subexpressions over ~20 expressions per key: 3 s for 300 keys, 100 s for 1,000).
    wide = bool(extras) and len(extras) > WIDE_EXTRAS
    values, mapped = _extra_values(schema, extras, direct, by_path, wide, unwrap)
    step = f"coalesce({ex['step']}, fs::VARCHAR::JSON)" if file_steps else ex["step"]
    texts = {"_x_step": step, "_x_reward": ex["reward"], "_x_ref_reward": ex["ref_reward"],
             "_x_gt": ex["ground_truth"]}
    advantage = f"{ex['advantage']} AS advantage"
    if ex.get("advantage_raw"):
        texts["_x_advantage"] = ex["advantage_raw"]
        advantage = _number("advantage")
    helpers = "".join(f", {v} AS {ident(k)}" for k, v in ex.items() if k.startswith("_"))  # for the format's decode
    record = f"json_transform(j, {literal(json.dumps({k: v for k, v in schema.items() if k not in (given or {})}))})"
    if given:
        record = f"struct_insert({record}, {', '.join(f'{ident(k)} := {ident(c)}' for k, c in given.items())})"
    table = _query(con, f"""
            SELECT line,
                   {_STEP_SQL},
                   {ex['prompt']} AS prompt, {ex['response']} AS response, {_number('reward')},
                   {ex['ref_response']} AS ref_response, {_number('ref_reward')},
                   {text_of("_x_gt")} AS ground_truth,
                   {ex['tokens']} AS tokens, {', '.join(f'{ex[a]} AS {a}' for a in ARRAYS)},
                   {ex['group_id']} AS group_id, {advantage} {_extra_select(extras, wide)} {helpers}
            FROM (SELECT line, fs, r, {', '.join(f'({v})::VARCHAR AS {ident(k)}' for k, v in texts.items())} {values}
                  FROM (SELECT line, fs, {'j, ' if wide or by_path else ''}
                               {record} AS r {mapped} FROM raw))""")
    return (extra_columns(table, extras) if extras else table), used


def _number(f: str) -> str:
    """SQL: the number field ``f``; ``_p_{f}``: what is wrong (NULL when fine), ``_v_{f}``: the bad value, for the
    message."""
    x, d = f"_x_{f}", _num(f"_x_{f}")
    return (f"CASE WHEN isfinite({d}) THEN {d} END AS {f}, "
            f"CASE WHEN {x} IS NULL OR {x} = 'null' THEN 'missing' WHEN {d} IS NULL THEN 'type' "
            f"WHEN NOT isfinite({d}) THEN 'nan' END AS _p_{f}, "
            f"CASE WHEN {d} IS NULL OR NOT isfinite({d}) THEN {x} END AS _v_{f}")


def _step_sql() -> str:
    """SQL: the step, ``_p_step`` (what is wrong) and ``_v_step`` (the bad value). A string step is read as a number
    (and reported); 3.0 is 3; anything else skips the record."""
    sx, sd = "_x_step", _num("_x_step")
    ss = _num("(_x_step::JSON->>'$')")
    whole = f"({sd} = round({sd}) AND isfinite({sd}))"  # an integral number
    # read as an integer from the text (exact past 2**53; NULL past the 64-bit range, which the DOUBLE
    # cast would make an error), once the DOUBLE says it is integral (the integer cast rounds 3.5)
    sx_int, ss_int = f"TRY_CAST({sx} AS BIGINT)", "TRY_CAST((_x_step::JSON->>'$') AS BIGINT)"
    return f"""CASE WHEN {whole} THEN {sx_int}
                        WHEN starts_with({sx}, '"') AND {ss} = round({ss}) AND isfinite({ss}) THEN {ss_int}
                        END AS step,
                   CASE WHEN {sx} IS NULL OR {sx} = 'null' THEN 'missing' WHEN starts_with({sx}, '"') THEN 'VARCHAR'
                        WHEN NOT {whole} OR {sd} IS NULL OR {sx_int} IS NULL THEN 'other' END AS _p_step,
                   CASE WHEN NOT {whole} OR {sd} IS NULL OR {sx_int} IS NULL THEN {sx} END AS _v_step"""


_STEP_SQL = _step_sql()


def _extra_values(schema: dict[str, str], extras: list[str], direct: list[str], by_path: list[str], wide: bool,
                  unwrap: Callable[[str], str] | None) -> tuple[str, str]:
    """(the select list's ``_xs``, the custom values of each record as JSON texts, and ``_xk``, their keys, where
    a map is read; the inner select's ``_m``, that map). Adds the direct custom keys to ``schema``."""
    if not extras:
        return "", ""
    if wide:
        # a map of each record's own keys, picked by name in Python: no struct of thousands of fields (its
        # planning grows with their square). A record holding a key twice gets no map: looked up by path.
        paths = f"[{', '.join(literal(key_path(k)) for k in extras)}]"
        values = f"CASE WHEN _m IS NULL THEN json_extract(j, {paths}) ELSE map_values(_m) END"
        keyed = f", CASE WHEN _m IS NULL THEN [{', '.join(map(literal, extras))}] ELSE map_keys(_m) END AS _xk"
    else:
        schema.update({k: "JSON" for k in direct})
        # keys json_transform cannot take (the same name in another case as a key it has): looked up by path
        values = "[" + ", ".join(field_ref(k) if k not in by_path else f"json_extract(j, {literal(key_path(k))})"
                                 for k in extras) + "]"
        keyed = ""
    mapped = ", json_transform(j, '\"MAP(VARCHAR, JSON)\"') AS _m" if wide else ""
    value = unwrap("_v") if unwrap is not None else "_v"
    return f", list_transform({values}, lambda _v: ({value})::VARCHAR) AS _xs{keyed}", mapped


def _extra_select(extras: list[str], wide: bool) -> str:
    """SQL: the custom values sorted out, a list each: ``_en`` the number, ``_es`` the text, ``_ef`` a NaN/Infinity
    given (left empty), ``_eo`` "[" or "{" for a list or object."""
    if not extras:
        return ""
    x, d = "_x", _num("_x")
    big = _big_integer(x)
    cases = {"n": f"""CASE WHEN {big} THEN NULL WHEN isfinite({d}) THEN {d} WHEN {x} = 'true' THEN 1.0::DOUBLE
                               WHEN {x} = 'false' THEN 0.0::DOUBLE END""",
             "s": f"CASE WHEN starts_with({x}, '\"') THEN {x}::JSON->>'$' WHEN {big} THEN {x} END",
             # digits past 1e308 are text (``s``): the regexp of ``big`` runs only where the float is not finite
             "f": f"CASE WHEN NOT isfinite({d}) THEN CASE WHEN NOT {big} THEN {x} END END",
             "o": f"CASE WHEN starts_with({x}, '[') OR starts_with({x}, '{{') THEN left({x}, 1) END"}
    out = "".join(f", list_transform(_xs, lambda _x: {v}) AS _e{c}" for c, v in cases.items())
    return out + (", _xk" if wide else "")


def _big_integer(x: str) -> str:
    """SQL: whether the JSON text ``x`` is an integer no float holds exactly (past 2**53: an id or a hash, kept as
    its digits, not rounded). Short texts are ruled out first: the test runs on every custom value."""
    return (f"(CASE WHEN length({x}) < 16 OR NOT regexp_full_match({x}, '-?[0-9]+') THEN false "
            f"WHEN length(ltrim({x}, '-')) > 16 THEN true ELSE abs({x}::HUGEINT) > 9007199254740992 END)")


def extra_columns(t: pa.Table, extras: list[str]) -> pa.Table:
    """The transform's custom values (lists per record: ``_en``, ``_es``, ``_ef``, ``_eo``; each record's keys in
    ``_xk``, or ``extras`` in order without it) as columns ``_n_{key}``, ``_s_{key}``, ``_f_{key}``, ``_o_{key}``."""
    lists = {c: t["_e" + c].combine_chunks() for c in "nsfo"}
    first = lists["n"]
    offsets = first.offsets.to_numpy()
    parent = pc.list_parent_indices(first).to_numpy()
    flat = {c: pc.list_flatten(a) for c, a in lists.items()}  # the four lists are alike: one transform of _xs
    if "_xk" in t.column_names:  # a map per record: its keys named by position in ``extras`` (others: null)
        at = pc.index_in(pc.list_flatten(t["_xk"].combine_chunks()), value_set=pa.array(extras, pa.string()))
        keep = mask(at.is_valid())
        index = at.to_numpy(zero_copy_only=False)[keep].astype(np.int64)
        pos, rows = np.flatnonzero(keep), parent[keep]
    else:
        pos = np.arange(len(parent))
        index, rows = pos - (offsets[parent] - offsets[0]), parent
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(len(extras) + 1))
    names = [c for c in t.column_names if c not in ("_en", "_es", "_ef", "_eo", "_xk")]
    columns = [t[c] for c in names]
    take = np.empty(t.num_rows, np.int64)
    for i, key in enumerate(extras):
        take.fill(-1)
        sel = order[bounds[i]:bounds[i + 1]]
        held = rows[sel]  # ascending (positions run record by record): a record's repeats are neighbours
        first = np.ones(len(held), bool)
        first[1:] = held[1:] != held[:-1]  # a key a record holds twice: its first value
        take[held[first]] = pos[sel[first]]
        idx = pa.array(take, mask=take < 0)
        for c in "nsfo":
            names.append(f"_{c}_{key}")
            columns.append(flat[c].take(idx))
    return pa.Table.from_arrays(columns, names=names)


def split_extras(schema: dict[str, str], keys: list[str]) -> tuple[list[str], list[str]]:
    """(custom keys json_transform can take, keys to look up by path). Its schema is a struct, whose field
    names DuckDB compares ignoring case: a second ``Acc`` beside ``acc`` (or ``Prompt`` beside ``prompt``)
    would make it refuse every record. An empty key has neither: no column can be named after it."""
    taken = {k.lower() for k in schema}
    direct, by_path = [], []
    for k in keys:
        if not k or k == LONG_KEY:
            continue
        if k.lower() in taken:
            by_path.append(k)
        else:
            taken.add(k.lower())
            direct.append(k)
    return direct, by_path


_VIEWS: dict[int, tuple] = {}  # id of a cursor -> (the cursor, {chunk view: the relation reading it})


def _query(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """``sql`` (over the registered ``raw``) as Arrow, through a temporary view made once per query text, and a
    relation over it made once too.

    Every chunk of a file asks the same long query: parsing its text again each time showed in profiles.
    Whether the view exists is remembered here, not learned from a failed lookup: DuckDB's first
    "no such table" error costs ~8 ms (it looks through the whole catalog for a name to suggest).
    Making a relation binds its query (DuckDB 2.0: ~6 ms a chunk, a tenth of the parsing thread's time); running
    one again does not, and reads the ``raw`` registered at the time.
    """
    name = "_chunk_" + hashlib.sha1(sql.encode()).hexdigest()[:16]
    made = _made(con)
    rel = made.get(name)
    if rel is not None:
        try:
            return rel.to_arrow_table()
        except (duckdb.CatalogException, duckdb.ConnectionException):  # the view dropped meanwhile, say: made again
            made.clear()  # (not on other errors: those are the chunk's, and would come again)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")
    if len(_VIEWS) > 64:  # cursors long closed (each held here until then)
        _VIEWS.clear()
        made = _made(con)
    rel = made[name] = con.sql(f"SELECT * FROM {name}")
    return rel.to_arrow_table()


def _made(con: duckdb.DuckDBPyConnection) -> dict:
    """The chunk views (and relations) made on ``con``. Kept with the cursor itself: a relation does not keep its
    cursor alive, and a new cursor may get a closed one's id (its relations would fail, "connection closed")."""
    held = _VIEWS.get(id(con))
    if held is None or held[0] is not con:
        held = _VIEWS[id(con)] = (con, {})
    return held[1]
