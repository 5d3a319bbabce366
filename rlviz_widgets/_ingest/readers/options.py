"""What every reader shares of its options: the common fields ``columns=`` may name, the cache key of
``columns=`` and ``tokenizer=``, and the step a file's name gives."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from rlviz_widgets._ingest.metrics import ARRAYS
from rlviz_widgets._ingest.readers.tokens import id_strings

TEXT_FIELDS = ("prompt", "response", "ref_response")
NUMBER_FIELDS = ("reward", "ref_reward")
ALIASES = {"response_tokens": "tokens", "token": "tokens", "group": "group_id", "uid": "group_id"}
MISMATCH_FIELDS = ("inference_logprob", "trainer_logprob", "entropy")  # per-token lists (issue 32), where logged
COMMON = (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth", "tokens", *ARRAYS, "group_id", "advantage",
          *MISMATCH_FIELDS)


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


def default_fields() -> dict[str, str]:
    """Common field -> the record key holding it, where a format writes every field under its common name."""
    base = {f: f for f in (*TEXT_FIELDS, *NUMBER_FIELDS, "step", "ground_truth", *ARRAYS, "advantage")}
    base["tokens"] = "response_tokens"
    # RL Logging Board's schema as users extend it: the sampler's and the trainer's log-probs beside ``logprobs``
    base |= {"inference_logprob": "rollout_logprobs", "trainer_logprob": "old_logprobs", "entropy": "entropy"}
    return base


def signature(columns: dict[str, str], tokenizer) -> str:
    """A short key naming the options that change what a reader produces (for the cache)."""
    if not columns and tokenizer is None:
        return ""
    tok = None if tokenizer is None else _tokenizer_key(tokenizer)
    return hashlib.sha1(json.dumps([sorted(columns.items()), tok], default=str).encode()).hexdigest()[:10]


def cache_name(format_name: str, columns: dict[str, str], tokenizer) -> str:
    """A reader's name as its cache key: the format's, and the options that make other parts."""
    sig = signature(columns, tokenizer)
    return format_name + (f"+{sig}" if sig else "")


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


def name_step(step_pattern: str | None, name: str) -> int | None:
    """The step a file's name gives (``step_pattern``'s first group that matched), if any."""
    m = re.search(step_pattern, name) if step_pattern else None
    return next((int(g) for g in m.groups() if g is not None), None) if m else None


def name_accepted(file_pattern: str | None, path) -> bool:
    """Whether a file found in a folder belongs to a format whose files' names match ``file_pattern``."""
    return file_pattern is None or re.search(file_pattern, Path(path).name) is not None
