"""prime-rl token exports: ``{output_dir}/token_exports/step_{N}/rank_{R}.jsonl``, or
``{output_dir}/{run_id}/token_exports/step_{N}/...`` (v0.6–v0.8 multi-run), one JSON line per packed sequence.

Five key sets (docs/upstream-writers.md, "Rollout–trainer mismatch"), told apart by their keys, never by
``schema_version`` (always 1). Every per-token list covers the whole sequence: prompt, turns, tool results. Read:

- the step: ``export_step`` where the record has it (it names the folder), else ``step``; the folder's ``step_{N}``
  for a line without either;
- per token (``mismatch_fields``): ``token_ids``, ``trained`` (``loss_mask``), ``inference_logprob``,
  ``trainer_logprob``, ``entropy``, ``token_advantage`` (``advantage`` in ``run.tokens()``), and as logged
  ``mismatch_kl``, ``log_importance_ratio``, ``importance_ratio``, ``prob_delta`` (``logged_*``), ``is_masked``,
  ``is_masked_high``, ``is_masked_low``; a ``null`` (prime-rl's spelling of a non-finite value) is a missing value,
  never a problem;
- per sample: ``reward`` where a version logs it (v0.6 and before: the per-token ``rewards`` on a trained token;
  newer ones log none, and that is no problem), ``advantage`` (the mean over trained tokens), ``group_id``: the step
  and a hash of the tokens before the first trained one (the prompt turns, identical for a group's members, which
  prime-rl spreads over ranks and micro batches); ``env_name``, ``run_id``, ``rank``, ``micro_step``,
  ``micro_sequence_idx``, ``export_sequence_idx`` (and ``training_mode``) are kept as custom columns;
- texts and turns: with ``tokenizer=``, the turns from the chat template's role markers (``markers``); without one,
  the prompt and the response as ``#id`` words.

A step folder without ``STABLE`` (v0.6+) is still being written (``being_written``): the run marks its step in
progress, and its cut last line is no problem (a finished folder's is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rlviz_widgets._ingest.metrics import ARRAYS
from rlviz_widgets._ingest.readers.chat import conversation, with_chats
from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader
from rlviz_widgets._ingest.readers.jsonl.sql import field_ref
from rlviz_widgets._ingest.readers.markers import marker_turns
from rlviz_widgets._ingest.readers.mismatch_fields import helper
from rlviz_widgets._ingest.readers.sequence import with_sequence_columns

FILE_PATTERN = r"^rank_\d+\.jsonl$"
STEP_DIR = re.compile(r"^step_(\d+)$")
MARKER = "STABLE"

FLOAT_LISTS = {"inference_logprobs": "inference_logprob", "trainer_logprobs": "trainer_logprob",
               "entropy": "entropy", "advantages": "token_advantage", "mismatch_kl": "logged_mismatch_kl",
               "log_importance_ratio": "logged_log_importance_ratio", "importance_ratio": "logged_importance_ratio",
               "prob_delta": "logged_prob_delta"}
BOOL_LISTS = {"is_masked": "is_masked", "is_masked_high": "is_masked_high", "is_masked_low": "is_masked_low"}
UNUSED = ("schema_version", "step", "export_step", "position_ids", "rewards", "rl_weights", "ce_weights",
          "ref_kl_weights")  # read, or lists no column shows
OWN_READS = ("prompt", "response", "ref_response", "reward", "ref_reward", "ground_truth", "tokens", "advantage",
             *ARRAYS)


def generation(keys: set[str]) -> str | None:
    """The schema generation a record's keys belong to (None: not a prime-rl token export): ``"flat/steps"``
    (e971d905, badd2b0f), ``"v0.6"``, ``"v0.7"`` (v0.7.0, v0.8.0) or ``"main"``."""
    if not {"token_ids", "loss_mask", "inference_logprobs", "trainer_logprobs"} <= keys:
        return None
    if "export_step" in keys:
        return "v0.7" if "rl_weights" in keys else "v0.6"
    return "main" if "rl_weights" in keys else "flat/steps"


def accepts(path: str | Path) -> bool:
    """A rank file of a token export: ``rank_{R}.jsonl`` in ``step_{N}/`` or (first commit) ``token_exports/``."""
    p = Path(path)
    return re.search(FILE_PATTERN, p.name) is not None and (
        STEP_DIR.match(p.parent.name) is not None or p.parent.name == "token_exports")


def folder_step(path: str | Path) -> int | None:
    """The step of a rank file's ``step_{N}`` folder."""
    m = STEP_DIR.match(Path(path).parent.name)
    return int(m.group(1)) if m else None


