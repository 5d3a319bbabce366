"""rlviz_widgets: Jupyter widgets for looking inside RLHF / RL-for-LLM training runs."""

from .cache_prune import cache_usage, prune_cache
from .problems import LogWarning, OptionWarning
from .run import Run, open_run
from .runset import RunSet
from .sources import NoLogsError
from .widgets import ChartWidget, RunView, SampleTable, TokenStrip

__all__ = ["ChartWidget", "LogWarning", "NoLogsError", "OptionWarning", "Run", "RunSet", "RunView", "SampleTable",
           "TokenStrip", "cache_usage", "open_run", "prune_cache"]
__version__ = "0.1.0"
