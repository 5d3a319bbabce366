"""Key discovery from bytes: every real top-level key, extra candidates harmless."""

from __future__ import annotations

import json

import pyarrow as pa

from rlviz_widgets._ingest.readers.jsonl.keyscan import candidate_keys, odd_values


def arr(*objs_or_lines) -> pa.Array:
    lines = [o if isinstance(o, str) else json.dumps(o, ensure_ascii=False) for o in objs_or_lines]
    return pa.array([line + "\n" for line in lines], pa.large_string())


def test_finds_every_top_level_key():
    keys = candidate_keys(arr({"prompt": "a", "reward": 1.0, "response_tokens": ["Ġa", "b"], "logprobs": [-1.0]},
                              {"step": 3, "acc": True, "été": 1, 'say "hi"': 2}))
    assert {"prompt", "reward", "response_tokens", "logprobs", "step", "acc", "été", 'say "hi"'} <= keys


def test_spacing_and_escapes():
    keys = candidate_keys(arr('{"a" : 1, "b":2, "c"  : 3, "\\u00e9t\\u00e9": 4}'))
    assert {"a", "b", "c", "été"} <= keys


def test_strings_that_look_like_keys_only_add_candidates():
    keys = candidate_keys(arr({"prompt": 'reply with {"x": 1}', "reward": 0.5}))
    assert {"prompt", "reward"} <= keys  # "x" may appear too: its top-level column comes out empty


def test_empty_and_sliced():
    assert candidate_keys(pa.array([], pa.large_string())) == set()
    a = arr({"first": 1}, {"second": 2})
    assert "second" in candidate_keys(a.slice(1)) and "first" not in candidate_keys(a.slice(1))


def test_fuzz_every_real_key_is_found():
    """Random keys full of quotes, backslashes, colons, spaces and non-ASCII, in every spacing."""
    import random

    rnd = random.Random(7)
    alphabet = ["a", "é", '"', "\\", ":", " ", "{", "}", "x", "\n", "\t", "ü", "\u0000", ": ", '":']

    def text(n: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, n)))

    for _ in range(600):
        objs = [{text(rnd.choice([5, 5, 30, 90])): rnd.choice([1, text(20), [text(5)], {text(3): text(3)}])
                 for _ in range(rnd.randint(1, 5))} for _ in range(rnd.randint(1, 5))]
        seps = rnd.choice([(",", ":"), (", ", ": "), (",", " : "), (",", "  :")])
        lines = [json.dumps(o, ensure_ascii=rnd.random() < 0.5, separators=seps) + "\n" for o in objs]
        want = {k for o in objs for k in o}
        got = candidate_keys(pa.array(lines, pa.large_string()))
        assert want <= got, (lines, want - got)


def test_keys_sharing_their_last_bytes_are_each_found():
    """Keys are grouped by their last 8 bytes: every distinct key of a group must still come out,
    also past the reads per group, with escapes before the shared tail, and longer than a short look back
    (keys are looked for up to 64 KB back from their closing quote)."""
    import random

    rnd = random.Random(11)
    tails = ["logprobs", "_reward", "x"]
    heads = ["", "ref_", "a\\\\", 'q"', "é", "\\\\\\\\", "x" * 300, "y" * 60000] + [f"m{i}_" for i in range(20)]
    keys = [h + t for h in heads for t in tails]
    for _ in range(40):
        objs = [{k: rnd.random() for k in rnd.sample(keys, rnd.randint(1, 12))} for _ in range(rnd.randint(1, 8))]
        lines = [json.dumps(o, separators=rnd.choice([(",", ":"), (", ", ": ")])) + "\n" for o in objs]
        want = {k for o in objs for k in o}
        got = candidate_keys(pa.array(lines, pa.large_string()))
        assert want <= got, want - got


def test_odd_values_finds_every_text_key_holding_a_non_string():
    lines = arr({"prompt": "a", "response": "b"},  # 0: strings
                '{"prompt":5, "response": "b"}',  # 1: compact
                '{"prompt" :\t [1], "response": null}',  # 2: blanks around the colon; null is fine
                '{"response"  :   {"a": 1}}',  # 3: more blanks than looked past: in anyway
                {"prompt": 'say "response": 5', "response": "x"},  # 4: inside a string (its quotes escaped)
                {"reward": 1.0, "response_tokens": ["a"], "step": 2},  # 5: other keys are not looked at
                '{"ref_response": true, "prompt": NaN}',  # 6: a key not asked for; NaN
                '{"a\\"prompt": 1}')  # 7: a key ending in one: a harmless extra
    assert odd_values(lines, None, ["prompt", "response"]).tolist() == [1, 2, 3, 6, 7]
    assert odd_values(lines.slice(2, 2), None, ["prompt"]).tolist() == [0]
    assert odd_values(lines, None, []).tolist() == []


