"""Rollout–trainer mismatch as DuckDB SQL: the per-token fields, the masking rule, per-sample and per-step figures.

Everything here is SQL text over a tokens relation (one row per token) and a samples relation (one row per sample),
so that it runs inside the store's queries. Sources and conventions: ``docs/upstream-writers.md`` §9.

- **Log ratio** ``trainer_logprob - inference_logprob`` (prime-rl's ``log_importance_ratio``, TRL's
  ``old_per_token_logps - sampling_per_token_logps``, NeMo-RL's ``prev_logprobs - generation_logprobs``), its
  **ratio** ``exp(log ratio)``, **mismatch KL** k3 ``ratio - 1 - log ratio`` (prime-rl's ``mismatch_kl``, verl's
  ``token_k3``: an estimate of KL(inference ‖ trainer) from inference samples, never negative) and **prob delta**
  ``exp(trainer) - exp(inference)`` (prime-rl's DPPO statistic).
- **Only trained tokens count.** Off the loss mask the logs hold 0.0 for the sampler's log-prob, so every derived
  field is NULL there, and every aggregate is over trained tokens. Non-finite inputs are NULL (as prime-rl writes
  them); a ratio past a double's range is +inf, never an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlviz_widgets._sql import ident, mean_sql

TOKEN_KINDS = ("token_truncate", "token_mask")
SEQUENCE_KINDS = ("sequence_truncate", "sequence_mask", "geometric_mask")
RULE_KINDS = (*TOKEN_KINDS, *SEQUENCE_KINDS, "prob_delta")
DEFAULT = "default"  # a bound left to the rule kind's framework default

# (low, high) per kind: TRL GRPOConfig vllm_importance_sampling_clip_min / _clip_max (None / 3.0) for its four modes;
# verl's geometric rejection presets (decoupled_geo_rs: "0.999_1.001"); prime-rl's dppo_mask_low / _high (0.2 / 0.2)
DEFAULT_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "token_truncate": (None, 3.0), "token_mask": (None, 3.0), "sequence_truncate": (None, 3.0),
    "sequence_mask": (None, 3.0), "geometric_mask": (0.999, 1.001), "prob_delta": (0.2, 0.2)}

STEP_FIGURES = ("mismatch_log_ratio_abs_mean", "mismatch_log_ratio_abs_max", "mismatch_kl_mean", "masked_fraction",
                "rule_masked_fraction", "sequence_ratio", "entropy_mean")  # per-sample columns summed up per step


@dataclass(frozen=True)
class TokenColumns:
    """The tokens relation's columns (None: the log has no such field; read as NULL)."""

    inference: str = "inference_logprob"
    trainer: str = "trainer_logprob"
    trained: str = "trained"
    sample: str = "sample_id"
    logged_kl: str | None = None  # the log's own per-token mismatch KL (prime-rl ``mismatch_kl``)
    logged_mask: str | None = None  # the log's own mask (prime-rl ``is_masked``)
    entropy: str | None = None
    advantage: str | None = None

    def col(self, name: str | None) -> str:
        """A column as a finite DOUBLE or NULL."""
        return "NULL::DOUBLE" if name is None else _finite(f"{ident(name)}::DOUBLE")

    def is_trained(self) -> str:
        return f"coalesce({ident(self.trained)}, false)"

    def logged(self) -> str:
        return "NULL::BOOLEAN" if self.logged_mask is None else ident(self.logged_mask)


def _finite(x: str) -> str:
    return f"CASE WHEN isfinite({x}) THEN {x} END"


def _on_trained(c: TokenColumns, x: str) -> str:
    return f"CASE WHEN {c.is_trained()} THEN {x} END"


def log_ratio_sql(c: TokenColumns) -> str:
    """SQL: trainer − inference log-prob on trained tokens."""
    return _on_trained(c, f"({c.col(c.trainer)} - {c.col(c.inference)})")


def importance_ratio_sql(c: TokenColumns) -> str:
    """SQL: exp(log ratio) on trained tokens."""
    return f"exp({log_ratio_sql(c)})"


def k3_sql(c: TokenColumns) -> str:
    """SQL: the k3 mismatch KL from the two log-probs, ``ratio - 1 - log ratio``."""
    r = log_ratio_sql(c)
    return f"(exp({r}) - 1 - {r})"


def mismatch_kl_sql(c: TokenColumns) -> str:
    """SQL: the log's own per-token mismatch KL where it has a finite one, else k3; on trained tokens."""
    return _on_trained(c, f"coalesce({c.col(c.logged_kl)}, {k3_sql(c)})")


