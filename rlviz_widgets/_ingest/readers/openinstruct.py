"""open-instruct's rollout traces (``--save_traces``): ``{run}_rollouts_{shard:06d}.jsonl``.

One record per sample (``RolloutRecord``): ``step``, ``sample_idx``, ``prompt_idx`` (index of the
prompt in the step's batch: the GRPO group), ``prompt_tokens`` and ``response_tokens`` (token ids),
``reward``, ``advantage``, ``finish_reason``, ``dataset``, ``ground_truth``, ``request_info``,
``logprobs`` (one per response token, or null). Texts and token strings come from ``tokenizer=``;
without one, ids are shown as ``#1234``. The ``{run}_metadata.jsonl`` beside the shards is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader
from rlviz_widgets._ingest.readers.jsonl.sql import field_ref, reports_sql
from rlviz_widgets._ingest.readers.tokens import decode_texts


def _adjust(schema: dict[str, str], ex: dict[str, str | None], used: set[str], f: Mapping[str, str],
            mapped: set[str]) -> None:
    """Token ids for the texts (decoded in ``_decode``), and the group as (step, prompt_idx)."""
    schema[f["tokens"]] = "BIGINT[]"  # ids, spelled by the reader
    reports = []  # "kind|message" of values of another type than open-instruct writes
    if "prompt" not in mapped:
        schema.pop("prompt", None)
        schema["prompt_tokens"] = "JSON"  # typed below: a value that is no list of ids is seen, and reported
        ex["prompt"] = "NULL::VARCHAR"
        ex["_prompt_ids"] = "from_json(r.prompt_tokens, '[\"BIGINT\"]')"
        reports.append("CASE WHEN r.prompt_tokens IS NULL OR json_type(r.prompt_tokens) = 'NULL' THEN "
                       "'missing_field|no prompt_tokens: the prompt is left empty' "
                       "WHEN json_type(r.prompt_tokens) NOT IN ('ARRAY', 'NULL') THEN 'wrong_type|"
                       "prompt_tokens is not a list of token ids: the prompt is left empty' "
                       "WHEN list_bool_or(list_transform(from_json(r.prompt_tokens, '[\"BIGINT\"]'), "
                       "lambda i: i IS NULL OR i < 0)) THEN 'wrong_type|prompt_tokens holds null or invalid "
                       "token ids: shown as \ufffd' END")
    if "response" not in mapped:
        schema.pop("response", None)
        ex["response"] = "NULL::VARCHAR"
        ex["_response_ids"] = field_ref(f["tokens"])
    if "group_id" not in mapped:
        schema["prompt_idx"] = "JSON"
        # prompt_idx counts the prompts of one step's batch: the group is (step, prompt_idx)
        ex["group_id"] = ("CASE WHEN json_type(r.prompt_idx) IN ('BIGINT', 'UBIGINT') "
                          "THEN step::VARCHAR || ':' || (r.prompt_idx)::VARCHAR END")  # the step as read
        used.discard("prompt_idx")  # still a custom column as well
        reports.append("CASE WHEN json_type(r.prompt_idx) NOT IN ('BIGINT', 'UBIGINT', 'NULL') THEN "
                       "'wrong_type|prompt_idx is ' || left(r.prompt_idx::VARCHAR, 40) || "
                       "', not an integer: no group' END")
    if reports:
        ex["_reports"] = reports_sql(reports)
    used |= {"prompt_tokens", "request_info"}


def _decode(t: pa.Table, tokenizer) -> pa.Table:
    """The prompt and response texts from their token ids."""
    for col, ids in (("prompt", "_prompt_ids"), ("response", "_response_ids")):
        if ids in t.column_names:
            t = t.set_column(t.schema.get_field_index(col), col, decode_texts(t[ids], tokenizer))
            t = t.drop_columns([ids])
    return t


OPENINSTRUCT = JsonlFormat(name="openinstruct", file_pattern=r"_rollouts_\d+\.jsonl$", token_ids=True,
                           tokens_required=True, adjust=_adjust, decode=_decode)


class OpenInstructReader(JsonlReader):
    format = OPENINSTRUCT
