"""What run.sql and the filters (``where=``) let through to DuckDB: queries that read, conditions that are one.

A guard against slips, not a sandbox: the run's database also locks its settings (``run._connect``), so
no query turns on DuckDB's logging or profiling to a file.
"""

from __future__ import annotations

import re

import duckdb

QUERY_KINDS = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "MULTI"}  # what run.sql runs (MULTI: a PIVOT)
# the pragmas that only tell: others run SQL of their own (import_database runs a folder's schema.sql and load.sql,
# copy_database and json_execute_serialized_sql theirs) or change settings (locked anyway)
READ_PRAGMAS = {"collations", "database_list", "database_size", "extension_versions", "functions", "metadata_info",
                "platform", "show", "show_databases", "show_tables", "show_tables_expanded", "storage_info",
                "table_info", "user_agent", "version"}


_LOGGING = re.compile(r"\benable_logging\s*\(", re.IGNORECASE)  # makes DuckDB write its log to a file


def check_query(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise a ValueError unless ``query`` holds statements and only of ``QUERY_KINDS``: a DROP, CREATE, INSERT
    or COPY, also under EXPLAIN ANALYZE (which runs what it explains), would change the run's views."""
    if not isinstance(query, str):
        raise TypeError(f"run.sql takes SQL as text, such as \"SELECT * FROM samples\", not {query!r}")
    kinds = statement_kinds(con, query)
    if not kinds:
        raise ValueError(f"no SQL statement in {query!r}")
    refused = sorted(set(kinds) - QUERY_KINDS)
    if refused:
        named = {"MULTI": "PIVOT", "LOAD": "INSTALL or LOAD"}
        raise ValueError(f"run.sql runs queries ({', '.join(named.get(k, k) for k in sorted(QUERY_KINDS))}), "
                         f"not {', '.join(named.get(k, k) for k in refused)} statements: they could change the "
                         "run's views, tables or settings")
    # DuckDB before 2.0 gives a PIVOT as two statements, the first without text of its own
    given = [st for st in con.extract_statements(query) if st.query.strip()]
    if len(given) > 1:
        raise ValueError(f"run.sql runs one statement at a time; {len(given)} were given (only the last one's "
                         "result would come back)")


def statement_kinds(con: duckdb.DuckDBPyConnection, query: str) -> list[str]:
    """The kinds of the statements in ``query`` (an EXPLAIN's: its own and those of what it explains)."""
    if _LOGGING.search(_without_comments(query)):  # DuckDB before 2.0 lets it by a locked configuration
        return ["CALL enable_logging"]
    statements = con.extract_statements(query)
    # DuckDB before 2.0 gives a PIVOT as a CREATE (of its enum type: no text of its own) and a SELECT; 2.0 as MULTI
    kinds = ["MULTI" if st.type.name == "CREATE" and not st.query.strip() else st.type.name for st in statements]
    for st in statements:
        if st.type.name == "PRAGMA":
            name = re.match(r"\s*pragma\s+(\w*)", _without_comments(st.query), re.IGNORECASE)
            if name is None or name.group(1).lower() not in READ_PRAGMAS:
                kinds.append(f"PRAGMA {name.group(1).lower() if name else '?'}")
        if st.type.name == "EXPLAIN":
            try:
                kinds += [t.type.name for t in con.extract_statements(_explained(st.query))]
            except duckdb.Error:  # what it would run cannot be told: not run
                kinds.append("EXPLAIN of a statement that cannot be told")
    return kinds


def condition(con: duckdb.DuckDBPyConnection, where: str, relation: str | None = None) -> str:
    """``where`` (a SQL condition over samples) in parentheses, so that it binds as a whole beside the conditions
    it is added to (``a OR b`` after ``isfinite(x) AND``); a ValueError if it is no single condition (a ``;`` or
    a closing parenthesis could bring in another statement) or, given ``relation``, not one over its columns (a
    misspelt name failed later, in a query of ours it showed). Empty stays empty."""
    if not isinstance(where, str):
        raise TypeError(f"where= takes a SQL condition as text, such as \"kl_mean > 0.1\", not {where!r}")
    if not where.strip():
        return ""
    try:
        statements = con.extract_statements(f"SELECT 1 WHERE ({where}\n)")  # (a -- comment ends at the line)
    except duckdb.Error as e:
        raise ValueError(f"where= is not a SQL condition: {where!r} ({str(e).splitlines()[0]})") from None
    if len(statements) != 1 or statements[0].type.name != "SELECT":
        raise ValueError(f"where= must be one SQL condition, not statements: {where!r}")
    if not _balanced(where):  # "false) OR (true" parses, wrapped, as two: it would undo the conditions before it
        raise ValueError(f"where= must be one SQL condition, its parentheses balanced: {where!r}")
    if _LOGGING.search(_without_comments(where)):
        raise ValueError(f"where= cannot turn on DuckDB's logging: {where!r}")
    if relation is not None:
        try:  # bound, not run
            con.execute(f"DESCRIBE SELECT 1 FROM {relation} WHERE ({where}\n)").fetchall()
        except duckdb.Error as e:
            raise ValueError(f"where= is no condition over the samples' columns: {where!r} "
                             f"({str(e).splitlines()[0]})") from None
    return f"({where}\n)"


def names_any(where: str, names: list[str]) -> bool:
    """Whether ``where`` names any of ``names`` as a column, in any letter case (as DuckDB reads names). Text
    in quotes that holds a name counts too: a false yes only sends the query to a slower relation."""
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", where, re.IGNORECASE) for n in names)


def _without_comments(sql: str, quoted: bool = True) -> str:
    """``sql`` with its comments (``-- ...``, nested ``/* ... */``) blanked out; quoted text and names kept (with
    ``quoted`` False: each as a pair of quotes, what they hold left out)."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":  # a string or a quoted name: to its closing quote (a doubled quote stays inside)
            j = i + 1
            while j < n and not (sql[j] == c and sql[j + 1:j + 2] != c):
                j += 2 if sql[j] == c else 1
            out.append(sql[i:j + 1] if quoted else c + c)
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(" ")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _balanced(sql: str) -> bool:
    """Whether the parentheses of ``sql`` (outside comments, strings and quoted names) close in order."""
    depth = 0
    for c in _without_comments(sql, quoted=False):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def _explained(statement: str) -> str:
    """The statement an EXPLAIN statement explains (and, with ANALYZE, runs): after ``EXPLAIN``, its ``ANALYZE``
    and its options in parentheses, in any order, comments anywhere."""
    text = re.sub(r"^\s*explain\b", "", _without_comments(statement), flags=re.IGNORECASE)
    while True:
        rest = re.sub(r"^\s*(?:analy[sz]e\b|\((?:[^()'\"]|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")*\))", "", text,
                      flags=re.IGNORECASE)
        if rest == text:
            return text
        text = rest
