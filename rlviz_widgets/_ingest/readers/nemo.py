"""NeMo-RL's training data: ``{log_dir}/train_data_step{N}.jsonl`` (``logger.log_batched_dict_as_jsonl``).

Each line is a batch of one: every value is wrapped in a one-item list (``"rewards": [0.5]``,
``"token_ids": [[...]]``) except ``idx``, the sample's position in the step. ``content`` holds the
message texts of the sample (``[[prompt..., response]]``; some versions log only the response
text), ``token_ids`` / ``token_loss_mask`` / ``advantages`` / ``generation_logprobs`` /
``prev_logprobs`` cover prompt and response, padded to the batch's longest sequence. The step is
the file name's. Response tokens are those with ``token_loss_mask`` = 1 (without a mask, as older versions
log: the first ``input_lengths`` positions from the first non-zero ``generation_logprobs``, NeMo writing 0.0 at
the prompt's; a response's first tokens whose log-probs are exactly 0.0 are taken for the prompt's, and a row
with no other value is reported, its tokens the whole row); ``logprobs`` are the
generation log-probs, ``advantage`` is the mean advantage over the response tokens, and the group is the
prompt's text within the step (NeMo repeats each prompt once per generation). Messages (``_chat``): in train files
(texts, no roles) those before the trained span are the prompt, then assistant and environment by turns; val files'
``{role, content}`` objects are read as chat messages (``chat``); ``answer`` is the last assistant text.
The mismatch fields (issue 32): ``generation_logprobs`` are the sampler's (``inference_logprob``), ``prev_logprobs``
the trainer's (``trainer_logprob``), over the whole sequence; ``prev_logprobs`` all 0.0 (their computation skipped)
are none, and neither field is then kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import pyarrow as pa

from rlviz_widgets._ingest.readers.chat import Chat, conversation, messages_chat, with_chats
from rlviz_widgets._ingest.readers.jsonl import JsonlFormat, JsonlReader
from rlviz_widgets._ingest.readers.jsonl.sql import field_ref, json_number, reports_sql
from rlviz_widgets._ingest.readers.markers import marker_turns
from rlviz_widgets._ingest.readers.mismatch_fields import helper
from rlviz_widgets._ingest.readers.sequence import train_turns, with_sequence_columns
from rlviz_widgets._ingest.readers.tokens import decode_ids

GYM_NOT_FOUND = ("template_markers|no chat-template role markers found in the tokens of these empty messages: the "
                 "turns are the loss mask's runs")
TOKEN_KEYS = ("token_ids", "token_loss_mask", "advantages", "generation_logprobs", "prev_logprobs")
OWN_READS = ("prompt", "response", "reward", "tokens", "logprobs", "advantage")  # read through expressions below


def _unwrap(value: str) -> str:
    """A value of a batch of one: its item."""
    return f"CASE WHEN json_type({value}) = 'ARRAY' THEN {value}->'$[0]' ELSE {value} END"


def _adjust(schema: dict[str, str], ex: dict[str, str | None], used: set[str], f: Mapping[str, str],
            mapped: set[str]) -> None:
    """The fields NeMo-RL wraps in batches of one, and the response cut from its padded prompt+response rows."""
    for c in OWN_READS:
        if c not in mapped:
            schema.pop(f[c], None)
    schema.update({"content": "JSON", "rewards": "JSON", "input_lengths": "JSON", "token_ids": "BIGINT[][]",
                   "token_loss_mask": "DOUBLE[][]", "advantages": "FLOAT[][]", "generation_logprobs": "FLOAT[][]",
                   "prev_logprobs": "FLOAT[][]"})
    _read_content(ex, mapped)
    n = "(r.input_lengths->'$[0]')::BIGINT"
    has_n = "json_type(r.input_lengths->'$[0]') IN ('BIGINT', 'UBIGINT')"
    # without a mask (older NeMo-RL logs neither it nor token_ids): the response starts at the first
    # generation log-prob that is not 0.0, which NeMo writes at every prompt position
    first = f"list_position(list_transform(list_slice(r.generation_logprobs[1], 1, {n}), lambda x: x <> 0), true)"
    start = f"coalesce({first}, 1)"
    # ... and where every one is 0.0 (an empty response, or a model sure of every token), it cannot be told
    no_start = (f"r.token_loss_mask IS NULL AND r.generation_logprobs IS NOT NULL AND {has_n} AND {first} IS NULL")

    def response_only(expr: str) -> str:
        """The response positions of a padded prompt+response row."""
        return (f"CASE WHEN r.token_loss_mask[1] IS NOT NULL THEN list_where({expr}[1], "
                f"list_transform(r.token_loss_mask[1], lambda m: coalesce(m > 0, false))) "
                f"WHEN {has_n} THEN list_slice({expr}[1], {start}, {n}) ELSE {expr}[1] END")

    def whole(expr: str) -> str:
        """The positions of a padded row that hold the sequence (prompt, every turn), padding cut."""
        return f"CASE WHEN {has_n} THEN list_slice({expr}[1], 1, {n}) ELSE {expr}[1] END"

    if "tokens" not in mapped:
        ex["tokens"] = whole("r.token_ids")
    if "logprobs" not in mapped:
        ex["logprobs"] = whole("r.generation_logprobs")
    # the trained tokens: the loss mask; without one, those the sampler generated (NeMo writes 0.0 elsewhere)
    ex["_trained"] = (f"CASE WHEN r.token_loss_mask[1] IS NOT NULL THEN list_transform({whole('r.token_loss_mask')}, "
                      f"lambda m: coalesce(m > 0, false)) WHEN r.generation_logprobs[1] IS NOT NULL THEN "
                      f"list_transform({whole('r.generation_logprobs')}, lambda x: coalesce(x <> 0, false)) END")
    # the trainer's log-probs, where computed (all 0.0: skipped), against the sampler's
    prev = "list_bool_or(list_transform(r.prev_logprobs[1], lambda x: x <> 0))"
    ex[helper("inference_logprob")] = f"CASE WHEN {prev} THEN {whole('r.generation_logprobs')} END"
    ex[helper("trainer_logprob")] = f"CASE WHEN {prev} THEN {whole('r.prev_logprobs')} END"
    nan_advantage = None
    if "advantage" not in mapped:
        mean = f"list_avg({response_only('r.advantages')})::DOUBLE"
        ex["advantage"] = f"CASE WHEN isfinite({mean}) THEN {mean} END"  # NaN in it: reported, left empty
        nan_advantage = (f"CASE WHEN NOT isfinite({mean}) THEN 'nan|advantages holds NaN/Infinity at response "
                         f"tokens: the advantage is left empty' END")
    if "group_id" not in mapped:  # a file with a step in its name: one group per prompt of the step
        ex["group_id"] = (f"CASE WHEN fs IS NOT NULL THEN fs::VARCHAR || ':' || md5({ex['prompt']})[:12] "
                          f"ELSE {ex['group_id']} END")
        ex["_prompt_group"] = "fs IS NOT NULL"  # the group is the prompt's: named again once the prompt is read
    ex["_reports"] = _shape_reports(None if "response" in mapped else ex["response"], nan_advantage, no_start)
    used |= {"content", "rewards", *TOKEN_KEYS}
    if "advantage" in mapped:
        ex["advantage"] = json_number(_unwrap(field_ref(f["advantage"])))
    ex["advantage_raw"] = _unwrap(field_ref(f["advantage"])) if "advantage" in mapped else None


def _read_content(ex: dict[str, str | None], mapped: set[str]) -> None:
    """The prompt and response from ``content`` (the sample's messages, the response last), the reward from
    ``rewards``; unless ``columns=`` maps them elsewhere."""
    c0 = "r.content->'$[0]'"
    if "response" not in mapped:
        ex["response"] = (f"CASE json_type({c0}) WHEN 'ARRAY' THEN {c0}->>'$[#-1]' "
                          f"WHEN 'VARCHAR' THEN {c0}->>'$' END")
    if "prompt" not in mapped:
        ex["prompt"] = (f"CASE WHEN json_type({c0}) = 'ARRAY' AND json_array_length({c0}) > 1 THEN array_to_string("
                        f"list_slice(json_extract_string({c0}, '$[*]'), 1, -2), chr(10)) END")
    if "reward" not in mapped:
        ex["reward"] = _unwrap(field_ref("rewards"))
    if "prompt" not in mapped and "response" not in mapped:  # the messages, split in Python (``_chat``)
        ex["_messages"] = f"({c0})::VARCHAR"


NEMO = JsonlFormat(
    name="nemo", file_pattern=r"^train_data_step\d+\.jsonl$", step_pattern=r"data_step(\d+)\.jsonl$", token_ids=True,
    shown={"reward": "rewards", "tokens": "token_ids", "logprobs": "generation_logprobs", "advantage": "advantages",
           "prompt": "content", "response": "content"},
    unwrap=_unwrap, adjust=_adjust, decode=lambda t, tokenizer: _chat(t, tokenizer),
)


def _chat(t: pa.Table, tokenizer) -> pa.Table:
    """The prompt, response, answer and turns of each sample from its messages (``_messages``); their reports added
    to ``_reports``, the group named after the prompt read; the trained mask, each token's turn and the turns' roles
    (``trained``, ``turn``, ``roles``: ``turns.SEQUENCE_COLUMNS``). A sample whose messages are neither texts nor
    objects keeps the SQL's texts (and its reports)."""
    trained = t["_trained"].to_pylist() if "_trained" in t.column_names else [None] * t.num_rows
    if "_messages" in t.column_names:
        ids = t["tokens"].to_pylist() if pa.types.is_integer(t.schema.field("tokens").type.value_type) else None
        chats = [_read_messages(text, mask, None if ids is None else ids[i], tokenizer)
                 for i, (text, mask) in enumerate(zip(t["_messages"].to_pylist(), trained))]
        t = with_chats(t, chats)
        prompts = t["prompt"].to_pylist()
        if "_prompt_group" in t.column_names:
            groups = [f"{g.split(':', 1)[0]}:{hashlib.md5(p.encode()).hexdigest()[:12]}" if own and g and p else g
                      for g, p, own in zip(t["group_id"].to_pylist(), prompts, t["_prompt_group"].to_pylist())]
            t = t.set_column(t.schema.get_field_index("group_id"), "group_id", pa.array(groups, pa.string()))
    else:
        chats = [None] * t.num_rows
    return with_sequence_columns(t, [None if c is None else c.turns for c in chats])


def _read_messages(text: str | None, mask: list[bool] | None, ids: list[int] | None, tokenizer) -> Chat | None:
    """A sample's texts from its message list: objects with roles (val files), or texts (train files:
    ``train_turns``); where the texts are all empty (NeMo-Gym) or missing, the turns found in the token ids
    (``markers``); None for anything else."""
    messages = json.loads(text) if text else None
    if ids and (messages is None or (isinstance(messages, list) and messages and not any(messages))):
        turns, reports = marker_turns(ids, mask, tokenizer)
        if messages is None or not reports:
            return conversation(turns, reports=reports)
    if not isinstance(messages, list) or not messages:
        return None
    if all(isinstance(m, dict) for m in messages):
        return messages_chat(messages)
    if len(messages) < 2 or not all(m is None or isinstance(m, str) for m in messages):
        return None
    turns, first_response = train_turns([m or "" for m in messages], mask)
    reports = []
    if ids and not any(messages):  # NeMo-Gym without its template's markers: the runs' texts
        for turn in turns:
            if turn.start is not None:
                turn.text = decode_ids(ids[turn.start:turn.end], tokenizer)
        if tokenizer is not None:  # (without one, the file's no_tokenizer says it)
            reports.append(GYM_NOT_FOUND)
    return conversation(turns, first_response, reports)


class NemoReader(JsonlReader):
    format = NEMO


def _shape_reports(response: str | None, nan_advantage: str | None, no_start: str) -> str:
    """SQL: the ``kind|message`` of each value not shaped as NeMo writes it (a batch of one; token rows as long as
    ``token_ids``), for ``_check`` to report: unwrapping reads such values only in part, or not at all.
    ``response``: the SQL of the response read from ``content`` (None: mapped to another field, checked there);
    ``nan_advantage``: the SQL of the report of a NaN mean advantage (None: mapped, checked as a plain value);
    ``no_start``: the SQL saying a row without a mask has no generation log-prob other than 0.0."""
    out = [nan_advantage] if nan_advantage else []
    if response is not None:
        out.append(f"CASE WHEN (r.content IS NULL OR json_type(r.content) = 'NULL') AND r.token_ids[1] IS NOT NULL "
                   f"THEN 'missing_field|no content: the texts and turns are read from the token ids' "
                   f"WHEN r.content IS NULL OR json_type(r.content) = 'NULL' "
                   f"THEN 'missing_field|no content: prompt and response left empty' "
                   f"WHEN ({response}) IS NULL THEN 'missing_field|no response text in content: left empty' END")
        # messages that are neither text nor chat objects (numbers, lists): shown as their JSON
        c0 = "r.content->'$[0]'"
        last = f"json_type({c0}->'$[#-1]')"
        kind = (f"CASE {last} WHEN 'OBJECT' THEN 'an object' WHEN 'ARRAY' THEN 'a list' "
                f"WHEN 'BOOLEAN' THEN 'a boolean' ELSE 'a number' END")
        out.append(f"CASE WHEN json_type({c0}) = 'ARRAY' AND json_array_length({c0}) > 0 "
                   f"AND {last} NOT IN ('VARCHAR', 'NULL', 'OBJECT') "
                   f"THEN 'wrong_type|response is ' || {kind} || ', not text: shown as its JSON' END")
        out.append(f"CASE WHEN json_type({c0}) = 'ARRAY' AND json_array_length({c0}) > 1 "
                   f"AND list_bool_or(list_transform(list_slice(json_extract({c0}, '$[*]'), 1, -2), "
                   f"lambda m: json_type(m) NOT IN ('VARCHAR', 'NULL', 'OBJECT'))) "
                   f"THEN 'wrong_type|prompt holds a message that is not text: shown as its JSON' END")
    for k in ("content", "rewards", "input_lengths"):
        v = f"r.{k}"
        out.append(f"CASE WHEN {v} IS NULL THEN NULL WHEN json_type({v}) <> 'ARRAY' "
                   f"THEN 'wrong_type|{k} is not a batch of one (a one-item list): read as it is' "
                   f"WHEN json_array_length({v}) > 1 THEN 'wrong_type|{k} holds ' || json_array_length({v}) || "
                   f"' values, not one: the first is read' END")
    # without a mask or generation log-probs, the response cannot be told from the prompt: its tokens are the
    # unpadded row, prompt included
    out.append("CASE WHEN r.token_loss_mask IS NULL AND r.generation_logprobs IS NULL AND coalesce(len(r.token_ids), "
               "len(r.advantages)) IS NOT NULL THEN 'missing_field|no token_loss_mask: every token is counted as "
               "trained (the prompt''s too), and the advantage is their mean' END")
    out.append(f"CASE WHEN {no_start} THEN 'missing_field|no token_loss_mask, and every generation log-prob is 0.0: "
               f"no token is counted as trained (the response cannot be told from the prompt)' END")
    for k in ("token_ids", "token_loss_mask", "generation_logprobs", "advantages"):
        v = f"r.{k}"
        out.append(f"CASE WHEN {v} IS NOT NULL AND (len({v}) = 0 OR {v}[1] IS NULL) "
                   f"THEN 'wrong_type|{k} is not a batch of one list of numbers: ignored' "
                   f"WHEN len({v}) > 1 THEN 'wrong_type|{k} holds ' || len({v}) || ' rows, not one: the first is "
                   f"read' END")
        if k != "token_ids":
            out.append(f"CASE WHEN len({v}) = 1 AND len(r.token_ids) = 1 AND len({v}[1]) <> len(r.token_ids[1]) "
                       f"THEN 'length_mismatch|{k} has ' || len({v}[1]) || ' values for ' || len(r.token_ids[1]) "
                       f"|| ' token ids: the trained tokens may be off' END")
    return reports_sql(out)
