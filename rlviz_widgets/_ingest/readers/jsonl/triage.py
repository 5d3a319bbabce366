"""The lines DuckDB cannot read as they are, sorted out in Python: blank, indented, not UTF-8, not JSON, not an
object (``repair``); and the records that hold a key twice (``duplicate_key_reports``). Only ever the few lines the
key scan or DuckDB point at."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.lines import line_bytes
from rlviz_widgets._problems import short as _short

BIG_LINE = 1 << 20  # a line this long that is no object is reported without parsing it


def repair(raw: pa.Table, idx, problems: list[list], strict: bool = False) -> pa.Table:
    """Re-read the lines at ``idx`` in Python: fix what can be fixed, report and drop the rest."""
    idx = sorted(set(int(i) for i in idx))
    col = raw["j"].combine_chunks()
    nums = raw["line"].to_numpy()
    keep = np.ones(raw.num_rows, dtype=bool)
    fixed_lines, fixed_texts = [], []
    for i in idx:
        n = int(nums[i])
        keep[i] = False
        text = _object_text(n, line_bytes(col, i), problems, strict)
        if text is not None:
            fixed_lines.append(n)
            fixed_texts.append(text)
    out = raw.filter(pa.array(keep))
    if fixed_lines:
        fixed = pa.table({"line": pa.array(fixed_lines, pa.int64()), "j": pa.array(fixed_texts, pa.large_string())})
        out = pa.concat_tables([out, fixed]).sort_by("line")
    return out


def _object_text(n: int, b: bytes, problems: list[list], strict: bool) -> str | None:
    """Line ``n``'s bytes ``b`` as the text of a JSON object DuckDB can read, or None (reported)."""
    head = b[:4096].lstrip(b" \t\r\n\xef\xbb\xbf")
    if len(b) > BIG_LINE and head and not head.startswith(b"{"):
        # no record, whatever it is: parsing it (a whole run json.dump'ed as one list) took a minute and GBs
        what = "a JSON list" if head.startswith(b"[") else "not a JSON object"
        problems.append([n, "not_an_object", f"{what} of {len(b) / 2**20:.0f} MB on one line: skipped "
                                             "(one record per line is expected)"])
        return None
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        text = b.decode("utf-8", errors="replace")
        problems.append([n, "non_utf8", "bytes that are not UTF-8: shown as \ufffd"])
    text = text.strip().lstrip("\ufeff")  # a UTF-8 byte order mark (Windows tools) opens some files
    if not text:
        problems.append([n, "empty_line", "blank line"])
        return None
    try:
        obj = json.loads(text, parse_int=_any_int)
    except RecursionError:  # nested deeper than Python's parser goes, not DuckDB's: an object is left to it
        if strict or not text.startswith("{"):
            problems.append([n, "malformed_json", _json_error(text)])
            return None
        obj = {}
    except ValueError:
        problems.append([n, "malformed_json", _json_error(text)])
        return None
    if not isinstance(obj, dict):
        problems.append([n, "not_an_object", f"a JSON {_json_kind(obj)}, not an object: skipped"])
    elif strict:
        problems.append([n, "malformed_json", f"not valid JSON for DuckDB: {_short(text, 60)!r}"])
    else:
        return text
    return None


def duplicate_key_reports(con: duckdb.DuckDBPyConnection, raw: pa.Table, lines: np.ndarray) -> list[list]:
    """The reports of the records among ``lines`` (of ``raw``) that hold a key twice at their top: DuckDB reads the
    first value, the others are lost. Their top keys are listed by DuckDB in one query (``json_keys`` keeps a
    key written twice): a record of nested objects (chat messages) is flagged by ``repeated_keys`` on every line,
    and parsing each in Python cost more than reading it."""
    if not len(lines):
        return []
    at = np.searchsorted(raw["line"].to_numpy(), lines)
    con.register("_repeated", pa.table({"line": lines, "j": raw["j"].take(pa.array(at))}))
    try:
        rows = con.execute("SELECT line, json_keys(j) FROM _repeated ORDER BY line").fetchall()
    except duckdb.Error:  # (a line DuckDB cannot take: looked at one by one)
        rows = []
        for n, i in zip(lines.tolist(), at.tolist()):
            try:
                rows.append((n, con.execute("SELECT json_keys(?)", [raw["j"][i].as_py()]).fetchall()[0][0]))
            except (duckdb.Error, UnicodeDecodeError):
                continue
    finally:
        con.unregister("_repeated")
    out = []
    for n, keys in rows:
        counts: dict[str, int] = {}
        for key in keys or []:
            counts[key] = counts.get(key, 0) + 1
        out += [[n, "duplicate_key", f"{_short(key)} is written {k} times: its first value is read"]
                for key, k in counts.items() if k > 1]
    return out


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
