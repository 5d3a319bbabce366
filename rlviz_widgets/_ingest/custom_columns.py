"""Custom fields' columns: how a record key is stored in the cache parts and named in ``samples``.

A custom field is stored under a name made of its key alone, unique even ignoring case (DuckDB's names
do): what it is called in ``samples`` depends on the other keys of the run, which a part cannot know
("a b" and "a-b" both want ``a_b``; "acc" and "Acc" are one name to DuckDB). The run names them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from rlviz_widgets._ingest.metrics import ARRAYS

# the common columns (and RunSet's run): a custom field named like one is kept with a trailing "_"
RESERVED = {"prompt", "response", "ref_response", "reward", "ref_reward", *ARRAYS, "step", "response_tokens",
            "ground_truth", "group_id", "advantage", "sample_id", "file", "line", "n_tokens", "response_chars",
            "response_pad_chars", "reward_gap", "file_no", "tokens", "log_ratio_mean", "log_ratio_sum", "kl_mean",
            "kl_sum", "logprob_mean", "value_mean", "token_reward_sum", "run", "id", "n_trained_tokens", "n_turns",
            "n_tool_calls", "turns"}
_SAFE = re.compile(r"\W+")  # letters and digits of any script stay
STORED_PREFIX = "x_"
LISTED_PREFIX = "o_"  # a part's column of where a custom field held a list or an object ("[" or "{") and no part
# line held a number or text in it: whether that is a problem is known only once the run has every part
FIRST_LINES = b"rlviz.first_lines"  # Arrow metadata of a parsed table: custom key -> first line with a value


def plain_column(key: str) -> str:
    """A custom field's key as a column name: letters and digits kept, the rest ``_``."""
    return _SAFE.sub("_", key).strip("_") or "field"


def extra_column(key: str) -> str:
    """The samples column a custom scalar field lands in, unless another field took that name first."""
    name = plain_column(key)
    return name + "_" if name.lower() in RESERVED else name


def stored_column(key: str) -> str:
    """The cache parts' column of a custom field (its key, hex-encoded)."""
    return STORED_PREFIX + key.encode("utf-8", "surrogatepass").hex()


def stored_key(column: str) -> str:
    return bytes.fromhex(column[len(STORED_PREFIX):]).decode("utf-8", "surrogatepass")


def listed_column(key: str) -> str:
    """The cache parts' column of where a custom field held a list or an object, in a part with no scalar of it."""
    return LISTED_PREFIX + key.encode("utf-8", "surrogatepass").hex()


def listed_key(column: str) -> str:
    return bytes.fromhex(column[len(LISTED_PREFIX):]).decode("utf-8", "surrogatepass")


def column_names(keys: Iterable[str], known: dict[str, str]) -> dict[str, str]:
    """Give each custom key not in ``known`` its samples column; returns ``known``, updated.

    A key gets its cleaned name (``extra_column``) unless a common column or another key has it (ignoring
    case), then the cleaned name and a short hash of the key. Names given stay: a column keeps its meaning
    for as long as the run is open. Among new keys, one that is its own cleaned name comes first (``a_b``
    before ``a b``), then lower case (``acc`` before ``Acc``), so a run opened afresh names them alike.
    """
    taken = {v.lower() for v in known.values()}
    for key in sorted({k for k in keys if k not in known}, key=lambda k: (extra_column(k) != k, k != k.lower(), k)):
        column = extra_column(key)
        if column.lower() in taken:
            column = f"{column}_{hashlib.sha1(key.encode('utf-8', 'surrogatepass')).hexdigest()[:6]}"
            while column.lower() in taken:  # a key spelled like a renamed one: rare enough for a plain suffix
                column += "_"
        taken.add(column.lower())
        known[key] = column
    return known




def number_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Numbers of a field that also holds text, as text the way DuckDB writes a DOUBLE (``18.0``, ``1e+16``; it
    is Python's repr): parts that hold only the numbers are turned to text by DuckDB when the run reads them
    with parts holding text, so each value reads the same however the lines fell into parts."""
    return pa.array([None if v is None else repr(float(v)) for v in values.to_pylist()], pa.string())


def load_names(path: Path) -> dict[str, str]:
    """The names a run was given when last open (``save_names``): a run opened again names its fields alike,
    though the keys came in another order (``Acc`` before ``acc`` while it was followed)."""
    try:
        names = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in names.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(names, dict) \
        else {}


def save_names(path: Path, names: dict[str, str]) -> None:
    """Keep a run's names for its next open. Best effort: a read-only cache names afresh."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(names, f)
        os.replace(tmp, path)
    except OSError:
        pass
