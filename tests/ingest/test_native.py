"""The number arrays read by ``rlviz_widgets._ingest.native`` (C) give what DuckDB's ``json_transform`` to
FLOAT[] gives, bit for bit, or nothing (the chunk is then read by DuckDB as before); a run opens to the same frames
and the same problems either way."""

from __future__ import annotations

import json
import platform
import random
import shutil
import struct
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import README_RECORD, SHARED_DATA, write_lines

import rlviz_widgets
from rlviz_widgets._ingest import lines as linereader
from rlviz_widgets._ingest import native
from rlviz_widgets._ingest.readers.jsonl import reader as jreader

needs_lib = pytest.mark.skipif(native.library() is None, reason="the native array reader is not built here")


def _lines(*texts: str) -> pa.LargeStringArray:
    return pa.array([t if t.endswith("\n") else t + "\n" for t in texts], pa.large_string())


def _duckdb_floats(numbers: list[str]) -> np.ndarray:
    """DuckDB's reading of the numbers as one FLOAT[] (what the cold open did before, and does without C)."""
    line = '{"a": [' + ", ".join(numbers) + "]}"
    con = duckdb.connect()
    got = con.execute("""SELECT json_transform(?::JSON, '{"a": "FLOAT[]"}').a""", [line]).fetchone()[0]
    return np.array([np.nan if v is None else v for v in got], np.float32)  # null: past float32's range


def test_the_powers_of_ten_are_those_published():
    """The Eisel-Lemire table is computed, not pasted: its ends and 10**0 are Go's strconv values."""
    hi, lo = native.powers()
    assert len(hi) == native.POW_MAX - native.POW_MIN + 1
    assert (int(hi[0]), int(lo[0])) == (0xFA8FD5A0081C0288, 0x1732C869CD60E453)  # 1e-348
    assert (int(hi[348]), int(lo[348])) == (0x8000000000000000, 0)  # 1e0
    assert (int(hi[-1]), int(lo[-1])) == (0xD13EB46469447567, 0x4B7195F2D2D1A9FB)  # 1e347