def prob_delta_sql(c: TokenColumns) -> str:
    """SQL: exp(trainer) − exp(inference) on trained tokens."""
    return _on_trained(c, f"(exp({c.col(c.trainer)}) - exp({c.col(c.inference)}))")


def entropy_sql(c: TokenColumns) -> str:
    """SQL: the finite entropy of a trained token."""
    return _on_trained(c, c.col(c.entropy))


def _bound(value, name: str, kind: str) -> float | None:
    """A bound checked: None (no bound) or a finite number; ratio bounds above 0, prob-delta bounds at least 0."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bool, np.bool_)):
        raise TypeError(f"MismatchRule {name}= takes a number or None, not {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"MismatchRule {name}= takes a number or None, not {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"MismatchRule {name}= must be finite (None for no bound), not {value!r}")
    if kind == "prob_delta" and x < 0:
        raise ValueError(f"MismatchRule {name}= of a prob_delta rule must be at least 0, not {value!r}")
    if kind != "prob_delta" and x <= 0:
        raise ValueError(f"MismatchRule {name}= bounds a ratio: it must be above 0, not {value!r}")
    return x


@dataclass(frozen=True)
class MismatchRule:
    """Which trained tokens a mismatch correction would mask (or, for ``*_truncate``, truncate).

    ``kind``:
    - ``"token_mask"`` / ``"token_truncate"``: each token's ratio outside [low, high] (TRL ``token_mask`` /
      ``token_truncate``, verl ``rollout_is="token"``);
    - ``"sequence_mask"`` / ``"sequence_truncate"``: the sequence's ratio, the product of its tokens' ratios
      (TRL's ``sequence_*`` modes, verl ``rollout_is="sequence"``), outside [low, high]: every trained token of it;
    - ``"geometric_mask"``: the geometric mean of its tokens' ratios outside [low, high] (verl ``seq_mean_k1``,
      NeMo-RL ``seq-mask-tis``);
    - ``"prob_delta"``: prime-rl's DPPO masks, prob delta above ``high`` where the advantage is positive, below
      ``-low`` elsewhere.

    Bounds left at ``"default"`` follow the framework the kind comes from: TRL's GRPOConfig for the four TRL modes
    (``vllm_importance_sampling_clip_min=None``, ``_clip_max=3.0``; TRL's default mode is ``sequence_mask``, the
    default here), verl's geometric presets (0.999, 1.001), prime-rl's ``dppo_mask_low`` / ``_high`` (0.2, 0.2).
    A ratio bound of None is no bound on that side.
    """

    kind: str = "sequence_mask"
    low: float | None | str = DEFAULT
    high: float | None | str = DEFAULT

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"MismatchRule kind must be one of {', '.join(RULE_KINDS)}; not {self.kind!r}")
        bounds = []
        for name, value, default in zip(("low", "high"), (self.low, self.high), DEFAULT_BOUNDS[self.kind]):
            bounds.append(default if isinstance(value, str) and value == DEFAULT else _bound(value, name, self.kind))
        low, high = bounds
        if self.kind == "prob_delta" and (low is None or high is None):
            raise ValueError("a prob_delta MismatchRule needs both bounds (low= and high=, each at least 0)")
        if low is None and high is None:
            raise ValueError(f"a {self.kind} MismatchRule needs a bound: low=, high= or both")
        if self.kind != "prob_delta" and low is not None and high is not None and low > high:
            raise ValueError(f"MismatchRule low={low} is above high={high}")
        object.__setattr__(self, "low", low)  # frozen: the checked bounds are set once, here
        object.__setattr__(self, "high", high)

    @property
    def per_sequence(self) -> bool:
        """Whether the rule masks whole sequences."""
        return self.kind in SEQUENCE_KINDS

    def outside(self, log_ratio: str) -> str:
        """SQL: a log ratio (token or sequence) outside the ratio bounds, compared in log space (no overflow)."""
        parts = []
        if self.low is not None:
            parts.append(f"{log_ratio} < {math.log(self.low)!r}")
        if self.high is not None:
            parts.append(f"{log_ratio} > {math.log(self.high)!r}")
        return f"coalesce({' OR '.join(parts)}, false)"

    def token_sql(self, c: TokenColumns) -> str:
        """SQL: whether a token is masked by a per-token rule (``token_*``, ``prob_delta``); trained tokens only.
        For a per-sequence rule use ``sequence_sql`` (per sample) or ``token_window_sql``."""
        if self.per_sequence:
            raise ValueError(f"a {self.kind} rule masks sequences: use sequence_sql or token_window_sql")
        if self.kind != "prob_delta":
            return f"({c.is_trained()} AND {self.outside(log_ratio_sql(c))})"
        d = prob_delta_sql(c)
        # an advantage of 0 (or none) takes the low side, as prime-rl's torch.where(advantages > 0, high, low)
        cond = f"CASE WHEN {c.col(c.advantage)} > 0 THEN {d} > {self.high!r} ELSE {d} < {-self.low!r} END"
        return f"({c.is_trained()} AND coalesce({cond}, false))"

    def sequence_log_sql(self, c: TokenColumns) -> str:
        """SQL aggregate: the log of the sequence ratio the rule tests (a sum for the product, a mean for the
        geometric mean) over a sample's trained tokens of finite log ratio."""
        return f"{self._sequence_agg()}({log_ratio_sql(c)})"

    def _sequence_agg(self) -> str:
        return "avg" if self.kind == "geometric_mask" else "sum"

    def sequence_sql(self, c: TokenColumns) -> str:
        """SQL aggregate (per sample): whether the rule masks any of the sample's trained tokens."""
        if self.per_sequence:
            return f"(count(*) FILTER (WHERE {c.is_trained()}) > 0 AND {self.outside(self.sequence_log_sql(c))})"
        return f"coalesce(bool_or({self.token_sql(c)}), false)"

    def token_window_sql(self, c: TokenColumns) -> str:
        """SQL: whether a token is masked by the rule, for any kind; per-sequence kinds by a window over the
        sample (for a few samples' tokens; the per-sample table's ``sequence_masked`` is the cheap way at scale)."""
        if not self.per_sequence:
            return self.token_sql(c)
        over = f"OVER (PARTITION BY {ident(c.sample)})"
        stat = f"{self._sequence_agg()}({log_ratio_sql(c)}) {over}"
        return f"({c.is_trained()} AND {self.outside(stat)})"

    def rule_masked_count_sql(self, c: TokenColumns) -> str:
        """SQL aggregate (per sample): the trained tokens the rule masks."""
        trained = f"count(*) FILTER (WHERE {c.is_trained()})"
        if self.per_sequence:
            return f"CASE WHEN {self.sequence_sql(c)} THEN {trained} ELSE 0 END"
        return f"count(*) FILTER (WHERE {self.token_sql(c)})"

    def disagreements_sql(self, c: TokenColumns) -> str:
        """SQL aggregate (per sample): trained tokens the log marks masked or not (not NULL) where the rule says
        otherwise."""
        logged = f"{c.is_trained()} AND {c.logged()} IS NOT NULL"
        if self.per_sequence:
            return (f"CASE WHEN {self.sequence_sql(c)} THEN count(*) FILTER (WHERE {logged} AND NOT {c.logged()}) "
                    f"ELSE count(*) FILTER (WHERE {logged} AND {c.logged()}) END")
        return f"count(*) FILTER (WHERE {logged} AND {c.logged()} <> {self.token_sql(c)})"


