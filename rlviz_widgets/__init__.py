"""rlviz_widgets: Jupyter widgets for looking inside RLHF / RL-for-LLM training runs."""

from rlviz_widgets import groups as groups  # the module rw.groups: GRPO group frames
from rlviz_widgets._ingest.sources import NoLogsError
from rlviz_widgets._mismatch import MismatchRule
from rlviz_widgets._problems import LogWarning, OptionWarning
from rlviz_widgets._report import report
from rlviz_widgets._store.prune import cache_usage, prune_cache
from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet
from rlviz_widgets.widgets import ChartWidget, RunView, SampleTable, TokenStrip

__all__ = ["ChartWidget", "LogWarning", "MismatchRule", "NoLogsError", "OptionWarning", "Run", "RunSet", "RunView",
           "SampleTable", "TokenStrip", "cache_usage", "open_run", "prune_cache", "report"]
__version__ = "0.1.0"
