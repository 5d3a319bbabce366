"""``format="auto"``: which reader a log source needs, from its files' names and first records.

Each file votes with its first record's fields (names only break ties when a file has no readable record): RL
Logging Board schema (``prompt``/``response``/``reward``/``step``), verl (``input``/``output``/``score``), TRL
(``completions_*.parquet`` with ``prompt``/``completion``), open-instruct (``prompt_idx``/``response_tokens``),
NeMo-RL (``content``/``rewards`` wrapped in one-item lists), prime-rl token exports (``token_ids``, ``loss_mask``,
``inference_logprobs``, ``trainer_logprobs``), generic chat (a ``messages`` list of role objects). One
format found: that one. Several, or fields that match none: a clear error saying what was found and how to force
``format=`` or map fields with ``columns=``. Nothing readable at all (empty or broken files): the RL Logging Board
reader, which reports each problem.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

from rlviz_widgets._ingest.readers.prime import generation
from rlviz_widgets._ingest.sources import named_files, resolve

SUFFIXES = (".jsonl", ".parquet")
NAME_RULES = (("trl", r"^completions_\d+\.parquet$"), ("nemo", r"^(train|val)_data_step\d+\.jsonl$"),
              ("openinstruct", r"_rollouts_\d+\.jsonl$"), ("verl", r"^\d+\.jsonl$"))
DESCRIBE = {
    "rlb": "RL Logging Board schema (prompt, response, reward, step, response_tokens, logprobs...)",
    "verl": "verl rollout_data_dir dump ({step}.jsonl: input, output, gts, score, step)",
    "trl": "TRL completions (completions_{step:05d}.parquet: step, prompt, completion, rewards, advantage)",
    "openinstruct": "open-instruct traces ({run}_rollouts_{shard:06d}.jsonl: step, prompt_idx, response_tokens...)",
    "nemo": "NeMo-RL train_data_step{N}.jsonl (content, rewards, token_ids... in one-item lists)",
    "chat": "generic chat JSON lines (messages: OpenAI-chat role objects, reward, step, group)",
    "prime": "prime-rl token exports (token_exports/step_{N}/rank_{R}.jsonl: token_ids, loss_mask, "
             "inference_logprobs, trainer_logprobs...)",
}
RLB_KEYS = {"prompt", "response", "response_tokens", "reward", "ref_reward", "ref_response", "step", "logprobs",
            "ref_logprobs", "values", "token_rewards"}
MAX_FILES = 64  # files sampled for their first record
MAX_LINES = 20  # lines tried per file before giving up on it
LONG_LINE = 1 << 20  # a first line longer than this is parsed by DuckDB (see _skeleton)
WRAPPED = ("rewards", "input_lengths", "content")  # NeMo-RL's one-item lists


class FormatError(ValueError):
    """The format of the logs could not be decided."""


def by_name(path: Path) -> str | None:
    for fmt, pattern in NAME_RULES:
        if re.search(pattern, path.name):
            return fmt
    return None


def by_fields(rec: dict) -> str | None:
    """The format a first record belongs to (``"meta"``: open-instruct's run metadata; None: unknown)."""
    keys = set(rec)
    if {"run_name", "git_commit"} <= keys and "step" not in keys:
        return "meta"
    if generation(keys) is not None:
        return "prime"
    texts = isinstance(rec.get("prompt"), str) and isinstance(rec.get("response"), str)  # open-instruct logs ids
    if not texts and ({"prompt_idx", "response_tokens"} <= keys or {"sample_idx", "prompt_idx"} <= keys):
        return "openinstruct"
    if {"input", "output"} <= keys and keys & {"score", "gts", "step"}:
        return "verl"
    if keys & {"input", "output"} and keys & {"score", "gts"} and not keys & {"prompt", "response"}:
        return "verl"  # one of its texts missing (an empty generation): still verl's fields
    wrapped = [rec[k] for k in WRAPPED if k in rec]
    if wrapped and all(isinstance(v, list) and len(v) == 1 for v in wrapped) and keys & {"content", "token_ids"}:
        return "nemo"
    if _chat_messages(rec.get("messages")):
        return "chat"
    if {"prompt", "completion"} <= keys:
        return "trl"
    if keys & RLB_KEYS:
        return "rlb"
    return None


def _chat_messages(value) -> bool:
    """Whether a value is a list of OpenAI-chat messages (objects, with a role: one message without a role is a bad
    message of a chat log, reported by the chat reader, not another format)."""
    return (isinstance(value, list) and bool(value) and all(isinstance(m, dict) for m in value)
            and any("role" in m for m in value))


def first_record(path: Path) -> dict | None:
    """The first JSON object of a file that some format knows (its columns, for Parquet); else its first JSON
    object (a bad first record, ``{}``, must not hide the good ones after it), or None."""
    if path.suffix == ".parquet":
        try:
            return dict.fromkeys(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001 - an unreadable file simply gives no evidence
            return None
    first = None
    try:
        with open(path, "rb") as f:
            for _ in range(MAX_LINES):
                line = f.readline()
                if not line:
                    break
                text = line.decode("utf-8", errors="replace").strip().lstrip("\ufeff") or "null"
                rec = _skeleton(text) if len(text) > LONG_LINE else None
                if rec is None:
                    try:
                        rec = json.loads(text)
                    except (ValueError, RecursionError):
                        continue
                if isinstance(rec, dict):
                    if by_fields(rec) is not None:
                        return rec
                    first = rec if first is None else first
    except OSError:
        pass
    return first


def _skeleton(text: str) -> dict | None:
    """A long line's top-level keys, with the values ``by_fields`` reads (texts, one-item lists), parsed by DuckDB:
    ``json.loads`` makes a Python object of every float (seconds for a 100 MB line, on every open, warm too).
    None when DuckDB finds no object: a line it refuses (a lone surrogate escape), or with a key written twice (DuckDB
    reads the first value, json.loads the last), goes to ``json.loads``. DuckDB is more lenient than json.loads (a
    trailing comma, nesting past Python's recursion limit): such a line is told by its keys, as the reader, DuckDB
    too, reads it."""
    import duckdb  # (here: the module is imported by every open, and this is rare)

    read = ("prompt", "response", "messages", *WRAPPED)
    if not text.startswith("{"):  # (stripped) no object: nothing a format knows
        return None
    try:
        with duckdb.connect() as con:
            # a parse per function: the keys, and the few values read, as JSON text
            sql = "SELECT json_keys(j), json_transform(j, ?) FROM (SELECT ? j)"
            keys, values = con.execute(sql, [json.dumps(dict.fromkeys(read, "JSON")), text]).fetchone()
            if len(set(keys)) != len(keys):
                return None
            rec: dict = dict.fromkeys(keys)
            for key in read:
                v = values.get(key)
                if key not in rec or v is None:
                    continue
                if len(v) <= LONG_LINE:
                    rec[key] = json.loads(v)
                elif v.startswith("["):  # a long list: only its length counts
                    rec[key] = [None] * con.execute("SELECT json_array_length(?)", [v]).fetchone()[0]
                else:
                    rec[key] = "" if v.startswith('"') else 0
    except (duckdb.Error, ValueError, RecursionError):
        return None
    return rec


def detect(source, columns: dict | None = None) -> str:
    """The reader name for ``source`` (see the module docstring)."""
    votes, unknown, names = _votes(source)
    if len(votes) == 1:
        return next(iter(votes))
    if len(votes) > 1:
        found = "; ".join(f"{fmt}: {len(ps)} file(s), e.g. {ps[0]}" for fmt, ps in sorted(votes.items()))
        raise FormatError(f"these logs hold more than one format ({found}). Open one run's files at a time, "
                          f"or force a reader with open_run(..., format={sorted(votes)[0]!r}) "
                          f"(formats: {', '.join(DESCRIBE)}).")
    if columns:
        return "columns"
    if unknown:
        path, keys = unknown[0]
        shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
        known = "\n".join(f"  format={k!r}: {v}" for k, v in DESCRIBE.items())
        raise FormatError(f"cannot tell the format of these logs: the first record of {path} has the fields "
                          f"[{shown}], which match none of the known dumps:\n{known}\n"
                          f"Force one with open_run(..., format=...), or map your fields onto the common "
                          f"columns: open_run(..., columns={{'response': 'completion', 'reward': 'score'}}).")
    if len(names) == 1:  # nothing readable yet: the names decide
        return next(iter(names))
    return "rlb"  # empty or broken files: the RL Logging Board reader reports each problem


def _votes(source) -> tuple[dict[str, list[Path]], list[tuple[Path, list[str]]], dict[str, list[Path]]]:
    """(format -> the files whose first record says it, files whose first record no format knows (with its keys),
    format -> the files whose names say it) of the sampled files."""
    files = resolve(source, SUFFIXES)
    named = named_files(source)
    votes: dict[str, list[Path]] = {}
    unknown: list[tuple[Path, list[str]]] = []
    names: dict[str, list[Path]] = {}
    sampled = 0
    classes: set[str | None] = set()  # the name rules matched so far (None: no rule)
    for path in files:
        named_as = by_name(path)
        rec = None
        if path.suffix == ".parquet" and named_as != "trl":
            # other Parquet files are no logs of ours (a dataset beside the logs), unless named by the user with
            # TRL's columns
            if path not in named or by_fields(rec := first_record(path) or {}) != "trl":
                continue
        if sampled >= MAX_FILES and named_as in classes:
            continue  # past the sample, only a file named as no file before was (another format's) is read
        if named_as:
            names.setdefault(named_as, []).append(path)
        classes.add(named_as)
        sampled += 1
        rec = rec or first_record(path)
        if rec is None:
            continue
        fmt = _vote(path, rec)
        if fmt is None:
            unknown.append((path, sorted(rec)))
        elif fmt != "meta":
            votes.setdefault(fmt, []).append(path)
    return votes, unknown, names


def _vote(path: Path, rec: dict) -> str | None:
    """The format a sampled file's first record says (``by_fields``), as its suffix allows."""
    if path.suffix == ".parquet":
        return "trl"  # named as TRL names them, or with its columns (others were passed over)
    fmt = by_fields(rec)
    return None if fmt == "trl" else fmt  # TRL writes Parquet; a JSON-lines file with these fields needs columns=