def token_fields(c: TokenColumns, rule: MismatchRule) -> dict[str, str]:
    """Column name -> SQL of the derived per-token fields (``run.tokens()``); ``rule_masked`` by a window for a
    per-sequence rule, ``masked`` the log's own mask where it has one, else the rule's."""
    rule_masked = rule.token_window_sql(c)
    return {"mismatch_log_ratio": log_ratio_sql(c), "importance_ratio": importance_ratio_sql(c),
            "mismatch_kl": mismatch_kl_sql(c), "prob_delta": prob_delta_sql(c), "rule_masked": rule_masked,
            "masked": f"coalesce({c.is_trained()} AND {c.logged()}, {rule_masked})",
            "mask_disagrees": f"({c.is_trained()} AND {c.logged()} IS NOT NULL AND {c.logged()} <> {rule_masked})"}


def rule_sample_sql(rule: MismatchRule, s: str, counts: str | None, logged: bool) -> dict[str, str]:
    """Column name -> SQL of a sample's rule-dependent figures from its stored ones (``mismatch_metrics``, relation
    alias ``s``): for a per-sequence rule the sequence ratio's log (``mismatch_log_ratio_sum``, or over
    ``mismatch_tokens`` for the geometric mean); for a per-token rule the counts of one scan of the tokens
    (``token_rule_query``, alias ``counts``). ``logged``: the samples have the log's own mask counts."""
    trained = f"{s}.n_trained_tokens"
    if rule.per_sequence:
        stat = f"{s}.mismatch_log_ratio_sum"
        if rule.kind == "geometric_mask":
            stat = f"({stat} / nullif({s}.mismatch_tokens, 0))"
        seq = f"coalesce({trained} > 0 AND {rule.outside(stat)}, false)"
        rule_n = f"CASE WHEN {seq} THEN {trained} ELSE 0 END"
        disagree = (f"CASE WHEN {seq} THEN coalesce({s}.logged_unmasked_tokens, 0) "
                    f"ELSE coalesce({s}.logged_masked_tokens, 0) END") if logged else "0"
    else:
        rule_n = f"coalesce({counts}.rule_masked_tokens, 0)"
        seq = f"({rule_n} > 0)"
        disagree = f"coalesce({counts}.mask_disagreements, 0)" if logged else "0"
    masked = f"coalesce({s}.logged_masked_tokens, {rule_n})" if logged else rule_n
    return {"masked_tokens": f"({masked})::INTEGER",
            "masked_fraction": f"({masked}) / nullif({trained}, 0)::DOUBLE",
            "rule_masked_tokens": f"({rule_n})::INTEGER",
            "rule_masked_fraction": f"({rule_n}) / nullif({trained}, 0)::DOUBLE",
            "sequence_masked": seq, "mask_disagreements": f"({disagree})::INTEGER"}


