"""prime-rl token exports and NeMo-RL train dumps with trainer log-probs, written as the frameworks' writers write
them (docs/upstream-writers.md §3, §5, §6, §9).

prime-rl ``TokenExporter`` (``src/prime_rl/trainer/rl/token_export.py``), one generation per key set:

- ``"flat"`` (``e971d905``, unreleased): one file ``{output_dir}/token_exports/rank_{R}.jsonl`` appended across
  steps; ``export_sequence_idx`` restarts each step; ``training_mode`` and per-token ``rewards``.
- ``"steps"`` (``badd2b0f``, unreleased): ``token_exports/step_{N}/rank_{R}.jsonl``, no ``STABLE`` marker; same keys.
- ``"v0.6"`` (``941019f2``, v0.6.0): ``export_step`` and ``run_id`` added, ``STABLE`` once a step is complete; with a
  ``run_id`` the folder is ``{output_dir}/{run_id}/token_exports/step_{export_step}/``.
- ``"v0.7"`` (``0be5ac45``, v0.7.0 and v0.8.0): ``training_mode`` and ``rewards`` gone; ``rl_weights``,
  ``ce_weights``, ``ref_kl_weights`` added (all ``null`` when the batch has no such stream); advantages only on
  sampled tokens.
- ``"main"`` (``289562d2``): ``export_step`` and ``run_id`` gone (single-run layout only).

Every record: ``json.dumps(record, separators=(",", ":"), allow_nan=False)``; the per-token lists cover the whole
packed sequence (prompt, every turn, tool results); floats are float32 values widened to Python floats, a non-finite
one is ``null``; ``inference_logprobs`` are 0.0 off the loss mask (so the ratios there are artefacts); the first
sequence of a micro batch has the pads ``log(1/V)`` / ``log V`` at position 0 of ``trainer_logprobs`` / ``entropy``;
the ratio fields follow ``compute_importance_ratio_and_mismatch_kl`` and the DPPO masks of the default loss
(``dppo_mask_low`` = ``dppo_mask_high`` = 0.2); a non-default loss leaves ``is_masked*`` all ``null``; a micro batch
without sampled tokens (``training_mode`` "sft"; an all-zero ``rl_weights`` stream) leaves every ratio field ``null``.
A packed sequence without a trained token is not written, but counts in ``micro_sequence_idx``.

Token ids are ChatML turns (``<|im_start|>role\\n … <|im_end|>\\n``) spelled by ``ChatMLTokenizer``, which wraps the
tests' ``FakeTokenizer`` for every ordinary id. The assistant's content and its ``<|im_end|>`` are trained (they were
sampled); the generation prompt ``<|im_start|>assistant\\n``, the newline after ``<|im_end|>`` and tool turns are not.

NeMo-RL (``write_nemo_prev``): the chat train dump of ``tests/chat_formats.py`` with ``prev_logprobs`` as
``grpo_train`` logs them since v0.2.0: the trainer's values on every real token (prompt and environment tokens
included), 0.0 at position 0 and on padding, all 0.0 when their computation is skipped; bare ``NaN`` as
``json.dumps`` writes it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.chat_formats import write_nemo_chat
from tests.formats import FakeTokenizer

GENERATIONS = ("flat", "steps", "v0.6", "v0.7", "main")
VOCAB_SIZE = 151936  # Qwen2.5's, for the first-position pads
IM_START, IM_END, NL = 151644, 151645, 198  # Qwen's ChatML ids
ROLE_IDS = {"system": 8948, "user": 872, "assistant": 77091, "tool": 14172}  # role words (made-up ids but user's)
DPPO_LOW = DPPO_HIGH = 0.2  # DefaultLossConfig.dppo_mask_low / dppo_mask_high


class ChatMLTokenizer:
    """A tiny tokenizer with ChatML markers: the markers, newline and role words by name, every other id as
    ``FakeTokenizer`` spells it (``Ġt17``, decoded `` t17``)."""

    name_or_path = "chatml-fake-tokenizer"
    vocab_size = VOCAB_SIZE

    def __init__(self) -> None:
        self._words = FakeTokenizer()
        self._named = {IM_START: "<|im_start|>", IM_END: "<|im_end|>", NL: "Ċ",
                       **{i: r for r, i in ROLE_IDS.items()}}

    def convert_ids_to_tokens(self, ids):
        return [self._named.get(i) or self._words.convert_ids_to_tokens([i])[0] for i in ids]

    def decode(self, ids) -> str:
        return "".join("\n" if t == "Ċ" else t if t in self._named.values() else " " + t[1:]
                       for t in self.convert_ids_to_tokens(ids))


@dataclass
class Sample:
    """One trajectory: its token ids, loss mask and turns ``(role, start, end)``, and the truth the tests check."""

    step: int
    group: int
    member: int
    reward: float
    advantage: float
    ids: list[int] = field(default_factory=list)
    mask: list[bool] = field(default_factory=list)
    turns: list[tuple[str, int, int]] = field(default_factory=list)

    def add(self, role: str, content: list[int], trained: bool) -> None:
        """A ChatML turn; ``trained``: its content and ``<|im_end|>`` were sampled (its opening was the generation
        prompt, the newline after it is the template's)."""
        start = len(self.ids)
        head = [IM_START, ROLE_IDS[role], NL]
        self.ids += head + content + [IM_END, NL]
        self.mask += [False] * len(head) + [trained] * (len(content) + 1) + [False]
        self.turns.append((role, start, len(self.ids)))


def conversation(step: int, group: int, member: int, rng: np.random.Generator, reward: float,
                 advantage: float, untrained: bool = False) -> Sample:
    """A multi-turn sample: system and user (the group's prompt, the same ids for every member), an assistant
    turn calling a tool (odd members), the tool's answer, and a final assistant turn."""
    s = Sample(step, group, member, reward, advantage)
    s.add("system", [1000 + group, 1001], False)
    s.add("user", [2000 + group * 10 + k for k in range(3 + group % 3)], False)
    answer = [int(x) for x in rng.integers(3000, 4000, 2 + (member % 3))]
    if member % 2:
        s.add("assistant", [5000, *answer[:1]], not untrained)
        s.add("tool", [6000 + group, 6001], False)
    s.add("assistant", answer, not untrained)
    return s


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _floats(a: np.ndarray) -> list[float | None]:
    """float32 values as the writer lists them: widened to Python floats, non-finite ones ``None``."""
    return [float(v) if math.isfinite(v) else None for v in a.astype(np.float32).tolist()]


@dataclass
class Packed:
    """The per-token streams of one micro batch, float32 as the trainer holds them."""

    samples: list[Sample]
    inference: np.ndarray
    trainer: np.ndarray
    entropy: np.ndarray
    advantages: np.ndarray
    rewards: np.ndarray
    mask: np.ndarray


def _pack(samples: list[Sample], generation: str, rng: np.random.Generator, nonfinite: bool) -> Packed:
    """The micro batch's streams: sampler log-probs on trained tokens (0.0 elsewhere), the trainer's on every token
    (shifted: the pads at the batch's position 0), entropies; one trained token's trainer log-prob -inf and one
    entropy NaN per batch when ``nonfinite``."""
    mask = np.concatenate([np.asarray(s.mask, bool) for s in samples])
    n = len(mask)
    inference = np.where(mask, -rng.uniform(0, 2, n) ** 2, 0.0)
    drift = rng.normal(0, 0.05, n) + np.where(rng.uniform(size=n) < 0.1, rng.normal(0, 1.5, n), 0.0)
    trainer = np.where(mask, np.minimum(inference + drift, -1e-6), -rng.uniform(0, 8, n))
    entropy = rng.uniform(0, 3, n)
    trainer[0], entropy[0] = math.log(1.0 / VOCAB_SIZE), math.log(VOCAB_SIZE)
    if nonfinite and mask.sum() > 2:
        at = np.flatnonzero(mask)
        trainer[at[1]] = -np.inf
        entropy[at[-1]] = np.nan
    per_sample = [(s.advantage, s.reward, np.asarray(s.mask, bool)) for s in samples]
    if generation in ("v0.7", "main"):  # verifiers v1 branches: the advantage on sampled tokens only
        advantages = np.concatenate([np.where(m, a, 0.0) for a, _, m in per_sample])
    else:
        advantages = np.concatenate([np.full(len(m), a) for a, _, m in per_sample])
    rewards = np.concatenate([np.full(len(m), r) for _, r, m in per_sample])
    return Packed(samples, _f32(inference), _f32(trainer), _f32(entropy), _f32(advantages), _f32(rewards), mask)


def _ratio_fields(p: Packed, loss: str, rl: bool) -> dict[str, list]:
    """``compute_importance_ratio_and_mismatch_kl`` and the DPPO masks, in float32 as torch computes them."""
    n = len(p.mask)
    if not rl:
        return {k: [None] * n for k in ("mismatch_kl", "log_importance_ratio", "importance_ratio", "prob_delta",
                                        "is_masked", "is_masked_high", "is_masked_low")}
    with np.errstate(over="ignore", invalid="ignore"):
        log_ratio = p.trainer - p.inference
        ratio = np.exp(log_ratio)
        kl = ratio - log_ratio - np.float32(1)
        delta = np.exp(p.trainer) - np.exp(p.inference)
    out = {"mismatch_kl": _floats(kl), "log_importance_ratio": _floats(log_ratio),
           "importance_ratio": _floats(ratio), "prob_delta": _floats(delta)}
    if loss != "default":
        return {**out, "is_masked": [None] * n, "is_masked_high": [None] * n, "is_masked_low": [None] * n}
    high, low = delta > np.float32(DPPO_HIGH), delta < -np.float32(DPPO_LOW)
    pos, neg = p.advantages > 0, p.advantages < 0
    return {**out, "is_masked": (p.mask & np.where(pos, high, low)).tolist(),
            "is_masked_high": (p.mask & pos & high).tolist(), "is_masked_low": (p.mask & neg & low).tolist()}


def _columns(p: Packed, generation: str, loss: str, rl: bool, rewarded: bool) -> dict[str, list]:
    """``_export_columns`` of one micro batch, in the writer's key order."""
    ids = [i for s in p.samples for i in s.ids]
    cols = {"token_ids": ids, "position_ids": [k for s in p.samples for k in range(len(s.ids))],
            "loss_mask": p.mask.tolist(), "advantages": _floats(p.advantages)}
    if generation in ("flat", "steps", "v0.6"):
        cols["rewards"] = _floats(p.rewards if rewarded else np.full(len(ids), np.nan, np.float32))
    cols |= {"inference_logprobs": _floats(p.inference), "trainer_logprobs": _floats(p.trainer),
             "entropy": _floats(p.entropy), **_ratio_fields(p, loss, rl)}
    if generation in ("v0.7", "main"):
        rl_weights = [None] * len(ids) if rl else [0.0] * len(ids)  # no stream: rl 1.0 on the loss mask
        cols |= {"rl_weights": rl_weights, "ce_weights": [None] * len(ids), "ref_kl_weights": [None] * len(ids)}
    return cols


def _head(generation: str, step: int, rank: int, micro_step: int, index: int, file_index: int,
          run_id: str | None, rl: bool) -> dict:
    """The record's scalar keys before the lists, in the writer's order."""
    head = {"schema_version": 1, "step": step}
    if generation in ("v0.6", "v0.7"):
        head["export_step"] = step
    head |= {"rank": rank, "micro_step": micro_step, "micro_sequence_idx": index, "export_sequence_idx": file_index}
    if generation in ("v0.6", "v0.7"):
        head["run_id"] = run_id
    head["env_name"] = "math"
    if generation in ("flat", "steps", "v0.6"):
        head["training_mode"] = "rl" if rl else "sft"
    return head


def _step_folder(output_dir: Path, generation: str, step: int, run_id: str | None) -> Path:
    base = output_dir / run_id if run_id and generation in ("v0.6", "v0.7") else output_dir
    return base / "token_exports" if generation == "flat" else base / "token_exports" / f"step_{step}"


def _step_samples(step: int, prompts: int, n: int, rng: np.random.Generator) -> list[Sample]:
    """A step's GRPO groups (rewards 0/1, advantages normalised within the group) plus one sample without any
    trained token (not exported), shuffled as the packer spreads them."""
    out = []
    for g in range(prompts):
        rewards = rng.integers(0, 2, n).astype(float)
        adv = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
        out += [conversation(step, g, k, rng, float(rewards[k]), float(adv[k])) for k in range(n)]
    out.append(conversation(step, prompts, 0, rng, 0.0, 0.0, untrained=True))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def write_prime(output_dir: Path, generation: str = "main", steps=(1, 2), prompts: int = 3, n: int = 4,
                ranks: int = 2, per_micro_batch: int = 2, seed: int = 0, run_id: str | None = None,
                loss: str = "default", rewarded: bool = True, nonfinite: bool = True, sft_step: int | None = None,
                unfinished_step: int | None = None) -> list[dict]:
    """prime-rl token exports of ``steps`` x ``prompts`` groups of ``n`` samples, dealt round-robin to ``ranks``
    and packed ``per_micro_batch`` to a micro batch. ``sft_step``: that step's batches carry no sampled tokens (ratio
    fields all null). ``unfinished_step``: its folder gets no ``STABLE`` and its last line is cut in half.
    Returns one dict per line written: ``record`` (as parsed back; None for the cut line), ``path``, ``line``
    (1-based), ``sample`` (the ``Sample``), ``complete``."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation must be one of {GENERATIONS}")
    rng = np.random.default_rng(seed)
    out: list[dict] = []
    counters: dict[Path, int] = {}
    for step in steps:
        folder = _step_folder(output_dir, generation, step, run_id)
        folder.mkdir(parents=True, exist_ok=True)
        samples = _step_samples(step, prompts, n, rng)
        rl = step != sft_step
        for rank in range(ranks):
            mine = samples[rank::ranks]
            path = folder / f"rank_{rank}.jsonl"
            file_index = 0  # export_sequence_idx: records of this (step, rank)
            lines = []
            for micro_step, at in enumerate(range(0, len(mine), per_micro_batch)):
                batch = mine[at:at + per_micro_batch]
                cols = _columns(_pack(batch, generation, rng, nonfinite), generation, loss, rl, rewarded)
                start = 0
                for index, s in enumerate(batch):
                    end = start + len(s.ids)
                    if any(s.mask):
                        rec = {**_head(generation, step, rank, micro_step, index, file_index, run_id, rl),
                               **{k: v[start:end] for k, v in cols.items()}}
                        lines.append((json.dumps(rec, separators=(",", ":"), allow_nan=False), s))
                        file_index += 1
                    start = end
            counters[path] = _append(path, lines, counters.get(path, 0), out, cut=step == unfinished_step
                                     and rank == ranks - 1)
        if generation in ("v0.6", "v0.7", "main") and step != unfinished_step:
            (folder / "STABLE").touch()
    return out


def _append(path: Path, lines: list[tuple[str, Sample]], written: int, out: list[dict], cut: bool) -> int:
    """Append the lines to ``path`` (the flat layout appends across steps); ``cut``: the last is half-written."""
    with open(path, "a", encoding="utf-8") as f:
        for k, (text, s) in enumerate(lines):
            last = cut and k == len(lines) - 1
            f.write(text[: len(text) // 2] if last else text + "\n")
            out.append({"record": None if last else json.loads(text), "path": path, "line": written + k + 1,
                        "sample": s, "complete": not last})
    return written + len(lines)


def write_nemo_prev(log_dir: Path, step: int = 3, prompts: int = 3, n: int = 4, skipped: bool = False,
                    seed: int = 0) -> list[dict]:
    """``train_data_step{step}.jsonl`` of ``write_nemo_chat`` with ``prev_logprobs`` as NeMo-RL logs them; one bare
    ``NaN`` at a trained token of line 1 (unless ``skipped``: all 0.0). Returns per line the parsed record."""
    write_nemo_chat(log_dir, step=step, prompts=prompts, n=n, seed=seed)
    rng = np.random.default_rng(seed + 1)
    path = log_dir / f"train_data_step{step}.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for i, rec in enumerate(records):
        gen = np.asarray(rec["generation_logprobs"][0])
        mask = np.asarray(rec["token_loss_mask"][0]) > 0
        real = np.arange(len(gen)) < rec["input_lengths"][0]
        prev = np.where(mask, gen + rng.normal(0, 0.05, len(gen)), -rng.uniform(0, 6, len(gen)))
        prev = np.where(real, np.minimum(prev, 0.0), 0.0)
        prev[0] = 0.0  # "the logprob of the first token is 0"
        if skipped:
            prev[:] = 0.0
        elif i == 1:
            prev[np.flatnonzero(mask)[0]] = np.nan
        rec["prev_logprobs"] = [prev.tolist()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def nemo_prev_tokens(records: list[dict]) -> dict[str, list]:
    """The tokens of ``write_nemo_prev``'s records as a reference computation reads them: per real token its
    sample (the line's index), both log-probs and whether it is trained."""
    rows: dict[str, list] = {"sample_id": [], "inference_logprob": [], "trainer_logprob": [], "trained": []}
    for sid, rec in enumerate(records):
        n = rec["input_lengths"][0]
        rows["sample_id"] += [sid] * n
        rows["inference_logprob"] += rec["generation_logprobs"][0][:n]
        rows["trainer_logprob"] += rec["prev_logprobs"][0][:n]
        rows["trained"] += [m > 0 for m in rec["token_loss_mask"][0][:n]]
    return rows
