"""``JsonlFormat``: everything that sets one JSON-lines format apart, in one place (the pipeline reads it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

# (json_transform schema, SQL per common field over the record ``r``, record keys used), changed in place
Adjust = Callable[[dict[str, str], dict[str, str | None], set[str], Mapping[str, str], set[str]], None]


@dataclass(frozen=True)
class JsonlFormat:
    """Where a format's records keep each common field, and how its files are named."""

    name: str
    file_pattern: str | None = None  # names a folder's files must match (None: every *.jsonl)
    step_pattern: str | None = None  # the step in a file's name, for records without one
    renames: Mapping[str, str] = field(default_factory=dict)  # common field -> the format's own key for it
    group_keys: tuple[str, ...] = ("uid", "group_index", "group_id", "prompt_idx")  # first present: the GRPO group
    kept_group_keys: tuple[str, ...] = ("prompt_idx",)  # group keys that stay custom columns too (an index to sort by)
    text_steps: bool = False  # the format writes steps as strings ("12": read, not reported)
    token_ids: bool = False  # the format logs token ids (spelled with ``tokenizer``), not token strings
    tokens_required: bool = False  # the response is read from the tokens (a record without them is reported)
    own_renames: frozenset[str] = frozenset()  # fields written beside a common column of that name: the custom
    # column they get (``reward_``) is no news to report
    shown: Mapping[str, str] = field(default_factory=dict)  # common field -> the key messages name, for fields read
    # through an expression (unless ``columns=`` maps them)
    unwrap: Callable[[str], str] | None = None  # SQL: a custom field's JSON value as the format means it
    adjust: Adjust | None = None  # the format's own SQL for some fields, over the common spec
    decode: Callable[[pa.Table, object], pa.Table] | None = None  # Python-side fixes of a parsed table (tokenizer)
    native_derive: Callable[[Mapping[str, pa.Array], Mapping[str, str], object], dict[str, pa.Array]] | None = None
    # columns of the lists C read (record key -> list; the fields; the tokenizer), worked out on its thread: the
    # decode finds them (``jsonl.derive``)
