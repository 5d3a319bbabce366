"""Columns worked out on C's thread from the lists it read (``native.read_arrays_later``), while the parsing
thread runs DuckDB on the chunk before: the per-sample mismatch figures and what a format derives itself
(``JsonlFormat.native_derive``). They are set on the table after the SQL, as the lists a column takes whole are;
those steps later (the decode, the part's figures) find them made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa

from rlviz_widgets._ingest.mismatch_metrics import per_sample
from rlviz_widgets._ingest.readers.jsonl.format import JsonlFormat
from rlviz_widgets._ingest.readers.jsonl.sql import field_ref
from rlviz_widgets._ingest.readers.mismatch_fields import helper

FIGURE_INPUTS = ("inference_logprob", "trainer_logprob", "entropy", "logged_mismatch_kl", "is_masked")
Derive = Callable[[Mapping[str, pa.Array]], dict[str, pa.Array]]


def deriver(ex: Mapping[str, str | None], direct: Mapping[str, str], read: set[str], fmt: JsonlFormat,
            fields: Mapping[str, str], tokenizer) -> Derive | None:
    """What to work out of C's lists (record key -> list) for a chunk whose SQL is ``ex`` and whose lists C reads
    (``read``; ``direct``: column -> key, those set whole): None for nothing."""
    figures = _figure_keys(ex, direct, read)
    own = fmt.native_derive
    if figures is None and own is None:
        return None

    def derive(arrays: Mapping[str, pa.Array]) -> dict[str, pa.Array]:
        out = own(arrays, fields, tokenizer) if own is not None else {}
        if figures is not None:
            inputs, trained = figures
            table = pa.table({f: arrays[k] for f, k in inputs.items()}
                             | ({"trained": arrays[trained].cast(pa.list_(pa.bool_()))} if trained else {}))
            out |= per_sample(table)
        return out

    return derive


def _figure_keys(ex: Mapping[str, str | None], direct: Mapping[str, str], read: set[str]
                 ) -> tuple[dict[str, str], str | None] | None:
    """({mismatch field: key} of the figures' inputs, the loss mask's key) where every input the SQL gives is a
    list C reads whole and the mask, if any, one C reads too; else None (the part's figures are worked out as it is
    written)."""
    wanted = [f for f in FIGURE_INPUTS if ex.get(helper(f))]
    if not {"inference_logprob", "trainer_logprob", "entropy"} & set(wanted) \
            or any(helper(f) not in direct for f in wanted):
        return None
    mask = ex.get("_trained")
    trained = next((k for k in read if mask == field_ref(k)), None)
    if mask and trained is None:
        return None
    return {f: direct[helper(f)] for f in wanted}, trained
