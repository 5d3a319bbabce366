"""Chat messages read in C (``native/messages.c``) give what the Python reading gives (``chat.messages_chat``),
field for field, or leave the line to Python: a run opens to the same samples, turns and problems either way."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from chat_formats import XSS, agent_messages, write_agent_chat, write_openai_chat
from test_native import open_both

from rlviz_widgets._ingest import lines as linereader
from rlviz_widgets._ingest import native
from rlviz_widgets._ingest.readers import messages as chat_reader
from rlviz_widgets._ingest.readers.chat import messages_chat
from rlviz_widgets._ingest.readers.jsonl.checks import DEFAULT_PAD_TOKEN
from rlviz_widgets._ingest.readers.jsonl.keyscan import candidate_keys, odd_values, repeated_keys
from rlviz_widgets._ingest.readers.turns import turn_rows

needs_lib = pytest.mark.skipif(native.library() is None, reason="the native reader is not built here")
TEXTS = ("", "plain", "é 数据 😀", 'quote " and \\ backslash', "tab\tnew\nline\r", "\u2028\u00a0", XSS, "</script>",
         "<PAD>x<PAD>", "\x01ctl", "ünï " * 40)
ROLES = ("system", "developer", "user", "assistant", "tool", "function", "environment")


# -- a fuzz of messages, plain and odd -------------------------------------------------------------------------------
def _text(rng: random.Random) -> str:
    return rng.choice(TEXTS) + (str(rng.randint(0, 99)) if rng.random() < 0.5 else "")


def _arguments(rng: random.Random):
    return rng.choice([json.dumps({"q": _text(rng), "k": [1, 2.5, None, True]}), "{}", " [1, {\"a\": []}] ", "",
                       "{query: oops", "NaN", "1e5", "[1,]", '{"a": 1} x', "01", '"\\u0000"', '"\\ud800"', "-0.5",
                       "9" * 400, "[" * 70 + "]" * 70, {"k": "v", "n": None}, None, 7])


def _call(rng: random.Random, k: int):
    shape = rng.random()
    if shape < 0.03:
        return rng.choice(["not a call", 3, None])
    fn = {"name": rng.choice(["search", "", None, f"t{XSS}", 5]), "arguments": _arguments(rng)}
    for key in list(fn):
        if rng.random() < 0.1:
            del fn[key]
    call = {"id": rng.choice([f"c{k}", "", None, 9]), "type": "function", "function": fn}
    if shape < 0.06:
        call = fn  # legacy: no function object
    if rng.random() < 0.1:
        call.pop("id", None)
    if rng.random() < 0.05:
        call["index"] = rng.choice([0, -1.5, [1, {"x": None}], "s"])
    return call


def _content(rng: random.Random):
    r = rng.random()
    if r < 0.6:
        return _text(rng)
    if r < 0.75:
        return None
    if r < 0.9:
        parts = [rng.choice([{"type": "text", "text": _text(rng)}, _text(rng), {"text": _text(rng)},
                             {"type": "input_text", "text": _text(rng)}, {"type": "output_text", "text": "o"},
                             {"type": "image_url", "image_url": {"url": "data:"}}, {"type": "input_audio"},
                             {"type": "text", "text": None}, {"type": "text", "text": 3}, 5, {"a": 1}])
                 for _ in range(rng.randint(0, 3))]
        return parts
    return rng.choice([3, {"a": 1}, True, []])


def _message(rng: random.Random, k: int):
    if rng.random() < 0.02:
        return rng.choice(["bare text", 5, None, ["x"]])
    m = {"role": rng.choice([*ROLES, *ROLES, "", None, f"critic{XSS}", 3]), "content": _content(rng)}
    if rng.random() < 0.3:
        m["tool_calls"] = rng.choice([[_call(rng, k), _call(rng, k + 1)][:rng.randint(1, 2)], [], None,
                                      {"id": "x", "function": {"name": "f", "arguments": "{}"}}, "calls"])
    for key, values in (("tool_call_id", [f"c{k}", "", None, 4]), ("name", ["search", "", None, 1.5]),
                        ("reasoning_content", ["why", "", None, 2]), ("thinking", ["hm", "", None]),
                        ("function_call", [None, {"name": "f", "arguments": "{}"}, "auto"]),
                        ("extra", [{"deep": [[[1]]]}, "s", 1e300, -0.0])):
        if rng.random() < 0.15:
            m[key] = rng.choice(values)
    for key in ("role", "content"):
        if rng.random() < 0.03:
            del m[key]
    return m


def fuzz_records(seed: int, n: int) -> list[str]:
    """``n`` JSON lines of chat records, most of them plain (C reads them), some odd in every way the Python reading
    reports or shapes differently (C leaves them), written as json.dumps does, compact or with escapes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            messages = [{"role": "user", "content": _text(rng)},
                        {"role": "assistant", "content": rng.choice([_text(rng), None]),
                         "tool_calls": [_call(rng, i)] if rng.random() < 0.5 else None}]
            if messages[1]["content"] is None and messages[1]["tool_calls"] is None:
                messages[1]["content"] = "x"
        else:
            messages = [_message(rng, i) for _ in range(rng.randint(0, 6))]
        rec = {"step": i // 10, "reward": rng.random(), "group": f"g{i % 3}", "messages": messages}
        if rng.random() < 0.05:
            rec["messages"] = rng.choice(["hello", None, {"role": "user"}, 5])
        if rng.random() < 0.02:
            del rec["messages"]
        line = json.dumps(rec, ensure_ascii=rng.random() < 0.5,
                          separators=rng.choice([(", ", ": "), (",", ":"), (" ,  ", " :\t")]))
        out.append(line)
    return out


ODD_LINES = [  # written by hand: what json.dumps never writes
    '{"step": 1, "messages": [{"role": "user", "content": "a", "content": "b"}]}',  # a key twice
    '{"step": 1, "messages": [{"role": "user", "role": "tool", "content": "b"}]}',
    '{"step": 1, "messages": [{"r\\u006fle": "user", "content": "b"}]}',  # a key spelled with an escape
    '{"step": 1, "messages": [{"role": "us\\u0065r", "content": "\\ud83d\\ude00 \\u00e9"}]}',  # escapes in values
    '{"step": 1, "messages": [{"role": "user", "content": "lone \\ud800"}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "nul \\u0000"}]}',
    '{"step": 1, "messages": [], "messages": [{"role": "user", "content": "x"}]}',  # the messages twice
    '{"step": 1, "Messages": [{"role": "user", "content": "x"}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "x"},]}',  # a trailing comma
    '{"step": 1, "messages": [{"role": "user", "content": "x", "n": 01}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "x", "n": 1e999}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "x", "n": NaN}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "x", "n": ' + "[" * 200 + "]" * 200 + "}]}",
    '{"step": 1, "messages": [{"role": "user", "content": "x"}], "step": 2}',  # a top-level key twice
    '{"step": 1, "messages": [{"role": "user", "content": "x"}]} trailing',
    '{"step": 1, "messages": [{"role": "user", "content": "unterminated}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "x"}  ',
    '{"step": 1, "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": '
    '"{\\"a\\": \\"\\\\u0000\\"}"}}]}]}',
    '  {"step": 1, "messages": [{"role": "user", "content": "x"}]}',
    '{"step": 1, "messages": [{"role": "user", "content": "tab\there"}]}',  # a raw control character
]
BAD_BYTES = [b'{"step": 1, "messages": [{"role": "user", "content": "\xff\xfe"}]}',
             b'{"step": 1, "messages": [{"role": "user", "content": "x", "\xc0\x80": 1}]}',
             b'{"step": 1, "messages": [{"role": "user", "content": "over \xed\xa0\x80"}]}']


# -- C's reading against Python's, line by line ------------------------------------------------------------------------
def _python(line: str) -> tuple | None:
    """Python's texts and stored turn rows of a line's messages; None where it reports something (C leaves those)."""
    messages = json.loads(line).get("messages")
    if not isinstance(messages, list):
        return None
    chat = messages_chat(messages)
    if chat.reports:
        return None
    return chat.prompt, chat.response, chat.answer, turn_rows(chat.turns)


def _c(got: dict, i: int) -> tuple | None:
    """C's texts and turn rows of line i, each turn's text cut out of the prompt or response where its span says."""
    if not got["handled"][i].as_py():
        return None
    a, b = got["row_offsets"][i].as_py(), got["row_offsets"][i + 1].as_py()
    names = ("turn", "role", "tool_name", "tool_arguments", "tool_call_id", "trained", "reasoning")
    prompt, response = got["prompt"][i].as_py(), got["response"][i].as_py()
    rows = []
    for r in range(a, b):
        start, end, in_prompt = (got[f][r].as_py() for f in ("text_start", "text_end", "in_prompt"))
        text = None if start is None else (prompt if in_prompt else response).encode()[start:end].decode()
        rows.append({**{f: got[f][r].as_py() for f in names}, "text": text, "start": None, "end": None})
    return prompt, response, _answer(got, i), rows


def _answer(got: dict, i: int) -> str | None:
    """Line i's answer: cut out of the response where C says it stands."""
    start, end = got["answer_start"][i].as_py(), got["answer_end"][i].as_py()
    return None if start is None else got["response"][i].as_py().encode()[start:end].decode()


def _counts(response: str | None) -> tuple[int | None, int | None]:
    """What the checks count in a response: its characters and default pad tokens (None each without one)."""
    return (None, None) if response is None else (len(response), response.count(DEFAULT_PAD_TOKEN))


@needs_lib
@pytest.mark.parametrize("seed", range(4))
def test_messages_read_as_python_reads_them(seed):
    lines = fuzz_records(seed, 400)
    got = native.read_messages(pa.array([x + "\n" for x in lines], pa.large_string()), "messages",
                               DEFAULT_PAD_TOKEN.encode())
    assert got is not None
    read = 0
    for i, line in enumerate(lines):
        mine = _c(got, i)
        counts = got["response_chars"][i].as_py(), got["response_pads"][i].as_py()
        if mine is not None:
            read += 1
            assert mine == _python(line), line
            assert counts == _counts(mine[1])
            assert got["n_turns"][i].as_py() == len({r["turn"] for r in mine[3]}) or not mine[3]
            rewritten = json.loads(got["lines"][i].as_py())
            assert rewritten == {**json.loads(line), "messages": []}
        else:
            assert got["lines"][i].as_py() == line + "\n"
            assert got["prompt"][i].as_py() is None and got["n_turns"][i].as_py() is None
            assert counts == (None, None)
    assert read > len(lines) // 4  # the plain ones, and odd ones that give no report


@needs_lib
def test_response_counts_at_every_place():
    """The characters and pad tokens of each response, counted in C as the checks count them, wherever they fall
    (across C's 16-byte blocks, side by side, cut short, after multi-byte characters)."""
    pieces = ["<PAD>", "<PAD><PAD>", "<PA<PAD>", "<<PAD>", "<PAD", "é<PAD>数据", "😀<"]
    answers = [" " * k + p + "x" * (k % 7) + p for k in range(40) for p in pieces]
    lines = [json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": a}]})
             for a in answers]
    got = native.read_messages(pa.array([x + "\n" for x in lines], pa.large_string()), "messages",
                               DEFAULT_PAD_TOKEN.encode())
    assert got["handled"].to_pylist() == [True] * len(lines)
    assert got["response_chars"].to_pylist() == [len(a) for a in answers]
    assert got["response_pads"].to_pylist() == [a.count(DEFAULT_PAD_TOKEN) for a in answers]


@needs_lib
def test_odd_lines_are_left_to_python():
    texts = [x.encode() for x in ODD_LINES] + BAD_BYTES
    lines = pa.array([t + b"\n" for t in texts], pa.large_binary()).cast(pa.large_string(), safe=False)
    got = native.read_messages(lines, "messages")
    handled = got["handled"].to_pylist()
    plain = {3, 18}  # escapes in values; blanks before the object (the reader leaves such a chunk whole to DuckDB)
    assert {i for i, h in enumerate(handled) if h} == plain
    assert got["prompt"][3].as_py() == "\U0001F600 é" and got["row_offsets"].to_pylist()[-1] == 2
    copied = got["lines"].cast(pa.large_binary())
    assert [copied[i].as_py() for i in range(len(texts)) if i not in plain] == \
        [t + b"\n" for i, t in enumerate(texts) if i not in plain]


def _with_texts(seed: int, lines: list[str]) -> list[str]:
    """``lines`` with a top-level text key (``ref_response``) now and then, of every type, and keys only a few lines
    have (among them lines C leaves: a key written twice, an escape in a key)."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        if line.startswith("{") and rng.random() < 0.3:
            value = json.dumps(rng.choice(["r", "", None, 5, [1, "x"], {"a": "b"}, True, "null"]))
            line = "{" + rng.choice(['"ref_response": ', '"ref_response" :  ', '"rare": 1, "ref_response":']) + \
                value + ", " + line[1:]
        out.append(line)
    return out


def _top_keys(line: str) -> tuple[list[str], bool]:
    """A line's top-level keys as written (with repeats), and whether its text key holds no string or null."""
    pairs = json.loads(line, object_pairs_hook=lambda kv: kv)
    odd = any(k == "ref_response" and not (v is None or isinstance(v, str)) for k, v in pairs)
    return [k for k, _ in pairs], odd


@needs_lib
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_keys_c_finds_are_the_byte_scans(seed):
    """C's keys and odd lines (``found``) of the lines it reads are those the lines hold (the byte scan's, less the
    nested keys it also finds) and the scan's odd lines; none of its lines writes a key twice; a line it leaves
    (a key written twice, an escape in a key) adds no key of its own."""
    lines = _with_texts(seed, fuzz_records(seed, 400)) + ODD_LINES + [
        '{"step": 1, "only_left": 1, "messages": [], "messages": []}',
        '{"step": 1, "only_\\u0065": 1, "messages": []}',
        '{"step": 1, "ref_response": 3, "messages": [{"role": "user", "content": "a", "content": "b"}]}']
    arr = pa.array([x + "\n" for x in lines], pa.large_string())
    got = native.read_messages(arr, "messages", DEFAULT_PAD_TOKEN.encode(), ["ref_response"])
    read = np.flatnonzero(got["handled"].to_numpy(zero_copy_only=False))
    assert len(read) > 100
    mine = arr.take(pa.array(read))
    keys, odd = set(), []
    for i in read.tolist():
        top, bad = _top_keys(lines[i])
        assert len(top) == len(set(top)), lines[i]  # C reads no line with a key written twice
        keys |= set(top)
        odd += [i] if bad else []
    found = got["found"]
    assert found.keys == keys and keys <= candidate_keys(mine) and "only_left" not in keys
    assert found.odd.tolist() == odd == read[odd_values(mine, None, ["ref_response"])].tolist()
    assert not set(read[repeated_keys(mine)]) & {i for i in read.tolist() if "only" in lines[i]}
    assert native.read_messages(arr, "messages")["found"].odd.tolist() == []  # no text keys: none odd


@needs_lib
@pytest.mark.parametrize("chunk_bytes", [2048, 1 << 20])
def test_chunks_c_read_give_the_byte_scans_problems(tmp_path, monkeypatch, chunk_bytes):
    """A chat log whose chunks C reads whole (their keys, odd lines and repeats of the lines it leaves by the byte
    scan): a text key holding numbers and lists, a key only later lines have, keys written twice at the top and
    nested, odd lines: the frames and problems of the byte scan and Python alone."""
    for name in ("CHUNK_BYTES", "FIRST_CHUNK_BYTES", "LAST_CHUNK_BYTES"):
        monkeypatch.setattr(linereader, name, chunk_bytes)
    settled = [0]
    real = chat_reader.ChatReader.settle

    def counted(self, chunk):
        settled[0] += chunk.keys is None and chunk.native is not None
        real(self, chunk)

    monkeypatch.setattr(chat_reader.ChatReader, "settle", counted)
    folder = tmp_path / "logs"
    folder.mkdir()
    lines = _with_texts(5, fuzz_records(5, 500))
    lines[300] = lines[300][:-1] + ', "late": 2.5}'
    lines[320] = lines[320][:-1] + ', "step": 7}'
    lines[340] = '{"step": 1, "messages": [{"role": "user", "content": "a", "content": "b"}], "late": "x"}'
    lines[360] = '{"step": 1, "Messages": [], "messages": [{"role": "user", "content": "x"}]}'
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    with_c, without, read = _open_both(folder, tmp_path, monkeypatch, format="chat")
    assert read > 150 and settled[0] > 0
    _same(with_c, without)
    kinds = set(with_c["problems"]["kind"])
    assert {"wrong_type", "duplicate_key"} <= kinds and "late" in with_c["samples"]


@needs_lib
def test_huge_and_empty_inputs():
    big = json.dumps({"step": 1, "messages": [{"role": "user", "content": "x" * 3_000_000},
                                              {"role": "assistant", "content": "é" * 1_000_000}]})
    got = native.read_messages(pa.array([big + "\n", "{}\n", "\n"], pa.large_string()), "messages")
    assert got["handled"].to_pylist() == [True, False, False]
    assert got["prompt"][0].as_py() == "x" * 3_000_000 and _answer(got, 0) == "é" * 1_000_000
    assert native.read_messages(pa.array([], pa.large_string()), "messages") is None


# -- a run opened both ways --------------------------------------------------------------------------------------------
def _frames(run) -> dict[str, pd.DataFrame]:
    samples = run.samples.sort_values("line").reset_index(drop=True)
    turns = run.turns(samples["sample_id"].tolist())
    return {"samples": samples, "turns": turns, "problems": pd.DataFrame(run.problems)}


def _open_both(source, tmp_path, monkeypatch, **options) -> tuple[dict, dict, int]:
    """The frames of ``source`` opened with the messages read in C and without, and how many lines C read."""
    return open_both(source, tmp_path, monkeypatch, reader="read_messages", frames=_frames,
                     counts=lambda got: 0 if got is None else sum(got["handled"].to_pylist()), **options)


def _same(a: dict, b: dict) -> None:
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)


