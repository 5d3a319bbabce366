"""Chat-shaped logs written as the frameworks' own writers write them (docs/upstream-writers.md, §1, §3, §4).

- TRL >= 1.15 ``GRPOTrainer.log``: ``pandas.DataFrame(table).to_parquet(path)`` with ``prompt`` / ``completion`` as
  message lists; pyarrow infers ``list<struct>`` whose fields are the union of the file's keys (absent keys null),
  tool calls ``{type, function: {name, arguments: dict}}`` without ids, tool results ``{role: tool, name, content}``,
  image parts ``{type: "image"}``; a reward function returning None is null.
- NeMo-RL ``Logger.log_batched_dict_as_jsonl``: every value a batch of one (``[x]``, ``[[...]]``) but ``idx``,
  ``json.dumps`` defaults (bare ``NaN``). Train files: ``content`` one string per message, no roles; the user
  message is the templated prompt, the assistant's text has no stop token but its ids do, the environment text
  ("Environment: correct") is tokenized raw after it; per-token rows right-padded to the batch's longest sequence
  (pad id, mask 0). Val files: ``content`` = ``[[{role, content}, ...]]``, ``rewards``, ``idx`` only.
- Generic OpenAI chat JSON lines (§7, openai-python ``types/chat``): ``messages`` of ``{role, content}``, content a
  string or a list of parts (``{type: "text", text}``, ``{type: "image_url", image_url: {url, detail}}``), assistant
  ``content: null`` beside ``tool_calls: [{id, type: "function", function: {name, arguments: JSON text}}]``, tool
  results ``{role: "tool", tool_call_id, content}``; the dumper's own ``step``, ``group``, ``reward`` beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PAD_ID = 0
IM_END = 151645


def write_trl_chat(output_dir: Path, step: int = 40, prompts: int = 2, n: int = 4, images: bool = False) -> list[dict]:
    """One ``completions_{step:05d}.parquet`` of ``prompts`` x ``n`` conversational completions; odd generations
    call a tool. Returns per row the expected ``prompt``, ``response``, ``answer`` and ``group``."""
    import pandas as pd

    folder = output_dir / "completions"
    folder.mkdir(parents=True, exist_ok=True)
    table = {"step": [], "prompt": [], "completion": [], "accuracy_reward": [], "format_reward": [], "advantage": []}
    if images:
        n = min(n, 1)  # completions stay text: their content is a string (one type per column)
    truth = []
    for p in range(prompts):
        question = f"What is {p + 6}*7?"
        user = ({"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": question}]}
                if images else {"role": "user", "content": question})
        # prepare_multimodal_messages makes every content a list of parts (a column mixing both cannot be written)
        system = [{"type": "text", "text": "Use the tools."}] if images else "Use the tools."
        prompt = [{"role": "system", "content": system}, user]
        shown_q = f"[image]\n{question}" if images else question
        for k in range(n):
            final = f"{p + 6}*7 = {(p + 6) * 7 + k}"
            if k % 2:
                completion = [
                    {"role": "assistant", "content": "",
                     "tool_calls": [{"type": "function", "function": {"name": "multiply",
                                                                      "arguments": {"a": p + 6, "b": 7}}}]},
                    {"role": "tool", "name": "multiply", "content": str((p + 6) * 7)},
                    {"role": "assistant", "content": final}]
                response = (f'multiply({{"a": {p + 6}, "b": 7}})\n── tool ──\n{(p + 6) * 7}\n'
                            f"── assistant ──\n{final}")
            else:
                completion = [{"role": "assistant", "content": final}]
                response = final
            table["step"].append(step)
            table["prompt"].append(prompt)
            table["completion"].append(completion)
            table["accuracy_reward"].append(float(k == 0))
            table["format_reward"].append(None if k == 3 else 0.5)  # None: null in the file
            table["advantage"].append(float(k) - 1.5)
            truth.append({"prompt": f"── system ──\nUse the tools.\n── user ──\n{shown_q}", "response": response,
                          "answer": final, "group": p})
    pd.DataFrame(table).to_parquet(folder / f"completions_{step:05d}.parquet")
    return truth


def _ids(text: str, base: int) -> list[int]:
    """Made-up token ids, one per word."""
    return [base + sum(map(ord, w)) % 1000 for w in text.split()] or [base]


def write_nemo_chat(log_dir: Path, step: int = 3, prompts: int = 9, n: int = 4, val: bool = False,
                    seed: int = 0) -> list[dict]:
    """``train_data_step{step}.jsonl`` (or ``val_data_step``) of ``prompts`` x ``n`` math samples: user,
    assistant, environment. Returns per line the expected ``prompt``, ``response``, ``answer``, ``group``."""
    rng = np.random.default_rng(seed)
    log_dir.mkdir(parents=True, exist_ok=True)
    rows, truth = [], []
    for p in range(prompts):
        user = f"<|im_start|>user\nWhat is {p}+{p}?<|im_end|>\n<|im_start|>assistant\n"
        for k in range(n):
            answer = f"The sum is {2 * p + k % 2}"
            verdict = "Environment: correct" if k % 2 == 0 else "Environment: incorrect"
            rows.append((user, answer, verdict, float(k % 2 == 0)))
            truth.append({"prompt": user, "response": f"{answer}\n── environment ──\n{verdict}", "answer": answer,
                          "group": p, "reward": float(k % 2 == 0)})
    name = "val_data_step" if val else "train_data_step"
    with open(log_dir / f"{name}{step}.jsonl", "w") as f:
        if val:
            for i, (user, answer, verdict, reward) in enumerate(rows):
                msgs = [{"role": "user", "content": user}, {"role": "assistant", "content": answer},
                        {"role": "environment", "content": verdict}]
                f.write(json.dumps({"content": [msgs], "rewards": [reward], "idx": i}) + "\n")
            return truth
        seqs = [(_ids(u, 1000), _ids(a, 2000) + [IM_END], _ids(v, 3000)) for u, a, v, _ in rows]
        width = -(-max(sum(map(len, s)) for s in seqs) // 8) * 8  # make_sequence_length_divisible_by
        for i, ((user, answer, verdict, reward), (u, a, v)) in enumerate(zip(rows, seqs)):
            length = len(u) + len(a) + len(v)
            pad = width - length
            gen = [0.0] * len(u) + [float(x) for x in -rng.uniform(0.01, 2, len(a))] + [0.0] * (len(v) + pad)
            prev = [x - 0.01 if x else 0.0 for x in gen]
            if i == 5:
                prev[0] = float("nan")  # bare NaN, as json.dumps writes it (prev_logprobs are not read)
            rec = {"content": [[user, answer, verdict]], "rewards": [reward],
                   "generation_logprobs": [gen], "prev_logprobs": [prev],
                   "input_lengths": [length], "token_ids": [u + a + v + [PAD_ID] * pad],
                   "token_loss_mask": [[0] * len(u) + [1] * len(a) + [0] * (len(v) + pad)],
                   "sample_loss_mask": [1.0], "advantages": [[reward - 0.5] * width]}
            f.write(json.dumps({**rec, "idx": i}) + "\n")
    return truth


def openai_chat_samples(prompt: int, step: int, reward_key: str = "reward") -> list[tuple[dict, dict]]:
    """Three generations of one prompt (group ``prompt``), as (record, expected texts): two tool-calling turns
    before the answer, a plain answer, and a question with an image part."""
    city = f"City{prompt}"
    system = {"role": "system", "content": "You can call tools."}
    user = {"role": "user", "content": [{"type": "text", "text": f"Weather in {city}?"}]}
    calls = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": city, "days": [1, 2]})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
        {"role": "assistant", "content": "Converting.", "tool_calls": [
            {"id": "call_2", "type": "function",
             "function": {"name": "to_fahrenheit", "arguments": '{"celsius":18}'}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "64F"}]},
        {"role": "assistant", "content": "It is 64F and cloudy."}]
    image = {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        {"type": "text", "text": f"Is it {city}?"}]}
    prompt_text = f"── system ──\nYou can call tools.\n── user ──\nWeather in {city}?"
    shapes = [
        ([system, user, *calls], prompt_text,
         f'get_weather({{"city": "{city}", "days": [1, 2]}})\n── tool ──\n18C, cloudy\n── assistant ──\n'
         f'Converting.\nto_fahrenheit({{"celsius":18}})\n── tool ──\n64F\n── assistant ──\nIt is 64F and cloudy.',
         "It is 64F and cloudy."),
        ([system, user, {"role": "assistant", "content": "No idea."}], prompt_text, "No idea.", "No idea."),
        ([system, image, {"role": "assistant", "content": "Yes."}],
         f"── system ──\nYou can call tools.\n── user ──\n[image]\nIs it {city}?", "Yes.", "Yes."),
    ]
    out = []
    for k, (messages, prompt_shown, response, answer) in enumerate(shapes):
        reward = float(k == 0)
        record = {"step": step, "group": f"q{prompt}", reward_key: reward, "messages": messages, "source": "web"}
        out.append((record, {"prompt": prompt_shown, "response": response, "answer": answer,
                             "group": f"q{prompt}", "reward": reward, "step": step}))
    return out


def write_openai_chat(folder: Path, steps: tuple[int, ...] = (1, 2), prompts: int = 2,
                      reward_key: str = "reward") -> list[dict]:
    """``rollouts.jsonl``: per step ``prompts`` x 3 samples (``openai_chat_samples``), one JSON object a line as
    ``json.dumps`` writes it. Returns per line the expected texts, group, reward and step."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [pair for s in steps for p in range(prompts) for pair in openai_chat_samples(p, s, reward_key)]
    (folder / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r, _ in pairs))
    return [t for _, t in pairs]


