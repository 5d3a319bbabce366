"""rlviz_widgets: Jupyter widgets for looking inside RLHF / RL-for-LLM training runs."""

from .problems import LogWarning
from .run import Run, open_run
from .runset import RunSet
from .sources import NoLogsError
from .widgets import ChartWidget, RunView, SampleTable, TokenStrip

__all__ = ["ChartWidget", "LogWarning", "NoLogsError", "Run", "RunSet", "RunView", "SampleTable", "TokenStrip",
           "open_run"]
__version__ = "0.1.0"
