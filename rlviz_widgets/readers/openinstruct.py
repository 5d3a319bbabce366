"""open-instruct's rollout traces (``--save_traces``): ``{run}_rollouts_{shard:06d}.jsonl``.

One record per sample (``RolloutRecord``): ``step``, ``sample_idx``, ``prompt_idx`` (index of the
prompt in the step's batch: the GRPO group), ``prompt_tokens`` and ``response_tokens`` (token ids),
``reward``, ``advantage``, ``finish_reason``, ``dataset``, ``ground_truth``, ``request_info``,
``logprobs`` (one per response token, or null). Texts and token strings come from ``tokenizer=``;
without one, ids are shown as ``#1234``. The ``{run}_metadata.jsonl`` beside the shards is skipped.
"""

from __future__ import annotations

import pyarrow as pa

from .rlb import RLBReader, _q
from .tokens import decode_texts


class OpenInstructReader(RLBReader):
    name = "openinstruct"
    file_pattern = r"_rollouts_\d+\.jsonl$"
    step_pattern = None

    def _spec(self, keys):
        schema, ex, used = super()._spec(keys)
        f = self.fields()
        schema[f["tokens"]] = "BIGINT[]"  # ids, spelled in _post
        if "prompt" not in self.columns:
            schema.pop("prompt", None)
            schema["prompt_tokens"] = "BIGINT[]"
            ex["prompt"] = "NULL::VARCHAR"
            ex["_prompt_ids"] = "r.prompt_tokens"
        if "response" not in self.columns:
            schema.pop("response", None)
            ex["response"] = "NULL::VARCHAR"
            ex["_response_ids"] = f"r.{_q(f['tokens'])}"
        if "group_id" not in self.columns:
            schema["prompt_idx"] = "JSON"
            # prompt_idx counts the prompts of one step's batch: the group is (step, prompt_idx)
            ex["group_id"] = ("CASE WHEN json_type(r.prompt_idx) IN ('BIGINT', 'UBIGINT') "
                              "THEN step::VARCHAR || ':' || (r.prompt_idx)::VARCHAR END")  # the step as read
            used.discard("prompt_idx")  # still a custom column as well
        used |= {"prompt_tokens", "request_info"}
        return schema, ex, used

    def _post(self, t: pa.Table) -> pa.Table:
        for col, ids in (("prompt", "_prompt_ids"), ("response", "_response_ids")):
            if ids in t.column_names:
                t = t.set_column(t.schema.get_field_index(col), col, decode_texts(t[ids], self.tokenizer))
                t = t.drop_columns([ids])
        return super()._post(t)
