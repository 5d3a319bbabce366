"""RL Logging Board's JSONL schema (also what its OpenRLHF and verl integrations write).

``parse`` turns one chunk of raw lines into one Arrow table in the common columns (scalar
fields, per-sample token reductions, and the token arrays as float32 lists) plus the
problems it found, each located by line. The JSON is parsed by DuckDB (C++, both cores);
Python only triages odd lines and runs vectorized numpy over the arrays.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from concurrent.futures import Future
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.custom_columns import (
    FIRST_LINES,
    LISTED_PREFIX,
    STORED_PREFIX,
    listed_column,
    number_text,
    stored_column,
    stored_key,
)
from rlviz_widgets._ingest.lines import Chunk, find_byte, line_bytes
from rlviz_widgets._ingest.metrics import ARRAYS, with_reductions
from rlviz_widgets._ingest.native import read_arrays_later
from rlviz_widgets._ingest.readers.jsonkeys import LONG_KEY, candidate_keys, equal_at, odd_values, repeated_keys, scan
from rlviz_widgets._ingest.readers.tokens import id_strings, spell_ids
from rlviz_widgets._problems import short as _short
from rlviz_widgets._sql import ident, literal

TEXT_FIELDS = ("prompt", "response", "ref_response")
NUMBER_FIELDS = ("reward", "ref_reward")
DEFAULT_PAD_TOKEN = "<PAD>"  # open_run's pad_token: stripped from the texts shown
_BRACE = ord("{")
BATCH_STRIDE = 1 << 40  # line numbers of chunks parsed together (``parse_many``): chunk k's line n is k * this + n
BIG_LINE = 1 << 20  # a line this long that is no object is reported without parsing it
WIDE_EXTRAS = 256  # more custom keys than this in a chunk: read from a map of each record, not a struct of them all




# The scalar fields come out of json_transform as JSON text and are sorted out with string
# operations: json_type() would parse every value again, several times per field and row.
def _num(x: str) -> str:
    return f"TRY_CAST({x} AS DOUBLE)"


def json_number(v: str) -> str:
    """A JSON value as a DOUBLE (NULL unless a finite number or a boolean)."""
    x = f"({v})::VARCHAR"
    return (f"CASE WHEN isfinite({_num(x)}) THEN {_num(x)} WHEN {x} = 'true' THEN 1.0::DOUBLE "
            f"WHEN {x} = 'false' THEN 0.0::DOUBLE END")


def json_text(v: str) -> str:
    """A JSON value as text (strings unquoted, NULL for null)."""
    return _text_of(f"({v})::VARCHAR")


def reports_sql(cases: list[str]) -> str:
    """SQL: the ``kind|message`` strings of ``cases`` (CASE expressions, NULL when fine) that are not NULL, as a
    list: a format's own checks, read by ``_check`` from the ``_reports`` column."""
    return f"list_filter([{', '.join(cases)}], lambda x: x IS NOT NULL)"


def _text_of(x: str) -> str:
    """``json_text`` of a value already given as its JSON text."""
    return f"CASE WHEN starts_with({x}, '\"') THEN {x}::JSON->>'$' WHEN {x} <> 'null' THEN {x} END"


