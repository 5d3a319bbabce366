"""Thin anywidget classes: traits and request handlers, no data logic."""

from rlviz_widgets.widgets.chart import ChartWidget
from rlviz_widgets.widgets.run_view import RunView
from rlviz_widgets.widgets.sample_table import SampleTable
from rlviz_widgets.widgets.token_strip import TokenStrip

__all__ = ["ChartWidget", "RunView", "SampleTable", "TokenStrip"]
