/**
 * The scrolling body of the table: a spacer as tall as every row (capped, see lib/virtual.ts)
 * and a fixed pool of row elements recycled as the view scrolls, so a million rows cost the
 * same as a hundred. Cells are written with textContent only (prompts can contain HTML).
 */
import type { ColumnInfo } from "../lib/protocol";
import { computeWindow, type RowWindow } from "../lib/virtual";
import { barGeometry, formatCell, isIdColumn } from "../lib/format";
import { el } from "../lib/dom";
import { PAGE_SIZE, type Page } from "./pager";

/** Fixed row height in px (virtual maths depends on it). */
export const ROW_HEIGHT = 28;
const OVERSCAN = 8; // rows rendered above/below the viewport

interface Cell {
  td: HTMLDivElement;
  val: HTMLSpanElement;
  bar: HTMLSpanElement | null;
  expand: HTMLButtonElement | null;
}

interface RowEl {
  el: HTMLDivElement;
  cells: Cell[];
  key: string; // what the element currently shows, to skip rewriting unchanged rows
}

/** What a paint shows: the columns, how many rows, which page holds a row, the selection and the cursor. */
export interface RowsState {
  columns: ColumnInfo[];
  total: number;
  generation: number;
  pageOf: (row: number) => Page | undefined;
  selected: ReadonlySet<number>;
  cursor: number | null;
}

export class Rows {
  readonly scroll: HTMLDivElement;
  readonly spacer: HTMLDivElement;
  private pool: RowEl[] = [];
  /** The window of the last paint (null before the first). */
  win: RowWindow | null = null;

  /** `fallbackHeight()` stands in for the viewport's height where there is no layout (tests). */
  constructor(
    private readonly doc: Document,
    private readonly fallbackHeight: () => number,
  ) {
    this.scroll = el(doc, "div", "rlv-scroll");
    this.scroll.tabIndex = 0;
    this.scroll.setAttribute("role", "grid");
    this.spacer = el(doc, "div", "rlv-spacer");
    this.scroll.append(this.spacer);
  }

  /** The viewport height: clientHeight is 0 without layout (tests). */
  viewportHeight(): number {
    return this.scroll.clientHeight || this.fallbackHeight();
  }

  /** (Re)creates the pool: enough rows for the viewport plus overscan, one cell per column. */
  build(columns: ColumnInfo[]): void {
    const doc = this.doc;
    const n = Math.ceil(this.viewportHeight() / ROW_HEIGHT) + 2 * OVERSCAN + 2;
    for (const r of this.pool) r.el.remove();
    this.pool = [];
    for (let i = 0; i < n; i++) {
      const rowEl = el(doc, "div", "rlv-row");
      rowEl.setAttribute("role", "row");
      rowEl.style.display = "none";
      const cells: Cell[] = [];
      for (const c of columns) {
        const numeric = c.kind !== "text";
        const td = el(doc, "div", "rlv-td" + (numeric ? " rlv-num" : " rlv-text"));
        td.dataset.col = c.name;
        td.setAttribute("role", "gridcell");
        let bar: HTMLSpanElement | null = null;
        let expand: HTMLButtonElement | null = null;
        if (numeric && !isIdColumn(c.name)) {
          bar = el(doc, "span", "rlv-bar");
          td.append(bar);
        }
        if (!numeric) {
          expand = el(doc, "button", "rlv-expand", "▸");
          expand.type = "button";
          expand.tabIndex = -1;
          expand.title = "Show the full text";
          td.append(expand);
        }
        const val = el(doc, "span", "rlv-val");
        td.append(val);
        rowEl.append(td);
        cells.push({ td, val, bar, expand });
      }
      this.spacer.append(rowEl);
      this.pool.push({ el: rowEl, cells, key: "" });
    }
  }

  /** Every row is rewritten at the next paint (the data changed). */
  invalidate(): void {
    for (const r of this.pool) r.key = "";
  }

  private paintRow(r: RowEl, row: number, top: number, st: RowsState): void {
    const page = st.pageOf(row);
    const i = row % PAGE_SIZE;
    const loaded = !!page && i < page.ids.length;
    const id = loaded ? page!.ids[i] : undefined;
    const isSel = id !== undefined && st.selected.has(id);
    r.el.style.display = "";
    r.el.style.top = `${top}px`;
    r.el.classList.toggle("rlv-selected", isSel);
    r.el.classList.toggle("rlv-cursor", st.cursor === row);
    r.el.setAttribute("aria-selected", String(isSel));
    const key = `${st.generation}:${row}:${loaded ? 1 : 0}`;
    if (r.key === key) return; // content unchanged: only position/selection needed updating
    r.key = key;
    r.el.dataset.row = String(row);
    r.el.classList.toggle("rlv-loading", !loaded);
    if (loaded) r.el.dataset.id = String(id);
    else delete r.el.dataset.id;
    const values = loaded ? page!.rows[i] || [] : null;
    const clipped = loaded && page!.clipped ? page!.clipped[i] || null : null;
    st.columns.forEach((c, ci) => {
      const cell = r.cells[ci];
      if (!cell) return;
      if (!values) {
        cell.val.textContent = ci === 0 ? "…" : "";
        cell.td.classList.remove("rlv-null", "rlv-can-expand");
        if (cell.bar) cell.bar.style.width = "0";
        return;
      }
      const v = values[ci];
      const f = formatCell(v, c);
      cell.val.textContent = f.text; // textContent only: model text may contain markup
      cell.td.classList.toggle("rlv-null", f.missing);
      if (cell.bar) {
        const g = barGeometry(typeof v === "number" ? v : f.missing ? null : Number(v), c.min, c.max);
        cell.bar.style.left = g ? `${(g.left * 100).toFixed(2)}%` : "0";
        cell.bar.style.width = g ? `${(g.width * 100).toFixed(2)}%` : "0";
        cell.bar.classList.toggle("rlv-neg", !!g && g.negative);
      }
      if (cell.expand) {
        const wasClipped = !!(clipped && clipped[ci]);
        const long = typeof v === "string" && (v.length > 24 || v.includes("\n"));
        cell.td.classList.toggle("rlv-can-expand", wasClipped || long);
        cell.td.dataset.clipped = wasClipped ? "1" : "";
      }
    });
  }

  /**
   * Positions and fills the pooled rows for the current scroll position (no fetching); returns
   * the window. `grew` is called before painting when the viewport outgrew the pool.
   */
  paint(st: RowsState, grew: () => void): RowWindow {
    const win = computeWindow({ rowHeight: ROW_HEIGHT, viewportHeight: this.viewportHeight(), scrollTop: this.scroll.scrollTop, total: st.total, overscan: OVERSCAN });
    this.win = win;
    this.spacer.style.height = `${win.spacerHeight}px`;
    if (win.last - win.first + 1 > this.pool.length && st.columns.length > 0) grew(); // viewport grew
    const pool = this.pool;
    const used = new Set<number>();
    if (pool.length > 0) {
      for (let row = win.first; row <= win.last; row++) {
        const slot = row % pool.length; // row-modulo slots: rows that stay visible keep their element
        if (used.has(slot)) continue; // cannot happen while pool >= window; guard anyway
        used.add(slot);
        this.paintRow(pool[slot], row, win.topOf(row), st);
      }
    }
    pool.forEach((r, slot) => {
      if (!used.has(slot) && r.el.style.display !== "none") {
        r.el.style.display = "none";
        r.key = "";
        delete r.el.dataset.row;
        delete r.el.dataset.id;
      }
    });
    return win;
  }
}