def _numbers(n: int, seed: int) -> list[str]:
    """Numbers as loggers write them (float32 values printed as doubles, short and long decimals, exponents,
    integers) and the hard cases: float32 and double halfway points, subnormals, the edges of float32's range."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.35:  # a float32 tensor's value through Python's float repr (17 digits)
            out.append(repr(struct.unpack("f", struct.pack("f", rng.uniform(-30, 5)))[0]))
        elif k < 0.5:
            out.append(repr(rng.uniform(-1, 1) * 10 ** rng.randint(-44, 38)))
        elif k < 0.65:
            sign = "-" if rng.random() < 0.5 else ""
            out.append(f"{sign}{rng.randint(1, 10 ** rng.randint(1, 19))}e{rng.randint(-60, 30)}")
        elif k < 0.8:
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 30)))
            exp = f"E{rng.randint(-40, 30):+d}" if rng.random() < 0.5 else ""
            out.append(f"{rng.choice(['0', '1', '12', '-0', '-3', '999'])}.{digits}{exp}")
        elif k < 0.9:
            out.append(str(rng.randint(-10**15 + 1, 10**15 - 1)))
        else:  # near a float32 halfway point: the double rounds first, then the float (as DuckDB does)
            f = struct.unpack("f", struct.pack("f", rng.uniform(-4, 4)))[0]
            ulp = np.spacing(np.float32(f)).astype(np.float64)
            out.append(repr(float(f) + float(ulp) / 2 * rng.choice([1, -1]) + rng.choice([0, 1e-17, -1e-17])))
    out += ["0", "-0", "0.0", "-0.0", "1e-45", "1.4e-45", "7e-46", "1e-50", "3.4028235e38", "-3.4028234663852886e38",
            "1.0000000596046448", "1.00000005960464477539062500001", "0.000000000000000000000000000001",
            "123456789012345678901234567890", "1.5e00000000000000000000000001", "2.5e-0000000003"]
    return out


@needs_lib
@pytest.mark.parametrize("seed", range(3))
def test_numbers_read_as_duckdb_reads_them(seed):
    numbers = _numbers(40_000, seed)
    want = _duckdb_floats(numbers)
    # past float32's range (DuckDB: null, reported) and integers past 15 digits are left to DuckDB: tested below
    keep = ~np.isnan(want) & np.array([not (n.lstrip("-").isdigit() and len(n.lstrip("-")) > 15) for n in numbers])
    assert keep.mean() > 0.9
    numbers, want = [n for n, k in zip(numbers, keep) if k], want[keep]
    got = native.read_arrays(_lines('{"a": [' + ", ".join(numbers) + "]}"), ["a"])
    assert got is not None
    vals = got[1][0].values.to_numpy()
    bad = np.flatnonzero(vals.view(np.uint32) != want.view(np.uint32))  # bit for bit: -0.0 and 0.0 differ
    assert not len(bad), [(numbers[i], vals[i], want[i]) for i in bad[:10]]


@needs_lib
@pytest.mark.parametrize("value", ["01", "1.", ".5", "+1", "NaN", "Infinity", "-Infinity", "nan", "1e", "1e+", "-",
                                   '"1"', "[1]", "{}", "true", "0x10", "1.5.5", "1e5e5", "\uff11", "1 2",
                                   "3.5e38", "-1e39", "1e400", "1234567890123456"])
def test_what_it_does_not_read_is_left_to_duckdb(value):
    """Anything but a JSON number DuckDB reads as a finite float32 (and the odd integer past 15 digits) or null: the
    chunk is not read here, so DuckDB reads and reports it as it always did."""
    good = '{"step": 1, "logprobs": [0.5, -1.25]}'
    assert native.read_arrays(_lines(good), ["logprobs"]) is not None
    assert native.read_arrays(_lines(good, '{"step": 1, "logprobs": [0.5, ' + value + "]}"), ["logprobs"]) is None


@needs_lib
@pytest.mark.parametrize("seed", range(2))
def test_every_kind_read_as_duckdb_reads_it(seed):
    """Lists of each kind (float32, float64, booleans, int64, nulls among them, a line without the key, an empty
    list) come out as DuckDB's json_transform makes them, value for value and null for null; a DROP list (no
    column reads it) is only written []."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(300):
        n = int(rng.integers(0, 6))
        floats = [None if rng.random() < 0.2 else float(rng.normal() * 10.0 ** rng.integers(-5, 5)) for _ in range(n)]
        rec = {"f": floats, "d": floats, "b": [None if rng.random() < 0.2 else bool(rng.random() < 0.5)
                                               for _ in range(n)],
               "i": [None if rng.random() < 0.2 else int(rng.integers(-10**17, 10**17)) for _ in range(n)],
               "x": [None, True, 1.5, -3] if i % 2 else "not a list", "s": i}
        if i % 7 == 0:
            del rec["b"]
        lines.append(json.dumps(rec))
    types = {"f": "FLOAT[]", "d": "DOUBLE[]", "b": "BOOLEAN[]", "i": "BIGINT[]"}
    got = native.read_arrays(_lines(*lines), [*types, "x"], None, [*types.values(), "DROP"])
    assert got is not None
    rest, lists, _, _ = got
    assert lists[4] is None
    con = duckdb.connect()
    for (key, kind), col in zip(types.items(), lists):
        want = [con.execute(f"SELECT json_transform(?::JSON, '{{\"{key}\": \"{kind}\"}}').{key}", [line]).fetchone()[0]
                for line in lines]
        assert col.to_pylist() == want, key
    for i, line in enumerate(rest.to_pylist()):
        rec = json.loads(line)
        assert rec["s"] == i and rec["x"] == ([] if i % 2 else "not a list") and rec["f"] == []