XSS = "<img src=x onerror=alert(1)>"


def agent_messages(k: int) -> list[dict]:
    """A multi-turn agent trajectory in the OpenAI format: one assistant turn making two tool calls at once, their
    two results matched by ``tool_call_id``, then the answer. Markup sits in a tool argument, a role name and a tool
    name (``XSS``, ``</script>``): it must come back as the text it is."""
    calls = [{"id": f"c{k}a", "type": "function",
              "function": {"name": "search", "arguments": json.dumps({"q": f"{XSS}</script>", "k": k})}},
             {"id": f"c{k}b", "type": "function", "function": {"name": f"fetch{XSS}", "arguments": '{"url":"u"}'}}]
    return [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Find {k}."},
            {"role": "assistant", "content": "Looking.", "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{k}a", "content": "found it"},
            {"role": "tool", "tool_call_id": f"c{k}b", "content": "</script>page"},
            {"role": f"critic{XSS}", "content": "ok"},
            {"role": "assistant", "content": f"Answer {k}.", "reasoning_content": "think first"}]


def agent_turns(k: int) -> list[dict]:
    """``agent_messages(k)`` as ``run.turns`` gives it (rows after ``sample_id``; a turn's second call has no
    text)."""
    def row(turn, role, text, name=None, args=None, call=None, trained=False, reasoning=None):
        return {"turn": turn, "role": role, "text": text, "tool_name": name, "tool_arguments": args,
                "tool_call_id": call, "start": None, "end": None, "trained": trained, "reasoning": reasoning}
    return [row(0, "system", "Be brief."), row(1, "user", f"Find {k}."),
            row(2, "assistant", "Looking.", "search", json.dumps({"q": f"{XSS}</script>", "k": k}), f"c{k}a", True),
            row(2, "assistant", None, f"fetch{XSS}", '{"url":"u"}', f"c{k}b", True),
            row(3, "tool", "found it", call=f"c{k}a"), row(4, "tool", "</script>page", call=f"c{k}b"),
            row(5, f"critic{XSS}", "ok"), row(6, "assistant", f"Answer {k}.", trained=True, reasoning="think first")]


