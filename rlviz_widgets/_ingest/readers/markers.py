"""Turns of a token-only sequence, found from its chat template's role markers (docs/upstream-writers.md, section 8).

The tokens are spelled one by one with the user's tokenizer (special tokens kept: the markers are special tokens
in most families), joined, and searched for each family's turn openings; the family with the most is taken. A turn
runs from its opening to the next one; the text between the opening and a closing marker is its text. Tokens before
the first opening (a BOS token) join the first turn. Found nothing (no tokenizer, or a template of no known family):
every token is one turn of role ``unknown``, and the caller reports it.
"""

from __future__ import annotations

import re

import numpy as np

from rlviz_widgets._ingest.readers.tokens import decode_ids, id_strings
from rlviz_widgets._ingest.readers.turns import Turn

# family -> the regular expression of a turn's opening, its role in group 1
OPENINGS = {
    "chatml": r"<\|im_start\|>([^\n<]*)\n?",  # Qwen, Nemotron, LFM2, SmolLM
    "llama3": r"<\|start_header_id\|>(.*?)<\|end_header_id\|>(?:\n\n)?",
    "gemma": r"<start_of_turn>(\w+)\n?",
    "gemma4": r"<\|turn>(\w+)\n?",
    "harmony": r"<\|start\|>([^<]*?)(?:<\|channel\|>[^<]*)?<\|message\|>",  # gpt-oss
    "phi_glm": r"<\|(system|user|assistant|observation)\|>\n?",  # Phi-3, GLM-4.5
    "deepseek": "<\uff5c(User|Assistant)\uff5c>",
    "cohere": r"<\|START_OF_TURN_TOKEN\|><\|(SYSTEM|USER|CHATBOT)_TOKEN\|>",
}
CLOSINGS = re.compile(r"(<\|im_end\|>|<\|eot_id\|>|<\|eom_id\|>|<end_of_turn>|<turn\|>|<\|end\|>|<\|return\|>|"
                      "<\\|call\\|>|<\\|END_OF_TURN_TOKEN\\|>|<\uff5cend\u2581of\u2581sentence\uff5c>)\\s*$")
ROLES = {"model": "assistant", "chatbot": "assistant", "user": "user", "system": "system", "assistant": "assistant"}
NOT_FOUND = ("template_markers|no chat-template role markers (ChatML, Llama 3, Gemma, Phi-3, GLM, DeepSeek, "
             "gpt-oss, Cohere) found in the tokens: they are one turn of role unknown")
NO_TOKENIZER = "template_markers|token ids without tokenizer=: shown as #id, the turns not found (one turn, unknown)"


def token_texts(ids: list[int], tokenizer) -> list[str]:
    """Each token's text: ``decode([id])`` (special tokens kept) where the tokenizer has it, else its spelling;
    each distinct id looked up once."""
    uniq, inverse = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    if hasattr(tokenizer, "decode"):
        names = []
        for i in uniq.tolist():
            try:
                names.append(str(_decode_kept(tokenizer, i)))
            except Exception:  # noqa: BLE001 - an id it cannot take: its spelling instead
                names.append(id_strings(np.array([i]), tokenizer)[0])
    else:
        names = id_strings(uniq, tokenizer)
    return [names[k] for k in inverse.tolist()]


def _decode_kept(tokenizer, i: int) -> str:
    """One id decoded with its special tokens (a Hugging Face tokenizer's keyword; a plain ``decode`` keeps them)."""
    try:
        return tokenizer.decode([i], skip_special_tokens=False)
    except TypeError:
        return tokenizer.decode([i])


def _role(written: str) -> str:
    """A marker's role as turns name it: the template's words for the assistant (``model``, ``CHATBOT``) are the
    assistant's; any other is kept as written (``ipython``, ``observation``, ``functions.NAME``)."""
    w = written.strip()
    return ROLES.get(w.lower(), w)


def marker_turns(ids: list[int], mask: list[bool] | None, tokenizer) -> tuple[list[Turn], list[str]]:
    """(the turns, reports) of one token-only sequence: spans, roles and texts from its markers; ``trained`` from
    ``mask`` (None: the assistant's turns)."""
    n = len(ids)
    if tokenizer is None or not n:
        return [_whole(ids, mask, tokenizer)], [NO_TOKENIZER] if n else []
    texts = token_texts(ids, tokenizer)
    starts = np.cumsum([0, *map(len, texts)])
    joined = "".join(texts)
    best: list[re.Match] = []
    for pattern in OPENINGS.values():
        found = list(re.finditer(pattern, joined))
        if len(found) > len(best):
            best = found
    if not best:
        return [_whole(ids, mask, tokenizer)], [NOT_FOUND]
    at = [int(np.searchsorted(starts, m.start(), side="right") - 1) for m in best]
    at[0] = 0  # what comes before the first opening (a BOS token) is the first turn's
    bounds = [*at, n]
    turns = []
    for k, m in enumerate(best):
        lo, hi = bounds[k], bounds[k + 1]
        if hi <= lo:
            continue
        end_char = best[k + 1].start() if k + 1 < len(best) else len(joined)
        text = CLOSINGS.sub("", joined[m.end():end_char]).strip("\n")
        trained = None if mask is None else any(mask[lo:hi])
        turns.append(Turn(_role(m.group(1)), text, start=lo, end=hi, trained=trained))
    return turns, []


def _whole(ids: list[int], mask: list[bool] | None, tokenizer) -> Turn:
    """Every token as one turn of role ``unknown``, its text the tokens decoded (``#id`` words without a
    tokenizer)."""
    return Turn("unknown", decode_ids(ids, tokenizer), start=0, end=len(ids),
                trained=None if mask is None else any(mask))