@needs_lib
@pytest.mark.parametrize(("kind", "value"), [("BOOLEAN[]", "1"), ("BOOLEAN[]", "0"), ("BOOLEAN[]", '"true"'),
                                             ("BOOLEAN[]", "tru"), ("BIGINT[]", "1.5"), ("BIGINT[]", "1e3"),
                                             ("BIGINT[]", "1234567890123456789"), ("BIGINT[]", "true"),
                                             ("DOUBLE[]", "NaN"), ("DOUBLE[]", "12345678901234567"),
                                             ("DROP", '"a"'), ("DROP", "[1]"), ("DROP", "NaN"), ("FLOAT[]", "nul")])
def test_what_a_kind_does_not_read_is_left_to_duckdb(kind, value):
    assert native.read_arrays(_lines('{"k": [null]}'), ["k"], None, [kind]) is not None
    assert native.read_arrays(_lines('{"k": [null]}', '{"k": [null, ' + value + "]}"), ["k"], None, [kind]) is None


@needs_lib
@pytest.mark.parametrize("line", [
    '{"logprobs": [1], "logprobs": [2]}',  # twice: DuckDB decides which
    '{"log\\u0070robs": [1]}',  # an escaped key may spell ours
    '{"logprobs": [1]} x',  # more after the object
    '{"logprobs": [1]',  # half a line
    '[{"logprobs": [1]}]',  # not an object
    '{"logprobs": [1], }',
    '{"logprobs" [1]}',
    '{"logprobs": "[1]"}',  # not a list
    '{"logprobs": [[1]]}',
])
def test_lines_it_cannot_read_are_left_to_duckdb(line):
    assert native.read_arrays(_lines('{"logprobs": [1]}', line), ["logprobs"]) is None


@needs_lib
def test_only_top_level_keys_and_the_rest_kept_for_duckdb():
    """Keys inside strings or nested objects are not ours; the line DuckDB gets is the record without the lists."""
    records = [
        {"prompt": 'say "logprobs": [1, 2] \\" \\\\', "meta": {"logprobs": [9], "x": ["]", "}"]}, "logprobs": [0.5],
         "values": [], "step": 3},
        {"values": [1e-7, -2.5], "response_tokens": ["a", "\"", "\\"], "step": 4},  # no logprobs: null
        {"step": 5, "logprobs": [1, 2.0, -3e2], "values": [0.25], "ref": {"logprobs": [1]}},
    ]
    text = [json.dumps(r) for r in records]
    text[2] = '{ "step" : 5 ,"logprobs"  :  [ 1 ,2.0,\t-3e2 ] , "values":[0.25], "ref": {"logprobs": [1]} }\r'
    got = native.read_arrays(_lines(*text), ["logprobs", "values"], "response_tokens")
    assert got is not None
    rest, (logprobs, values), tokens, found = got
    assert tokens.to_pylist() == [None, ["a", '"', "\\"], None]
    assert logprobs.to_pylist() == [[0.5], None, [1.0, 2.0, -300.0]]
    assert values.to_pylist() == [[], [pytest.approx(1e-7), -2.5], [0.25]]
    for i, r in enumerate(records):
        kept = json.loads(rest[i].as_py())
        assert kept == {**r, **{k: [] for k in ("logprobs", "values", "response_tokens") if k in r}}


@needs_lib
def test_arrays_of_a_sliced_chunk():
    """The lines of a chunk are a slice of its buffer (``_subset``, ``parse_many``): offsets are the slice's."""
    arr = _lines('{"a": [1]}', '{"a": [2, 3]}', '{"a": [4]}').slice(1, 2)
    rest, (a,), _, _ = native.read_arrays(arr, ["a"])
    assert a.to_pylist() == [[2.0, 3.0], [4.0]] and rest.to_pylist() == ['{"a": []}\n', '{"a": []}\n']


def _duckdb_strings(lines: list[str]) -> list:
    con = duckdb.connect()
    return [con.execute("""SELECT json_transform(?::JSON, '{"t": "VARCHAR[]"}').t""", [line]).fetchone()[0]
            for line in lines]


