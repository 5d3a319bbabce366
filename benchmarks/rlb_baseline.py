"""The baseline: load a log folder the way RL Logging Board does (its load_log_file, minus Streamlit).

json.loads per line into per-step Python lists, numpy per sample for the derived metrics,
then per-step averages. Kept faithful so the ratios mean something.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

KEYS = ["prompt", "response", "ref_response", "reward", "ref_reward", "response_tokens", "logprobs",
        "ref_logprobs", "probs", "ref_probs", "values", "token_rewards", "kl", "avg_kl", "sum_kl", "log_ratio",
        "avg_log_ratio", "sum_log_ratio", "valid_reward", "ref_valid_reward", "response_tokens_len"]


def load(logdir: str, max_samples_each_step: int = 10**9) -> dict:
    data: dict = {}
    success = errors = 0
    for name in sorted(os.listdir(logdir)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(logdir, name), encoding="utf8", errors="ignore") as f:
            for line in f:
                try:
                    d = json.loads(line)
                    d["step"] = int(d["step"])
                    if d["step"] not in data:
                        data[d["step"]] = {k: [] for k in KEYS}
                    elif len(data[d["step"]]["prompt"]) >= max_samples_each_step:
                        pass  # RL Logging Board only updates a progress bar here: nothing is skipped
                    step = data[d["step"]]
                    for k in step:
                        if k in d:
                            step[k].append(d[k])
                    if "response_tokens" in d:
                        step["response_tokens_len"].append(len(d["response_tokens"]))
                    if "logprobs" in d and "ref_logprobs" in d:
                        logp, ref = np.array(d["logprobs"]), np.array(d["ref_logprobs"])
                        lr = logp - ref
                        kl = np.exp(lr) - 1 - lr
                        step["log_ratio"].append(lr.tolist())
                        step["avg_log_ratio"].append(np.nanmean(lr))
                        step["sum_log_ratio"].append(np.nansum(lr))
                        step["kl"].append(kl.tolist())
                        step["avg_kl"].append(np.nanmean(kl))
                        step["sum_kl"].append(np.nansum(kl))
                        step["probs"].append(np.exp(logp).tolist())
                        step["ref_probs"].append(np.exp(ref).tolist())
                    success += 1
                except Exception:
                    errors += 1
    for step in data.values():
        step["avg_reward"] = sum(step["reward"]) / len(step["reward"])
        step["avg_length"] = int(sum(len(r) for r in step["response"]) / len(step["response"]))
    return data


if __name__ == "__main__":
    d = load(sys.argv[1])
    print(len(d), "steps")
