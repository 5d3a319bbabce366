"""Runs: ``open_run`` and the ``Run`` it returns (one log), ``RunSet`` (several, compared)."""

from rlviz_widgets.run.run import Run, open_run
from rlviz_widgets.run.runset import RunSet

__all__ = ["Run", "RunSet", "open_run"]