def folder_run_id(path: str | Path) -> str | None:
    """The folder above ``token_exports``: the run id in the v0.6–v0.8 multi-run layout
    (``{run_id}/token_exports/step_{N}/rank_{R}.jsonl``), the output dir's name in the single-run one (the records'
    ``run_id``, null for a single run, tells them apart). A name to show a run by, not a column."""
    p = Path(path)
    exports = p.parent.parent if folder_step(p) is not None else p.parent
    return exports.parent.name if exports.name == "token_exports" else None


def is_stable(path: str | Path) -> bool:
    """Whether the rank file's step folder is complete (``STABLE`` written after every rank flushed). The first two
    unreleased layouts have no marker: their folders are taken as complete."""
    p = Path(path)
    if folder_step(p) is None:
        return True
    return (p.parent / MARKER).exists() or not _marks_steps(p.parent.parent)


def _marks_steps(exports: Path) -> bool:
    """Whether any step folder of the export has a marker (a v0.6+ writer)."""
    return any((d / MARKER).exists() for d in exports.glob("step_*"))


def _adjust(schema: dict[str, str], ex: dict[str, str | None], used: set[str], f: Mapping[str, str],
            mapped: set[str]) -> None:
    """The record's lists in the common and mismatch columns; the step from the record, else its folder."""
    for c in OWN_READS:
        if c not in mapped:
            schema.pop(f[c], None)
    schema.update({"token_ids": "BIGINT[]", "loss_mask": "BOOLEAN[]", "rewards": "DOUBLE[]", "export_step": "JSON",
                   **{k: "FLOAT[]" for k in FLOAT_LISTS}, **{k: "BOOLEAN[]" for k in BOOL_LISTS}})
    first = "list_position(r.loss_mask, true)"
    cut = f"coalesce({first}, len(r.token_ids) + 1)"
    if "step" not in mapped:
        ex["step"] = "coalesce(r.export_step, r.step, fs::VARCHAR::JSON)"
    defaults = {"ref_response": "NULL::VARCHAR", "ref_reward": "NULL::JSON", "ground_truth": "NULL::JSON",
                "tokens": "r.token_ids", "reward": "list_where(r.rewards, r.loss_mask)[1]",
                "advantage": "list_avg(list_filter(list_where(r.advantages, r.loss_mask), lambda a: isfinite(a)))"
                             "::DOUBLE",
                # the decode step writes them: the turns with a tokenizer, #id words without (``id_words``)
                "prompt": "NULL::VARCHAR", "response": "NULL::VARCHAR",
                **{a: "NULL::FLOAT[]" for a in ARRAYS}}
    for c, sql in defaults.items():
        if c not in mapped:
            ex[c] = sql
    if "advantage" not in mapped:
        ex["advantage_raw"] = None
    if "group_id" not in mapped:
        step = f"({ex['step']})::VARCHAR"
        ex["group_id"] = f"{step} || ':' || md5((r.token_ids[:{cut} - 1])::VARCHAR)[:12]"
    ex["_trained"] = field_ref("loss_mask")
    ex["_reports"] = "CAST([] AS VARCHAR[])"
    ex |= {helper(ours): field_ref(theirs) for theirs, ours in {**FLOAT_LISTS, **BOOL_LISTS}.items()}
    used |= {"token_ids", "loss_mask", *UNUSED, *FLOAT_LISTS, *BOOL_LISTS}


