"""GRPO groups: the responses sampled for one prompt at one step, and that prompt across steps.

The group of a sample is its ``group_id`` column where the log has one (verl ``uid``,
open-instruct ``prompt_idx``, ``group_index``...), else the samples sharing a prompt within a
step. A group whose rewards are all equal gives GRPO no learning signal: it is flagged.
"""

from __future__ import annotations

import pandas as pd

from .run import Run


def group_key(run: Run) -> str:
    """The SQL expression naming a sample's group."""
    fallback = "step::VARCHAR || ':' || md5(coalesce(prompt, ''))"
    if "group_id" in run.columns:
        return f"coalesce(group_id::VARCHAR, {fallback})"
    return fallback


def groups(run: Run, where: str = "") -> pd.DataFrame:
    """One row per group: step, prompt, size, reward mean / std / min / max / range, zero-spread flag."""
    adv = ("avg(advantage) AS advantage_mean, min(advantage) AS advantage_min, max(advantage) AS advantage_max, "
           if "advantage" in run.columns else "")
    df = run.sql(f"""
        SELECT {group_key(run)} AS "group", min(step) AS step, count(*) AS size,
               avg(reward) AS reward_mean, stddev_pop(reward) AS reward_std, min(reward) AS reward_min,
               max(reward) AS reward_max, max(reward) - min(reward) AS reward_range,
               count(*) > 1 AND coalesce(max(reward) = min(reward), true) AS zero_spread,
               {adv} any_value(prompt) AS prompt, list(sample_id ORDER BY sample_id) AS sample_ids
        FROM samples {'WHERE ' + where if where else ''}
        GROUP BY ALL ORDER BY step, "group" """)
    return df


def group_samples(run: Run, group: str) -> pd.DataFrame:
    """The samples of one group, best reward first."""
    return run.sql(f"SELECT * EXCLUDE (file_no) FROM _samples_raw WHERE {group_key(run)} = ? "
                   "ORDER BY reward DESC NULLS LAST, sample_id", [group])


def prompt_history(run: Run, prompt: str) -> pd.DataFrame:
    """The same prompt followed across steps: per step its responses' count and reward statistics."""
    return run.sql("""
        SELECT step, count(*) AS responses, avg(reward) AS reward_mean, stddev_pop(reward) AS reward_std,
               min(reward) AS reward_min, max(reward) AS reward_max, avg(n_tokens) AS length_mean,
               list(sample_id ORDER BY reward DESC NULLS LAST) AS sample_ids
        FROM samples WHERE prompt = ? GROUP BY step ORDER BY step""", [prompt])
