"""rlviz_widgets: Jupyter widgets for looking inside RLHF / RL-for-LLM training runs."""

from .problems import LogWarning
from .run import Run, open_run
from .sources import NoLogsError

__all__ = ["LogWarning", "NoLogsError", "Run", "open_run"]
__version__ = "0.1.0"
