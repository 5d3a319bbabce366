"""Small dumps in other RL frameworks' formats, written the way each framework writes them.

Field for field as in (checked against the frameworks' code):
- verl ``RayPPOTrainer._dump_generations``: ``{dir}/{global_step}.jsonl``, keys input, output, gts, score,
  step, then every reward-extra key of the batch's length (acc, pred, uid, request_id here);
  ``json.dumps(entry, ensure_ascii=False)`` lines joined by newlines plus a final newline.
- TRL ``GRPOTrainer.log``: ``completions/completions_{step:05d}.parquet`` from a pandas DataFrame
  with step, prompt, completion, one column per reward function, advantage.
- open-instruct ``rl_utils._save_rollouts``: ``{run}_rollouts_{shard:06d}.jsonl`` of
  ``asdict(RolloutRecord)`` (step, sample_idx, prompt_idx, prompt_tokens, response_tokens, reward,
  advantage, finish_reason, dataset, ground_truth, request_info, logprobs), next to
  ``{run}_metadata.jsonl``.
- NeMo-RL ``Logger.log_batched_dict_as_jsonl``: ``train_data_step{N}.jsonl``, each line a microbatch
  of one (every value a one-item list) plus ``"idx": i``; content is the sample's message texts,
  token fields cover prompt + response padded to the batch's longest row.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PAD_ID = 0


class FakeTokenizer:
    """convert_ids_to_tokens like a Hugging Face tokenizer: id 17 -> 'Ġt17'."""

    name_or_path = "fake-tokenizer"

    def convert_ids_to_tokens(self, ids):
        return [f"Ġt{i}" for i in ids]

    def convert_tokens_to_string(self, tokens):
        return " ".join(t[1:] for t in tokens)


class DecodeOnlyTokenizer:
    """Only decode(): each id on its own."""

    def decode(self, ids):
        return "".join(f"<{i}>" for i in ids)


class StrictTokenizer:
    """Like a Hugging Face fast tokenizer: ids are unsigned and within the vocabulary, or it raises."""

    name_or_path = "strict-tokenizer"
    vocab = 1000

    def _check(self, ids):
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < self.vocab:
                raise OverflowError(f"id {i!r} out of range")

    def convert_ids_to_tokens(self, ids):
        self._check(ids)
        return [f"w{i}" for i in ids]

    def decode(self, ids):
        self._check(ids)
        return " ".join(f"w{i}" for i in ids)


def write_verl(folder: Path, steps=(1, 2), prompts: int = 2, n: int = 3, seed: int = 0,
               with_step: bool = True) -> list[dict]:
    """Rollout dumps of a GRPO run (``n`` responses per prompt); returns the records written."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for step in steps:
        inputs, outputs, gts, scores = [], [], [], []
        extra = {"acc": [], "pred": [], "uid": [], "request_id": []}
        for p in range(prompts):
            for k in range(n):
                inputs.append(f"<|im_start|>user\nWhat is {p} + {step}?<|im_end|>\n<|im_start|>assistant\n")
                pred = str(p + step + (k % 2))
                outputs.append(f"The answer is {pred}.")
                gts.append(str(p + step))
                acc = pred == str(p + step)
                scores.append(float(acc) + float(rng.normal(0, 0.01)))
                extra["acc"].append(acc)
                extra["pred"].append(pred)
                extra["uid"].append(f"uid-{step}-{p}")
                extra["request_id"].append(f"req-{step}-{p}-{k}")
        base = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [step] * len(inputs)}
        if not with_step:
            del base["step"]
        base.update(extra)
        lines = []
        for i in range(len(inputs)):
            entry = {k: v[i] for k, v in base.items()}
            lines.append(json.dumps(entry, ensure_ascii=False))
            out.append(entry)
        (folder / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    return out


def write_trl(output_dir: Path, steps=(5, 10), prompts: int = 2, n: int = 4, seed: int = 0) -> list[dict]:
    """``completions_{step:05d}.parquet`` files; returns the rows."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    folder = output_dir / "completions"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for step in steps:
        table = {"step": [], "prompt": [], "completion": [], "accuracy_reward": [], "format_reward": [],
                 "advantage": []}
        for p in range(prompts):
            acc = rng.integers(0, 2, n).astype(float)
            fmt = rng.uniform(0, 1, n)
            total = acc + fmt
            adv = (total - total.mean()) / (total.std() + 1e-4)
            for k in range(n):
                table["step"].append(step)
                table["prompt"].append(f"Solve: {p} * {step} =")
                table["completion"].append(f"<think>...</think> {p * step + k}")
                table["accuracy_reward"].append(float(acc[k]))
                table["format_reward"].append(float(fmt[k]))
                table["advantage"].append(float(adv[k]))
        pd.DataFrame(table).to_parquet(folder / f"completions_{step:05d}.parquet")
        rows += [dict(zip(table, vals)) for vals in zip(*table.values())]
    return rows


def write_openinstruct(folder: Path, run: str = "grpo_run", steps=(1, 2), prompts: int = 2, n: int = 2,
                       seed: int = 0) -> list[dict]:
    """One shard of rollout records plus the run's metadata file; returns the records."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{run}_metadata.jsonl").write_text(json.dumps(
        {"run_name": run, "git_commit": "abc123", "model_name": "Qwen/Qwen3-0.6B",
         "timestamp": "2025-01-01T00:00:00+00:00"}) + "\n")
    records = []
    for step in steps:
        for i in range(prompts * n):
            resp = [int(x) for x in rng.integers(100, 200, 3 + i % 3)]
            records.append({
                "step": step, "sample_idx": i, "prompt_idx": i // n,
                "prompt_tokens": [11, 12, 13 + i // n],
                "response_tokens": resp,
                "reward": float(i % 2) * 10.0, "advantage": float(rng.normal()),
                "finish_reason": "stop" if i % 3 else "length", "dataset": "gsm8k",
                "ground_truth": str(i // n),
                "request_info": {"num_calls": 0, "timeouts": 0, "tool_errors": "", "tool_outputs": "",
                                 "tool_runtimes": 0.0, "tool_calleds": False, "tool_call_stats": [],
                                 "rollout_state": {}},
                "logprobs": [float(v) for v in -rng.uniform(0, 2, len(resp))],
            })
    with open(folder / f"{run}_rollouts_{0:06d}.jsonl", "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return records


def write_nemo(log_dir: Path, steps=(1, 2), prompts: int = 2, n: int = 2, seed: int = 0,
               name: str = "train_data_step") -> list[dict]:
    """``train_data_step{N}.jsonl`` files; returns per sample the unwrapped truth (for the checks)."""
    rng = np.random.default_rng(seed)
    log_dir.mkdir(parents=True, exist_ok=True)
    truth = []
    for step in steps:
        batch = []
        for p in range(prompts):
            for k in range(n):
                prompt_ids = [int(x) for x in rng.integers(1000, 1100, 4 + p)]
                resp_ids = [int(x) for x in rng.integers(2000, 2100, 2 + k + p)]
                batch.append((p, k, prompt_ids, resp_ids))
        width = max(len(a) + len(b) for *_, a, b in batch)
        lines = []
        for i, (p, k, prompt_ids, resp_ids) in enumerate(batch):
            length = len(prompt_ids) + len(resp_ids)
            pad = width - length
            gen_lp = [float(v) for v in -rng.uniform(0, 3, len(resp_ids))]
            adv = float(rng.normal())
            reward = float(k % 2)
            rec = {
                "content": [[f"<|im_start|>user\nQ{p} at step {step}<|im_end|>\n", f"answer {p}-{k}<|im_end|>"]],
                "rewards": [reward],
                "input_lengths": [length],
                "token_ids": [prompt_ids + resp_ids + [PAD_ID] * pad],
                "token_loss_mask": [[0] * len(prompt_ids) + [1] * len(resp_ids) + [0] * pad],
                "sample_loss_mask": [1.0],
                "advantages": [[adv] * width],
                "generation_logprobs": [[0.0] * len(prompt_ids) + gen_lp + [0.0] * pad],
                "prev_logprobs": [[0.0] * len(prompt_ids) + [v - 0.01 for v in gen_lp] + [0.0] * pad],
            }
            lines.append(json.dumps({**rec, "idx": i}))
            truth.append({"step": step, "prompt_group": p, "reward": reward, "advantage": adv,
                          "response_ids": resp_ids, "logprobs": gen_lp,
                          "prompt": rec["content"][0][0], "response": rec["content"][0][1]})
        (log_dir / f"{name}{step}.jsonl").write_text("".join(x + "\n" for x in lines))
    return truth
