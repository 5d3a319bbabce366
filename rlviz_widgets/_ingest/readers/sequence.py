"""Logs whose tokens cover the whole sequence (prompt, every turn): which tokens are trained, which turn each token
is of, and the turns' token spans.

A reader of such a log gives its tokens (and their arrays) whole, plus ``SEQUENCE_COLUMNS``: ``trained`` (the loss
mask), ``turn`` (each token's turn, null where the log does not tell) and ``roles`` (each turn's role, by turn
number). A log of response tokens only leaves them null: every token is then trained, of the response's turn
(docs/internals.md, "Tokens").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rlviz_widgets._ingest.readers.turns import Turn

SEQUENCE_COLUMNS = {"trained": pa.list_(pa.bool_()), "turn": pa.list_(pa.int32()), "roles": pa.list_(pa.string())}


def trained_runs(mask: list[bool | None]) -> list[tuple[int, int]]:
    """The runs of trained tokens in ``mask``: [start, end) each, in order."""
    m = np.array([bool(x) for x in mask], dtype=np.int8)
    edges = np.diff(np.concatenate([[0], m, [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def train_turns(texts: list[str], mask: list[bool | None] | None) -> tuple[list[Turn], int]:
    """(the turns, the first response turn) of a NeMo-RL train file's message texts, which carry no roles: each run
    of trained tokens is an assistant turn, each followed by one message (the environment's, or in NeMo-Gym logs,
    whose texts are all empty, the user's: the tool results and the next turn's header); the messages before the
    first run are the prompt (one: the user's; several: of roles the log does not tell). Spans come from the runs;
    a message the runs do not place has none."""
    m = len(texts)
    runs = trained_runs(mask) if mask else []
    n = len(mask) if mask else 0
    if runs:  # k runs, each followed by a message unless the last one ends the sequence
        p = m - 2 * len(runs) + (0 if runs[-1][1] < n else 1)
    else:
        p = m - 1
    p = min(max(p, 1), m - 1)
    masked = None if mask is None else False
    turns = [Turn("user" if p == 1 else "unknown", texts[i], plain=True, trained=masked) for i in range(p)]
    if p == 1 and runs:
        turns[0].start, turns[0].end = 0, runs[0][0]
    between = "environment" if any(texts) else "user"
    for j, text in enumerate(texts[p:]):
        k = j // 2
        if j % 2 == 0:
            span = runs[k] if k < len(runs) else None
            turns.append(Turn("assistant", text, trained=masked if span is None else True))
        else:
            span = (runs[k][1], runs[k + 1][0] if k + 1 < len(runs) else n) if k < len(runs) else None
            turns.append(Turn(between, text, trained=masked))
        if span is not None:
            turns[-1].start, turns[-1].end = span
    return turns, p


def token_turns(turns: list[Turn], n: int) -> list[int | None]:
    """Each of ``n`` tokens' turn number, from the turns' spans (None where no span covers it)."""
    out: list[int | None] = [None] * n
    for k, t in enumerate(turns):
        if t.start is not None and t.end is not None:
            out[t.start:t.end] = [k] * (min(t.end, n) - t.start)
    return out


def with_sequence_columns(t: pa.Table, samples: list[list[Turn] | None]) -> pa.Table:
    """``t`` with ``SEQUENCE_COLUMNS``: ``trained`` from the reader's ``_trained`` (null without one), each token's
    turn and the turns' roles from ``samples`` (each sample's turns; None, or turns without spans: null)."""
    n = t.num_rows
    i = t.schema.get_field_index("_trained")
    trained = t.column(i).cast(SEQUENCE_COLUMNS["trained"]) if i >= 0 else pa.nulls(n, SEQUENCE_COLUMNS["trained"])
    if i >= 0:
        t = t.remove_column(i)
    lengths = pa.compute.list_value_length(trained).fill_null(0).to_numpy(zero_copy_only=False)
    spanned = [s if s and any(x.start is not None for x in s) else None for s in samples]
    turn = [None if s is None else token_turns(s, int(k)) for s, k in zip(spanned, lengths)]
    roles = [None if s is None else [x.role for x in s] for s in spanned]
    for name, col in (("trained", trained), ("turn", pa.array(turn, SEQUENCE_COLUMNS["turn"])),
                      ("roles", pa.array(roles, SEQUENCE_COLUMNS["roles"]))):
        j = t.schema.get_field_index(name)
        t = t.set_column(j, name, col) if j >= 0 else t.append_column(name, col)
    return t