def test_equal_at_matches_a_byte_by_byte_comparison():
    """The word-at-a-time comparison behind the key search agrees with slicing, for patterns of 1-24 bytes, at
    the very start and end of the bytes, and on buffers shorter than a word."""
    import numpy as np

    from rlviz_widgets._ingest.readers.jsonl.keyscan import equal_at

    rng = np.random.default_rng(7)
    for size in (3, 7, 8, 9, 64, 1000):
        data = rng.integers(97, 100, size).astype(np.uint8)  # few letters: many near-matches
        for n in range(1, 25):
            if n > size:
                continue
            for pat_at in (0, size - n, size // 2 - n // 2):
                pattern = data[pat_at:pat_at + n].tobytes()
                starts = np.arange(0, size - n + 1)
                want = np.array([data[s:s + n].tobytes() == pattern for s in starts])
                got = equal_at(data, starts, pattern)
                assert got.tolist() == want.tolist(), (size, n, pat_at)
                assert got[pat_at]
    assert equal_at(np.frombuffer(b"abcdefghij", np.uint8), np.zeros(0, np.int64), b"abcdefghi").tolist() == []


def _top_level_repeats(line: str) -> bool:
    objects: list = []
    json.loads(line, object_pairs_hook=lambda pairs: objects.append(pairs) or {})
    keys = [k for k, _ in objects[-1]]
    return len(keys) != len(set(keys))


def test_repeated_keys_of_lines_shorter_than_its_window():
    """Lines of fewer than 16 bytes in all (a job appending one short line): numpy refused the 16-byte window
    view and the open or refresh failed."""
    from rlviz_widgets._ingest.readers.jsonl.keyscan import repeated_keys

    assert repeated_keys(arr('{"a":1,"a":2}')).tolist() == [0]
    assert repeated_keys(arr('{"step": 1}')).tolist() == []
    assert repeated_keys(arr('{"a":1}', '{"b":1}')).tolist() == []


def test_repeated_keys_finds_every_line_holding_a_key_twice():
    """A superset: every line with a top-level key written twice (in any spelling, any spacing, any length, the
    buffer's first key included), and few others: keys sharing their last bytes are told apart."""
    import random

    from rlviz_widgets._ingest.readers.jsonl.keyscan import repeated_keys

    fixed = ['{"a":1,"a":2}', '{"step": 1, "st\\u0065p": 2}', '{"x" :1,  "x"  : 2}',
             '{"' + "k" * 40 + '": 1, "' + "k" * 40 + '": 2}', '{"m": {"a": 1}, "a": 2}',
             '{"ref_logprobs": [1], "logprobs": [2], "values": [3], "token_values": [4]}',
             '{"prompt": "no", "b": 1}',
             '{"importance_ratio": [1], "log_importance_ratio": [2], "' + "z" * 20 + '": 1, "q' + "z" * 20 + '": 2}']
    found = repeated_keys(arr(*fixed)).tolist()
    assert found == [0, 1, 2, 3, 4]
    rng = random.Random(3)
    names = ["a", "ab", "step", "reward", "ref_reward", "é", "x" * 17, "y" * 17 + "x" * 17, "acc"]
    lines = []
    for _ in range(400):
        pairs = [(rng.choice(names), rng.random()) for _ in range(rng.randint(1, 6))]
        text = "{" + ", ".join(json.dumps(k, ensure_ascii=rng.random() < 0.5) + " " * rng.randint(0, 2) + ": "
                               + json.dumps(v) for k, v in pairs) + "}"
        lines.append(text)
    want = {i for i, line in enumerate(lines) if _top_level_repeats(line)}
    got = set(repeated_keys(arr(*lines)).tolist())
    assert want <= got
    # the extra lines are those with a key spelled with escapes or two long keys alike in their last 32 bytes
    plain = {i for i, line in enumerate(lines) if "\\" not in line and "y" not in line}
    assert got & plain == want & plain


def test_escaped_spellings_looks_back_in_batches(monkeypatch):
    """Keys ending as the key looked for (custom fields m0001, m0011...: every one ends in a digit) each got a window
    of 12 bytes per character at once: 300 MB more at peak on a wide log. Batched, with the same answer."""
    import tracemalloc

    import numpy as np

    from rlviz_widgets._ingest.readers.jsonl import keyscan as jsonkeys

    line = "".join(f'"m{i % 1000:04d}1": 1, ' for i in range(20)) + '"st\\u0065p1": 2, "step1": 3'
    text = ("{" + line + "}\n") * 10_000
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    close = np.flatnonzero((data[1:] == jsonkeys.COLON) & (data[:-1] == jsonkeys.QUOTE))
    want = [k for k in range(len(close)) if k % 22 == 20]  # the escaped spelling of each line
    tracemalloc.start()
    got = jsonkeys.escaped_spellings(data, close, "step1")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.flatnonzero(got).tolist() == want
    assert peak < 40 * 2**20  # 220k keys x 60 bytes back x 8: ~106 MB at once before
    monkeypatch.setattr(jsonkeys, "WINDOW_ROWS", 3)
    assert np.flatnonzero(jsonkeys.escaped_spellings(data, close, "step1")).tolist() == want
