"""The DuckDB views over a run's cache parts (``_samples_raw``, ``_nums``, ``samples``, ``tokens``), the SQL they are
made of, and the names custom fields get as columns."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import PurePath

import duckdb

from rlviz_widgets import _problems as problemsmod
from rlviz_widgets._ingest.custom_columns import (
    RESERVED,
    column_names,
    extra_column,
    listed_column,
    load_names,
    plain_column,
    save_names,
    stored_column,
)
from rlviz_widgets._ingest.metrics import per_token_sql
from rlviz_widgets._ingest.readers.chat import ANSWER
from rlviz_widgets._ingest.readers.mismatch_fields import TOKEN_NAMES as MISMATCH_NAMES
from rlviz_widgets._ingest.readers.rlb import DEFAULT_PAD_TOKEN, non_scalar_message
from rlviz_widgets._ingest.readers.turns import ANSWER_SPAN
from rlviz_widgets._mismatch import MismatchRule, TokenColumns, rule_sample_sql, token_rule_query, token_select
from rlviz_widgets._problems import Problem
from rlviz_widgets._sql import ident, literal
from rlviz_widgets._store import cache as cachemod
from rlviz_widgets._store import leases
from rlviz_widgets.run._db import Cursors
from rlviz_widgets.run._tokens import TokenFiles

ID_STRIDE = 1_000_000_000  # sample_id = file_no * ID_STRIDE + line: readable, and exact in JavaScript
TOKEN_FIELDS = {  # stored list column -> tokens frame column (the mismatch fields of issue 32 last)
    "tokens": "token", "logprobs": "logprob", "ref_logprobs": "ref_logprob",
    "values": "value", "token_rewards": "token_reward", **MISMATCH_NAMES,
}
TEXTS = ("prompt", "response", "ref_response", "ground_truth", "file", "id")  # samples columns kept out of _nums
NO_SAMPLES = ("SELECT NULL::BIGINT sample_id, NULL::BIGINT step, NULL::VARCHAR prompt, NULL::VARCHAR response, "
              "NULL::DOUBLE reward, NULL::VARCHAR ref_response, NULL::DOUBLE ref_reward, "
              "NULL::DOUBLE reward_gap, "
              "NULL::VARCHAR ground_truth, NULL::BIGINT response_chars, NULL::INTEGER n_tokens, "
              "NULL::INTEGER n_trained_tokens, NULL::INTEGER n_turns, NULL::INTEGER n_tool_calls, "
              "NULL::DOUBLE log_ratio_mean, NULL::DOUBLE log_ratio_sum, NULL::DOUBLE kl_mean, "
              "NULL::DOUBLE kl_sum, NULL::DOUBLE logprob_mean, NULL::DOUBLE value_mean, "
              "NULL::DOUBLE token_reward_sum, NULL::VARCHAR file, NULL::BIGINT line, NULL::VARCHAR id, "
              "NULL::BIGINT file_no "
              "WHERE false")
# AS: DuckDB before 2.0 reads a bare "position" as its POSITION(... IN ...)
NO_TOKENS = ("SELECT NULL::BIGINT AS sample_id, NULL::BIGINT AS step, NULL::INTEGER AS position, "
             "NULL::INTEGER AS turn, NULL::VARCHAR AS role, NULL::BOOLEAN AS trained, NULL::VARCHAR AS token "
             "WHERE false")
TURN_FIELDS = ("turn", "role", "text", "tool_name", "tool_arguments", "tool_call_id", "start", "end", "trained",
               "reasoning")  # the turns frame's columns after sample_id (``turns.TURN``)
NO_TURNS = ("SELECT NULL::BIGINT AS sample_id, NULL::INTEGER AS turn, NULL::VARCHAR AS role, NULL::VARCHAR AS text, "
            "NULL::VARCHAR AS tool_name, NULL::VARCHAR AS tool_arguments, NULL::VARCHAR AS tool_call_id, "
            "NULL::INTEGER AS start, NULL::INTEGER AS \"end\", NULL::BOOLEAN AS trained, NULL::VARCHAR AS reasoning, "
            "NULL::BIGINT AS _k WHERE false")
TURN_COUNTS = [("n_turns", "INTEGER"), ("n_tool_calls", "INTEGER")]  # a part's, where a log stores turns
ANSWER_SPAN_SQL = [(c, "INTEGER") for c in ANSWER_SPAN]  # ... and where its answer stands in the response
ANSWER_STORED = stored_column(ANSWER)  # the answer of a chat-shaped log's messages (a custom text column)
TURNS_SQL = ("STRUCT(turn INTEGER, role VARCHAR, text VARCHAR, tool_name VARCHAR, tool_arguments VARCHAR, "
             "tool_call_id VARCHAR, start INTEGER, \"end\" INTEGER, trained BOOLEAN, reasoning VARCHAR, "
             "text_start INTEGER, text_end INTEGER, in_prompt BOOLEAN)[]")  # a part's (``turns.TURNS``)
RESPONSE_TURN = 1  # a log without turns: the prompt is turn 0 (the user's), the response turn 1 (the assistant's)
SAMPLES_VIEW = "SELECT * EXCLUDE (file_no) FROM _samples_raw ORDER BY step, line, file_no"  # over _samples_raw
Scan = Callable[[list[str]], str]  # cache parts -> the SQL relation reading them (default: read_parquet)


def tokens_view(tokens: str, held: str) -> str:
    """The tokens view: ``tokens`` (SQL of every part's tokens) of the samples in ``held`` (a relation with their
    sample_id: the run's options may leave some of the parts' samples out)."""
    return f"SELECT t.* FROM ({tokens}) t SEMI JOIN {held} i ON t.sample_id = i.sample_id"


def after_last(expr: str, marker: str) -> str:
    """SQL: the text of ``expr`` after the last occurrence of ``marker`` (all of it without one).

    ``string_split`` finds occurrences left to right without overlap (a regular expression was ~50x slower): the
    last one may start up to ``len(marker) - 1`` characters later, overlapping the last found ("\\n\\n" in
    "\\n\\n\\nQ"). It can only where the marker's last ``len(marker) - k`` characters are also its first, and the
    text after the found one starts with the marker's last ``k`` (and one was found): those ``k`` are checked, the
    largest first.
    """
    piece, n = f"string_split({expr}, {literal(marker)})[-1]", len(marker)
    shifts = [k for k in range(n - 1, 0, -1) if marker[k:] == marker[:n - k]]
    if not shifts:
        return piece
    cases = " ".join(f"WHEN starts_with({piece}, {literal(marker[n - k:])}) THEN substr({piece}, {k + 1})"
                     for k in shifts)
    return f"(CASE WHEN NOT contains({expr}, {literal(marker)}) THEN {expr} {cases} ELSE {piece} END)"


def short_names(paths: Iterable[str]) -> dict[str, str]:
    """Each path's name in the readable sample ids: the file's name ("rank0.jsonl"), with as many of its folders
    before it as tell apart the paths of one name ("a/rank0.jsonl", "b/rank0.jsonl")."""
    split = {p: PurePath(p).parts or (p,) for p in paths}
    by_name: dict[str, list[str]] = {}
    for p, parts in split.items():
        by_name.setdefault(parts[-1], []).append(p)
    out = {}
    for name, group in by_name.items():
        out.update({group[0]: name} if len(group) == 1 else _told_apart(group, split))
    return out


def _told_apart(group: list[str], split: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """The paths of ``group`` (of one file name) by their last folders and name, as few as tell them apart (the
    whole path where none do: "a/./b" and "a/b")."""
    for k in range(2, max(len(split[p]) for p in group) + 1):
        tails = {p: "/".join(split[p][-k:]) for p in group}
        if len(set(tails.values())) == len(group):
            return tails
    return {p: p for p in group}


def present_token_fields(states: Iterable) -> list[str]:
    """The token arrays some file of ``states`` holds, in ``TOKEN_FIELDS`` order."""
    present = {f for st in states for f in st.fields}
    return [f for f in TOKEN_FIELDS if f in present]


def tokens_sql(fields: list[str], relation: str, limit: int | None = None, whole: bool = True,
               rule: MismatchRule | None = None) -> str:
    """``_tokens_sql`` with the mismatch columns (``_mismatch.token_select``: as logged, and derived under ``rule``)
    where the token files hold such fields."""
    sql = _tokens_sql(fields, relation, limit, whole)
    mine = [MISMATCH_NAMES[f] for f in fields if f in MISMATCH_NAMES]
    if not mine:
        return sql
    cols = ", ".join(token_select(set(mine), rule or MismatchRule()))
    return f"SELECT * EXCLUDE ({', '.join(map(ident, mine))}), {cols} FROM ({sql})"


def _tokens_sql(fields: list[str], relation: str, limit: int | None = None, whole: bool = True) -> str:
    """One row per token of the token files registered as ``relation`` (``limit``: only the first that many
    tokens of each sample, cut before unnesting), with its turn, role and whether it is trained: a token file of
    response tokens only has none of them (every token the response's, trained). ``whole``: some files hold whole
    sequences (else those columns are constants, and nothing more is unnested)."""
    cut = f"[1:{int(limit)}]" if limit is not None else ""
    cols = ", ".join(f'r."{f}"{cut} AS "{f}"' for f in (*fields, *(("trained", "turn") if whole else ())))
    unn = ", ".join(f'unnest(t."{f}") AS {TOKEN_FIELDS[f]}' for f in fields)
    lens = ", ".join(f'len(t."{f}")' for f in fields)
    derived = ""
    names = {TOKEN_FIELDS[f] for f in fields}
    if {"logprob", "ref_logprob"} <= names:
        derived = ", " + per_token_sql()
    elif names & {"logprob", "ref_logprob"}:  # one of the two: its probability, still
        derived = ", exp(logprob) AS prob" if "logprob" in names else ", exp(ref_logprob) AS ref_prob"
    order = ["token", "token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value",
             *MISMATCH_NAMES.values()]
    made = set(re.findall(r" AS (\w+)", derived))  # (names, not text: "logprob" is in "ref_logprob")
    out = [c for c in order if c in names or c in made]
    if not whole:
        return f"""SELECT sample_id, step, position::INTEGER AS position, {RESPONSE_TURN}::INTEGER AS turn,
                   'assistant' AS role, true AS trained, {', '.join(out)} FROM (
            SELECT sample_id, step, position, * EXCLUDE (sample_id, step, position) {derived} FROM (
                SELECT t.file_no::BIGINT * {ID_STRIDE} + t.line AS sample_id, t.step,
                       unnest(range(greatest({lens}))) AS position, {unn}
                FROM (SELECT r.file_no, r.line, r.step, {cols} FROM {relation} r) t))"""
    # a token past the end of its sample's mask is not trained; a sample without one is trained whole
    return f"""SELECT sample_id, step, position::INTEGER AS position,
               CASE WHEN _whole THEN _turn ELSE {RESPONSE_TURN} END::INTEGER AS turn,
               CASE WHEN _whole THEN _roles[_turn + 1] ELSE 'assistant' END AS role,
               coalesce(_trained, _masked IS NULL) AS trained, {', '.join(out)} FROM (
        SELECT sample_id, step, position, * EXCLUDE (sample_id, step, position) {derived} FROM (
            SELECT t.file_no::BIGINT * {ID_STRIDE} + t.line AS sample_id, t.step,
                   t.trained IS NOT NULL OR t.roles IS NOT NULL AS _whole, t.roles AS _roles, t.trained AS _masked,
                   unnest(range(greatest({lens}))) AS position, {unn},
                   unnest(t.trained[1:greatest({lens})]) AS _trained, unnest(t.turn[1:greatest({lens})]) AS _turn
            FROM (SELECT r.file_no, r.line, r.step, r.roles, {cols} FROM {relation} r) t))"""


def synthetic_turns(prompt: str, response: str) -> str:
    """SQL: the turns of a sample of a log without message structure: the prompt as the user's turn 0, the response
    as the assistant's turn 1, over the response tokens where the log has them."""
    def turn(k: int, role: str, text: str, span: str, trained: str) -> str:
        fields = {"turn": f"{k}::INTEGER", "role": literal(role), "text": text, "tool_name": "NULL::VARCHAR",
                  "tool_arguments": "NULL::VARCHAR", "tool_call_id": "NULL::VARCHAR", "start": f"{span}[1]",
                  "end": f"{span}[2]", "trained": trained, "reasoning": "NULL::VARCHAR",
                  "text_start": "NULL::INTEGER", "text_end": "NULL::INTEGER", "in_prompt": "NULL::BOOLEAN"}
        return "{" + ", ".join(f"{literal(k)}: {v}" for k, v in fields.items()) + "}"

    no_span = "[NULL::INTEGER, NULL::INTEGER]"
    tokens = "CASE WHEN s.n_tokens IS NOT NULL THEN [0, s.n_tokens]::INTEGER[] END"
    return (f"[{turn(0, 'user', prompt, no_span, 'false')}, "
            f"{turn(RESPONSE_TURN, 'assistant', response, tokens, 'true')}]")


def answer_sql(stored: str) -> str:
    """SQL: the answer of a sample of a part with turns: as stored, or cut out of the stored response where the
    part has its span there (``turns.ANSWER_SPAN``)."""
    return (f"CASE WHEN s.answer_start IS NULL THEN s.{stored} "
            f"ELSE decode(encode(s.response)[s.answer_start + 1:s.answer_end]) END")


def turns_rows(samples: str) -> str:
    """SQL: ``samples`` (sample_id, turns, and the stored _prompt and _response) as one row per turn, in order
    (``_k``); a text stored as its span in the prompt or response (UTF-8 bytes) cut out of it."""
    cut = "decode(encode(CASE WHEN u.in_prompt THEN _prompt ELSE _response END)[u.text_start + 1:u.text_end])"
    fields = ", ".join(f'u."{f}" AS "{f}"' if f != "text" else
                       f'CASE WHEN u.text_start IS NULL THEN u.text ELSE {cut} END AS "text"' for f in TURN_FIELDS)
    return f"""SELECT sample_id, {fields}, _k FROM (
                   SELECT sample_id, _prompt, _response, unnest(turns) AS u, generate_subscripts(turns, 1) AS _k
                   FROM ({samples}))"""


class FileParts:
    """What the views read of each log file: its number, state and cache (``file_no``, ``states``, ``caches``:
    path -> each), and the problems of files as wholes; read by ``parts`` and the names of custom fields."""

    def __init__(self):
        self.file_no: dict[str, int] = {}
        self.states: dict[str, cachemod.FileState] = {}
        self.caches: dict[str, cachemod.FileCache] = {}
        self.pending: list[Problem] = []  # problems of files as wholes: unreadable, unfinished, changing
        self.removed: dict[str, Problem] = {}  # files gone since read (said in ``problems`` until they are back)
        self._paths: dict[int, str] = {}
        self._names: tuple[dict, dict[int, str]] = ({}, {})  # (the file_no they were made of, file_no -> name)

    def parts(self, file_nos: Iterable[int] | dict[int, list[int]] | None = None) -> list[tuple[int, str]]:
        """(file_no, parquet path) of every cache part, optionally only of some files.

        Given ``{file_no: lines}``, only the parts holding those lines: a huge log has hundreds of
        parts per file, and a page of rows should open one or two of them.
        """
        if isinstance(file_nos, dict):
            out = []
            for p, st in self.states.items():
                lines = file_nos.get(self.file_no[p])
                if not lines:
                    continue
                lo, hi = min(lines), max(lines)
                paths = self.caches[p].part_paths(st)
                for path, (first, last) in zip(paths, st.part_lines):  # one [first, last] per part
                    if first <= hi and last >= lo and any(first <= x <= last for x in lines):
                        out.append((self.file_no[p], path))
            return out
        wanted = None if file_nos is None else set(file_nos)
        return [(self.file_no[p], part) for p, st in self.states.items()
                if wanted is None or self.file_no[p] in wanted
                for part in self.caches[p].part_paths(st)]

    def part_steps(self) -> Iterable:
        """Each part's steps, in the order of ``parts()``."""
        return (s for st in self.states.values() for s in st.part_steps)

    def part_lines(self) -> dict[int, dict[str, tuple[int, int]]]:
        """file_no -> {cache part: its first and last line}."""
        return {self.file_no[p]: {path: (int(lines[0]), int(lines[1]))
                                  for path, lines in zip(self.caches[p].part_paths(st), st.part_lines)}
                for p, st in self.states.items()}

    def path_of(self, file_no: int) -> str:
        if len(self._paths) != len(self.file_no):
            self._paths = {n: p for p, n in self.file_no.items()}
        return self._paths[file_no]

    def short_name(self, file_no: int) -> str:
        """The file's name in readable sample ids (``short_names``), decided over every file the run has seen: it
        changes only where a new file of the same name comes."""
        made, names = self._names
        if made is not self.file_no or len(names) != len(self.file_no):  # (a new dict on each new file)
            by_path = short_names(self.file_no)
            names = {n: by_path[p] for p, n in self.file_no.items()}
            self._names = (self.file_no, names)
        return names[file_no]

    def custom_keys(self) -> list[str]:
        """Every custom key, file by file, each file's by the line it first holds it (then by name): the same order
        however the file was read (whole, in chunks, or grown and read on)."""
        return list(dict.fromkeys(k for st in self.states.values()
                                  for k, _ in sorted(st.columns, key=lambda c: (c[1], c[0]))))

    def optional(self) -> list[str]:
        """The optional common columns some record has."""
        return [c for c in cachemod.OPTIONAL_COLUMNS if any(c in st.optional for st in self.states.values())]

    def has_optional(self, column: str) -> bool:
        """Whether some part holds the optional column (``cache.OPTIONAL_COLUMNS``)."""
        return any(column in st.optional for st in self.states.values())

    def has_turns(self) -> bool:
        """Whether some part stores turns (a chat-shaped log; the others' are made from prompt and response)."""
        return any(cachemod.TURNS_COLUMN in st.optional for st in self.states.values())

    def whole_sequences(self) -> bool:
        """Whether some part's tokens cover whole sequences (with a loss mask or turns), not only responses."""
        return any("trained" in st.fields or "roles" in st.fields for st in self.states.values())

    def renamed(self, names: dict[str, str], own: frozenset[str]) -> list[Problem]:
        """A custom field whose column (``names``) is not its cleaned name (a column of the run's own, or another
        field, has that): where it first is. ``own``: fields the format writes beside a common column of their
        name (``RLBReader.own_renames``)."""
        out = []
        for st in self.states.values():
            for key, line in st.columns:
                if key in own:
                    continue
                plain = plain_column(key)
                if names[key] != extra_column(key):
                    why = "its plain name is, or was, another field's"
                elif extra_column(key) != plain:
                    why = f"the run has a column {plain.lower()} of its own"
                else:
                    continue
                out.append(Problem(st.path, line, "renamed_field",
                                   f"field {problemsmod.short(key)!r} is kept as column {names[key]} ({why})"))
        return out


class NumsState:
    """What the last views made: each samples column's SQL type, those ``_nums`` lacks, and the parts it holds."""

    def __init__(self):
        self.kinds: dict[str, str] = {}  # samples column -> SQL type, as of the last views made
        self.not_in_nums: list[str] = []  # samples columns the in-memory numbers lack (texts, custom ones too)
        self.made: tuple | None = None  # (kinds, FileParts.part_lines()) of the last _nums made

    def type_of(self, column: str) -> str:
        """A samples column's SQL type ("NULL" before the views are made)."""
        return self.kinds.get(column, '"NULL"')


def build_views(con: duckdb.DuckDBPyConnection, rel, nums: NumsState, part_lines: dict, by_file: bool) -> None:
    """Make the views of ``rel`` (a ``RunViews`` or ``SetViews``) on ``con``; ``_nums`` brought up to date file by
    file where ``by_file`` allows it (not for a set: its runs' files share numbers)."""
    con.execute(f"CREATE OR REPLACE VIEW _samples_raw AS {rel.samples_raw_sql()}")
    # the numbers are small: keep them in memory for fast sorting, paging and aggregates
    kinds = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE _samples_raw)").fetchall())
    nums.kinds = kinds
    num_cols = [c for c, t in kinds.items() if c not in TEXTS and (not t.startswith("VARCHAR") or c == "run")]
    if not (by_file and _update_nums(con, rel, nums.made, kinds, num_cols, part_lines)):
        con.execute(f"""CREATE OR REPLACE TABLE _nums AS
            SELECT {', '.join(f'"{c}"' for c in num_cols)} FROM _samples_raw""")
    nums.made = (kinds, part_lines)
    nums.not_in_nums = [c for c in kinds if c not in num_cols]
    con.execute(f"CREATE OR REPLACE VIEW samples AS {SAMPLES_VIEW}")
    con.execute(f"CREATE OR REPLACE VIEW tokens AS {tokens_view(rel.tokens_sql(rel.parts()), '_nums')}")


