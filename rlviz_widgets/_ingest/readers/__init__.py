"""Readers turn a log's files into records in the common columns; one module per format.

Every reader is a ``base.Reader``: the JSON-lines formats share one pipeline (``jsonl``), each saying where its
fields are in a ``JsonlFormat``; TRL's Parquet files are read whole (``trl``).
"""

from rlviz_widgets._ingest.readers.base import FileReader, LineReader, Reader
from rlviz_widgets._ingest.readers.jsonl import DEFAULT_PAD_TOKEN, JsonlFormat, JsonlReader, non_scalar_message
from rlviz_widgets._ingest.readers.mapping import ColumnsReader
from rlviz_widgets._ingest.readers.messages import ChatReader
from rlviz_widgets._ingest.readers.nemo import NemoReader
from rlviz_widgets._ingest.readers.openinstruct import OpenInstructReader
from rlviz_widgets._ingest.readers.prime import PrimeReader
from rlviz_widgets._ingest.readers.rlb import RLBReader
from rlviz_widgets._ingest.readers.trl import TRLReader
from rlviz_widgets._ingest.readers.verl import VerlReader

READERS: dict[str, type[Reader]] = {"rlb": RLBReader, "verl": VerlReader, "trl": TRLReader,
                                    "openinstruct": OpenInstructReader, "nemo": NemoReader, "chat": ChatReader,
                                    "prime": PrimeReader, "columns": ColumnsReader}

__all__ = ["DEFAULT_PAD_TOKEN", "READERS", "ChatReader", "ColumnsReader", "FileReader", "JsonlFormat", "JsonlReader",
           "LineReader", "NemoReader", "OpenInstructReader", "PrimeReader", "RLBReader", "Reader", "TRLReader",
           "VerlReader", "non_scalar_message"]
