"""Readers turn one chunk of raw log lines into the common columns; one module per format."""

from .rlb import RLBReader

READERS = {"rlb": RLBReader}

__all__ = ["READERS", "RLBReader"]
