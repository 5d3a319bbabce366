"""Readers turn one chunk of raw log lines into the common columns; one module per format."""

from .mapping import ColumnsReader
from .nemo import NemoReader
from .openinstruct import OpenInstructReader
from .rlb import RLBReader
from .trl import TRLReader
from .verl import VerlReader

READERS = {"rlb": RLBReader, "verl": VerlReader, "trl": TRLReader, "openinstruct": OpenInstructReader,
           "nemo": NemoReader, "columns": ColumnsReader}

__all__ = ["READERS", "ColumnsReader", "NemoReader", "OpenInstructReader", "RLBReader", "TRLReader", "VerlReader"]
