"""The JSON-lines pipeline every JSON-lines format shares: the reader (``reader``), what sets a format apart
(``format``), the SQL (``sql``), the checks (``checks``), odd lines (``triage``), many small files at once
(``batches``), and the byte scans (``keyscan``, ``linesteps``)."""

from rlviz_widgets._ingest.readers.jsonl.checks import DEFAULT_PAD_TOKEN, non_scalar_message
from rlviz_widgets._ingest.readers.jsonl.format import JsonlFormat
from rlviz_widgets._ingest.readers.jsonl.reader import JsonlReader
from rlviz_widgets._ingest.readers.jsonl.sql import json_number, reports_sql

__all__ = ["DEFAULT_PAD_TOKEN", "JsonlFormat", "JsonlReader", "json_number", "non_scalar_message", "reports_sql"]
