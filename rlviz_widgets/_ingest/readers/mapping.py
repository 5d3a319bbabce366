"""Any other JSON-lines dump, read through ``columns=``: common names -> the file's field names.

``open_run(path, columns={"reward": "score", "response": "completion", "group_id": "prompt_id"})``.
Unmapped common fields are looked up under their own names (``prompt``, ``step``, ``logprobs``,
...); every other scalar field becomes a custom column. Without a ``step`` field, the file name gives
the step: the number after ``step`` in it (``dump_step4_rank1.jsonl`` -> 4), else the number that ends
it (``rollouts_120.jsonl`` -> 120) unless a word before that number says it counts something else
(``rollout_rank3.jsonl``, ``shard_02.jsonl``: no step; such records are reported as missing one).
"""

from __future__ import annotations

from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader

COLUMNS = JsonlFormat(
    name="columns",
    # "step" and a number; else the number ending the name, unless it counts ranks, shards, parts... (one file per
    # data-parallel rank is the common layout: its number is no step) or is a date's day (run-2024-05-01.jsonl)
    step_pattern=(r"(?i)step[ _-]?(\d+)|^(?!.*(?:rank|shard|part|worker|proc|node|device|(?:^|[^a-z])(?:gpu|dp|tp|pp|"
                  r"host))[ _-]?\d+\.jsonl$)(?!.*\d{4}[-_.]\d\d[-_.]\d\d\.jsonl$).*?(\d+)\.jsonl$"),
)


class ColumnsReader(JsonlReader):
    format = COLUMNS