def _tokens(n: int, seed: int) -> list[str]:
    """Token strings as tokenizers spell them, and the escapes JSON allows (ensure_ascii spells every non-ASCII
    character as \\u escapes, surrogate pairs for those past U+FFFF)."""
    rng = random.Random(seed)
    pool = ["Ġthe", "Ċ", "\n", "\t", '"', "\\", "/", "<|im_end|>", "é", "準", "😀", "\u0000", "\x7f", " ", "",
            "a\u00e9b", "\ud83d\ude00", "\b\f\r", "Ġ", "\u2028", "\u001f", "𝔘𝔫𝔦"]
    out = []
    for _ in range(n):
        parts = rng.choices(pool, k=rng.randint(0, 3))
        out.append("".join(parts))
    return out


@needs_lib
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_string_lists_read_as_duckdb_reads_them(ensure_ascii):
    rng = random.Random(int(ensure_ascii))
    lines = []
    for i in range(400):
        toks = [t.encode().decode("unicode_escape") if "\\u" in t else t for t in _tokens(rng.randint(0, 30), i)]
        toks = [t for t in toks if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
        lines.append(json.dumps({"t": toks, "step": i}, ensure_ascii=ensure_ascii))
    lines.append('{"t": [], "step": 1}')
    lines.append('{"t" : [ "a" ,"b\\u00e9" ] }')
    want = _duckdb_strings(lines)
    got = native.read_arrays(_lines(*lines), [], "t")
    assert got is not None
    assert got[2].to_pylist() == want


@needs_lib
@pytest.mark.parametrize("value", ['null', '1', '"a\\x"', '"\\ud800"', '"\\udc00x"', '"\\ud800\\u0041"', '"a\tb"',
                                   '"\\u12g4"', '["a"]', '{}', 'true'])
def test_strings_it_does_not_read_are_left_to_duckdb(value):
    """A token that is not a string DuckDB reads as it is written (null, numbers as their text, bad escapes, lone
    surrogates, raw control characters): the chunk is left to DuckDB."""
    good = '{"t": ["a", "b"]}'
    assert native.read_arrays(_lines(good), [], "t") is not None
    assert native.read_arrays(_lines(good, '{"t": ["a", ' + value + ']}'), [], "t") is None


@needs_lib
@pytest.mark.parametrize("raw", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"])
def test_strings_not_utf8_are_left_to_duckdb(raw):
    lines = pa.array([b'{"t": ["a"]}\n', b'{"t": ["a' + raw + b'"]}\n'], pa.large_binary()).cast(pa.large_string(),
                                                                                            safe=False)
    assert native.read_arrays(lines, [], "t") is None


def _compiler() -> str | None:
    """A C compiler on this machine, as the build hook looks for one."""
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


def test_the_library_is_built_where_a_compiler_is():
    """The build hook (hatch_build.py) compiled it into this install: without it the cold open is slower."""
    if _compiler() is None:
        pytest.skip("no C compiler here: the package reads the arrays through DuckDB")
    assert native.library() is not None


@pytest.mark.parametrize("source", ["int32_t rlviz_find(void) { return 0; }",  # older: no version at all
                                    "int32_t rlviz_abi(void) { return 1; }",  # another version
                                    f"int32_t rlviz_abi(void) {{ return {native.ABI}; }}"])  # this one, part of it
def test_a_library_of_other_sources_is_left_alone(tmp_path, source):
    """A library built from other sources (a checkout changed them, the install was not redone) would be called with
    other arguments and crash: it is not used, with a warning saying how to rebuild it."""
    import subprocess

    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler here")
    (tmp_path / "old.c").write_text("#include <stdint.h>\n" + source + "\n")
    lib = tmp_path / "_arrays.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "old.c")], check=True)
    with pytest.warns(RuntimeWarning, match="other sources|lacks some"):
        assert native._load(lib) is None
    if native.library() is not None:  # this install's own is of this version
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert native._load() is not None


def test_a_finder_built_without_vectors_leaves_the_search_to_numpy(tmp_path, monkeypatch):
    """Built where the compiler has no SSE2 (arm64, say), the finder would look a byte at a time, ~4x slower than
    NumPy's search: NumPy's is used, with the same positions."""
    import subprocess

    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler here")
    sources = sorted(str(p) for p in Path(native.__file__).parent.glob("*.c"))
    lib_path = tmp_path / "_arrays.so"
    subprocess.run([cc, "-O2", "-U__SSE2__", "-shared", "-fPIC", "-o", str(lib_path), *sources], check=True)
    lib = native._load(lib_path)
    assert lib is not None and lib.find_vector is False
    data = np.frombuffer(b'{"a": 1}\n{"b": [2, 3]}\n' * 5000, np.uint8)
    monkeypatch.setattr(native, "_lib", lib)
    assert native.find_bytes(data, 10, 58) is None
    assert linereader.find_byte(data, 58).tolist() == np.flatnonzero(data == 58).tolist()
    if native.library() is not None:
        monkeypatch.setattr(native, "_lib", None)
        assert native.library().find_vector is (platform.machine().lower() in ("x86_64", "amd64"))


# -- a run opened both ways ----------------------------------------------------------------------------------------
def _frames(run) -> dict[str, pd.DataFrame]:
    samples = run.samples
    tokens = run.tokens(samples["sample_id"].tolist())
    problems = pd.DataFrame(run.problems)
    return {"samples": samples, "steps": run.steps, "tokens": tokens, "problems": problems}


def open_both(source, tmp_path: Path, monkeypatch, reader: str = "read_arrays", counts=lambda got: got is not None,
              frames=None, **options) -> tuple[dict, dict, int]:
    """The frames of ``source`` (``frames``, default ``_frames``) opened with C (``native.<reader>``) and without
    (``native._lib`` off), and how much C read (``counts`` of each reading, summed; default: the chunks read)."""
    read = []
    real = getattr(native, reader)

    def counted(*args):
        got = real(*args)
        read.append(counts(got))
        return got

    monkeypatch.setattr(native, reader, counted)
    out = []
    for k, lib in enumerate((native.library(), False)):
        monkeypatch.setattr(native, "_lib", lib)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = rlviz_widgets.open_run(source, cache_dir=tmp_path / f"cache{k}", progress=False, **options)
        out.append((frames or _frames)(run))
    return out[0], out[1], sum(read)


def _same(a: dict, b: dict) -> None:
    for name in a:
        # steps are DuckDB's parallel aggregates over many small parts: their last bits vary from one open to
        # the next on either path (the sum's order); everything else is exact
        exact = name != "steps"
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=exact, rtol=1e-12, obj=name)


@needs_lib
def test_the_shared_run_opens_the_same(tmp_path, monkeypatch):
    with_c, without, chunks = open_both(SHARED_DATA, tmp_path, monkeypatch)
    assert chunks > 0
    _same(with_c, without)


@needs_lib
@pytest.mark.parametrize("options", [{}, {"max_samples_per_step": 3}, {"steps": (2, 6)}])
def test_faulty_logs_open_the_same(tmp_path, monkeypatch, options):
    """Every kind of bad input, in small chunks: those with a line C cannot read are read by DuckDB alone, the
    rest with C; frames and problems (file, line, kind, message) are those of DuckDB alone. With a cap or a step
    range, C reads the lines kept only."""
    monkeypatch.setattr(linereader, "CHUNK_BYTES", 2048)
    rng = random.Random(7)
    rows: list = []
    for i in range(400):
        n = rng.randint(0, 6)
        rec = {"step": i // 40, "prompt": f"p{i}", "response": f"r{i}", "reward": rng.uniform(-1, 1),
               "response_tokens": [f"t{j}" for j in range(n)],
               "logprobs": [rng.uniform(-5, 0) for _ in range(n)],
               "ref_logprobs": [rng.uniform(-5, 0) for _ in range(n)],
               "values": [rng.uniform(-1, 1) for _ in range(n)], "acc": rng.choice([0, 1])}
        line = json.dumps(rec)
        fault = rng.random()
        if fault < 0.03:
            line = line.replace('"logprobs": [', '"logprobs": [NaN, ', 1)
        elif fault < 0.06:
            line = line.replace('"values": [', '"values": [null, ', 1)
        elif fault < 0.09:
            line = line.replace('"ref_logprobs": [', '"ref_logprobs": [1e39, ', 1)
        elif fault < 0.12:
            line = line[: len(line) // 2]  # cut
        elif fault < 0.14:
            line = line.replace('"values": [', '"values": "x", "v": [', 1)
        elif fault < 0.16:
            line = line.replace('"logprobs": [', '"logprobs": [0.1], "logprobs": [', 1)
        elif fault < 0.18:
            line = line.replace('"step": ', '"step": "', 1).replace(', "prompt"', '", "prompt"', 1)
        elif fault < 0.20:
            line = "   " + line
        elif fault < 0.22:
            line = line.replace('"logprobs": [', '"logprobs": [1, ', 1)  # one value too many
        elif fault < 0.24:
            line = line.replace('"reward": ', '"reward": "', 1).replace(', "response_tokens"', '", "response_tokens"')
        elif fault < 0.26:
            rows.append(b"\xff\xfe not utf-8 " + line.encode())
            continue
        elif fault < 0.28:
            line = line.replace('"values": [', '"Values": [', 1)  # another spelling of a key
        rows.append(line)
    rows.append('{"step": 9, "logprobs": [0.5')  # half-written last line
    write_lines(tmp_path / "logs" / "rank0.jsonl", rows[:200])
    write_lines(tmp_path / "logs" / "rank1.jsonl", rows[200:], newline_at_end=False)
    with_c, without, chunks = open_both(tmp_path / "logs", tmp_path, monkeypatch, **options)
    assert chunks > 0
    assert len(without["problems"]) > (20 if not options else 5)
    _same(with_c, without)


@needs_lib
def test_the_readme_record_and_mapped_columns_open_the_same(tmp_path, monkeypatch):
    """RL Logging Board's own 13-vs-12 record; a log whose arrays are under other keys (``columns=``)."""
    _same(*open_both(README_RECORD, tmp_path / "a", monkeypatch)[:2])
    rec = {"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a", "b"],
           "lp": [-0.5, -1.5], "logprobs": [7.0, 7.0]}
    write_lines(tmp_path / "m" / "log.jsonl", [rec, {**rec, "step": 2}])
    with_c, without, chunks = open_both(tmp_path / "m", tmp_path / "b", monkeypatch, columns={"logprobs": "lp"})
    assert chunks > 0
    _same(with_c, without)
    assert with_c["tokens"]["logprob"].tolist() == [-0.5, -1.5, -0.5, -1.5]


def test_which_lists_a_reader_reads_in_c():
    """C reads the lists of the kinds it has (never NeMo-RL's lists of lists: DuckDB's), the ones a column takes as
    they are set after the SQL and those the SQL reads given to it; the lists a format uses and no column reads
    (prime-rl's ``position_ids``) are only written []."""
    from rlviz_widgets._ingest.readers.nemo import NemoReader
    from rlviz_widgets._ingest.readers.prime import PrimeReader

    assert NemoReader().native_plan({"generation_logprobs", "rewards", "token_ids"}) is None
    keys = {"token_ids", "position_ids", "loss_mask", "advantages", "inference_logprobs", "trainer_logprobs",
            "entropy", "step", "schema_version", "env_name"}
    plan = PrimeReader().native_plan(keys)
    assert plan.lists["position_ids"] == "DROP" and plan.lists["token_ids"] == "BIGINT[]"
    assert plan.lists["loss_mask"] == "BOOLEAN[]" and plan.lists["entropy"] == "FLOAT[]"
    assert "env_name" not in plan.lists
    assert set(plan.given) == {"token_ids", "loss_mask", "advantages"}  # read by the SQL's expressions
    assert set(plan.direct.values()) == {"inference_logprobs", "trainer_logprobs", "entropy"}


@needs_lib
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork here")
def test_a_forked_child_reads_arrays(tmp_path):
    """A child forked after an open (a multiprocessing pool) has no threads: it gets a thread of its own. The
    parent is a fresh interpreter: this test process holds the DuckDB connections and threads of every test
    before it, which a forked child may crash on while collecting them (not what is tested here)."""
    import subprocess
    import sys

    rec = {"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a"], "logprobs": [-0.5]}
    write_lines(tmp_path / "logs" / "log.jsonl", [rec])
    script = f"""
import multiprocessing
from pathlib import Path
import rlviz_widgets

def child(tmp):
    run = rlviz_widgets.open_run(Path(tmp) / "logs", cache_dir=Path(tmp) / "c1", progress=False)
    return run.tokens(run.samples["sample_id"].tolist())["logprob"].tolist()

if __name__ == "__main__":
    tmp = {str(tmp_path)!r}
    rlviz_widgets.open_run(Path(tmp) / "logs", cache_dir=Path(tmp) / "c0", progress=False)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        print(pool.apply_async(child, (tmp,)).get(timeout=120))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[-0.5]"


@needs_lib
def test_a_failing_reader_leaves_the_chunk_to_duckdb(tmp_path, monkeypatch):
    """The C reader is a shortcut: if it fails (out of memory, say), the open goes on through DuckDB."""
    rec = {"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "response_tokens": ["a"], "logprobs": [-0.5]}
    write_lines(tmp_path / "logs" / "log.jsonl", [rec, {**rec, "step": 2}])

    def fail(*args):
        raise MemoryError

    monkeypatch.setattr(native, "read_arrays", fail)
    run = rlviz_widgets.open_run(tmp_path / "logs", cache_dir=tmp_path / "c", progress=False)
    assert run.tokens(run.samples["sample_id"].tolist())["logprob"].tolist() == [-0.5, -0.5]


@needs_lib
def test_results_outlive_the_next_read():
    """The reader's outputs are copied out of its scratch memory: the next chunk's read leaves them as they were."""
    first = native.read_arrays(_lines('{"a": [1.5, 2.5], "t": ["x", "y"]}'), ["a"], "t")
    native.read_arrays(_lines('{"a": [7.0, 8.0, 9.0], "t": ["zzz", "w"], "pad": "' + "q" * 1000 + '"}'), ["a"], "t")
    assert first[0].to_pylist() == ['{"a": [], "t": []}\n']
    assert first[1][0].to_pylist() == [[1.5, 2.5]] and first[2].to_pylist() == [["x", "y"]]


@needs_lib
@pytest.mark.parametrize("large", [False, True])
def test_pad_counts_as_arrow_counts_them(large):
    """The pad tokens of each text counted in C (``arrow.count_literal``) as ``pc.count_substring`` counts them: in
    slices and chunks, across texts' ends, with nulls."""
    import pyarrow.compute as pc

    from rlviz_widgets._ingest.readers.jsonl.arrow import count_literal

    rng = random.Random(5)
    words = ["<PAD>", "<", "PAD", "<P", "x", "é", "<PA", "D>", ""]
    texts = [None if rng.random() < 0.1 else "".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
             for _ in range(3000)]
    a = pa.array(texts, pa.large_string() if large else pa.string())
    for t in (a, a.slice(7, 1000), pa.chunked_array([a.slice(0, 3), a.slice(3)]), a.slice(0, 0)):
        want = pc.count_substring(t, "<PAD>")
        want = want.combine_chunks() if isinstance(want, pa.ChunkedArray) else want
        got = count_literal(t, "<PAD>")
        assert got.type == want.type and got.equals(want)
    assert native.count_literal(a, b"<P<") is None  # matches could overlap: Arrow counts those


