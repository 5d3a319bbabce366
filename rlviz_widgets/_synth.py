"""Synthetic rollout logs in RL Logging Board's schema, for demos, tests and benchmarks.

Real token-level logs small enough to ship do not exist (see shared/data/README.md), so
this writes realistic ones: byte-level BPE spellings, sparse rewards on the last token, a
reward distribution that sharpens over training, several rank files, GRPO-style groups.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

_WORDS = [
    "the", "answer", "is", "because", "we", "compute", "first", "then", "so", "total",
    "step", "value", "let", "x", "equals", "plus", "minus", "times", "therefore", "result",
    "number", "sum", "of", "and", "check", "final", "apples", "train", "speed", "hours",
]
_SPECIAL_END = "<|endoftext|>"


def _spell(word: str, first: bool) -> str:
    """GPT-2 byte-level spelling: a leading space becomes 'Ġ'."""
    return word if first else "Ġ" + word


def make_record(rng: random.Random, step: int, index: int, n_tokens: int, *, progress: float,
                group: int | None = None, prompt: str | None = None) -> dict:
    """One rollout sample: texts, token strings, per-token arrays and rewards."""
    toks: list[str] = []
    words: list[str] = []
    for i in range(max(n_tokens - 1, 1)):
        if i and rng.random() < 0.04:
            toks.append("Ċ")
            words.append("\n")
            continue
        w = rng.choice(_WORDS)
        toks.append(_spell(w, i == 0 or toks[-1] == "Ċ"))
        words.append(w if (i == 0 or words[-1] == "\n") else " " + w)
    toks.append(_SPECIAL_END)
    n = len(toks)
    # policy drifts from the reference as training progresses: KL grows with progress
    drift = 0.05 + 0.6 * progress
    ref = [-abs(rng.gauss(1.2, 1.0)) for _ in range(n)]
    logp = [min(r + rng.gauss(0.0, drift), 0.0) for r in ref]
    values = [round(rng.gauss(0.3 * progress, 0.3), 4) for _ in range(n)]
    # the distribution sharpens: mean rises, spread shrinks
    reward = round(rng.gauss(-0.5 + 1.5 * progress, 1.0 - 0.6 * progress), 4)
    kl_coef = 0.05
    token_rewards = [-kl_coef * (lp - rl) for lp, rl in zip(logp, ref)]
    token_rewards[-1] += reward
    ref_reward = round(rng.gauss(0.0, 1.0), 4)
    rec = {
        "prompt": prompt if prompt is not None else
        f"<PAD><PAD>System: be helpful.<|im_end|>Question {index % 97}: what is {index % 13} + {step % 7}?",
        "response": "".join(words) + _SPECIAL_END + "<PAD>",
        "response_tokens": toks,
        "logprobs": logp,
        "ref_logprobs": ref,
        "values": values,
        "token_rewards": token_rewards,
        "reward": reward,
        "step": step,
        "ref_response": "the answer is " + str(index % 13 + step % 7),
        "ref_reward": ref_reward,
        "ground_truth": str(index % 13 + step % 7),
        "acc": float(reward > 0),
    }
    if group is not None:
        rec["uid"] = f"s{step}-g{group}"
    return rec


def write_log(folder: str | Path, *, steps: int = 10, samples_per_step: int = 64, tokens: int = 64,
              ranks: int = 2, seed: int = 0, step_gap: int = 1, group_size: int = 0, solved_every: int = 0,
              ) -> list[Path]:
    """Write a multi-rank log folder; returns the files written.

    Samples of each step are dealt round-robin over ``ranks`` files, as data-parallel
    ranks write them. ``group_size`` > 0 gives GRPO groups (several responses per prompt);
    ``solved_every`` > 0 makes every that many-th group one that all its responses solve (reward 1.0
    each: a group of no spread, no learning signal, as GRPO gets on easy prompts).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = [folder / f"rollout_rank{r}.jsonl" for r in range(ranks)]
    handles = [p.open("w", encoding="utf-8") for p in paths]
    try:
        for s in range(steps):
            step = s * step_gap
            progress = s / max(steps - 1, 1)
            for i in range(samples_per_step):
                n = max(2, int(rng.lognormvariate(math.log(tokens), 0.35)))
                group = prompt = None
                if group_size:
                    group = i // group_size
                    prompt = f"Question {group}: what is {group % 13} + 1?"  # the same prompts recur every step
                rec = make_record(rng, step, i, n, progress=progress, group=group, prompt=prompt)
                if group is not None and solved_every and group % solved_every == solved_every - 1:
                    rec["token_rewards"][-1] += 1.0 - rec["reward"]
                    rec["reward"], rec["acc"] = 1.0, 1.0
                handles[i % ranks].write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        for h in handles:
            h.close()
    return paths


def write_sample_log(folder: str | Path, *, samples: int = 1_000_000, steps: int = 100, ranks: int = 4,
                     seed: int = 0) -> list[Path]:
    """A large sample-level log (no token arrays), written fast with numpy: for scale tests."""
    import numpy as np

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per_step = max(samples // steps, 1)
    step = np.repeat(np.arange(steps), per_step)[:samples]
    progress = step / max(steps - 1, 1)
    reward = np.round(rng.normal(-0.5 + 1.5 * progress, 1.0 - 0.6 * progress), 4)
    ref_reward = np.round(rng.normal(0.0, 1.0, len(step)), 4)
    q = rng.integers(0, 1000, len(step))
    paths = [folder / f"samples_rank{r}.jsonl" for r in range(ranks)]
    for r, path in enumerate(paths):
        with path.open("w", encoding="utf-8") as f:
            idx = np.arange(r, len(step), ranks)
            f.writelines(
                f'{{"prompt": "Question {q[i]}: what is {q[i] % 13} + {step[i] % 7}?", '
                f'"response": "The answer is {q[i] % 13 + step[i] % 7 + (reward[i] < 0)}.", '
                f'"reward": {reward[i]}, "ref_reward": {ref_reward[i]}, "step": {step[i]}, '
                f'"ref_response": "The answer is {q[i] % 13 + step[i] % 7}."}}\n'
                for i in idx)
    return paths
