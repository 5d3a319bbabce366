"""Token ids made readable: spelled with the user's tokenizer, or shown as ``#1234`` without one.

``tokenizer`` is anything with ``convert_ids_to_tokens`` (a Hugging Face tokenizer: byte-BPE
artefacts such as ``Ġ`` stay, as RL Logging Board shows them) or ``decode`` (each id decoded on
its own). Each distinct id is looked up once per chunk, so a chunk of millions of tokens costs
one call over its few thousand distinct ids.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def id_strings(ids: np.ndarray, tokenizer) -> list[str]:
    """The token string of each id (``#id`` without a tokenizer, or where the tokenizer has none for it)."""
    plain = [int(i) for i in ids]
    if tokenizer is None:
        return [f"#{i}" for i in plain]
    if hasattr(tokenizer, "convert_ids_to_tokens"):
        spell = tokenizer.convert_ids_to_tokens
    elif hasattr(tokenizer, "decode"):
        def spell(some):
            return [tokenizer.decode([i]) for i in some]
    else:
        raise TypeError("tokenizer= needs a convert_ids_to_tokens or a decode method")
    try:
        out = list(spell(plain))
    except Exception:  # an id it does not know (past its vocabulary, or too big for it): asked one by one
        out = []
        for i in plain:
            try:
                out += list(spell([i]))
            except Exception:
                out.append(None)
    return [s if isinstance(s, str) else f"#{i}" for i, s in zip(plain, out)]  # unknown ids: None


def valid_ids(values: pa.Array) -> np.ndarray:
    """Which token ids of a flat integer array are ids at all (not null, not negative)."""
    ok = pc.greater_equal(values, 0).fill_null(False) if len(values) else pa.array([], pa.bool_())
    return ok.to_numpy(zero_copy_only=False)


def spell_ids(col: pa.ChunkedArray | pa.Array, tokenizer) -> pa.Array:
    """A list<int> column of token ids as list<string>; a null or negative id is a null token (reported
    as such by the reader's checks), never handed to the tokenizer."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.offset:
        arr = pa.concat_arrays([arr])
    offsets = arr.offsets
    values = arr.values.slice(offsets[0].as_py(), offsets[-1].as_py() - offsets[0].as_py())
    ok = valid_ids(values)
    if tokenizer is None:  # no lookups: Arrow spells every id (4x faster than one string per distinct id)
        spelled = pc.binary_join_element_wise("#", pc.cast(values, pa.string()), "")
        strings = pc.if_else(pa.array(ok), spelled, pa.scalar(None, pa.string()))
        return pa.ListArray.from_arrays(pc.subtract(offsets, offsets[0]), strings, mask=arr.is_null())
    vals = np.where(ok, values.to_numpy(zero_copy_only=False), 0).astype(np.int64) if len(values) else \
        np.zeros(0, np.int64)
    uniq, inverse = np.unique(vals[ok], return_inverse=True)
    names = pa.array(id_strings(uniq, tokenizer), pa.string())
    at = np.zeros(len(vals), np.int64)
    at[ok] = inverse
    strings = names.take(pa.array(at, mask=~ok)) if len(vals) else pa.array([], pa.string())
    rebased = pc.subtract(offsets, offsets[0])
    return pa.ListArray.from_arrays(rebased, strings, mask=arr.is_null())


def decode_texts(col: pa.ChunkedArray | pa.Array, tokenizer) -> pa.Array:
    """Each row's token ids as text (``decode_ids``; a null row stays null)."""
    return pa.array([None if ids is None else decode_ids(ids, tokenizer) for ids in col.to_pylist()], pa.string())


def decode_ids(ids: list[int | None], tokenizer) -> str:
    """Token ids as text: ``tokenizer.decode``, else the spelled tokens joined, else ``#id`` words. A null or
    negative id shows as U+FFFD (the replacement character), never handed to the tokenizer."""
    pieces: list = []  # runs of good ids, and a replacement character for each bad one
    for i in ids:
        if i is None or i < 0:
            pieces.append("\ufffd")
        elif pieces and isinstance(pieces[-1], list):
            pieces[-1].append(i)
        else:
            pieces.append([i])
    return "".join(p if isinstance(p, str) else _decode(p, tokenizer) for p in pieces)


def _decode(ids: list[int], tokenizer) -> str:
    if tokenizer is not None and hasattr(tokenizer, "decode"):
        try:
            return tokenizer.decode(ids)
        except Exception:  # an id it cannot take: spelled one by one instead
            pass
    toks = id_strings(np.asarray(ids, dtype=np.int64), tokenizer)
    if tokenizer is None:
        return " ".join(toks)
    conv = getattr(tokenizer, "convert_tokens_to_string", None)
    return conv(toks) if conv else "".join(toks)
