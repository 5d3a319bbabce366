"""The mismatch SQL (rlviz_widgets._mismatch) against an independent numpy computation, on prime-rl token exports
and NeMo-RL train dumps from the tests' generators (tests/prime_formats.py)."""

from __future__ import annotations

import json
import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from rlviz_widgets._mismatch import (
    DEFAULT_BOUNDS,
    STEP_FIGURES,
    MismatchRule,
    TokenColumns,
    token_fields,
)
from tests.mismatch_sql import sample_query, step_query
from tests.prime_formats import GENERATIONS, nemo_prev_tokens, write_nemo_prev, write_prime

PRIME = TokenColumns(logged_kl="mismatch_kl", logged_mask="is_masked", entropy="entropy", advantage="advantage")
RULES = [MismatchRule(), MismatchRule("token_mask", low=0.5, high=1.5), MismatchRule("token_truncate", high=1.2),
         MismatchRule("token_mask", low=0.9, high=None), MismatchRule("sequence_mask", low=0.8, high=1.1),
         MismatchRule("sequence_truncate", high=1.05), MismatchRule("geometric_mask"),
         MismatchRule("geometric_mask", low=0.98, high=1.02), MismatchRule("prob_delta"),
         MismatchRule("prob_delta", low=0.05, high=0.01)]
TOKEN_KEYS = {"inference_logprob": "inference_logprobs", "trainer_logprob": "trainer_logprobs",
              "trained": "loss_mask", "entropy": "entropy", "mismatch_kl": "mismatch_kl", "is_masked": "is_masked",
              "advantage": "advantages"}


def prime_tokens(records: list[dict]) -> pa.Table:
    """One row per token of the records (their lists as written, nulls kept), numbered by ``row``."""
    cols: dict[str, list] = {"row": [], "sample_id": [], "step": [], **{k: [] for k in TOKEN_KEYS}}
    for sid, rec in enumerate(records):
        n = len(rec["token_ids"])
        cols["sample_id"] += [sid] * n
        cols["step"] += [rec["step"]] * n
        for ours, theirs in TOKEN_KEYS.items():
            cols[ours] += rec[theirs]
    cols["row"] = list(range(len(cols["sample_id"])))
    types = {"trained": pa.bool_(), "is_masked": pa.bool_(), "sample_id": pa.int64(), "step": pa.int64(),
             "row": pa.int64()}
    return pa.table({k: pa.array(v, types.get(k, pa.float32())) for k, v in cols.items()})


@pytest.fixture(params=GENERATIONS)
def prime(request, tmp_path) -> pa.Table:
    written = write_prime(tmp_path, generation=request.param, steps=(1, 2, 3), prompts=4, n=4, seed=3)
    return prime_tokens([w["record"] for w in written])


def run(table: pa.Table, sql: str) -> dict[str, np.ndarray]:
    con = duckdb.connect()
    con.register("tokens", table)
    out = con.sql(sql).arrow()
    out = out.read_all() if hasattr(out, "read_all") else out
    return {k: np.asarray(out[k].to_pylist(), dtype=object) for k in out.column_names}


def floats(values) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


