"""The mismatch figures of whole samples and steps as one SQL query over token rows: the reference the tests hold
the package's figures to (the package stores per-sample figures when a part is written, ``mismatch_metrics``, and
works the rule's out from those, ``_mismatch.rule_sample_sql``). Built from the package's per-token SQL."""

from __future__ import annotations

from rlviz_widgets._mismatch import (
    MismatchRule,
    TokenColumns,
    entropy_sql,
    log_ratio_sql,
    mismatch_kl_sql,
    step_figures,
)
from rlviz_widgets._sql import ident, mean_sql


def sample_figures(c: TokenColumns, rule: MismatchRule) -> dict[str, str]:
    """Column name -> SQL aggregate of one sample's tokens (``GROUP BY`` the sample), over trained tokens:
    ``masked_tokens`` counts the log's own mask where the sample has one (a non-NULL value on a trained token),
    else the rule's; ``sequence_ratio`` is the geometric mean of the ratios."""
    trained = f"count(*) FILTER (WHERE {c.is_trained()})"
    logged_here = f"count({c.logged()}) FILTER (WHERE {c.is_trained()}) > 0"
    rule_masked = rule.rule_masked_count_sql(c)
    masked = (f"CASE WHEN {logged_here} THEN count(*) FILTER (WHERE {c.is_trained()} AND {c.logged()}) "
              f"ELSE {rule_masked} END")
    lr = log_ratio_sql(c)
    return {
        "trained_tokens": trained,
        "mismatch_log_ratio_abs_mean": mean_sql(f"abs({lr})"),
        "mismatch_log_ratio_abs_max": f"max(abs({lr}))",
        "mismatch_kl_mean": mean_sql(mismatch_kl_sql(c)),
        "masked_tokens": masked,
        "masked_fraction": f"({masked}) / nullif({trained}, 0)::DOUBLE",
        "rule_masked_tokens": rule_masked,
        "rule_masked_fraction": f"({rule_masked}) / nullif({trained}, 0)::DOUBLE",
        "sequence_masked": rule.sequence_sql(c),
        "mask_disagreements": rule.disagreements_sql(c),
        "sequence_ratio": f"exp(avg({lr}))",
        "entropy_mean": mean_sql(entropy_sql(c)),
    }


def sample_query(tokens: str, c: TokenColumns, rule: MismatchRule) -> str:
    """SQL: one row per sample of ``tokens`` (a relation's SQL or name) with ``sample_figures``."""
    cols = ", ".join(f"{sql} AS {ident(name)}" for name, sql in sample_figures(c, rule).items())
    return f"SELECT {ident(c.sample)}, {cols} FROM {tokens} GROUP BY {ident(c.sample)}"


def step_query(samples: str, step: str = "step") -> str:
    """SQL: one row per step of ``samples`` (``sample_query``'s rows with a ``step`` column), by step."""
    figures = {"samples": "count(*) FILTER (WHERE trained_tokens > 0)", **step_figures()}
    cols = ", ".join(f"{sql} AS {ident(name)}" for name, sql in figures.items())
    return f"SELECT {ident(step)}, {cols} FROM {samples} GROUP BY {ident(step)} ORDER BY {ident(step)}"