ALIASES = {"response_tokens": "tokens", "token": "tokens", "group": "group_id", "uid": "group_id"}
COMMON = (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth", "tokens", *ARRAYS, "group_id", "advantage")


def normalize_columns(columns: dict[str, str] | None) -> dict[str, str]:
    """``columns=`` checked: common names (a few aliases allowed) -> the file's field names."""
    out = {}
    for k, v in (columns or {}).items():
        name = ALIASES.get(k, k)
        if name not in COMMON:
            raise ValueError(f"columns=: {k!r} is not a common column; map any of {', '.join(COMMON)}")
        if not isinstance(v, str) or not v:
            raise ValueError(f"columns=: the field for {k!r} must be a field name, not {v!r}")
        out[name] = v
    return out


def signature(columns: dict[str, str], tokenizer) -> str:
    """A short key naming the options that change what a reader produces (for the cache)."""
    if not columns and tokenizer is None:
        return ""
    tok = None if tokenizer is None else _tokenizer_key(tokenizer)
    return hashlib.sha1(json.dumps([sorted(columns.items()), tok], default=str).encode()).hexdigest()[:10]


def _tokenizer_key(tokenizer) -> list:
    """What tells tokenizers apart for the cache: name, sizes, added tokens, and how it spells a spread of ids
    and those just past its base vocabulary (where added tokens go). A tokenizer with tokens added for
    fine-tuning keeps its name and ``vocab_size``: its parts must not be read as the base one's."""
    size = getattr(tokenizer, "vocab_size", None)
    key = [getattr(tokenizer, "name_or_path", None) or type(tokenizer).__qualname__, size]
    for probe in (len, lambda t: sorted(t.get_added_vocab().items())):
        try:
            key.append(probe(tokenizer))
        except Exception:  # noqa: BLE001 - a tokenizer without it
            key.append(None)
    n = size if isinstance(size, int) and size > 0 else 1000
    ids = sorted(set(np.linspace(0, n - 1, 256).astype(int).tolist()) | set(range(n, n + 256)))
    key.append(hashlib.sha1("\x00".join(id_strings(np.array(ids), tokenizer)).encode()).hexdigest())
    return key


class RLBReader:
    """Records with prompt/response/reward/step and optional token arrays.

    Other formats subclass it: they say where each common field lives in their records
    (``_spec``: a JSON-transform schema and one SQL expression per field) and share the
    triage of odd lines, the checks, the cleaning and the per-sample reductions.
    """

    name = "rlb"
    suffixes = (".jsonl",)
    file_pattern: str | None = None  # names a folder's files must match (None: every *.jsonl)
    step_pattern: str | None = None  # the step in a file's name, for records without one
    group_keys = ("uid", "group_index", "group_id", "prompt_idx")  # first present names the GRPO group
    kept_group_keys = ("prompt_idx",)  # group keys that stay custom columns too (an index users sort by)
    text_steps = False  # whether the format writes steps as strings ("12": read, not reported)
    token_ids = False  # whether the format logs token ids (spelled with ``tokenizer``), not token strings
    tokens_required = False  # whether the response is read from the tokens (a record without them is reported)
    own_renames: frozenset[str] = frozenset()  # fields the format writes beside a common column of that name: the
    # custom column they get (``reward_``) is no news to report

    def __init__(self, columns: dict[str, str] | None = None, tokenizer=None):
        self.columns = normalize_columns(columns)
        self.tokenizer = tokenizer
        self.file_step: int | None = None
        self._texts: dict[str, str] | None = None  # ``_text_keys``, once known
        sig = signature(self.columns, tokenizer)
        self.name = type(self).name + (f"+{sig}" if sig else "")  # the cache key: other options, other parts

    def for_file(self, path) -> RLBReader:
        """This reader bound to one file (the step its name gives, if the format has one)."""
        bound = copy.copy(self)
        bound.file_step = self.name_step(Path(path).name)
        return bound

    def name_step(self, name: str) -> int | None:
        """The step a file's name gives (``step_pattern``'s first group that matched), if any."""
        m = re.search(self.step_pattern, name) if self.step_pattern else None
        return next((int(g) for g in m.groups() if g is not None), None) if m else None

    def accepts(self, path) -> bool:
        """Whether a file found in a folder belongs to this format."""
        return self.file_pattern is None or re.search(self.file_pattern, Path(path).name) is not None

    # -- where the fields are ----------------------------------------------------------------
    def fields(self) -> dict[str, str]:
        """Common field -> the record key holding it (``columns=`` overrides)."""
        base = {f: f for f in (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth", *ARRAYS, "advantage")}
        base["tokens"] = "response_tokens"
        return {**base, **self.columns}

    def shown_names(self) -> dict[str, str]:
        """Common field -> the name messages give it: the file's own key (formats that read a field through an
        expression, not by its name, say which key they read)."""
        return self.fields()

    def _spec(self, keys: set[str]) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """(json_transform schema, SQL per common field over ``r``, record keys used) for a chunk."""
        f = self.fields()
        schema = {f[c]: "VARCHAR" for c in TEXT_FIELDS}
        schema.update({f[c]: "JSON" for c in (*NUMBER_FIELDS, "step", "ground_truth", "advantage")})
        schema[f["tokens"]] = "VARCHAR[]"
        schema.update({f[c]: "FLOAT[]" for c in ARRAYS})  # logged from float32/bf16 tensors: float32 keeps every digit
        ex = {c: f"r.{ident(f[c])}" for c in (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth", "tokens", *ARRAYS)}
        ex["advantage"] = json_number(f"r.{ident(f['advantage'])}")
        ex["advantage_raw"] = f"r.{ident(f['advantage'])}"  # a plain JSON value: checked (and reported) like reward
        used = set(schema)
        groups = [f["group_id"]] if "group_id" in f else [k for k in self.group_keys if k in keys]
        schema.update({k: "JSON" for k in groups})
        ex["group_id"] = json_text(f"coalesce({', '.join(f'r.{ident(k)}' for k in groups)})") if groups else \
            "NULL::VARCHAR"
        used |= (set(self.group_keys) | set(groups)) - set(self.kept_group_keys)
        return schema, ex, used

    def step_key(self) -> str | None:
        """The top-level key a record's step is read from as it is (lines can then be sorted by step from their bytes,
        ``readers.selective``), or None when the format derives it otherwise."""
        if getattr(self, "whole_file", False):
            return None
        key = self.fields()["step"]
        return key if self._spec(set())[1]["step"] == f"r.{ident(key)}" else None

    def _extra(self, key: str) -> str:
        """The JSON value of a custom field."""
        return self._unwrap(f"r.{ident(key)}")

    def _unwrap(self, value: str) -> str:
        """A custom field's JSON value as the format means it (formats that wrap values unwrap them here)."""
        return value

    def _step(self, expr: str) -> str:
        """A record's step as JSON, falling back on the file name's step (``fs``, a column: the query is one for
        every file, and parses the lines of several at once)."""
        if self.step_pattern is None:
            return expr
        return f"coalesce({expr}, fs::VARCHAR::JSON)"

    # -- parsing -----------------------------------------------------------------------------
    scan_byte = ord(":")  # read_chunks finds these with the newlines: keys end at colons

    def prepare(self, chunk: Chunk, arrays: bool = True) -> None:
        """Work on a chunk's bytes that can run ahead of ``parse``, in the reading thread: its keys, the lines
        where a text field may not be a string, and those where a key may be written twice; with ``arrays``, its
        number arrays and token strings too (``native_arrays``: on a thread of their own)."""
        scanned = scan(chunk.lines, chunk.found) if len(chunk.lines) else None
        chunk.keys = candidate_keys(chunk.lines, chunk.found, scanned)
        chunk.odd = self._odd_lines(chunk, scanned)
        chunk.repeats = chunk.numbers[repeated_keys(chunk.lines, chunk.found, scanned)]
        chunk.native = self.native_arrays(chunk) if arrays else None

    def native_arrays(self, chunk: Chunk) -> list[Future] | None:
        """The chunk's number arrays and token strings being read by ``native.read_arrays`` (beside DuckDB's parse
        of the chunk before; a future per piece of its lines), or None. Only the lists the transform would read as
        FLOAT[] (or VARCHAR[], the tokens) from a key of their own, in chunks of object lines without another
        spelling of those keys (json_transform matches keys whatever their case)."""
        if chunk.keys is None or not len(chunk.lines) or (chunk.first_bytes != _BRACE).any():
            return None
        schema, ex, _ = self._spec(chunk.keys)
        refs = " ".join(v for v in ex.values() if v)
        keys = self.fields()
        fields = {}
        for a in (*ARRAYS, "tokens"):
            key = keys[a]
            ref = f"r.{ident(key)}"
            if schema.get(key) == ("VARCHAR[]" if a == "tokens" else "FLOAT[]") and ex.get(a) == ref \
                    and refs.count(ref) == 1:
                fields[a] = key
        folded = {k.casefold() for k in fields.values()}
        if not fields or any(k.casefold() in folded and k not in fields.values() for k in chunk.keys):
            return None
        strings = ("tokens", fields.pop("tokens")) if "tokens" in fields else None
        pieces = chunk.lines.chunks if isinstance(chunk.lines, pa.ChunkedArray) else [chunk.lines]
        futures = [read_arrays_later(p, fields, strings) for p in pieces]
        return None if any(f is None for f in futures) else futures

    def _odd_lines(self, chunk: Chunk, scanned: tuple | None = None) -> np.ndarray:
        """The numbers of the lines where a text field may hold a value that is not a string."""
        return chunk.numbers[odd_values(chunk.lines, chunk.found, list(self._text_keys().values()), scanned)]

    def _text_keys(self) -> dict[str, str]:
        """Text field -> the record key it is read from as it is (the transform makes any JSON value text).
        Worked out once per reader: every chunk asks, twice."""
        if self._texts is None:
            _, ex, _ = self._spec(set())
            f = self.fields()
            self._texts = {c: f[c] for c in TEXT_FIELDS if ex.get(c) == f"r.{ident(f[c])}"}
        return self._texts

    def parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk) -> tuple[pa.Table | None, list[list]]:
        """One chunk of raw lines as one Arrow table in the common columns, and the problems found (by line)."""
        return self._parse(con, chunk, [self.file_step])

    def parse_many(self, con: duckdb.DuckDBPyConnection, chunks: list[Chunk],
                   readers: list[RLBReader]) -> list[tuple[pa.Table | None, list[list]]]:
        """Small chunks (of several files: ``readers``, this reader bound to each chunk's file) parsed in one query,
        each chunk's (table, problems) as ``parse`` gives them. A query costs ~8 ms however small: a log of many
        small files (a file per step) opened 8x slower than the same records in one file."""
        if len(chunks) == 1:
            return [readers[0].parse(con, chunks[0])]
        for c, r in zip(chunks, readers):
            if c.keys is None or c.odd is None or c.repeats is None:
                r.prepare(c, arrays=False)
        at = [k * BATCH_STRIDE for k in range(len(chunks))]  # chunk k's line n is k * BATCH_STRIDE + n meanwhile
        combined = Chunk(pa.concat_arrays([c.lines for c in chunks]),
                         np.concatenate([c.numbers + a for c, a in zip(chunks, at)]),
                         np.concatenate([c.first_bytes for c in chunks]), 0, 0,
                         keys=set().union(*(c.keys for c in chunks)),
                         odd=np.concatenate([np.asarray(c.odd, np.int64) + a for c, a in zip(chunks, at)]),
                         repeats=np.concatenate([np.asarray(c.repeats, np.int64) + a for c, a in zip(chunks, at)]),
                         native=None if any(c.native is None for c in chunks) else
                         [f for c in chunks for f in c.native])
        table, problems = self._parse(con, combined, [r.file_step for r in readers])
        # the per-sample reductions once for all (the writer adds them to a part that lacks them: ~2 ms each)
        return _split(None if table is None else with_reductions(table), problems, len(chunks))

    def _parse(self, con: duckdb.DuckDBPyConnection, chunk: Chunk,
               steps: list[int | None]) -> tuple[pa.Table | None, list[list]]:
        """``parse`` of a chunk whose lines may be of several chunks (``parse_many``): ``steps``, the step each
        one's file name gives."""
        problems: list[list] = []
        raw = pa.table({"line": chunk.numbers, "j": chunk.lines})
        odd = np.flatnonzero(chunk.first_bytes != _BRACE)
        if len(odd):  # blank, indented or not an object: sort those out first
            raw = _repair(raw, odd, problems)
        # the lists read already (``native_arrays``): DuckDB reads the rest (a line it refuses: the chunk is
        # read as it is, below, its odd lines found and reported as always)
        table = self._native_transform(con, chunk, steps) if chunk.native is not None and not len(odd) else None
        keys = chunk.keys
        if table is None:
            for attempt in range(3):
                if raw.num_rows == 0:
                    return None, problems
                # small batches: DuckDB parses them on every core
                _register(con, raw, steps, max_chunksize=128)
                # the keys of the chunk's raw lines cover those of repaired ones (only trimmed or dropped)
                keys = chunk.keys if chunk.keys is not None else candidate_keys(raw["j"])
                try:
                    table, used = self._transform(con, keys)
                    break
                except (duckdb.Error, UnicodeDecodeError):
                    # some lines are not JSON (or not UTF-8): locate them; keep what can be kept
                    bad = np.array([n for (n,) in
                                    con.execute("SELECT line FROM raw WHERE NOT json_valid(j)").fetchall()])
                    if not len(bad):  # valid JSON that DuckDB still refuses: find the records it refuses
                        table, raw = self._transform_apart(con, raw, keys, problems, steps)
                        if table is None:
                            con.unregister("raw")
                            return None, problems
                        break
                    idx = np.searchsorted(raw["line"].to_numpy(), bad)
                    raw = _repair(raw, idx, problems, strict=attempt > 0)
            else:
                raise RuntimeError("could not isolate the malformed lines")  # pragma: no cover
        odd = chunk.odd if chunk.odd is not None else self._odd_lines(chunk)
        table = self._check(con, self._post(table), keys, problems, odd, apart=len(steps) > 1)
        repeats = chunk.repeats if chunk.repeats is not None else chunk.numbers[repeated_keys(chunk.lines,
                                                                                              chunk.found)]
        if table is not None and len(repeats):
            problems += _duplicate_key_reports(con, raw, repeats[np.isin(repeats, table["line"].to_numpy())])
        con.unregister("raw")
        return table, problems

    def _native_transform(self, con: duckdb.DuckDBPyConnection, chunk: Chunk,
                          steps: list[int | None]) -> pa.Table | None:
        """``_transform`` of the chunk's lines with their number arrays and token strings read already
        (``chunk.native``), those lists put back in; None when DuckDB refuses a line (the chunk is then read as it
        is, its odd lines found and reported as always). Leaves the lines it read registered as ``raw`` for the
        checks after it."""
        parts = [_result(f) for f in chunk.native]
        chunk.native = None  # not held past this parse
        if any(p is None for p in parts):
            return None
        text = parts[0][0] if len(parts) == 1 else pa.concat_arrays([p[0] for p in parts])
        arrays = {a: pa.concat_arrays([p[1][a] for p in parts]) if len(parts) > 1 else parts[0][1][a]
                  for a in parts[0][1]}
        _register(con, pa.table({"line": chunk.numbers, "j": text}), steps, max_chunksize=128)
        try:
            table, _ = self._transform(con, chunk.keys)
        except (duckdb.Error, UnicodeDecodeError):
            return None
        lines = table["line"].to_numpy()
        rows = None if len(lines) == len(chunk.numbers) else np.searchsorted(chunk.numbers, lines)
        for a, values in arrays.items():
            col = values if rows is None else values.take(rows)
            i = table.schema.get_field_index(a)
            table = table.set_column(i, a, col.cast(table.schema.field(i).type))
        return table

    def _transform_apart(self, con: duckdb.DuckDBPyConnection, raw: pa.Table, keys: set[str],
                         problems: list[list], steps: list[int | None]) -> tuple[pa.Table | None, pa.Table]:
        """(the transform, the lines kept) of lines that are valid JSON but that DuckDB refuses as a whole:
        halved until the records it refuses are found one by one; each is reported and left out, the rest
        kept. Registers the kept lines as ``raw`` (the checks after the transform read them)."""
        tables, refused, todo = [], [], [raw]
        while todo:
            part = todo.pop()
            _register(con, part, steps)
            try:
                tables.append(self._transform(con, keys)[0])
            except (duckdb.Error, UnicodeDecodeError) as e:
                if part.num_rows > 1:
                    half = part.num_rows // 2
                    todo += [part.slice(half), part.slice(0, half)]  # first half first: tables stay in line order
                else:
                    n = int(part["line"][0].as_py())
                    refused.append(n)
                    problems.append([n, "unreadable", f"valid JSON that could not be read: {_short(str(e), 160)}"])
        keep = raw.filter(pc.invert(pc.is_in(raw["line"], pa.array(refused, pa.int64()))))
        _register(con, keep, steps)
        return (pa.concat_tables(tables) if tables else None), keep

    def _transform(self, con: duckdb.DuckDBPyConnection, keys: set[str]) -> tuple[pa.Table, set[str]]:
        schema, ex, used = self._spec(keys)
        direct, by_path = _split_extras(schema, sorted(k for k in keys if k not in used))
        extras = sorted(direct + by_path)
        # The custom fields' values come out as one list per record, sorted out by lambdas and split into columns
        # in Python (``_extra_columns``): the same SQL for any number of keys. SQL per key made DuckDB's planning
        # superlinear (common subexpressions over ~20 expressions per key: 3 s for 300 keys, 100 s for 1,000).
        wide = bool(extras) and len(extras) > WIDE_EXTRAS
        if not extras:
            values = keyed = ""
        elif wide:
            # a map of each record's own keys, picked by name in Python: no struct of thousands of fields (its
            # planning grows with their square). A record holding a key twice gets no map: looked up by path.
            paths = f"[{', '.join(literal(_path(k)) for k in extras)}]"
            values = f"CASE WHEN _m IS NULL THEN json_extract(j, {paths}) ELSE map_values(_m) END"
            keyed = f", CASE WHEN _m IS NULL THEN [{', '.join(map(literal, extras))}] ELSE map_keys(_m) END AS _xk"
        else:
            schema.update({k: "JSON" for k in direct})
            # keys json_transform cannot take (the same name in another case as a key it has): looked up by path
            values = "[" + ", ".join(f"r.{ident(k)}" if k not in by_path else f"json_extract(j, {literal(_path(k))})"
                                     for k in extras) + "]"
            keyed = ""
        mapped = ", json_transform(j, '\"MAP(VARCHAR, JSON)\"') AS _m" if wide else ""
        if extras:
            values = f", list_transform({values}, lambda _v: ({self._unwrap('_v')})::VARCHAR) AS _xs{keyed}"
        step = self._step(ex["step"])

        def number(f: str) -> str:
            # _p_{f}: what is wrong (NULL when fine), _v_{f}: the bad value, for the message
            x, d = f"_x_{f}", _num(f"_x_{f}")
            return (f"CASE WHEN isfinite({d}) THEN {d} END AS {f}, "
                    f"CASE WHEN {x} IS NULL OR {x} = 'null' THEN 'missing' WHEN {d} IS NULL THEN 'type' "
                    f"WHEN NOT isfinite({d}) THEN 'nan' END AS _p_{f}, "
                    f"CASE WHEN {d} IS NULL OR NOT isfinite({d}) THEN {x} END AS _v_{f}")

        # _en the number, _es the text, _ef a NaN/Infinity given (left empty), _eo "[" or "{" for a list or object
        extra_sel = ""
        if extras:
            x, d = "_x", _num("_x")
            big = _big_integer(x)
            cases = {"n": f"""CASE WHEN {big} THEN NULL WHEN isfinite({d}) THEN {d} WHEN {x} = 'true' THEN 1.0::DOUBLE
                                   WHEN {x} = 'false' THEN 0.0::DOUBLE END""",
                     "s": f"CASE WHEN starts_with({x}, '\"') THEN {x}::JSON->>'$' WHEN {big} THEN {x} END",
                     # digits past 1e308 are text (``s``): the regexp of ``big`` runs only where the float is not finite
                     "f": f"CASE WHEN NOT isfinite({d}) THEN CASE WHEN NOT {big} THEN {x} END END",
                     "o": f"CASE WHEN starts_with({x}, '[') OR starts_with({x}, '{{') THEN left({x}, 1) END"}
            extra_sel = "".join(f", list_transform(_xs, lambda _x: {v}) AS _e{c}" for c, v in cases.items())
            extra_sel += ", _xk" if wide else ""
        texts = {"_x_step": step, "_x_reward": ex["reward"], "_x_ref_reward": ex["ref_reward"],
                 "_x_gt": ex["ground_truth"]}
        advantage = f"{ex['advantage']} AS advantage"
        if ex.get("advantage_raw"):
            texts["_x_advantage"] = ex["advantage_raw"]
            advantage = number("advantage")
        # a string step is read as a number (and reported); 3.0 is 3; anything else skips the record
        sx, sd = "_x_step", _num("_x_step")
        ss = _num("(_x_step::JSON->>'$')")
        whole = f"({sd} = round({sd}) AND isfinite({sd}))"  # an integral number
        # read as an integer from the text (exact past 2**53; NULL past the 64-bit range, which the DOUBLE
        # cast would make an error), once the DOUBLE says it is integral (the integer cast rounds 3.5)
        sx_int, ss_int = f"TRY_CAST({sx} AS BIGINT)", "TRY_CAST((_x_step::JSON->>'$') AS BIGINT)"
        helpers = "".join(f", {v} AS {ident(k)}" for k, v in ex.items() if k.startswith("_"))  # for _post
        table = _query(con, f"""
            SELECT line,
                   CASE WHEN {whole} THEN {sx_int}
                        WHEN starts_with({sx}, '"') AND {ss} = round({ss}) AND isfinite({ss}) THEN {ss_int}
                        END AS step,
                   CASE WHEN {sx} IS NULL OR {sx} = 'null' THEN 'missing' WHEN starts_with({sx}, '"') THEN 'VARCHAR'
                        WHEN NOT {whole} OR {sd} IS NULL OR {sx_int} IS NULL THEN 'other' END AS _p_step,
                   CASE WHEN NOT {whole} OR {sd} IS NULL OR {sx_int} IS NULL THEN {sx} END AS _v_step,
                   {ex['prompt']} AS prompt, {ex['response']} AS response, {number('reward')},
                   {ex['ref_response']} AS ref_response, {number('ref_reward')},
                   {_text_of("_x_gt")} AS ground_truth,
                   {ex['tokens']} AS tokens, {', '.join(f'{ex[a]} AS {a}' for a in ARRAYS)},
                   {ex['group_id']} AS group_id, {advantage} {extra_sel} {helpers}
            FROM (SELECT line, fs, r, {', '.join(f'({v})::VARCHAR AS {ident(k)}' for k, v in texts.items())} {values}
                  FROM (SELECT line, fs, {'j, ' if wide or by_path else ''}
                               json_transform(j, {literal(json.dumps(schema))}) AS r {mapped} FROM raw))""")
        return (_extra_columns(table, extras) if extras else table), used

    def _post(self, t: pa.Table) -> pa.Table:
        """Python-side fixes after the SQL (token ids spelled as strings)."""
        if pa.types.is_integer(t.schema.field("tokens").type.value_type):
            t = t.set_column(t.schema.get_field_index("tokens"), "tokens", spell_ids(t["tokens"], self.tokenizer))
        return t

    def _check(self, con, t: pa.Table, keys: list[str], problems: list[list], odd: np.ndarray,
               apart: bool = False) -> pa.Table | None:
        """The problems of a transformed chunk reported, its bad values emptied, its records without a step
        dropped. ``odd``: the lines where a text field may not be a string; ``apart``: the lines are of several
        chunks (``parse_many``), whose custom fields' numbers and texts are kept apart for ``_split``."""
        line = t["line"].to_numpy()
        names = self.fields()  # the file's own name of each common field (asked once: a report per row asks)
        shown = self.shown_names()  # ... as messages name it
        # step: required (flags come from SQL; Python only touches the bad rows)
        step_ok = _mask(pc.is_valid(t["step"]))
        for i in np.flatnonzero(_mask(pc.is_valid(t["_p_step"]))).tolist():
            kind, value = t["_p_step"][i].as_py(), _short(t["_v_step"][i].as_py())
            step = shown["step"]
            if not step_ok[i]:
                problems.append([int(line[i]), "missing_step", f"no {step}: record skipped"] if kind == "missing" else
                                [int(line[i]), "wrong_type", f"{step} is {value}, not an integer: record skipped"])
            elif kind == "VARCHAR" and not self.text_steps:
                problems.append([int(line[i]), "wrong_type", f"{step} is the string {value}: read as a number"])
        # prompt, response: a record without it (or with null) is reported, where the format reads it from a field
        # (in every chunk alike: a refresh may read only records without it)
        texts = self._text_keys()
        for f in ("prompt", "response"):
            if f in texts:
                for i in np.flatnonzero(_mask(t[f].is_null()) & step_ok).tolist():
                    problems.append([int(line[i]), "missing_field", f"no {texts[f]}: left empty"])
        # prompt, response, ref_response given as another JSON value: the transform made it its JSON text
        odd = odd[np.isin(odd, line[step_ok])]
        if len(odd) and texts:
            types = ", ".join(f"json_type(j, {literal(_path(k))})" for k in texts.values())
            for n, *kinds in con.execute(f"SELECT line, {types} FROM raw WHERE line IN "
                                         f"({', '.join(map(str, odd.tolist()))}) ORDER BY line").fetchall():
                for key, kind in zip(texts.values(), kinds):
                    if kind not in (None, "VARCHAR", "NULL"):
                        problems.append([n, "wrong_type", f"{_short(key)} is {_JSON_KINDS.get(kind, kind)}, "
                                                          "not text: shown as its JSON"])
        # what a format's own checks found (``_reports``: "kind|message" per row)
        if "_reports" in t.column_names:
            reports = t["_reports"]
            for i in np.flatnonzero(_mask(pc.greater(pc.list_value_length(reports), 0)) & step_ok).tolist():
                for r in reports[i].as_py():
                    kind, _, message = r.partition("|")
                    problems.append([int(line[i]), kind, message])
        # reward, ref_reward (and advantage, where it is a plain value): kept empty when missing or bad
        for f in (*NUMBER_FIELDS, "advantage"):
            if f"_p_{f}" not in t.column_names:
                continue
            flags = t[f"_p_{f}"]
            flagged = _mask(pc.is_valid(flags)) & step_ok
            if f != "reward":  # only a missing reward is reported: most logs have no ref_reward (or advantage)
                flagged &= ~_mask(pc.equal(flags, "missing"))
            for i in np.flatnonzero(flagged).tolist():
                kind, value = flags[i].as_py(), t[f"_v_{f}"][i].as_py()
                key = shown[f]
                if kind == "missing":
                    problems.append([int(line[i]), "missing_reward", f"no {key}: left empty"])
                elif kind == "type":
                    problems.append([int(line[i]), "wrong_type", f"{key} is {_short(value)}, not a number: left empty"])
                else:
                    problems.append([int(line[i]), "nan", f"{key} is {value}: left empty"])
        # token arrays: present but not a list, NaN / Infinity / null values, unequal lengths
        cols = {}
        lens = {}
        for f in ("tokens", *ARRAYS):
            col = t[f]  # chunked as DuckDB made it: joining the chunks would copy every token
            key = names[f]
            nulls = _mask(col.is_null()) & step_ok
            there: list = []
            if key in keys and nulls.any():
                cand = line[nulls].tolist()
                path = literal(_path(key))
                there = con.execute(f"SELECT line FROM raw WHERE line IN ({', '.join(map(str, cand))}) "
                                    f"AND json_exists(j, {path}) AND json_type(j, {path}) <> 'NULL'").fetchall()
                kind = ("token ids" if self.token_ids else "strings") if f == "tokens" else "numbers"
                problems += [[n, "wrong_type", f"{key} is not a list of {kind}: ignored"] for (n,) in there]
            # the response is its tokens (unless mapped to a text field): none, no text
            if f == "tokens" and self.tokens_required and "response" not in self.columns and nulls.any():
                wrong = {n for (n,) in there}
                problems += [[n, "missing_field", f"no {shown[f]}: the response is left empty"]
                             for n in line[nulls].tolist() if n not in wrong]
            if f != "tokens" and col.null_count < len(col):
                col = self._clean(col, line, step_ok, shown[f], problems)
            elif f == "tokens":
                _null_tokens(col, line, step_ok, shown[f], problems)
            cols[f] = col
            lens[f] = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(float)
        present = [f for f in cols if cols[f].null_count < len(cols[f])]
        if len(present) > 1:
            stack = np.vstack([np.nan_to_num(lens[f], nan=-1) for f in present])
            has = stack >= 0
            hi = np.where(has, stack, -np.inf).max(axis=0)
            lo = np.where(has, stack, np.inf).min(axis=0)
            for i in np.flatnonzero((hi != lo) & np.isfinite(hi) & step_ok).tolist():
                desc = ", ".join(f"{shown[f]}={int(lens[f][i])}"
                                 for f in present if not np.isnan(lens[f][i]))
                problems.append([int(line[i]), "length_mismatch",
                                 f"token arrays differ in length ({desc}): missing values left empty"])
        for f, col in cols.items():
            t = t.set_column(t.schema.get_field_index(f), f, col)
        if not step_ok.all():
            t = t.filter(pa.array(step_ok))
        if t.num_rows == 0:
            return None
        reward, ref = t["reward"].to_numpy(zero_copy_only=False), t["ref_reward"].to_numpy(zero_copy_only=False)
        out = {c: t[c] for c in ("line", "step", "prompt", "response", "reward", "ref_response", "ref_reward")}
        out["reward_gap"] = pa.array(reward - ref, pa.float64(), from_pandas=True)
        out["ground_truth"] = t["ground_truth"]
        out["response_chars"] = pc.utf8_length(t["response"])
        # the characters of default pad tokens in it: the run shows responses without them (``pad_token``)
        out["response_pad_chars"] = pc.multiply(count_literal(t["response"], DEFAULT_PAD_TOKEN), len(DEFAULT_PAD_TOKEN))
        for name in ("group_id", "advantage"):  # optional: only where the log has them
            if t[name].null_count < t.num_rows:
                out[name] = t[name]
        # of the records kept, as every other check of a field (a record skipped for its step gets that report alone,
        # in whatever chunk it is read: these look at every raw line, which a chunk of only skipped ones never does)
        held = set(t["line"].to_numpy().tolist()) if "" in keys or LONG_KEY in keys else set()
        if "" in keys:  # a field with an empty name: no column can be named after it
            there = con.execute("SELECT line FROM raw WHERE list_contains(json_keys(j), '')").fetchall()
            problems += [[n, "unnamed_field", "a field with an empty name: its value is not kept"]
                         for (n,) in there if n in held]
        if LONG_KEY in keys:  # names too long to be read from the bytes: the lines with a long key not read
            found = [k for k in keys if len(k) > 10000]  # (64 KB written is 10,923 bytes or more once unescaped)
            there = con.execute("SELECT line FROM raw WHERE list_bool_or(list_transform(json_keys(j), "
                                "lambda k: strlen(k) > 10000 AND NOT list_contains(?, k)))", [found]).fetchall()
            problems += [[n, "unnamed_field", "a field whose name is longer than 64 KB: its value is not kept"]
                         for (n,) in there if n in held]
        kept = t["line"].to_numpy()  # the lines of the records kept (``line`` and ``step_ok``: of them all)
        first_lines = {}
        for name in t.column_names:
            if name.startswith("_n_"):
                key = name[3:]
                nums, strs = t[name], t["_s_" + key]
                for i in np.flatnonzero(_mask(t["_f_" + key].is_valid())).tolist():
                    value = _short(t["_f_" + key][i].as_py())
                    problems.append([int(kept[i]), "nan", f"{_short(key)} is {value}: left empty"])
                if nums.null_count == len(nums) and strs.null_count == len(strs):
                    # no scalar value here: lists or objects (a problem if another part holds numbers or text:
                    # the run tells, ``listed_column``), or a key candidate that is not one
                    objects = t["_o_" + key]
                    if objects.null_count < len(objects):
                        out[listed_column(key)] = objects
                    continue
                if apart:  # chunks parsed together: each chunk's values are settled on their own (``_split``)
                    out[stored_column(key) + _NUMBERS], out[stored_column(key) + _TEXTS] = nums, strs
                    out[stored_column(key) + _OBJECTS] = t["_o_" + key]
                    continue
                problems += _non_scalars(key, t["_o_" + key], kept)
                values = _scalar_values(nums, strs)
                # stored under a name made of the key alone; the run names the column (``column_names``)
                out[stored_column(key)] = values
                first_lines[key] = int(kept[np.flatnonzero(_mask(values.is_valid()))[0]])
        for f in ("tokens", *ARRAYS):
            out[f] = t[f]
        return pa.table(out).replace_schema_metadata({FIRST_LINES: json.dumps(first_lines)})

    def _clean(self, col: pa.ChunkedArray, line: np.ndarray, step_ok: np.ndarray, key: str,
               problems: list[list]) -> pa.ChunkedArray:
        """NaN / Infinity become missing values; every affected line is reported."""
        out, at = [], 0
        for chunk in col.chunks:
            n = len(chunk)
            out.append(self._clean_chunk(chunk, line[at:at + n], step_ok[at:at + n], key, problems))
            at += n
        return pa.chunked_array(out, type=col.type)

    @staticmethod
    def _clean_chunk(col: pa.Array, line: np.ndarray, step_ok: np.ndarray, key: str,
                     problems: list[list]) -> pa.Array:
        offsets = col.offsets.to_numpy()
        values = col.values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets = offsets - offsets[0]
        vals = values.to_numpy(zero_copy_only=False)
        bad = ~np.isfinite(vals)  # nulls come out as NaN too
        if not bad.any():
            return col
        nulls = _mask(values.is_null())
        nbad, nnull = _per_row(bad, offsets), _per_row(nulls, offsets)
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


_JSON_KINDS = {"OBJECT": "an object", "ARRAY": "a list", "BOOLEAN": "a boolean", "BIGINT": "a number",
               "UBIGINT": "a number", "DOUBLE": "a number"}
_VIEWS: dict[int, tuple] = {}  # id of a cursor -> (the cursor, {chunk view: the relation reading it})


def _result(future: Future):
    """A future's result; None if it failed (the chunk is then read as it is: the C reader is only a shortcut)."""
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - MemoryError, say: DuckDB reads the chunk instead
        return None


def _register(con: duckdb.DuckDBPyConnection, raw: pa.Table, steps: list[int | None],
              max_chunksize: int | None = None) -> None:
    """``raw`` (line, j) as the view ``raw``, with ``fs``: the step the name of each line's file gives (``steps``:
    one per chunk parsed together, see ``parse_many``)."""
    n = raw.num_rows
    if all(s is None for s in steps):
        fs = pa.nulls(n, pa.int64())
    elif len(steps) == 1:
        fs = pa.array(np.full(n, steps[0], np.int64))
    else:
        k = raw["line"].to_numpy() // BATCH_STRIDE
        known = np.array([s is not None for s in steps])
        fs = pa.array(np.array([s or 0 for s in steps], np.int64)[k], mask=~known[k])
    raw = raw.append_column("fs", fs)
    con.register("raw", pa.Table.from_batches(raw.to_batches(max_chunksize=max_chunksize)) if max_chunksize else raw)


_NUMBERS, _TEXTS, _OBJECTS = "\x00n", "\x00s", "\x00o"  # a custom field's numbers, texts, lists or objects:
# kept apart for ``_split``


def _non_scalars(key: str, kinds: pa.ChunkedArray | pa.Array, lines: np.ndarray) -> list[list]:
    """The reports of a field holding numbers or text whose value in some records is a list or an object (``kinds``:
    its first character there, "[" or "{"): no column cell can hold it, so it is left empty."""
    return [[int(lines[i]), "wrong_type", non_scalar_message(key, kinds[i].as_py())]
            for i in np.flatnonzero(_mask(kinds.is_valid())).tolist()]


def non_scalar_message(key: str, kind: str) -> str:
    """The report of a custom field holding a list (``kind`` "[") or an object ("{") where elsewhere it holds numbers
    or text: made here for a part that holds both, and by the run for parts apart (``Run._listed_in``)."""
    return f"{_short(key)} is {'a list' if kind == '[' else 'an object'} here, a number or text elsewhere: left empty"


def _scalar_values(nums: pa.ChunkedArray, strs: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """A custom field's column: its numbers, its texts, or (a field mixing both) everything as text."""
    if strs.null_count == len(strs):
        return nums
    if nums.null_count == len(nums):
        return strs
    return pc.coalesce(strs, number_text(nums))


def _split(table: pa.Table | None, problems: list[list], n: int) -> list[tuple[pa.Table | None, list[list]]]:
    """A table and problems of ``n`` chunks parsed together (``parse_many``) as each chunk's, with its own line
    numbers; a column a chunk has no value in is left out of its table, as ``parse`` leaves it out."""
    found: list[list[list]] = [[] for _ in range(n)]
    for p in problems:
        k, line = divmod(p[0], BATCH_STRIDE)
        found[k].append([line, *p[1:]])
    if table is None:
        return [(None, f) for f in found]
    line = table["line"].to_numpy()
    k = line // BATCH_STRIDE
    out = []
    for j in range(n):
        mask = k == j
        if not mask.any():
            out.append((None, found[j]))
            continue
        t = table.filter(pa.array(mask))
        own = line[mask] - j * BATCH_STRIDE
        t = t.set_column(t.schema.get_field_index("line"), "line", pa.array(own))
        # a custom field as this chunk alone holds it: numbers, texts, or both as text (as ``_check`` settles it)
        names, columns = [], []
        for c in t.column_names:
            if c.endswith(_NUMBERS):
                name = c[:-len(_NUMBERS)]
                nums, strs = t[c], t[name + _TEXTS]
                objects = t[name + _OBJECTS]
                if nums.null_count < t.num_rows or strs.null_count < t.num_rows:
                    names.append(name)
                    columns.append(_scalar_values(nums, strs))
                    found[j] += _non_scalars(stored_key(name), objects, own)
                elif objects.null_count < t.num_rows:  # lists or objects only, in this chunk: the run tells
                    names.append(listed_column(stored_key(name)))
                    columns.append(objects)
            elif c.startswith(LISTED_PREFIX):  # lists or objects only, in all the chunks: kept where this has any
                if t[c].null_count < t.num_rows:
                    names.append(c)
                    columns.append(t[c])
            elif not c.endswith((_TEXTS, _OBJECTS)):
                names.append(c)
                columns.append(t[c])
        t = pa.Table.from_arrays(columns, names=names)
        t = t.drop_columns([c for c in ("group_id", "advantage") if c in names and t[c].null_count == t.num_rows])
        first = {stored_key(c): int(own[np.flatnonzero(_mask(t[c].is_valid()))[0]])
                 for c in t.column_names if c.startswith(STORED_PREFIX)}
        out.append((t.replace_schema_metadata({FIRST_LINES: json.dumps(first)}), found[j]))
    return out


def count_literal(texts: pa.ChunkedArray | pa.Array, needle: str) -> pa.ChunkedArray | pa.Array:
    """How often ``needle`` occurs in each text, as ``pc.count_substring`` counts it (null for null), ~6x faster:
    the places of its first byte are found in the texts' bytes with numpy, and the rest compared there only
    (count_substring took ~5% of a cold open, for the pad tokens in the responses). A needle whose first byte
    recurs in it, whose matches may overlap, is left to count_substring."""
    raw = needle.encode()
    if not raw or raw[0] in raw[1:]:
        return pc.count_substring(texts, needle)
    if isinstance(texts, pa.ChunkedArray):  # joined: a search costs ~0.2 ms however few the texts
        texts = texts.combine_chunks()
    large = pa.types.is_large_string(texts.type)
    offsets = np.frombuffer(texts.buffers()[1], np.int64 if large else np.int32)[texts.offset:][:len(texts) + 1]
    counts = np.zeros(len(texts), np.int64)
    if len(texts) and offsets[-1] > offsets[0]:
        data = np.frombuffer(texts.buffers()[2], np.uint8)
        lo, hi = int(offsets[0]), int(offsets[-1])
        at = find_byte(data[lo:hi], raw[0]) + lo
        at = at[at + len(raw) <= hi]
        at = at[equal_at(data, at, raw)]
        row = np.searchsorted(offsets, at, side="right") - 1
        inside = at + len(raw) <= offsets[row + 1]  # not across the end of one text into the next
        counts = np.bincount(row[inside], minlength=len(texts))
    return pa.array(counts, pa.int64() if large else pa.int32(), mask=_mask(texts.is_null()))


def _per_row(flags: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """How many of each list row's values are flagged (``offsets``: the rows' bounds in ``flags``)."""
    c = np.concatenate([[0], np.cumsum(flags)])
    return c[offsets[1:]] - c[offsets[:-1]]


def _null_tokens(col: pa.ChunkedArray, line: np.ndarray, step_ok: np.ndarray, key: str, problems: list[list]) -> None:
    """Report the records whose token list holds nulls (shown as empty tokens)."""
    at = 0
    for chunk in col.chunks:
        if chunk.values.null_count:  # the usual case costs one look at a count
            offsets = chunk.offsets.to_numpy()
            counts = _per_row(_mask(chunk.values.is_null()), offsets)
            for i in np.flatnonzero(counts > 0).tolist():
                if step_ok[at + i]:
                    problems.append([int(line[at + i]), "wrong_type",
                                     f"{key} has {int(counts[i])} null or invalid token(s): shown empty"])
        at += len(chunk)


def _big_integer(x: str) -> str:
    """SQL: whether the JSON text ``x`` is an integer no float holds exactly (past 2**53: an id or a hash, kept as
    its digits, not rounded). Short texts are ruled out first: the test runs on every custom value."""
    return (f"(CASE WHEN length({x}) < 16 OR NOT regexp_full_match({x}, '-?[0-9]+') THEN false "
            f"WHEN length(ltrim({x}, '-')) > 16 THEN true ELSE abs({x}::HUGEINT) > 9007199254740992 END)")


def _extra_columns(t: pa.Table, extras: list[str]) -> pa.Table:
    """The transform's custom values (lists per record: ``_en``, ``_es``, ``_ef``, ``_eo``; each record's keys in
    ``_xk``, or ``extras`` in order without it) as columns ``_n_{key}``, ``_s_{key}``, ``_f_{key}``, ``_o_{key}``."""
    lists = {c: t["_e" + c].combine_chunks() for c in "nsfo"}
    first = lists["n"]
    offsets = first.offsets.to_numpy()
    parent = pc.list_parent_indices(first).to_numpy()
    flat = {c: pc.list_flatten(a) for c, a in lists.items()}  # the four lists are alike: one transform of _xs
    if "_xk" in t.column_names:  # a map per record: its keys named by position in ``extras`` (others: null)
        at = pc.index_in(pc.list_flatten(t["_xk"].combine_chunks()), value_set=pa.array(extras, pa.string()))
        keep = _mask(at.is_valid())
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


def _split_extras(schema: dict[str, str], keys: list[str]) -> tuple[list[str], list[str]]:
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


def _path(key: str) -> str:
    """A JSON path naming one top-level key (DuckDB's ``$."..."``, inner quotes escaped)."""
    return '$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
        head = b[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")
        if len(b) > BIG_LINE and head and not head.startswith(b"{"):
            # no record, whatever it is: parsing it (a whole run json.dump'ed as one list) took a minute and GBs
            what = "a JSON list" if head.startswith(b"[") else "not a JSON object"
            problems.append([n, "not_an_object", f"{what} of {len(b) / 2**20:.0f} MB on one line: skipped "
                                                 "(one record per line is expected)"])
            continue
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
            obj = json.loads(text, parse_int=_any_int)
        except RecursionError:  # nested deeper than Python's parser goes, not DuckDB's: an object is left to it
            if strict or not text.startswith("{"):
                problems.append([n, "malformed_json", _json_error(text)])
                continue
            obj = {}
        except ValueError:
            problems.append([n, "malformed_json", _json_error(text)])
            continue
        if not isinstance(obj, dict):
            problems.append([n, "not_an_object", f"a JSON {_json_kind(obj)}, not an object: skipped"])
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


def _duplicate_key_reports(con: duckdb.DuckDBPyConnection, raw: pa.Table, lines: np.ndarray) -> list[list]:
    """The reports of the records among ``lines`` (of ``raw``) that hold a key twice at their top: DuckDB reads the
    first value, the others are lost. Each line is parsed in Python (``repeated_keys`` found these few); one nested
    deeper than Python's parser goes has its keys listed by DuckDB."""
    out = []
    at = np.searchsorted(raw["line"].to_numpy(), lines)
    texts = raw["j"]
    for n, i in zip(lines.tolist(), at.tolist()):
        objects: list = []
        try:
            text = texts[i].as_py()
        except UnicodeDecodeError:  # bytes not UTF-8 (repaired before this: not met here)
            continue
        try:  # the hook sees every object, the record's own last
            json.loads(text, parse_int=_any_int, object_pairs_hook=lambda pairs, seen=objects: seen.append(pairs) or {})
            keys = [key for key, _ in objects[-1]]
        except (ValueError, RecursionError):
            try:
                keys = con.execute("SELECT json_keys(?)", [text]).fetchall()[0][0] or []
            except duckdb.Error:
                continue
        counts: dict[str, int] = {}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        out += [[n, "duplicate_key", f"{_short(key)} is written {k} times: its first value is read"]
                for key, k in counts.items() if k > 1]
    return out


def _mask(arr) -> np.ndarray:
    """A pyarrow boolean array as a numpy bool array (nulls false), without a Python loop."""
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    return arr.fill_null(False).to_numpy(zero_copy_only=False)


def _any_int(digits: str) -> int:
    """``parse_int`` for a parse whose values are not kept (only the types and keys): any number of digits (Python's
    int() refuses more than 4,300; DuckDB reads them)."""
    return 0


def _json_error(text: str) -> str:
    """A precise reason, from Python's parser (only ever run on the few bad lines)."""
    try:
        json.loads(text, parse_int=_any_int)  # the JSON's fault, not the 4,300-digit limit of Python's int
    except ValueError as e:
        return f"not valid JSON ({e}): {_short(text.strip(), 60)!r}"
    except RecursionError:
        return f"nested too deeply to read: {_short(text.strip(), 60)!r}"
    return f"not valid JSON: {_short(text.strip(), 60)!r}"


def _json_kind(value: object) -> str:
    """The JSON name of a parsed value's type (a message's words, not Python's)."""
    if value is None:
        return "null"
    return {bool: "boolean", str: "string", list: "array"}.get(type(value), "number")