# -- the independent computation ------------------------------------------------------------------------------------
class Ref:
    """Per-token values in numpy, NaN where SQL has NULL."""

    def __init__(self, t: pa.Table, c: TokenColumns = PRIME):
        g = {k: t[k].to_pylist() for k in t.column_names}
        self.sample = np.asarray(g[c.sample])
        self.step = np.asarray(g["step"]) if "step" in g else None
        self.trained = np.asarray([bool(x) for x in g[c.trained]])
        tr, inf = floats(g[c.trainer]), floats(g[c.inference])
        tr[~np.isfinite(tr)], inf[~np.isfinite(inf)] = np.nan, np.nan
        on = np.where(self.trained, 1.0, np.nan)
        with np.errstate(over="ignore", invalid="ignore"):
            self.lr = (tr - inf) * on
            self.ratio = np.exp(self.lr)
            k3 = self.ratio - 1 - self.lr
            self.delta = (np.exp(tr) - np.exp(inf)) * on
        logged = floats(g[c.logged_kl]) if c.logged_kl else np.full(len(tr), np.nan)
        self.kl = np.where(np.isfinite(logged), logged, k3) * on
        ent = floats(g[c.entropy]) if c.entropy else np.full(len(tr), np.nan)
        self.entropy = np.where(np.isfinite(ent), ent, np.nan) * on
        self.adv = floats(g[c.advantage]) if c.advantage else np.full(len(tr), np.nan)
        self.logged = np.asarray(g[c.logged_mask], dtype=object) if c.logged_mask else np.full(len(tr), None)

    def rule_tokens(self, rule: MismatchRule) -> np.ndarray:
        """Which tokens the rule masks, in ratio space (the SQL compares log ratios)."""
        if rule.kind == "prob_delta":
            with np.errstate(invalid="ignore"):
                hit = np.where(self.adv > 0, self.delta > rule.high, self.delta < -rule.low)
            return self.trained & hit
        if rule.kind in ("token_mask", "token_truncate"):
            return self.trained & self._outside(rule, self.ratio)
        out = np.zeros(len(self.lr), bool)
        for s in np.unique(self.sample):
            at = (self.sample == s) & self.trained
            if not at.any():
                continue
            lrs = self.lr[at]
            with np.errstate(over="ignore"):
                seq = (np.exp(np.nanmean(lrs)) if rule.kind == "geometric_mask" else np.exp(np.nansum(lrs))) \
                    if np.isfinite(lrs).any() else np.nan
            out[at] = self._outside(rule, np.asarray([seq]))[0]
        return out

    @staticmethod
    def _outside(rule: MismatchRule, ratio: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            low = ratio < rule.low if rule.low is not None else np.zeros(len(ratio), bool)
            high = ratio > rule.high if rule.high is not None else np.zeros(len(ratio), bool)
        return low | high

    def per_sample(self, rule: MismatchRule) -> dict[int, dict]:
        masked_by_rule = self.rule_tokens(rule)
        out = {}
        for s in np.unique(self.sample):
            at = self.sample == s
            tr = at & self.trained
            n = int(tr.sum())
            logged = [v for v in self.logged[tr] if v is not None]
            rule_n = int((masked_by_rule & at).sum())
            masked = sum(bool(v) for v in logged) if logged else rule_n
            disagree = sum(1 for v, m in zip(self.logged[tr], masked_by_rule[tr]) if v is not None and v != m)
            lr = self.lr[tr]
            out[int(s)] = {
                "trained_tokens": n,
                "mismatch_log_ratio_abs_mean": np.nanmean(np.abs(lr)) if np.isfinite(lr).any() else np.nan,
                "mismatch_log_ratio_abs_max": np.nanmax(np.abs(lr)) if np.isfinite(lr).any() else np.nan,
                "mismatch_kl_mean": _nanmean(self.kl[tr]),
                "masked_tokens": masked, "masked_fraction": masked / n if n else np.nan,
                "rule_masked_tokens": rule_n, "rule_masked_fraction": rule_n / n if n else np.nan,
                "sequence_masked": bool(rule_n), "mask_disagreements": disagree,
                "sequence_ratio": math.exp(np.nanmean(lr)) if np.isfinite(lr).any() else np.nan,
                "entropy_mean": _nanmean(self.entropy[tr]),
            }
        return out


def _nanmean(x: np.ndarray) -> float:
    return float(np.nanmean(x)) if np.isfinite(x).any() else np.nan


def close(got, want, what: str) -> None:
    np.testing.assert_allclose(floats(got), floats(want), rtol=1e-12, atol=1e-15, equal_nan=True, err_msg=what)


# -- per token ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", [MismatchRule("token_mask", low=0.5, high=1.5), MismatchRule("prob_delta"),
                                  MismatchRule("geometric_mask", low=0.98, high=1.02)])
