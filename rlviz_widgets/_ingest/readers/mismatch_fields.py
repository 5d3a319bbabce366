"""The per-token rollout–trainer mismatch and entropy fields (issue 32) a reader may give, and how they are stored.

A reader's SQL gives field ``f`` as the helper column ``_k_{f}`` (``helper``); the checks keep those with a value
under the stored name (``taken``); the token store keeps them per sample (list columns, ``COLUMNS``), and the tokens
frame names them as ``TOKEN_NAMES`` says. Logs without them store none, and no column appears.
"""

from __future__ import annotations

import pyarrow as pa

# stored list column -> its type; the sampler's and the trainer's log-probs, the entropy and the per-token
# advantage, then what a log computed itself (prime-rl's token export), kept as logged
FLOATS = ("inference_logprob", "trainer_logprob", "entropy", "token_advantage", "logged_mismatch_kl",
          "logged_log_importance_ratio", "logged_importance_ratio", "logged_prob_delta")
BOOLS = ("is_masked", "is_masked_high", "is_masked_low")
COLUMNS = {**{f: pa.list_(pa.float32()) for f in FLOATS}, **{f: pa.list_(pa.bool_()) for f in BOOLS}}
TOKEN_NAMES = {f: f for f in COLUMNS} | {"token_advantage": "advantage"}  # stored -> tokens frame column
PREFIX = "_k_"


def helper(field: str) -> str:
    """The helper column a reader's SQL gives ``field`` in (``JsonlFormat.adjust``'s ``ex`` key)."""
    return PREFIX + field


def taken(t: pa.Table) -> dict[str, pa.ChunkedArray]:
    """The fields of a parsed chunk that hold a value somewhere, under their stored names and types."""
    out = {}
    for f, typ in COLUMNS.items():
        name = helper(f)
        if name in t.column_names and t[name].null_count < t.num_rows:
            col = t[name]
            out[f] = col if col.type == typ else col.cast(typ)
    return out
