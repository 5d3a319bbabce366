"""SampleTable: every sample of a run (or any DataFrame), virtualized, sorted and searched in the engine."""

from __future__ import annotations

import pandas as pd
import traitlets

from rlviz_widgets._table_source import TableSource
from rlviz_widgets.run.run import Run
from rlviz_widgets.widgets._base import STATIC, RpcWidget, rpc, surface_errors
from rlviz_widgets.widgets._validate import clip, valid_text, whole

MAX_SELECTED = 5000
MAX_PAGE = 500
MAX_COLUMNS = 1000  # shown at once (each is in every page sent)
MAX_SEARCH_CHARS = 10_000


class SampleTable(RpcWidget):
    """A table of samples: scroll through millions of rows, sort, search, pick rows."""

    _esm = STATIC / "sample_table.js"
    _front_end = "sample_table"

    columns = traitlets.List(traitlets.Dict(), default_value=[]).tag(sync=True)
    """The shown columns: name, kind (number/int/text) and min/max for the inline bars."""

    row_count = traitlets.Int(0).tag(sync=True)
    """Rows passing the search and filter."""

    sort_by = traitlets.Unicode("").tag(sync=True)
    """Column the rows are sorted by ("" keeps the log's order)."""

    sort_desc = traitlets.Bool(False).tag(sync=True)
    """Sort descending."""

    search = traitlets.Unicode("").tag(sync=True)
    """Text searched for in prompt, response and ref_response (case-insensitive, as typed; blanks only: none), or a
    sample's whole readable id ("rank0.jsonl:12")."""

    selected_ids = traitlets.List(traitlets.Int(), default_value=[]).tag(sync=True)
    """sample_ids of the rows the user picked."""

    height = traitlets.Int(360).tag(sync=True)
    """Height of the scroll area in px."""

    max_selected = traitlets.Int(MAX_SELECTED, read_only=True).tag(sync=True)
    """The most rows ``selected_ids`` takes: the browser caps shift-click ranges to it."""

    where = traitlets.Unicode("").tag(sync=False)
    """A SQL condition over the samples columns restricting the rows (set by code, e.g. by RunView)."""

    _browser_writes = dict.fromkeys(("sort_by", "sort_desc", "search", "selected_ids"))

    def __init__(self, data: Run | pd.DataFrame, columns: list[str] | None = None, **kwargs):
        """``data``: a run (or a set of runs) or a DataFrame; ``columns``: those shown, in order (default: the
        common ones, then the first 24 custom ones); ``kwargs``: traits (``height``, ``sort_by``...)."""
        if isinstance(data, Run):
            self._source = TableSource.from_run(data)
        elif isinstance(data, pd.DataFrame):
            self._source = TableSource.from_frame(data)
        else:
            raise TypeError(f"SampleTable needs a Run or a pandas DataFrame, not {type(data).__name__}")
        self._data = data
        self._chosen = list(columns) if columns else None  # else the defaults, looked at again on reload
        cols = self._chosen or self._source.default_columns()
        super().__init__(columns=self._source.column_info(cols), **kwargs)
        self.row_count = self._source.count()

    @property
    def visible_columns(self) -> list[str]:
        """Names of the shown columns."""
        return [c["name"] for c in self.columns]

    @property
    def selected(self) -> pd.DataFrame:
        """The picked rows, every column, in the order picked."""
        return self._source.rows(self.selected_ids)

    @property
    def shown(self) -> pd.DataFrame:
        """Every row passing search and filter, in display order (sample ids and shown columns)."""
        ids = self._source.ids(self.search, self.where, self.sort_by, self.sort_desc)
        return self._source.rows(ids, list(dict.fromkeys(["sample_id", *self.visible_columns])))

    def check_where(self, where: str) -> None:
        """A ValueError unless ``where`` is a condition over these rows that runs."""
        self._source.check(where)

    def ids_matching(self, search: str = "", where: str = "") -> list[int]:
        """The ids of the rows passing ``search`` and ``where``, in the table's natural order."""
        return self._source.ids(search, where)

    def rows_of(self, ids) -> pd.DataFrame:
        """The rows of these ids, every column, in that order (ids it no longer holds: left out)."""
        return self._source.rows(ids)

    def show_columns(self, columns: list[str] | None = None) -> None:
        """Show these columns, in this order (None: the defaults, which hold at most 24 custom columns)."""
        unknown = [c for c in columns or [] if c not in self._source.kinds]
        if unknown:
            raise KeyError(f"no column {unknown[0]!r}; columns: {', '.join(self._source.kinds)}")
        self._chosen = list(columns) if columns else None
        self._show(self._chosen or [])

    def replace_data(self, data: Run | pd.DataFrame) -> None:
        """Show other data (same columns where they exist); sort, search and selection are kept."""
        self._data = data
        self._source = TableSource.from_run(data) if isinstance(data, Run) else TableSource.from_frame(data)
        self._show(self.visible_columns)

    def reload(self) -> None:
        """Re-read column ranges and counts (after the data grew) and redraw."""
        self._source = TableSource.from_run(self._data) if isinstance(self._data, Run) else self._source
        self._source.invalidate()
        # default columns are chosen again: a followed run's first look may have had none filled (an empty file)
        self._show(self._chosen or [])

    def _show(self, columns: list[str]) -> None:
        """Show ``columns`` where the data have them (else the defaults) and redraw; a sort by a column the data
        lack (a rewritten or deleted file, other data) goes back to the data's order."""
        if self.sort_by and self.sort_by not in self._source.kinds:
            self.sort_by = ""
        cols = [c for c in columns if c in self._source.kinds]
        self.columns = self._source.column_info(cols or self._source.default_columns())
        self._query_changed(None)

    def __repr__(self) -> str:
        order = f", sorted by {self.sort_by}{' desc' if self.sort_desc else ''}" if self.sort_by else ""
        where = "".join(f", {k} {v!r}" for k, v in (("search", self.search), ("where", self.where)) if v)
        return f"SampleTable: {self.row_count} rows{order}{where}, {len(self.selected_ids)} selected"

    @traitlets.validate("selected_ids")
    def _check_selected(self, proposal):
        try:
            ids = list(dict.fromkeys(whole(i, "selected_ids") for i in proposal["value"]))
        except ValueError as e:
            raise traitlets.TraitError(str(e)) from None
        if len(ids) > MAX_SELECTED:
            raise traitlets.TraitError(f"at most {MAX_SELECTED} rows can be selected at once; got {len(ids)}")
        return ids

    @traitlets.validate("columns")
    def _check_columns(self, proposal):
        shown = {}  # each column once, in the order first given
        for c in proposal["value"]:
            name = c.get("name")
            if name not in self._source.kinds:
                raise traitlets.TraitError(f"no column {clip(repr(name), 100)}")
            shown.setdefault(name, c)
        if len(shown) > MAX_COLUMNS:
            raise traitlets.TraitError(f"at most {MAX_COLUMNS} columns at once; got {len(shown)}")
        return list(shown.values())

    @traitlets.validate("search")
    def _check_search(self, proposal):
        if len(proposal["value"]) > MAX_SEARCH_CHARS:
            raise traitlets.TraitError(f"search: at most {MAX_SEARCH_CHARS:,} characters")
        return valid_text(proposal["value"])  # a lone surrogate from the browser: no UTF-8 for the engine

    @traitlets.validate("where")
    def _check_where(self, proposal):
        try:  # refused at once, the old one kept: it failed on every page after (the error line said why)
            self._source.check(proposal["value"])
        except (TypeError, ValueError) as e:
            raise traitlets.TraitError(str(e)) from None
        return proposal["value"]

    @traitlets.validate("sort_by")
    def _check_sort(self, proposal):
        value = proposal["value"]
        if value and value not in self._source.kinds:
            raise traitlets.TraitError(f"cannot sort by {value!r}: no such column")
        return value

    @traitlets.observe("search", "where", "sort_by", "sort_desc")
    @surface_errors
    def _query_changed(self, _change) -> None:
        self.row_count = self._source.count(self.search, self.where)
        if self.error:
            self.error = ""
        self.refresh_view()

    @rpc
    def rows(self, offset: int = 0, limit: int = 100):
        limit = max(0, min(whole(limit, "limit"), MAX_PAGE))
        offset = max(0, whole(offset, "offset"))  # the answer names where its rows start
        page = self._source.page(offset, limit, self.visible_columns, self.search, self.where,
                                 self.sort_by, self.sort_desc)
        page.update(generation=self.generation, total=self.row_count)
        return page

    @rpc
    def cell(self, sample_id: int, column: str):
        if column not in self.visible_columns:  # (the browser is shown these; it asks for their full text)
            raise KeyError(f"no column {clip(repr(column), 100)} is shown")
        return {"text": self._source.cell(whole(sample_id, "sample_id"), column)}