def test_token_fields_match_numpy(prime, rule):
    fields = token_fields(PRIME, rule)
    got = run(prime, "SELECT " + ", ".join(f"{v} AS {k}" for k, v in fields.items()) + " FROM tokens ORDER BY row")
    ref = Ref(prime)
    close(got["mismatch_log_ratio"], ref.lr, "log ratio")
    close(got["importance_ratio"], ref.ratio, "ratio")
    close(got["mismatch_kl"], ref.kl, "mismatch KL")
    close(got["prob_delta"], ref.delta, "prob delta")
    rule_masked = ref.rule_tokens(rule)
    assert got["rule_masked"].tolist() == rule_masked.tolist()
    logged = np.asarray([v is True for v in ref.logged])
    has_logged = np.asarray([v is not None for v in ref.logged])
    assert got["masked"].tolist() == np.where(ref.trained & has_logged, logged & ref.trained, rule_masked).tolist()
    assert got["mask_disagrees"].tolist() == (ref.trained & has_logged & (logged != rule_masked)).tolist()


def test_untrained_tokens_have_no_derived_values(prime):
    got = run(prime, "SELECT " + ", ".join(f"{v} AS {k}" for k, v in token_fields(PRIME, MismatchRule()).items())
              + " FROM tokens WHERE NOT trained")
    assert len(got["mismatch_kl"]) > 0
    for k in ("mismatch_log_ratio", "importance_ratio", "mismatch_kl", "prob_delta"):
        assert all(v is None for v in got[k]), k
    assert not any(got["rule_masked"]) and not any(got["masked"])


def test_k3_is_the_logged_mismatch_kl(tmp_path):
    """Without the log's own field, k3 of the two log-probs gives prime-rl's mismatch_kl (float32 apart)."""
    t = prime_tokens([w["record"] for w in write_prime(tmp_path, seed=5)])
    no_log = TokenColumns(entropy="entropy")
    got = run(t, f"SELECT {token_fields(no_log, MismatchRule())['mismatch_kl']} AS k3, "
                 f"mismatch_kl FROM tokens WHERE trained ORDER BY row")
    k3, logged = floats(got["k3"]), floats(got["mismatch_kl"])
    both = np.isfinite(k3) & np.isfinite(logged)
    assert both.sum() > 20
    np.testing.assert_allclose(k3[both], logged[both], rtol=2e-3, atol=2e-6)
    assert np.isnan(k3[~np.isfinite(logged)]).all()  # a null trainer log-prob: no k3 either


def test_logged_dppo_masks_agree_with_the_prob_delta_rule(tmp_path):
    """The log's is_masked (prime-rl's DPPO at its defaults) and the prob_delta rule at its defaults agree, but
    where the trainer's log-prob was -inf: prime-rl masks on the value it then writes as null (prob delta -p)."""
    for nonfinite in (False, True):
        written = write_prime(tmp_path / str(nonfinite), generation="main", seed=8, prompts=6, nonfinite=nonfinite)
        t = prime_tokens([w["record"] for w in written])
        got = run(t, sample_query("tokens", PRIME, MismatchRule("prob_delta")))
        assert sum(got["masked_tokens"]) > 0
        lost = run(t, "SELECT count(*) AS n FROM tokens WHERE trained AND trainer_logprob IS NULL AND is_masked")
        assert sum(got["mask_disagreements"]) == lost["n"][0] == (9 if nonfinite else 0)


# -- per sample and per step ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.kind}-{r.low}-{r.high}")
def test_sample_figures_match_numpy(prime, rule):
    got = run(prime, sample_query("tokens", PRIME, rule) + " ORDER BY sample_id")
    want = Ref(prime).per_sample(rule)
    ids = got["sample_id"].tolist()
    assert ids == sorted(want)
    for name in want[ids[0]]:
        close(got[name].astype(float) if name == "sequence_masked" else got[name],
              [float(want[s][name]) for s in ids], f"{rule} {name}")


def samples_with_steps(rule: MismatchRule, c: TokenColumns = PRIME) -> str:
    return (f"(SELECT s.*, k.step FROM ({sample_query('tokens', c, rule)}) s "
            f"JOIN (SELECT DISTINCT {c.sample}, step FROM tokens) k USING ({c.sample}))")


@pytest.mark.parametrize("rule", [MismatchRule(), MismatchRule("token_mask", low=0.7, high=1.3),
                                  MismatchRule("prob_delta")], ids=lambda r: r.kind)
