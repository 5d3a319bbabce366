/** The column header: one cell per column with the sort arrow; a click asks to sort by that column. */
import type { ColumnInfo } from "../lib/protocol";
import { isIdColumn } from "../lib/format";
import { el } from "../lib/dom";

/** Grid track for a column: fixed for numbers, flexible for text. */
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

  /** `onSort(name)` is called with the clicked column's name. */
  constructor(
    private readonly doc: Document,
    onSort: (column: string) => void,
  ) {
    this.wrap = el(doc, "div", "rlv-head-wrap");
    this.head = el(doc, "div", "rlv-head");
    this.wrap.append(this.head);
    this.head.addEventListener("click", (ev) => {
      const th = (ev.target as HTMLElement).closest(".rlv-th") as HTMLElement | null;
      if (th?.dataset.col) onSort(th.dataset.col);
    });
  }

  /** One header cell per column; returns the grid tracks the rows use too. */
  build(columns: ColumnInfo[]): Tracks {
    this.head.replaceChildren();
    const tracks = columns.map(trackFor);
    const minWidth = tracks.reduce((s, t) => s + t[1], 0);
    this.head.style.minWidth = `${minWidth}px`;
    for (const c of columns) {
      const th = el(this.doc, "div", "rlv-th" + (c.kind === "text" ? "" : " rlv-num"));
      th.dataset.col = c.name;
      th.title = c.name;
      th.setAttribute("role", "columnheader");
      th.append(el(this.doc, "span", "rlv-th-name", c.name), el(this.doc, "span", "rlv-arrow"));
      this.head.append(th);
    }
    return { template: tracks.map((t) => t[0]).join(" ") || "1fr", minWidth };
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
}