def id_words(tokens: pa.Array | pa.ChunkedArray, trained: pa.Array | pa.ChunkedArray
             ) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(prompt, response, tokens) of each row's token ids as ``#id`` words: the ids before the first trained one (by
    the row's mask ``trained``; all of them without one) and the rest. Null ids are left out: a part of nothing but
    nulls is null, an empty part an empty text, a null row null. Arrow spells and joins them: a lambda per token in
    SQL took a third of a chunk's query. ``tokens``: the ids spelled as ``spell_ids`` spells them without a
    tokenizer (a negative id null), from the same words."""
    ids, mask = (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in (tokens, trained))
    n = len(ids)
    lens = pc.list_value_length(ids).fill_null(0).to_numpy(zero_copy_only=False)
    cut = lens.copy()  # each row's prompt length
    flat_mask = pc.list_flatten(mask).fill_null(False).to_numpy(zero_copy_only=False)
    mask_row = pc.list_parent_indices(mask).to_numpy()
    hits = np.flatnonzero(flat_mask)
    rows, first = np.unique(mask_row[hits], return_index=True)
    mask_start = np.r_[0, np.cumsum(pc.list_value_length(mask).fill_null(0).to_numpy(zero_copy_only=False))][:-1]
    cut[rows] = np.minimum(hits[first] - mask_start[rows], lens[rows])
    values = pc.list_flatten(ids)
    row = pc.list_parent_indices(ids).to_numpy()
    pos = np.arange(len(row)) - np.r_[0, np.cumsum(lens)][:-1][row]
    words = pc.binary_join_element_wise("#", pc.cast(values, pa.string()), "")
    known = values.is_valid().to_numpy(zero_copy_only=False)
    in_prompt = pos < cut[row]
    out = []
    for part, size in ((in_prompt, cut), (~in_prompt, lens - cut)):
        keep = part & known
        counts = np.bincount(row[keep], minlength=n)
        offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32))
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, words.filter(pa.array(keep))), " ")
        null = ~ids.is_valid().to_numpy(zero_copy_only=False) | ((size > 0) & (counts == 0))
        out.append(pc.if_else(pa.array(null), pa.scalar(None, pa.string()), joined))
    spelled = pc.if_else(pc.greater_equal(values, 0), words, pa.scalar(None, pa.string()))
    offsets = pa.array(np.r_[0, np.cumsum(lens)].astype(np.int32))
    return out[0], out[1], pa.ListArray.from_arrays(offsets, spelled, mask=ids.is_null())


def _decode(t: pa.Table, tokenizer) -> pa.Table:
    """A version without rewards is no missing reward; with a tokenizer, the turns from the template's markers."""
    if "_p_reward" in t.column_names:  # (newer versions log none; v0.6 logs all-null lists without rewards)
        flags = t["_p_reward"]
        t = t.set_column(t.schema.get_field_index("_p_reward"), "_p_reward",
                         pc.if_else(pc.equal(flags, "missing"), pa.scalar(None, flags.type), flags))
    if tokenizer is None:
        made = [t[WORDS[c]] for c in ("prompt", "response", "tokens")] if WORDS["prompt"] in t.column_names else \
            id_words(t["tokens"], t["_trained"])
        for name, col in zip(("prompt", "response", "tokens"), made):
            t = t.set_column(t.schema.get_field_index(name), name, col)
        t = t.drop_columns([c for c in WORDS.values() if c in t.column_names])
        return with_sequence_columns(t, [None] * t.num_rows)
    masks = t["_trained"].to_pylist()
    chats = []
    for ids, mask in zip(t["tokens"].to_pylist(), masks):
        turns, reports = marker_turns(ids or [], mask, tokenizer)
        chats.append(conversation(turns, reports=reports))
    return with_sequence_columns(with_chats(t, chats), [c.turns for c in chats])


WORDS = {"prompt": "_ids_prompt", "response": "_ids_response", "tokens": "_ids_tokens"}  # id_words made ahead


def _derive(arrays: Mapping[str, pa.Array], fields: Mapping[str, str], tokenizer) -> dict[str, pa.Array]:
    """Without a tokenizer, the #id words of the ids C read, made on its thread (``jsonl.derive``)."""
    ids, mask = arrays.get("token_ids"), arrays.get("loss_mask")
    if tokenizer is not None or ids is None or mask is None:
        return {}
    return dict(zip(WORDS.values(), id_words(ids, mask)))


PRIME = JsonlFormat(
    name="prime", file_pattern=FILE_PATTERN, token_ids=True,
    shown={"tokens": "token_ids", "reward": "rewards", "advantage": "advantages", "step": "export_step/step"},
    adjust=_adjust, decode=_decode, native_derive=_derive)


class PrimeReader(JsonlReader):
    """prime-rl's token exports: the step folder names a line's step; a folder not yet marked is being written."""

    format = PRIME

    def accepts(self, path) -> bool:
        return accepts(path)

    def for_file(self, path) -> PrimeReader:
        bound = super().for_file(path)
        bound.file_step = folder_step(path)
        return bound

    def being_written(self, path) -> bool:
        """Whether the file's step folder is still being written (its last line may be cut, for now)."""
        return not is_stable(path)