def _update_nums(con: duckdb.DuckDBPyConnection, rel, old: tuple | None, kinds: dict[str, str], nums: list[str],
                 parts: dict[int, dict[str, tuple[int, int]]]) -> bool:
    """Bring ``_nums`` up to ``parts`` (file_no -> {cache part: its first and last line}) reading only what
    changed, where it can: a followed run's refresh read every part again (0.3 s a refresh at a million samples).
    A file's new parts are added; where parts of a file were replaced (merged, or the file read again from its
    start) or left, its rows from the first line they held on are taken out and read again from the parts
    holding them now. False where only a whole rebuild will do: the first views, other columns, a per-step
    cap (which samples are kept depends on every file)."""
    if old is None or old[0] != kinds or rel.options.max_samples_per_step:
        return False
    before = old[1]
    cut: dict[int, int] = {}  # file_no -> the first line whose rows are read again
    for n, was in before.items():
        now = parts.get(n, {})
        gone = [lines for path, lines in was.items() if now.get(path) != lines]
        if gone:
            cut[n] = min(first for first, _ in gone)
    read = [(n, path) for n, now in parts.items() for path, (_, last) in sorted(now.items(), key=lambda x: x[1])
            if (n in cut and last >= cut[n]) or (n not in cut and path not in before.get(n, {}))]
    if not cut and not read:
        return True
    cols = ", ".join(f'"{c}"' for c in nums)
    kept = " OR ".join(f"(file_no = {n} AND line < {first})" for n, first in sorted(cut.items()))
    redone = " OR ".join(f"(file_no = {n} AND line >= {first})" for n, first in sorted(cut.items()))
    try:
        con.execute("BEGIN TRANSACTION")  # readers meanwhile see the table before or after, never between
        if cut:
            con.execute(f"DELETE FROM _nums WHERE {redone}")
        if read:
            con.execute(f"INSERT INTO _nums ({cols}) SELECT {cols} FROM ({rel.samples_raw_sql(parts=read)}) "
                        + (f"WHERE NOT ({kept})" if kept else ""))
        con.execute("COMMIT")
    except duckdb.Error:  # (a part's column of another type than the run's, say): read it all
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        return False
    return True


