/**
 * The column header: one cell per column with its label (two lines, see labels.ts), the sort arrow and a
 * resize handle on its right edge. A click asks to sort by that column; a drag on the handle sets the
 * column's width, kept by name for the life of the view (a new column list keeps the widths it shares).
 */
import type { ColumnInfo } from "../lib/protocol";
import { isIdColumn } from "../lib/format";
import { el } from "../lib/dom";
import { breakPieces, charMeasure, headerLabels, type Measure } from "./labels";

/** The narrowest a drag makes a column, in px. */
export const MIN_COLUMN_PX = 40;
/** A click this soon after a drag ended is the drag's own click, not a sort. */
const CLICK_AFTER_DRAG_MS = 300;

/** Grid track for a column: fixed for numbers, flexible for text (its minimum is its width in px). */
function trackFor(c: ColumnInfo): [string, number] {
  if (c.kind === "text") return ["minmax(160px, 1fr)", 160];
  if (isIdColumn(c.name)) return ["110px", 110];
  return c.kind === "int" ? ["80px", 80] : ["96px", 96];
}

/** The grid columns and the width under which the table scrolls sideways. */
export interface Tracks {
  template: string;
  minWidth: number;
}

export class Header {
  /** The clipping box, scrolled sideways with the body. */
  readonly wrap: HTMLDivElement;
  private readonly head: HTMLDivElement;
  private columns: ColumnInfo[] = [];
  /** Widths set by dragging, by column name. */
  private readonly widths = new Map<string, number>();
  private dragEndedAt = -Infinity;
  private canvasEl: HTMLCanvasElement | undefined;
  private endDrag: (() => void) | null = null;

  /**
   * `onSort(name)` is called with the clicked column's name; `onResize(tracks)` with the new grid tracks
   * while a column's edge is dragged (the rows use the same tracks).
   */
  constructor(
    private readonly doc: Document,
    onSort: (column: string) => void,
    private readonly onResize: (tracks: Tracks) => void = () => {},
  ) {
    this.wrap = el(doc, "div", "rlv-head-wrap");
    this.head = el(doc, "div", "rlv-head");
    this.head.setAttribute("role", "row");
    this.wrap.append(this.head);
    this.head.addEventListener("click", (ev) => {
      const target = ev.target as HTMLElement;
      if (target.closest(".rlv-resize") || Date.now() - this.dragEndedAt < CLICK_AFTER_DRAG_MS) return;
      const th = target.closest(".rlv-th") as HTMLElement | null;
      if (th?.dataset.col) onSort(th.dataset.col);
    });
    this.head.addEventListener("pointerdown", (ev) => {
      const handle = (ev.target as HTMLElement).closest(".rlv-resize") as HTMLElement | null;
      const col = (handle?.parentElement as HTMLElement | null)?.dataset.col;
      if (!handle || col === undefined) return;
      ev.preventDefault(); // no text selection while dragging
      this.startDrag(col, ev.clientX);
    });
    this.head.addEventListener("dblclick", (ev) => {
      const handle = (ev.target as HTMLElement).closest(".rlv-resize") as HTMLElement | null;
      const col = (handle?.parentElement as HTMLElement | null)?.dataset.col;
      if (col === undefined || !this.widths.delete(col)) return; // back to the default width
      this.onResize(this.relabel());
    });
  }

  /** One header cell per column; returns the grid tracks the rows use too. */
  build(columns: ColumnInfo[]): Tracks {
    this.endDrag?.();
    this.columns = columns;
    this.head.replaceChildren();
    for (const c of columns) {
      const th = el(this.doc, "div", "rlv-th" + (c.kind === "text" ? "" : " rlv-num"));
      th.dataset.col = c.name;
      th.title = c.name; // the full name, whatever the label shows
      th.setAttribute("aria-label", c.name);
      th.setAttribute("role", "columnheader");
      const handle = el(this.doc, "div", "rlv-resize");
      handle.title = `Drag to resize ${c.name}; double-click for the default width`;
      handle.setAttribute("aria-hidden", "true");
      th.append(el(this.doc, "span", "rlv-th-name"), el(this.doc, "span", "rlv-arrow"), handle);
      this.head.append(th);
    }
    const tracks = this.relabel();
    // not in the page yet: no font to measure with, so the labels are measured again once it is
    if (!this.head.isConnected && typeof requestAnimationFrame === "function") {
      requestAnimationFrame(() => {
        if (this.head.isConnected && this.columns === columns) this.relabel();
      });
    }
    return tracks;
  }

