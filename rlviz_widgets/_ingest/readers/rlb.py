"""RL Logging Board's JSONL schema (also what its OpenRLHF and verl integrations write).

One record per sample: ``prompt``, ``response``, ``reward``, ``step``, and optionally ``ref_response``,
``ref_reward``, ``ground_truth``, ``advantage``, the token strings ``response_tokens`` and the token arrays
(``logprobs``, ``ref_logprobs``, ``values``, ``token_rewards``). The GRPO group is the first of ``uid``,
``group_index``, ``group_id``, ``prompt_idx`` a record has. Every other scalar field is a custom column.
"""

from __future__ import annotations

from rlviz_widgets._ingest.readers.jsonl import DEFAULT_PAD_TOKEN, JsonlFormat, JsonlReader, non_scalar_message

RLB = JsonlFormat(name="rlb")


class RLBReader(JsonlReader):
    format = RLB


# DEFAULT_PAD_TOKEN and non_scalar_message: still imported from here by the run and the CLI
__all__ = ["DEFAULT_PAD_TOKEN", "RLB", "RLBReader", "non_scalar_message"]
