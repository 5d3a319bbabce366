"""TokenStrip: responses as token strips, each token coloured by one token metric."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import traitlets

from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets._base import STATIC, RpcWidget, rpc, surface_errors
from rlviz_widgets.widgets._validate import JS_SAFE_INT, clip, whole, whole_list

MAX_SAMPLES = 64
MAX_STRIP_TOKENS = 32_768  # tokens sent per answer, shared by its samples (a chip each: the page stays responsive)
MIN_SAMPLE_TOKENS = 1024  # each sample's share at least
MAX_TOKEN_CHARS = 1000  # of one token's text (a log's "token" may be a whole text)
MAX_STRIP_CHARS = 1_000_000  # of token text per answer, shared by its samples (32,768 such tokens were 33 MB)


def _default_metric(metrics: list[str]) -> str:
    """KL where the run has it, else the log-ratio, else its first token metric."""
    return next((m for m in ("kl", "log_ratio", *metrics) if m in metrics), "kl")


def _shares(lengths: list[int], budget: int = MAX_STRIP_TOKENS, least: int = MIN_SAMPLE_TOKENS) -> list[int]:
    """Tokens sent of each sample: the budget shared out, what short samples leave going to the long ones."""
    shares = [0] * len(lengths)
    left = budget
    for k, i in enumerate(sorted(range(len(lengths)), key=lengths.__getitem__)):
        shares[i] = min(lengths[i], max(left // (len(lengths) - k), least))
        left -= shares[i]
    return shares


def _turn_starts(turn, roles, share: int) -> list[dict]:
    """Where each turn starts among the first ``share`` tokens, with its role; none when they hold one turn only
    (a log of response tokens draws as it did)."""
    if turn is None or roles is None or share == 0:
        return []
    turn = np.asarray(turn[:share])
    starts = np.flatnonzero(np.r_[True, turn[1:] != turn[:-1]] & (turn >= 0))
    if len(starts) < 2:
        return []
    return [{"start": int(i), "role": clip(str(roles[i]), 60)} for i in starts]


def _flags_and_turns(sample: dict, share: int, buffers: list) -> dict:
    """The loss mask and rule mask of the sent tokens as byte buffers, and the turns starting among them; a flag
    that changes nothing (every token trained, none masked) is left out, so single-turn strips cost what they did."""
    out: dict = {}
    for name, unset in (("trained", True), ("masked", False)):
        flags = sample.get(name)
        if flags is None:
            continue
        flags = np.asarray(flags[:share], dtype=bool)
        if (flags == unset).all():
            continue
        out.setdefault("flags", {})[name] = len(buffers)
        buffers.append(memoryview(np.ascontiguousarray(flags, dtype=np.uint8)).cast("B"))
    turns = _turn_starts(sample.get("turn"), sample.get("role"), share)
    if turns:
        out["turns"] = turns
    return out


UNKNOWN_IDS = "sample_ids: "


class TokenStrip(RpcWidget):
    """One or more responses as token strips; hover a token for every metric, click to pin."""

    _esm = STATIC / "token_strip.js"
    _front_end = "token_strip"

    sample_ids = traitlets.List(traitlets.Int(), default_value=[]).tag(sync=True)
    """The samples shown, one strip each."""

    color_by = traitlets.Unicode("kl").tag(sync=True)
    """The token metric that colours the chips (one of ``metrics``)."""

    scale_scope = traitlets.Enum(["sample", "step", "run"], default_value="sample").tag(sync=True)
    """Where the colour limits come from: this sample, its step, or the whole run."""

    metrics = traitlets.List(traitlets.Unicode(), default_value=[]).tag(sync=True)
    """The token metrics this run has, in display order (read-only)."""

    show_table = traitlets.Bool(True).tag(sync=True)
    """Show the token x metric table under a single sample's strip."""

    pinned = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    """The clicked token, {sample_id, position}, or None."""

    height = traitlets.Int(0).tag(sync=True)
    """Max height of the strips area in px (0: as tall as needed)."""

    _browser_writes = dict.fromkeys(("pinned", "color_by", "scale_scope"))

    def __init__(self, run: Run, sample_ids: int | Iterable[int] = (), color_by: str | None = None,
                 scale_scope: str = "sample", **kwargs):
        """``color_by``: one of the run's token metrics; None (the default) is "kl", or the best the run has."""
        self._run = run
        metrics = run.token_metrics
        ids = [int(sample_ids)] if isinstance(sample_ids, (int, np.integer)) else [int(i) for i in sample_ids]
        self._shown: tuple | None = None  # what the strips show: their cache parts and metrics (see reload)
        super().__init__(metrics=metrics, color_by=color_by or _default_metric(metrics), scale_scope=scale_scope,
                         sample_ids=ids, **kwargs)

    def reload(self) -> None:
        """Take the run's token metrics again (a followed run may gain token arrays) and redraw what changed.

        The strips are sent again only when their samples' records may have changed (a file holding them was
        read again from its start, or the run let one go) or the metrics did; with a step or run colour scope, the
        limits move with the run, so they are always redrawn. A poll that only added other samples sends nothing.
        """
        metrics = self._run.token_metrics
        if metrics != self.metrics:
            with self.hold_trait_notifications():
                self.metrics = metrics
                if self.color_by not in metrics:
                    self.color_by = _default_metric(metrics)
        shown = self._data_key()
        if shown != self._shown or self.scale_scope != "sample":
            self._shown = shown
            self.refresh_view()
            self._say_unknown_ids()  # a rewritten file may have taken a sample shown

    def _data_key(self) -> tuple:
        return tuple(self.metrics), self._run.data_key(self.sample_ids)

    def __repr__(self) -> str:
        ids = ", ".join(map(str, self.sample_ids[:5])) + (", ..." if len(self.sample_ids) > 5 else "")
        return f"TokenStrip: samples [{ids}], coloured by {self.color_by} ({self.scale_scope} scale)"

    @traitlets.validate("color_by")
    def _check_color_by(self, proposal):
        value = proposal["value"]
        if self.metrics and value not in self.metrics:
            raise traitlets.TraitError(f"color_by must be one of {', '.join(self.metrics)}; got {value!r}")
        return value

    @traitlets.validate("metrics")
    def _check_metrics(self, proposal):
        # read-only: the run's token metrics (color_by is checked against them)
        if list(proposal["value"]) != list(self._run.token_metrics):
            raise traitlets.TraitError(f"metrics is read-only: the run's token metrics, {self._run.token_metrics}")
        return proposal["value"]

    @traitlets.validate("sample_ids")
    def _check_ids(self, proposal):
        ids = list(proposal["value"])
        if len(ids) > MAX_SAMPLES:
            raise traitlets.TraitError(f"at most {MAX_SAMPLES} samples at once; got {len(ids)}")
        try:
            return [whole(i, "sample_ids") for i in ids]
        except ValueError as e:
            raise traitlets.TraitError(str(e)) from None

    @traitlets.validate("pinned")
    def _check_pinned(self, proposal):
        pin = proposal["value"]
        if pin is None:
            return None
        if set(pin) != {"sample_id", "position"}:
            raise traitlets.TraitError(f"pinned: None or {{sample_id, position}}, not {clip(repr(pin), 100)}")
        try:
            return {"sample_id": whole(pin["sample_id"], "pinned.sample_id"),
                    "position": whole(pin["position"], "pinned.position", 0, JS_SAFE_INT)}
        except ValueError as e:
            raise traitlets.TraitError(str(e)) from None

    @traitlets.observe("sample_ids")
    @surface_errors
    def _ids_changed(self, _change) -> None:
        self.pinned = None
        self._shown = self._data_key()
        self.refresh_view()
        self._say_unknown_ids()

    def _say_unknown_ids(self) -> None:
        """The error line names the ids the run does not hold (they showed nothing, in silence); the others are
        drawn."""
        try:
            self._run.check_ids(self.sample_ids)
            if self.error.startswith(UNKNOWN_IDS):
                self.error = ""
        except KeyError as e:
            self.error = UNKNOWN_IDS + e.args[0]

    @property
    def tokens(self) -> pd.DataFrame:
        """The tokens of the shown samples, one row per token (long form)."""
        return self._run.held_tokens(self.sample_ids)

    @rpc
    def strips(self):
        samples, buffers = [], []
        # what is sent is cut before it is read: a sample of millions of tokens costs what 32k cost
        arrays = self._run.token_arrays(self.sample_ids, limit=lambda counts: max(_shares(counts), default=0))
        shares = _shares([s["n_tokens"] for s in arrays])
        chars_each = MAX_STRIP_CHARS // max(len(arrays), 1)
        for s, share in zip(arrays, shares):
            tokens, chars = [], 0
            for t in s["tokens"][:share]:
                t = t if len(t) <= MAX_TOKEN_CHARS else f"{t[:MAX_TOKEN_CHARS]}…"
                chars += len(t)
                if chars > chars_each and tokens:  # tokens that are whole texts: the answer stays small
                    break
                tokens.append(t)
            share = len(tokens)
            index = {}
            for m, arr in s["metrics"].items():
                index[m] = len(buffers)
                buffers.append(memoryview(np.ascontiguousarray(arr[:share], dtype="<f4")).cast("B"))
            reward = "" if s["reward"] is None else f" · reward {s['reward']:.4g}"
            samples.append({"sample_id": s["sample_id"], "step": s["step"], "reward": s["reward"],
                            "label": f"step {s['step']} · sample {s['sample_id']}{reward}",
                            "tokens": tokens, "more": max((s["n_tokens"] if s["tokens"] else 0) - share, 0),
                            "buffers": index,  # (no token strings: no chips, and nothing "more" to say)
                            **_flags_and_turns(s, share, buffers)})
        return {"generation": self.generation, "metrics": self.metrics, "samples": samples}, buffers

    @rpc
    def domain(self, metric: str, scope: str, steps: list[int] | None = None):
        if not isinstance(metric, str) or not isinstance(scope, str):
            raise TypeError("domain: metric and scope are names")
        if steps is not None:  # the steps of the shown samples: no more than there are samples
            steps = sorted(set(whole_list(steps, "steps", MAX_SAMPLES)))
        lo, hi = self._run.token_domain(metric, scope, steps)
        return {"metric": metric, "lo": lo, "hi": hi}
