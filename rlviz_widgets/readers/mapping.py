"""Any other JSON-lines dump, read through ``columns=``: common names -> the file's field names.

``open_run(path, columns={"reward": "score", "response": "completion", "group_id": "prompt_id"})``.
Unmapped common fields are looked up under their own names (``prompt``, ``step``, ``logprobs``,
...); every other scalar field becomes a custom column. Without a ``step`` field, a number at the
end of the file name is the step (``rollouts_120.jsonl`` -> 120).
"""

from __future__ import annotations

from .rlb import RLBReader


class ColumnsReader(RLBReader):
    name = "columns"
    step_pattern = r"(\d+)\.jsonl$"