def write_agent_chat(folder: Path, samples: int = 3) -> list[dict]:
    """``agent.jsonl``: ``samples`` agent trajectories (``agent_messages``) of step 1, one group."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = [{"step": 1, "group": "g", "reward": float(k), "messages": agent_messages(k)} for k in range(samples)]
    (folder / "agent.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs


class ChatTokenizer:
    """A tokenizer whose pieces are a chat template's special tokens, runs of other characters and single blanks;
    ids in order of first sight (encode everything before a run is opened: the cache key reads the vocabulary)."""

    name_or_path = "chat-tokenizer"
    SPECIAL = ("<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
               "<|eot_id|>")

    def __init__(self):
        self.pieces: list[str] = list(self.SPECIAL)
        self.ids = {p: i for i, p in enumerate(self.pieces)}

    def encode(self, text: str) -> list[int]:
        import re

        special = "|".join(re.escape(s) for s in self.SPECIAL)
        out = []
        for piece in re.findall(rf"{special}|\s|[^\s<]+|<", text):
            if piece not in self.ids:
                self.ids[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(self.ids[piece])
        return out

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.pieces[i] for i in ids if not (skip_special_tokens and self.pieces[i] in self.SPECIAL))

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i] if 0 <= i < len(self.pieces) else None for i in ids]


GYM_MESSAGES = (  # (role, rendered text, trained): a Qwen-style ChatML rollout as NeMo-Gym tokenizes it
    ("user", "<|im_start|>system\nUse tools.<|im_end|>\n<|im_start|>user\nWhat is {a}*7?<|im_end|>\n"
             "<|im_start|>assistant\n", False),
    ("assistant", '<tool_call>\n{{"name": "multiply", "arguments": {{"a": {a}, "b": 7}}}}\n</tool_call><|im_end|>',
     True),
    ("user", "\n<|im_start|>user\n<tool_response>\n{p}\n</tool_response><|im_end|>\n<|im_start|>assistant\n", False),
    ("assistant", "{a}*7 = {p}<|im_end|>", True),
)


def write_nemo_gym(log_dir: Path, tok: ChatTokenizer, samples: int = 2, step: int = 1) -> list[dict]:
    """``train_data_step{step}.jsonl`` as NeMo-RL writes NeMo-Gym rollouts: every ``content`` text empty, the turns
    only in ``token_ids`` (the tool results and the next header folded into a user message). Returns per line the
    rendered texts of the messages, their token counts and the turns the template's markers give."""
    log_dir.mkdir(parents=True, exist_ok=True)
    lines, truth = [], []
    for i in range(samples):
        a, p = i + 6, (i + 6) * 7
        texts = [m[1].format(a=a, p=p) for m in GYM_MESSAGES]
        ids = [tok.encode(t) for t in texts]
        mask = [int(m[2]) for m, x in zip(GYM_MESSAGES, ids) for _ in x]
        flat = [t for x in ids for t in x]
        gen = [-0.5 if m else 0.0 for m in mask]
        rec = {"content": [[""] * len(texts)], "rewards": [1.0], "input_lengths": [len(flat)], "token_ids": [flat],
               "token_loss_mask": [mask], "sample_loss_mask": [1.0], "advantages": [[0.5] * len(flat)],
               "generation_logprobs": [gen], "prev_logprobs": [gen], "idx": i}
        lines.append(json.dumps(rec))
        call = f'<tool_call>\n{{"name": "multiply", "arguments": {{"a": {a}, "b": 7}}}}\n</tool_call>'
        truth.append({"lengths": [len(x) for x in ids], "mask": mask,
                      "turns": [("system", "Use tools."), ("user", f"What is {a}*7?"), ("assistant", call),
                                ("user", f"<tool_response>\n{p}\n</tool_response>"), ("assistant", f"{a}*7 = {p}")]})
    (log_dir / f"train_data_step{step}.jsonl").write_text("".join(x + "\n" for x in lines))
    return truth