def _native_parses(monkeypatch) -> list[int]:
    """A count (in a list, updated) of the chunks parsed with lists C read: a chunk C read is otherwise read again by
    DuckDB, with the same frames (which alone would not tell)."""
    used = [0]
    real = jreader.JsonlReader._native_transform

    def counted(self, *args):
        table = real(self, *args)
        used[0] += table is not None
        return table

    monkeypatch.setattr(jreader.JsonlReader, "_native_transform", counted)
    return used


@needs_lib
@pytest.mark.parametrize("generation", ["flat", "steps", "v0.6", "v0.7", "main"])
def test_prime_exports_open_the_same(tmp_path, monkeypatch, generation):
    """prime-rl's token exports (every schema generation, nulls for non-finite values, an SFT step of all-null
    ratio fields, a folder still being written): their lists read in C, the frames and problems those of DuckDB
    alone; a line of another kind (a float among the token ids) leaves its chunk to DuckDB, as exact."""
    from tests.prime_formats import write_prime

    write_prime(tmp_path / "out", generation, steps=(1, 2, 3), sft_step=2,
                unfinished_step=3 if generation not in ("flat", "steps") else None)
    used = _native_parses(monkeypatch)
    import threading

    from rlviz_widgets._ingest.readers import prime

    threads, real = [], prime.id_words
    monkeypatch.setattr(prime, "id_words", lambda *a: threads.append(threading.current_thread().name) or real(*a))
    with_c, without, chunks = open_both(tmp_path / "out", tmp_path, monkeypatch)
    assert chunks > 0 and used[0] > 0
    assert any(t.startswith("rlviz-arrays") for t in threads)  # the #id words made on C's thread (jsonl.derive)
    _same(with_c, without)  # (and without C, in the decode step: the same)
    assert with_c["tokens"]["trained"].any() and with_c["samples"]["n_trained_tokens"].gt(0).all()
    first = next((tmp_path / "out").rglob("rank_0.jsonl"))
    rec = json.loads(first.read_text().splitlines()[0])
    rec["token_ids"][0] = 1.5
    with first.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    with_c, without, _ = open_both(tmp_path / "out", tmp_path / "again", monkeypatch)
    _same(with_c, without)