  /** The width of a column in px: dragged, else its track's. */
  widthOf(c: ColumnInfo): number {
    return this.widths.get(c.name) ?? trackFor(c)[1];
  }

  /** Sets a column's width (px, at least MIN_COLUMN_PX), as a drag does; returns the new tracks. */
  setWidth(name: string, px: number): Tracks {
    this.widths.set(name, Math.max(MIN_COLUMN_PX, Math.round(px)));
    const tracks = this.relabel();
    this.onResize(tracks);
    return tracks;
  }

  /** The tracks at the current widths; rewrites the labels for them. */
  private relabel(): Tracks {
    const cols = this.columns;
    const tracks = cols.map((c) => (this.widths.has(c.name) ? [`${this.widths.get(c.name)}px`, this.widths.get(c.name)!] as const : trackFor(c)));
    const minWidth = tracks.reduce((s, t) => s + t[1], 0);
    this.head.style.minWidth = `${minWidth}px`;
    const labels = headerLabels(cols.map((c) => c.name), cols.map((c) => this.widthOf(c)), this.measure());
    const ths = Array.from(this.head.children) as HTMLElement[];
    ths.forEach((th, i) => this.writeLabel(th.querySelector(".rlv-th-name") as HTMLElement, labels[i] ?? ""));
    return { template: tracks.map((t) => t[0]).join(" ") || "1fr", minWidth };
  }

  /** Text widths in the header's font, from a canvas where the page has one and its font is known. */
  private measure(): Measure {
    const span = this.head.querySelector(".rlv-th-name");
    const ctx = span?.isConnected ? this.canvas()?.getContext("2d") : null;
    const cs = ctx && span ? getComputedStyle(span) : null;
    if (!ctx || !cs?.fontSize) return charMeasure;
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    return (text) => ctx.measureText(text).width;
  }

  private canvas(): HTMLCanvasElement | null {
    try {
      this.canvasEl ??= this.doc.createElement("canvas");
      return this.canvasEl;
    } catch {
      return null;
    }
  }

  /** The label as text with a line-break opportunity after each `_` (text nodes only: names are data). */
  private writeLabel(span: HTMLElement, label: string): void {
    if (span.dataset.label === label) return;
    span.dataset.label = label;
    const parts: Node[] = [];
    for (const piece of breakPieces(label)) parts.push(this.doc.createTextNode(piece), this.doc.createElement("wbr"));
    parts.pop();
    span.replaceChildren(...parts);
  }

  private startDrag(name: string, x0: number): void {
    this.endDrag?.();
    const col = this.columns.find((c) => c.name === name);
    const th = (Array.from(this.head.children) as HTMLElement[]).find((e) => e.dataset.col === name);
    if (!col || !th) return;
    const w0 = th.getBoundingClientRect().width || this.widthOf(col); // no layout (tests): the known width
    let moved = false;
    const move = (ev: PointerEvent) => {
      moved = moved || ev.clientX !== x0;
      this.setWidth(name, w0 + ev.clientX - x0);
    };
    const end = () => {
      this.doc.removeEventListener("pointermove", move);
      this.doc.removeEventListener("pointerup", end);
      this.doc.removeEventListener("pointercancel", end);
      this.head.classList.remove("rlv-resizing");
      this.endDrag = null;
      if (moved) this.dragEndedAt = Date.now();
    };
    this.doc.addEventListener("pointermove", move);
    this.doc.addEventListener("pointerup", end);
    this.doc.addEventListener("pointercancel", end);
    this.head.classList.add("rlv-resizing");
    this.endDrag = end;
  }

  /** Marks the sorted column (arrow and aria-sort). */
  showSort(by: string, desc: boolean): void {
    for (const th of Array.from(this.head.children) as HTMLElement[]) {
      const active = th.dataset.col === by;
      th.classList.toggle("rlv-sorted", active);
      th.setAttribute("aria-sort", active ? (desc ? "descending" : "ascending") : "none");
      (th.querySelector(".rlv-arrow") as HTMLElement).textContent = active ? (desc ? "▼" : "▲") : "";
    }
  }

  /** Ends a drag in progress (the view is going away). */
  dispose(): void {
    this.endDrag?.();
  }
}
