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
    """The token string of each id (``#id`` without a tokenizer)."""
    plain = [int(i) for i in ids]
    if tokenizer is None:
        return [f"#{i}" for i in plain]
    if hasattr(tokenizer, "convert_ids_to_tokens"):
        out = tokenizer.convert_ids_to_tokens(plain)
    elif hasattr(tokenizer, "decode"):
        out = [tokenizer.decode([i]) for i in plain]
    else:
        raise TypeError("tokenizer= needs a convert_ids_to_tokens or a decode method")
    return [s if isinstance(s, str) else f"#{i}" for i, s in zip(plain, out)]  # unknown ids: None


def spell_ids(col: pa.ChunkedArray | pa.Array, tokenizer) -> pa.Array:
    """A list<int> column of token ids as list<string>, nulls kept."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.offset:
        arr = pa.concat_arrays([arr])
    offsets = arr.offsets
    values = arr.values.slice(offsets[0].as_py(), offsets[-1].as_py() - offsets[0].as_py())
    vals = values.to_numpy(zero_copy_only=False)
    if len(vals) and values.null_count:
        vals = np.where(pc.is_null(values).to_numpy(zero_copy_only=False), -1, vals)
    uniq, inverse = np.unique(vals.astype(np.int64), return_inverse=True)
    names = pa.array(id_strings(uniq, tokenizer), pa.string())
    strings = names.take(pa.array(inverse.astype(np.int64))) if len(vals) else pa.array([], pa.string())
    rebased = pc.subtract(offsets, offsets[0])
    return pa.ListArray.from_arrays(rebased, strings, mask=arr.is_null())


def decode_texts(col: pa.ChunkedArray | pa.Array, tokenizer) -> pa.Array:
    """Each row's token ids as text: ``tokenizer.decode``, else the spelled tokens joined, else ``#id`` words."""
    rows = col.to_pylist()
    out: list[str | None] = []
    for ids in rows:
        if ids is None:
            out.append(None)
        elif tokenizer is not None and hasattr(tokenizer, "decode"):
            out.append(tokenizer.decode(ids))
        elif tokenizer is not None:
            toks = id_strings(np.asarray(ids, dtype=np.int64), tokenizer)
            conv = getattr(tokenizer, "convert_tokens_to_string", None)
            out.append(conv(toks) if conv else "".join(toks))
        else:
            out.append(" ".join(f"#{int(i)}" for i in ids))
    return pa.array(out, pa.string())
