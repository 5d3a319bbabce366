"""Readers turn one chunk of raw log lines into the common columns; one module per format."""

from rlviz_widgets._ingest.readers.mapping import ColumnsReader
from rlviz_widgets._ingest.readers.nemo import NemoReader
from rlviz_widgets._ingest.readers.openinstruct import OpenInstructReader
from rlviz_widgets._ingest.readers.rlb import RLBReader
from rlviz_widgets._ingest.readers.trl import TRLReader
from rlviz_widgets._ingest.readers.verl import VerlReader

READERS = {"rlb": RLBReader, "verl": VerlReader, "trl": TRLReader, "openinstruct": OpenInstructReader,
           "nemo": NemoReader, "columns": ColumnsReader}

__all__ = ["READERS", "ColumnsReader", "NemoReader", "OpenInstructReader", "RLBReader", "TRLReader", "VerlReader"]
