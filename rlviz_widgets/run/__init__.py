"""Runs: ``open_run`` and the ``Run`` it returns (one log), ``RunSet`` (several, compared), ``OpenOptions``."""

from rlviz_widgets.run.options import OpenOptions
from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet

__all__ = ["OpenOptions", "Run", "RunSet", "open_run"]
