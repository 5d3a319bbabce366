"""GRPO groups of a run, as pandas: ``groups(run)``, ``group_samples(run, group)``, ``prompt_history(run, prompt)``.

The public face of the queries behind the RunView's groups tab (``rlviz_widgets._groups``)."""

from rlviz_widgets._groups import group_key, group_samples, groups, prompt_history

__all__ = ["group_key", "group_samples", "groups", "prompt_history"]