@needs_lib
def test_keys_c_finds_are_the_byte_scans(tmp_path, monkeypatch):
    """C gives a chunk's keys (it reads lists by a plan guessed from the first lines): a key only later lines have,
    a text that looks like a key (``"x": 1`` in a prompt), a prompt that is no string, a key written twice: the
    frames and problems are those of the byte scan and DuckDB alone."""
    for name in ("CHUNK_BYTES", "FIRST_CHUNK_BYTES", "LAST_CHUNK_BYTES"):  # chunks of ~25 lines
        monkeypatch.setattr(linereader, name, 4096)
    rows = [{"step": 1 + i // 80, "prompt": 'say "x": 1, "y" : [2]' if i % 3 else "p", "response": "r",
             "reward": 0.5, "response_tokens": ["a", "b"], "logprobs": [-0.5, -1.0]} for i in range(200)]
    rows[150]["late"] = 3.5  # past the lines the plan is guessed from
    rows[170]["prompt"] = {"role": "user"}
    lines = [json.dumps(r) for r in rows]
    lines[180] = lines[180][:-1] + ', "reward": 2}'
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "a.jsonl").write_text("\n".join(lines) + "\n")
    used = _native_parses(monkeypatch)
    with_c, without, chunks = open_both(tmp_path / "log", tmp_path, monkeypatch)
    assert chunks > 0 and used[0] >= 5  # chunks parsed with the lists C read (the late key's too)
    _same(with_c, without)
    assert "late" in with_c["samples"] and {"wrong_type", "duplicate_key"} <= set(with_c["problems"]["kind"])