@needs_lib
def test_generated_logs_open_the_same(tmp_path, monkeypatch):
    """The OpenAI-chat generators' logs (tool calls, image parts, text parts; markup in arguments, roles and tool
    names): the same frames, with C reading the lines it can."""
    folder = tmp_path / "logs"
    write_openai_chat(folder, steps=(1, 2, 3), prompts=3)
    write_agent_chat(folder, samples=5)
    with_c, without, read = _open_both(folder, tmp_path, monkeypatch, format="chat")
    assert read > 0 and len(with_c["samples"]) == 32
    _same(with_c, without)
    assert (with_c["samples"]["response"].str.contains(XSS, regex=False)).any()
    assert with_c["problems"]["kind"].tolist().count("unknown_role") == 5


@needs_lib
@pytest.mark.parametrize("chunk_bytes", [2048, 1 << 20])
def test_faulty_logs_open_the_same(tmp_path, monkeypatch, chunk_bytes):
    """Plain records, every kind of bad message, odd lines and bytes in chunks of all sizes: every problem located
    and kept as the Python reading finds it; the texts and turns the same."""
    for name in ("CHUNK_BYTES", "FIRST_CHUNK_BYTES", "LAST_CHUNK_BYTES"):
        monkeypatch.setattr(linereader, name, chunk_bytes)
    folder = tmp_path / "logs"
    folder.mkdir()
    lines = [x.encode() for x in fuzz_records(11, 600)]
    for k, odd in enumerate([x.encode() for x in ODD_LINES] + BAD_BYTES + [b"", b"not json", b"[1, 2]"]):
        lines.insert(37 * k + 5, odd)
    (folder / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (folder / "b.jsonl").write_text("".join(json.dumps({"step": 1, "messages": agent_messages(k)}) + "\n"
                                            for k in range(20)))
    with_c, without, read = _open_both(folder, tmp_path, monkeypatch, format="chat")
    # (in one chunk, a line spells Messages: json_transform would read it as the messages, DuckDB reads them all)
    assert read > 150 or chunk_bytes > 10000
    _same(with_c, without)
    kinds = set(with_c["problems"]["kind"])
    assert {"missing_field", "unknown_role", "wrong_type", "image", "duplicate_key", "malformed_json"} <= kinds


@needs_lib
def test_answers_are_spans_of_the_response_unless_the_log_has_its_own(tmp_path, monkeypatch):
    """The answers C reads are stored as spans of the response (not written twice) and read back as Python's texts;
    a log's own field ``answer`` (numbers here) stays as it is, of its type."""
    for name, own in (("plain", {}), ("own", {"answer": 1})):
        folder = tmp_path / name
        folder.mkdir()
        known = [[m for m in agent_messages(k) if m["role"] in ROLES] for k in range(6)]  # (all read in C)
        (folder / "a.jsonl").write_text("".join(json.dumps({"step": 1, **own, "messages": m}) + "\n" for m in known))
        with_c, without, read = _open_both(folder, tmp_path / f"{name}_caches", monkeypatch, format="chat")
        assert read == 6
        _same(with_c, without)
        answers = with_c["samples"]["answer"].tolist()
        assert answers == [1.0] * 6 if own else all(isinstance(a, str) and a for a in answers)


@needs_lib
def test_mapped_texts_and_arrays_are_left_alone(tmp_path, monkeypatch):
    """``columns=`` mapping the prompt or response, or a chat log with token arrays: not read in C (as before)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    recs = [{"step": 1, "reward": 1.0, "q": "p", "messages": agent_messages(k), "logprobs": [-0.5, -1.0]}
            for k in range(4)]
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    for options in ({"format": "chat"}, {"format": "chat", "columns": {"prompt": "q"}}):
        with_c, without, read = _open_both(folder, tmp_path / str(len(options)), monkeypatch, **options)
        assert read == 0
        _same(with_c, without)


@needs_lib
def test_the_benchmark_log_opens_the_same(tmp_path, monkeypatch):
    """The conversation log of ``benchmarks/ingest.py`` (case d): every line read in C, the same frames."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ingest.py"
    spec = importlib.util.spec_from_file_location("bench_ingest", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = random.Random(3)
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "rank0.jsonl").write_text("".join(json.dumps(bench.chat_record(rng, i // 50, i, 60)) + "\n"
                                                for i in range(300)))
    with_c, without, read = _open_both(folder, tmp_path, monkeypatch)
    assert read == 300 and with_c["problems"].empty
    _same(with_c, without)
