"""Thin anywidget classes: traits and request handlers, no data logic."""

from .chart import ChartWidget
from .run_view import RunView
from .sample_table import SampleTable
from .token_strip import TokenStrip

__all__ = ["ChartWidget", "RunView", "SampleTable", "TokenStrip"]