class RunViews:
    """One run's relations: the SQL of its samples and tokens over its cache parts, the views made of them, the
    names of its custom fields, and the cursors that read them (given its token files)."""

    def __init__(self, files: FileParts, options, reader, cache_root, names_file, owner: object):
        self.files, self.options, self.reader = files, options, reader
        self.pad_token = options.pad_token or None
        self.system_prompt_end = options.system_prompt_end or None
        lock = threading.RLock()  # held while the views are remade: no cursor is made meanwhile
        self.tokens = TokenFiles(files.parts, files.part_steps, self.token_fields, lock)
        self.cursors = Cursors(self._register, lock)
        self.rule: MismatchRule = options.rule()
        self.rule_counts = None  # a per-token rule's counts per sample, of the views' tokens (``_rule_counts``)
        self.lease = leases.Lease(cache_root, owner)  # the parts the views read, while ``owner`` lives
        self.nums = NumsState()
        self.builds = 0  # how many times the views were made
        # custom field key -> its samples column: kept while open, and for the next open of the same logs
        self.names_file = names_file
        # a kept name that is a column of the run's own (id is one: the names file may be older) is given afresh
        self.column_names: dict[str, str] = {k: v for k, v in load_names(names_file).items()
                                             if v.lower() not in RESERVED}
        self.listed: list[Problem] = []  # lists or objects in a field the run has numbers or text in (``listed_in``)

    # -- what the queries read (``_queries.Relations``) ----------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.cursors.cursor()

    def execute(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        return self.cursors.execute(query, params)

    def parts(self, file_nos=None) -> list[tuple[int, str]]:
        return self.files.parts(file_nos)

    def token_fields(self) -> list[str]:
        return present_token_fields(self.files.states.values())

    def register_tokens(self, cur, parts=None, lines=None) -> None:
        self.tokens.register(cur, parts, lines)

    def map_token_files(self) -> None:
        self.tokens.map_all()

    def token_sources(self) -> list[tuple[str, object]]:
        """(name, Arrow source) of the token files the tokens SQL names (none for a sample-level log), and of a
        per-token mismatch rule's counts the samples SQL names."""
        out = [self.tokens.source()] if self.token_fields() else []
        return out + ([(self.rule_relation(), self.rule_counts)] if self.rule_counts is not None else [])

    def _register(self, cur: duckdb.DuckDBPyConnection) -> None:
        """A cursor given the token files and the rule's counts."""
        self.tokens.register(cur)
        if self.rule_counts is not None:
            cur.register(self.rule_relation(), self.rule_counts)

    def rule_relation(self) -> str:
        return f"_rule_{id(self):x}_{self.tokens.version}"

    def leaves_samples_out(self) -> bool:
        """Whether the run's options keep only some samples of its files (a step range, a per-step cap)."""
        return self.options.steps != (None, None) or bool(self.options.max_samples_per_step)

    def file_states(self) -> dict:
        """Each file's state as last read (what ``files`` and ``skipped_lines`` tell of)."""
        return self.files.states

    def follow(self) -> bool:
        return False  # a run's views change only in its own refresh

    def problems(self) -> list[Problem]:
        """Every problem: of the files' lines, of custom fields, of the files as wholes."""
        files = self.files
        lines = [Problem(st.path, *p) for st in files.states.values() for p in st.problems]
        return (lines + self.listed + self.renamed() + list(files.pending) + list(files.removed.values())
                + self.unspelled())

    def unspelled(self) -> list[Problem]:
        """Each file of token ids read without ``tokenizer=``: its tokens are shown as ``#id``, said once a file."""
        if self.options.tokenizer is not None or not getattr(getattr(self.reader, "format", None), "token_ids", False):
            return []
        return [Problem(st.path, 0, "no_tokenizer", "token ids without tokenizer=: shown as #id (line 0: the file "
                                                    "as a whole)") for st in self.files.states.values()
                if "tokens" in st.fields]

    # -- names of custom fields ------------------------------------------------------------------
    def names(self, names: dict[str, str] | None = None) -> dict[str, str]:
        """``names`` (default: the run's own, kept for its next open) with every custom field of the run named."""
        own = names is None
        names = self.column_names if own else names
        known = len(names)
        column_names(self.files.custom_keys(), names)
        # names are kept for the next open only from every line: a cache of a cap's lines lacks some keys, and
        # names it gave would stick to a later open of every line (``Score`` kept, ``score`` renamed)
        if own and len(names) > known and all(c.reader_name == self.reader.name for c in self.files.caches.values()):
            save_names(self.names_file, names)
        return names

    def extras(self, names: dict[str, str] | None = None) -> list[tuple[str, str]]:
        """(stored column, samples column) of each custom field, named by ``names`` (default: the run's)."""
        names = self.names(names)
        return [(stored_column(k), names[k]) for k in self.files.custom_keys()]

    def renamed(self, names: dict[str, str] | None = None) -> list[Problem]:
        return self.files.renamed(self.names(names), self.reader.own_renames)

    def listed_in(self) -> list[Problem]:
        """Lines where a custom field held a list or an object, in a part where it held nothing else, when the run
        has numbers or text in it (its column is empty there). A part holding both reports them as it is read."""
        keys = set(self.files.custom_keys())
        out = []
        for path, st in self.files.states.items():
            found = [k for k in st.listed if k in keys]
            if not found:
                continue
            parts = "[" + ", ".join(literal(p) for p in self.files.caches[path].part_paths(st)) + "]"
            cols = [listed_column(k) for k in found]
            with self.cursors.db.cursor() as cur:
                rows = cur.execute(
                    f"SELECT line, {', '.join(cols)} FROM read_parquet({parts}, union_by_name=true) "
                    f"WHERE {' OR '.join(f'{c} IS NOT NULL' for c in cols)} ORDER BY line").fetchall()
            for line, *kinds in rows:
                out += [Problem(path, line, "wrong_type", non_scalar_message(k, kind))
                        for k, kind in zip(found, kinds) if kind is not None]
        return out

    # -- SQL ---------------------------------------------------------------------------------------
    def samples_sql(self, parts: list[tuple[int, str]], where: str = "", lines: dict[int, list[int]] | None = None,
                    names: dict[str, str] | None = None, pad: bool = False, scan: Scan | None = None) -> str:
        """Samples of the given cache parts, texts cleaned, no run options applied (``pad``, ``scan``: see
        ``source_sql``)."""
        if not parts:
            return NO_SAMPLES
        extras = [(c, c) for c in self.files.optional()] + self.extras(names)
        turned = self.files.has_turns()
        # answers stored as spans of the response where some part has one (none: a log's own field "answer", of
        # numbers say, stays as it is)
        spans = turned and self.files.has_optional(cachemod.ANSWER_SPAN_COLUMN)
        extra_sel = "".join(f', {answer_sql(stored) if spans and stored == ANSWER_STORED else "s." + stored} '
                            f'AS "{column}"' for stored, column in extras)
        typed = [(stored, self.nums.type_of(c)) for stored, c in extras]
        source = self.source_sql(parts, lines, typed + (TURN_COUNTS if turned else []) +
                                 (ANSWER_SPAN_SQL if spans else []), pad, scan)
        counts = ("coalesce(s.n_turns, 2) AS n_turns, coalesce(s.n_tool_calls, 0) AS n_tool_calls" if turned else
                  "2::INTEGER AS n_turns, 0::INTEGER AS n_tool_calls")  # (a log without turns: prompt, response)
        rule_sel, join = self.rule_sql()
        return f"""SELECT s.file_no::BIGINT * {ID_STRIDE} + s.line AS sample_id, s.step,
                   {self.text('s.prompt', prompt=True)} AS prompt, {self.text('s.response')} AS response,
                   s.reward, {self.text('s.ref_response')} AS ref_response, s.ref_reward, s.reward_gap,
                   s.ground_truth, {self.response_chars()} AS response_chars, s.n_tokens, s.n_trained_tokens,
                   {counts}, s.log_ratio_mean,
                   s.log_ratio_sum, s.kl_mean, s.kl_sum, s.logprob_mean, s.value_mean, s.token_reward_sum {extra_sel}
                   {rule_sel}, s.file AS file, s.line AS line, s.short_name || ':' || s.line::VARCHAR AS id,
                   s.file_no AS file_no
            FROM {source} s {join}
            {where}"""

    def rule_sql(self) -> tuple[str, str]:
        """(the select list's rule-dependent mismatch columns, the join they need) of a run with the mismatch
        figures (``_mismatch.rule_sample_sql``); a per-token rule's counts come from ``rule_counts``."""
        if not self.files.has_optional("mismatch_log_ratio_sum"):
            return "", ""
        join = ""
        if not self.rule.per_sequence:
            rel = self.rule_relation() if self.rule_counts is not None else \
                "(SELECT NULL::BIGINT AS sample_id, NULL::BIGINT AS rule_masked_tokens, " \
                "NULL::BIGINT AS mask_disagreements WHERE false)"
            join = f"LEFT JOIN {rel} rc ON rc.sample_id = s.file_no::BIGINT * {ID_STRIDE} + s.line"
        cols = rule_sample_sql(self.rule, "s", "rc", self.files.has_optional("logged_masked_tokens"))
        return "".join(f", {sql} AS {ident(name)}" for name, sql in cols.items()), join

    def response_chars(self) -> str:
        """The length of the response as shown (without pad tokens): counted when read for the default pad token,
        here for another (which reads every response's text)."""
        if not self.pad_token:
            return "s.response_chars"
        if self.pad_token == DEFAULT_PAD_TOKEN:
            return "s.response_chars - coalesce(s.response_pad_chars, 0)"
        return f"length({self.text('s.response')})::BIGINT"

    def text(self, col: str, prompt: bool = False) -> str:
        expr = col
        if prompt and self.system_prompt_end:  # cut first: the marker may hold the pad token (Llama 3's <|eot_id|>)
            expr = after_last(expr, self.system_prompt_end)
        if self.pad_token:
            expr = f"replace({expr}, {literal(self.pad_token)}, '')"
        return expr

    def source_sql(self, parts: list[tuple[int, str]], lines: dict[int, list[int]] | None = None,
                   extras: Iterable[tuple[str, str]] = (), pad: bool = False, scan: Scan | None = None) -> str:
        """The cache parts as one relation with file_no, file and short_name (``FileParts.short_name``) columns.

        With ``lines`` (file_no -> line numbers), each file is read on its own with the line filter
        pushed into the Parquet scan, so only the row groups holding those lines are read. With ``pad``
        too, or with ``lines``, the ``extras`` columns the parts lack are there, empty. ``scan`` names the relation
        reading a file's parts (run.sql's sandbox reads no file itself), as ``pad`` does.
        """
        if scan is None:
            def scan(paths: list[str]) -> str:
                return f"read_parquet([{', '.join(literal(p) for p in paths)}], union_by_name=true)"
        else:
            pad = True
        if lines is None and pad:
            lines = {n: None for n, _ in parts}
        if lines is None:
            plist = "[" + ", ".join(literal(p) for _, p in parts) + "]"
            files = ", ".join(f"({n}, {literal(p)}, {literal(self.files.path_of(n))}, "
                              f"{literal(self.files.short_name(n))})" for n, p in parts)
            return (f"(SELECT r.* EXCLUDE (filename), m.file_no, m.file, m.short_name "
                    f"FROM read_parquet({plist}, filename=true, union_by_name=true) r "
                    f"JOIN (VALUES {files}) m(file_no, parquet, file, short_name) ON r.filename = m.parquet)")
        selects = []
        for n in sorted(lines):
            paths = [p for f, p in parts if f == n]
            if not paths:
                continue
            kept = "" if lines[n] is None else f"WHERE r.line IN ({', '.join(map(str, sorted(set(lines[n]))))})"
            selects.append(f"SELECT r.*, {n}::BIGINT AS file_no, {literal(self.files.path_of(n))} AS file, "
                           f"{literal(self.files.short_name(n))} AS short_name FROM {scan(paths)} r {kept}")
        # the parts read may lack some optional or custom fields the run has: empty there, of the type they have
        # in samples (a page of numbers stays numbers)
        selects.append(f"SELECT {', '.join(['NULL AS line', *(f'NULL::{t} AS {c}' for c, t in extras)])} WHERE false")
        return "(" + " UNION ALL BY NAME ".join(selects) + ")"

    def samples_raw_sql(self, names: dict[str, str] | None = None, parts: list[tuple[int, str]] | None = None,
                        scan: Scan | None = None) -> str:
        """Every sample passing the run's options (step range, per-step cap), texts cleaned (``parts``: of those cache
        parts only, each column there even where they lack it; ``scan``: see ``source_sql``)."""
        where = []
        lo, hi = self.options.whole_steps()
        if lo is not None:
            where.append(f"step >= {lo}")
        if hi is not None:
            where.append(f"step <= {hi}")
        qualify = ""
        if self.options.max_samples_per_step:
            # ties of line number broken by path, not file number: numbers follow the order a cache dir first
            # saw the files, so the same logs would keep other samples on another cache
            qualify = (f"QUALIFY row_number() OVER (PARTITION BY step ORDER BY line, file) "
                       f"<= {int(self.options.max_samples_per_step)}")
        source = (self.samples_sql(self.parts(), names=names, scan=scan) if parts is None else
                  self.samples_sql(parts, names=names, pad=True, scan=scan))
        return (f"SELECT * FROM ({source}) "
                f"{'WHERE ' + ' AND '.join(where) if where else ''} {qualify}")

    def turns_sql(self, parts: list[tuple[int, str]], lines: dict[int, list[int]] | None = None) -> str:
        """One row per turn (or tool call) of the samples of the given cache parts, in order (``_k``); a sample
        without stored turns has two, made of its prompt and response (``synthetic_turns``)."""
        if not parts:
            return NO_TURNS
        turned = self.files.has_turns()
        source = self.source_sql(parts, lines, [("turns", TURNS_SQL)] if turned else [])
        made = synthetic_turns(self.text("s.prompt", prompt=True), self.text("s.response"))
        return turns_rows(f"""SELECT s.file_no::BIGINT * {ID_STRIDE} + s.line AS sample_id,
                                     {f'coalesce(s.turns, {made})' if turned else made} AS turns,
                                     s.prompt AS _prompt, s.response AS _response FROM {source} s""")

    def tokens_sql(self, parts: list[tuple[int, str]], lines: dict[int, list[int]] | None = None,
                   limit: int | None = None) -> str:
        """``limit``: only the first that many tokens of each sample (cut before unnesting)."""
        fields = self.token_fields()
        if not parts or not fields:
            return NO_TOKENS
        return tokens_sql(fields, self.tokens.relation(lines is not None), limit, self.files.whole_sequences(),
                          self.rule)

    # -- making the views ----------------------------------------------------------------------------
    def build(self) -> None:
        """Make the views over the parts as they are now (the caller holds ``tokens.lock``: no cursor is made
        meanwhile, each has the files its views name)."""
        self.tokens.renew()
        self.rule_counts = None
        self.cursors.register_again()
        self.count_rule()
        self.lease.hold(p for _, p in self.parts())
        with self.cursors.lock:
            build_views(self.cursor(), self, self.nums, self.files.part_lines(), by_file=True)
        self.builds += 1

    def count_rule(self) -> None:
        """A per-token rule's counts per sample, by one scan of every token (a per-sequence rule needs none: its
        columns come from the samples' stored figures); given to every cursor."""
        if self.rule.per_sequence or not self.files.has_optional("mismatch_log_ratio_sum"):
            return
        c = TokenColumns(logged_mask="is_masked" if "is_masked" in self.token_fields() else None,
                         advantage="advantage" if "token_advantage" in self.token_fields() else None)
        with self.cursor() as cur:
            tokens = f"({self.tokens_sql(self.parts())})"
            self.rule_counts = cur.sql(token_rule_query(tokens, c, self.rule)).to_arrow_table()
        self.cursors.register_again()

    def set_rule(self, rule: MismatchRule) -> None:
        """Another mismatch rule: the views made again, every sample's rule columns with them."""
        with self.tokens.lock:
            self.rule = rule
            self.nums.made = None  # the rule's columns of every sample change: ``_nums`` made whole
            self.build()