def test_step_figures_match_numpy(prime, rule):
    got = run(prime, step_query(samples_with_steps(rule)))
    ref = Ref(prime)
    per = ref.per_sample(rule)
    step_of = {int(s): int(ref.step[ref.sample == s][0]) for s in per}
    for k, step in enumerate(got["step"].tolist()):
        rows = [v for s, v in per.items() if step_of[s] == step and v["trained_tokens"] > 0]
        assert got["samples"][k] == len(rows)
        for name in STEP_FIGURES:
            x = np.asarray([r[name] for r in rows], float)
            close([got[name][k]], [_nanmean(x)], f"step {step} {name}")
            for q in (95, 99):
                want = np.nanpercentile(x, q) if np.isfinite(x).any() else np.nan
                close([got[f"{name}_p{q}"][k]], [want], f"step {step} {name} p{q}")
        close([got["masked_sequences_fraction"][k]], [np.mean([r["masked_tokens"] > 0 for r in rows])], "seqs")
        close([got["rule_masked_sequences_fraction"][k]], [np.mean([r["rule_masked_tokens"] > 0 for r in rows])],
              "rule seqs")
        close([got["masked_token_fraction"][k]],
              [sum(r["masked_tokens"] for r in rows) / sum(r["trained_tokens"] for r in rows)], "token fraction")
        assert got["mask_disagreements"][k] == sum(r["mask_disagreements"] for r in rows)


def test_untrained_values_change_nothing(tmp_path):
    """Garbage off the loss mask (the 0.0 sampler log-probs, huge trainer values) moves no figure."""
    t = prime_tokens([w["record"] for w in write_prime(tmp_path, seed=11)])
    off = ~np.asarray(t["trained"].to_pylist())
    noisy = t
    for name, value in (("inference_logprob", -50.0), ("trainer_logprob", 0.0), ("entropy", 1e6),
                        ("mismatch_kl", 1e9)):
        col = np.asarray(floats(t[name].to_pylist()))
        col[off] = value
        noisy = noisy.set_column(noisy.schema.get_field_index(name), name, pa.array(col, pa.float32()))
    for rule in (MismatchRule(), MismatchRule("token_mask", low=0.5, high=1.5), MismatchRule("prob_delta")):
        # by sample: GROUP BY gives its groups in any order
        a, b = (run(x, sample_query("tokens", PRIME, rule) + " ORDER BY 1") for x in (t, noisy))
        for name in a:
            close(a[name].astype(float), b[name].astype(float), f"{rule} {name}")


# -- nulls and non-finite values ------------------------------------------------------------------------------------
def test_nulls_and_non_finite_inputs_are_left_out():
    t = pa.table({
        "row": list(range(8)), "sample_id": [1] * 4 + [2] * 4,
        "inference_logprob": pa.array([-0.5, -0.2, None, -0.1, -1.0, float("nan"), -0.3, 0.0], pa.float64()),
        "trainer_logprob": pa.array([-0.4, float("-inf"), -0.3, -0.1, -1.2, -0.3, float("inf"), -9.0], pa.float64()),
        "trained": [True, True, True, None, True, True, True, False],
        "entropy": pa.array([1.0, float("nan"), None, 5.0, 2.0, 4.0, float("inf"), 7.0], pa.float64()),
    })
    c = TokenColumns(entropy="entropy")
    got = run(t, sample_query("tokens", c, MismatchRule("token_mask", low=0.5, high=1.5)) + " ORDER BY sample_id")
    assert got["trained_tokens"].tolist() == [3, 3]  # a NULL loss mask is not trained
    close(got["mismatch_log_ratio_abs_mean"], [0.1, 0.2], "only finite pairs")
    close(got["mismatch_kl_mean"], [math.exp(0.1) - 1.1, math.exp(-0.2) - 0.8], "k3")
    close(got["entropy_mean"], [1.0, 3.0], "finite entropies")
    close(got["sequence_ratio"], [math.exp(0.1), math.exp(-0.2)], "geometric mean")
    assert got["rule_masked_tokens"].tolist() == [0, 0]


def test_a_ratio_past_double_range_is_inf_not_an_error():
    t = pa.table({"row": [0, 1], "sample_id": [1, 1], "inference_logprob": [-900.0, -0.1],
                  "trainer_logprob": [-0.01, -0.1], "trained": [True, True]})
    c = TokenColumns()
    got = run(t, "SELECT " + ", ".join(f"{v} AS {k}" for k, v in token_fields(c, MismatchRule()).items())
              + " FROM tokens ORDER BY row")
    assert got["importance_ratio"][0] == math.inf and got["mismatch_kl"][0] == math.inf
    s = run(t, sample_query("tokens", c, MismatchRule("token_mask")))
    assert s["rule_masked_tokens"].tolist() == [1] and s["sequence_ratio"][0] > 1e100