def token_rule_query(tokens: str, c: TokenColumns, rule: MismatchRule) -> str:
    """SQL: per sample of ``tokens`` (token rows), the trained tokens a per-token rule masks and those where the
    log's own mask says otherwise."""
    return (f"SELECT {ident(c.sample)} AS sample_id, {rule.rule_masked_count_sql(c)} AS rule_masked_tokens, "
            f"{rule.disagreements_sql(c)} AS mask_disagreements FROM {tokens} GROUP BY {ident(c.sample)}")


TOKEN_ORDER = ("inference_logprob", "trainer_logprob", "mismatch_log_ratio", "importance_ratio", "mismatch_kl",
               "prob_delta", "masked", "entropy", "advantage", "rule_masked", "mask_disagrees", "logged_mismatch_kl",
               "logged_log_importance_ratio", "logged_importance_ratio", "logged_prob_delta", "is_masked",
               "is_masked_high", "is_masked_low")  # the tokens frame's mismatch columns, in this order


def token_select(present: set[str], rule: MismatchRule) -> list[str]:
    """``expr AS name`` of the tokens frame's mismatch columns over token rows holding ``present`` (the unnested
    fields, ``trained`` and ``sample_id`` besides): the fields as logged and, given both log-probs, the derived ones
    (``token_fields``)."""
    c = TokenColumns(logged_kl="logged_mismatch_kl" if "logged_mismatch_kl" in present else None,
                     logged_mask="is_masked" if "is_masked" in present else None,
                     entropy="entropy" if "entropy" in present else None,
                     advantage="advantage" if "advantage" in present else None)
    made = dict.fromkeys(present)
    if {"inference_logprob", "trainer_logprob"} <= present:
        made |= token_fields(c, rule)
    return [f"{ident(n)}" if made[n] is None else f"{made[n]} AS {ident(n)}" for n in TOKEN_ORDER if n in made]


def step_figures(trained: str = "trained_tokens", present: tuple[str, ...] = STEP_FIGURES) -> dict[str, str]:
    """Column name -> SQL aggregate of one step's samples (rows with the per-sample figures and a step): each of
    ``STEP_FIGURES`` as the mean over samples with trained tokens, and its ``_p95`` / ``_p99``; the fraction of
    those sequences with a masked token (``masked_sequences_fraction``, by the log where it has its mask;
    ``rule_masked_sequences_fraction``), the token-weighted ``masked_token_fraction``, and the
    ``mask_disagreements``. The two quantiles are items of one ``quantile_cont`` list, which DuckDB computes once
    (one sort of the step's values, not two)."""
    has = f"{ident(trained)} > 0"
    out: dict[str, str] = {}
    for name in present:
        x = ident(name)
        out[name] = mean_sql(x)
        out[f"{name}_p95"] = f"quantile_cont({x}, [0.95, 0.99])[1]"
        out[f"{name}_p99"] = f"quantile_cont({x}, [0.95, 0.99])[2]"
    if "masked_fraction" not in present:
        return out
    out["masked_sequences_fraction"] = f"avg((masked_tokens > 0)::INT) FILTER (WHERE {has})"
    out["rule_masked_sequences_fraction"] = f"avg((rule_masked_tokens > 0)::INT) FILTER (WHERE {has})"
    out["masked_token_fraction"] = f"sum(masked_tokens) / nullif(sum({ident(trained)}), 0)::DOUBLE"
    out["mask_disagreements"] = "sum(mask_disagreements)"
    return out
