"""RunView: the linked notebook view of a whole run (curves, distributions, table, sample detail)."""

from rlviz_widgets.widgets.run_view.view import RunView

__all__ = ["RunView"]
