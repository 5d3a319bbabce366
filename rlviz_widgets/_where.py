"""The ``where=`` conditions set from Python (histograms, steps, the sample table): one SQL condition that binds as a
whole over the rows' columns, never another statement. (User SQL as a whole goes to run.sql's sandbox.)"""

from __future__ import annotations

import re

import duckdb

_LOGGING = re.compile(r"\benable_logging\s*\(", re.IGNORECASE)  # makes DuckDB write its log to a file


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
