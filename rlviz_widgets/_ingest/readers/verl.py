"""verl's rollout dumps: ``trainer.rollout_data_dir`` (or ``validation_data_dir``) -> ``{dir}/{global_step}.jsonl``.

One record per sample, as ``RayPPOTrainer._dump_generations`` writes it: ``input`` (decoded prompt),
``output`` (decoded response), ``gts`` (ground truth), ``score``, ``step``, every reward-extra key of
the same length (``acc``, ``pred``, ...: custom columns; validation dumps repeat the score as ``reward``,
kept as the column ``reward_``), and in newer versions ``request_id`` (some forks also write ``uid``, the GRPO
group). No token arrays.
"""

from __future__ import annotations

from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader

VERL = JsonlFormat(
    name="verl", file_pattern=r"^\d+\.jsonl$", step_pattern=r"^(\d+)\.jsonl$", group_keys=("uid",),
    renames={"prompt": "input", "response": "output", "reward": "score", "ground_truth": "gts"},
    own_renames=frozenset({"reward"}),  # validation dumps repeat the score as a reward-extra key "reward"
)


class VerlReader(JsonlReader):
    format = VERL