def test_nemo_generation_against_prev_logprobs(tmp_path):
    """NeMo-RL: generation_logprobs (sampler) against prev_logprobs (trainer); bare NaN left out."""
    records = write_nemo_prev(tmp_path / "logs", prompts=3, n=4)
    assert "NaN" in (tmp_path / "logs" / "train_data_step3.jsonl").read_text()
    rows = {"row": [], **nemo_prev_tokens(records)}
    rows["row"] = list(range(len(rows["sample_id"])))
    t = pa.table({k: pa.array(v, pa.float64() if "logprob" in k else None) for k, v in rows.items()})
    c = TokenColumns()
    for rule in (MismatchRule(), MismatchRule("geometric_mask", low=0.97, high=1.03)):
        got = run(t, sample_query("tokens", c, rule) + " ORDER BY sample_id")
        want = Ref(t, c).per_sample(rule)
        for name in ("mismatch_log_ratio_abs_mean", "mismatch_log_ratio_abs_max", "mismatch_kl_mean",
                     "rule_masked_tokens", "sequence_ratio"):
            close(got[name], [float(want[s][name]) for s in sorted(want)], name)
    assert json.dumps(records[0]["prev_logprobs"])  # every record parsed back


# -- the rule's options ---------------------------------------------------------------------------------------------
def test_default_bounds_follow_the_frameworks():
    assert MismatchRule() == MismatchRule("sequence_mask", low=None, high=3.0)  # TRL's GRPOConfig defaults
    for kind, (low, high) in DEFAULT_BOUNDS.items():
        r = MismatchRule(kind)
        assert (r.low, r.high) == (low, high)
    assert MismatchRule("prob_delta").low == 0.2 and MismatchRule("geometric_mask").high == 1.001
    assert MismatchRule("token_mask", low=np.float32(0.5), high=2).low == 0.5


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"kind": "tis"}, ValueError, "kind must be one of"),
    ({"kind": "token_mask", "high": "3"}, TypeError, "high= takes a number or None"),
    ({"kind": "token_mask", "low": True}, TypeError, "low= takes a number or None"),
    ({"kind": "token_mask", "high": math.nan}, ValueError, "must be finite"),
    ({"kind": "token_mask", "high": math.inf}, ValueError, "must be finite"),
    ({"kind": "token_mask", "low": 0.0}, ValueError, "must be above 0"),
    ({"kind": "sequence_mask", "low": -1.0}, ValueError, "must be above 0"),
    ({"kind": "token_mask", "low": None, "high": None}, ValueError, "needs a bound"),
    ({"kind": "token_mask", "low": 2.0, "high": 1.5}, ValueError, "is above high"),
    ({"kind": "prob_delta", "low": -0.1}, ValueError, "at least 0"),
    ({"kind": "prob_delta", "high": None}, ValueError, "needs both bounds"),
    ({"kind": "token_mask", "high": [1.0]}, TypeError, "takes a number or None"),
])
def test_rule_options_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        MismatchRule(**kwargs)


def test_per_sequence_rules_mask_per_token_only_by_window():
    with pytest.raises(ValueError, match="masks sequences"):
        MismatchRule("geometric_mask").token_sql(PRIME)
    assert "OVER (PARTITION BY" in MismatchRule("sequence_mask").token_window_sql(PRIME)
    assert "OVER" not in MismatchRule("token_mask").token_window_sql(PRIME)


def test_names_are_quoted():
    odd = TokenColumns(inference='inf"x', trainer="t r", trained="is trained", sample="s-id")
    t = pa.table({'inf"x': [-0.5, -0.1], "t r": [-0.4, -0.2], "is trained": [True, True], "s-id": [7, 7]})
    got = run(t, sample_query("tokens", odd, MismatchRule("token_mask", low=0.95, high=1.05)))
    assert got["s-id"].tolist() == [7] and got["rule_masked_tokens"].tolist() == [2]
