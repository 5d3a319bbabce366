"""GRPO groups: the responses sampled for one prompt at one step, and that prompt across steps.

The group of a sample is its ``group_id`` column where the log has one (verl ``uid``,
open-instruct ``prompt_idx``, ``group_index``...), else the samples sharing a prompt within a
step. A group is always one step's: an id the log repeats at every step (``group_index`` 0, a
question id) names a new group at each step. A group whose rewards are all equal gives GRPO no
learning signal: it is flagged.

Groups are named ``"{step}:{id}"`` (the ``group`` column of :func:`groups`, what
:func:`group_samples` takes); an id that already starts with its step and a colon (open-instruct,
TRL, NeMo-RL, the prompt fallback) is kept as it is. In a set of runs, a group is one run's:
``"{run}/{step}:{id}"``, with a ``run`` column.
"""

from __future__ import annotations

import pandas as pd

from rlviz_widgets._sql import mean_sql, std_sql
from rlviz_widgets.run.run import Run


def _group_id(run: Run) -> str:
    """The SQL expression of a sample's group id within its step (the log's own id, else step and prompt)."""
    fallback = "step::VARCHAR || ':' || md5(coalesce(prompt, ''))"
    if "group_id" in run.columns:
        return f"coalesce(group_id::VARCHAR, {fallback})"
    return fallback


def _set_runs(run: Run) -> list[str]:
    """The names of the runs of a set (a RunSet), else none: a set's groups are each one run's."""
    return list(getattr(run, "runs", None) or ())


def group_key(run: Run) -> str:
    """The SQL expression naming a sample's group, ``"{step}:{id}"``: one step's, never shared across steps. In a
    set of runs, ``"{run}/{step}:{id}"``: runs trained on the same prompts share ids, not groups."""
    gid, prefix = _group_id(run), "(step::VARCHAR || ':')"
    key = f"(CASE WHEN starts_with({gid}, {prefix}) THEN {gid} ELSE {prefix} || {gid} END)"
    return f"(run || '/' || {key})" if _set_runs(run) else key


def _split_group(group: str, runs: list[str] = ()) -> tuple[int, str]:
    """A group's name -> (its step, the name); ValueError for anything else (e.g. the log's bare id)."""
    rest = str(group)
    for name in sorted(runs, key=len, reverse=True):  # a set's: its run's name first
        if rest.startswith(f"{name}/"):
            rest = rest[len(name) + 1:]
            break
    head, sep, _ = rest.partition(":")
    try:
        step = int(head)
    except ValueError:
        step = None
    if not sep or step is None:
        raise ValueError(f"group {group!r} is not a group name \"step:id\": take it from groups(run)['group']")
    return step, str(group)


def groups(run: Run, where: str = "") -> pd.DataFrame:
    """One row per group (a step's group id): step, prompt, size, reward mean / std / min / max / range, zero-spread."""
    adv = (f"{mean_sql('advantage')} AS advantage_mean, min(advantage) AS advantage_min, "
           "max(advantage) AS advantage_max, " if "advantage" in run.columns else "")
    df = run.query_frame(f"""
        SELECT {group_key(run)} AS "group", {'run, ' if _set_runs(run) else ''}step, count(*) AS size,
               {mean_sql('reward')} AS reward_mean, {std_sql('reward')} AS reward_std, min(reward) AS reward_min,
               max(reward) AS reward_max, max(reward) - min(reward) AS reward_range,
               count(*) > 1 AND coalesce(max(reward) = min(reward), true) AS zero_spread,
               {adv} any_value(prompt) AS prompt, list(sample_id ORDER BY sample_id) AS sample_ids
        FROM samples {'WHERE ' + run.check_where(where) if where.strip() else ''}
        GROUP BY ALL ORDER BY step, "group" """)
    return df


def group_samples(run: Run, group: str) -> pd.DataFrame:
    """The samples of one group (its name in ``groups(run)["group"]``), best reward first."""
    step, name = _split_group(group, _set_runs(run))
    return run.query_frame(f"SELECT * EXCLUDE (file_no) FROM _samples_raw WHERE step = ? AND {group_key(run)} = ? "
                   "ORDER BY reward DESC NULLS LAST, sample_id", [step, name])


def prompt_history(run: Run, prompt: str) -> pd.DataFrame:
    """The same prompt followed across steps: per step its responses' count and reward statistics."""
    return run.query_frame(f"""
        SELECT {'run, ' if _set_runs(run) else ''}step, count(*) AS responses, {mean_sql('reward')} AS reward_mean,
               {std_sql('reward')} AS reward_std,
               min(reward) AS reward_min, max(reward) AS reward_max, avg(n_trained_tokens) AS length_mean,
               list(sample_id ORDER BY reward DESC NULLS LAST) AS sample_ids
        FROM samples WHERE prompt = ? GROUP BY ALL ORDER BY step{', run' if _set_runs(run) else ''}""", [prompt])


def group_history(run: Run, group: pd.Series) -> pd.DataFrame:
    """``prompt_history`` of one group's prompt (a row of :func:`groups`), in a set of runs only its run's; empty
    for a group without a prompt."""
    if group["prompt"] is None:
        return pd.DataFrame()
    hist = prompt_history(run, group["prompt"])
    return hist[hist["run"] == group["run"]] if "run" in hist.columns else hist


def spread_counts(groups_frame: pd.DataFrame) -> tuple[int, int, int, int]:
    """Of the groups of more than one response in a :func:`groups` frame: (how many, the smallest size, the
    largest, how many have zero reward spread); (0, 0, 0, 0) when there are none."""
    multi = groups_frame[groups_frame["size"] > 1]
    if not len(multi):
        return 0, 0, 0, 0
    return len(multi), int(multi["size"].min()), int(multi["size"].max()), int(multi["zero_spread"].sum())


def sizes_text(smallest: int, largest: int) -> str:
    """The sizes of groups in words: "8 responses" when all have 8, else "4–8 responses"."""
    return f"{smallest} responses" if smallest == largest else f"{smallest}–{largest} responses"
