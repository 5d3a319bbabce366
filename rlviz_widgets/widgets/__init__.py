"""Thin anywidget classes: traits and request handlers, no data logic."""

from .sample_table import SampleTable
from .token_strip import TokenStrip

__all__ = ["SampleTable", "TokenStrip"]
