/**
 * The expanded cell: a panel under a row with the whole text of a text cell, fetched with rpc
 * "cell" when the page only holds it clipped. Written with textContent only.
 */
import type { ColumnInfo } from "../lib/protocol";
import type { RowWindow } from "../lib/virtual";
import { el } from "../lib/dom";
import { PAGE_SIZE, type Page } from "./pager";
import { ROW_HEIGHT } from "./rows";

interface Shown {
  row: number;
  sampleId: number;
  column: string;
  text: string | null; // null while loading
  error: string;
}

export class ExpandedCell {
  private shown: Shown | null = null;
  private panel: HTMLDivElement | null = null;

  /** The panel goes into `spacer`; `fetchCell` is the rpc "cell" call; `fail` shows an error. */
  constructor(
    private readonly doc: Document,
    private readonly spacer: HTMLElement,
    private readonly fetchCell: (sampleId: number, column: string) => Promise<string>,
    private readonly fail: (message: string) => void,
  ) {}

  get isOpen(): boolean {
    return this.shown !== null;
  }

  close(): void {
    this.shown = null;
    this.panel?.remove();
    this.panel = null;
  }

  /** Puts the panel back on top of the rows (after the row pool was rebuilt). */
  raise(): void {
    if (this.panel) this.spacer.append(this.panel);
  }

  /** Places the panel under its row, or hides it while that row is scrolled away. */
  paint(win: RowWindow | null): void {
    if (!this.panel || !this.shown || !win) return;
    const inView = this.shown.row >= win.first && this.shown.row <= win.last;
    this.panel.style.display = inView ? "" : "none";
    if (inView) this.panel.style.top = `${win.topOf(this.shown.row) + ROW_HEIGHT}px`;
  }

  private fill(win: RowWindow | null): void {
    const shown = this.shown;
    if (!shown) return;
    const doc = this.doc;
    if (!this.panel) {
      this.panel = el(doc, "div", "rlv-expanded");
      this.spacer.append(this.panel);
    }
    const title = el(doc, "div", "rlv-expanded-title", `${shown.column} · sample ${shown.sampleId}`);
    const close = el(doc, "button", "rlv-expanded-close", "×");
    close.type = "button";
    close.title = "Close";
    close.addEventListener("click", (e) => {
      e.stopPropagation();
      this.close();
    });
    const body = el(doc, "div", shown.error ? "rlv-expanded-text rlv-expanded-error" : "rlv-expanded-text");
    body.textContent = shown.error || (shown.text ?? "loading…"); // never innerHTML
    this.panel.replaceChildren(close, title, body);
    this.panel.addEventListener("click", (e) => e.stopPropagation());
    this.paint(win);
  }

  /**
   * Opens the text cell of `column` in `row` (closes it when it is the one open); `win()` is the
   * window at the time of painting.
   */
  async toggle(row: number, column: string, page: Page | undefined, columns: ColumnInfo[], win: () => RowWindow | null): Promise<void> {
    const i = row % PAGE_SIZE;
    if (!page || i >= page.ids.length) return;
    const ci = columns.findIndex((c) => c.name === column);
    if (ci < 0 || columns[ci].kind !== "text") return;
    const sampleId = page.ids[i];
    if (this.shown && this.shown.sampleId === sampleId && this.shown.column === column) {
      this.close(); // the affordance toggles
      return;
    }
    const local = page.rows[i]?.[ci];
    const wasClipped = !!page.clipped?.[i]?.[ci];
    const mine: Shown = { row, sampleId, column, text: wasClipped ? null : String(local ?? ""), error: "" };
    this.shown = mine;
    this.fill(win());
    if (!wasClipped) return; // the whole text is already here
    try {
      const text = await this.fetchCell(sampleId, column);
      if (this.shown !== mine) return;
      mine.text = text;
    } catch (err: any) {
      if (this.shown !== mine) return;
      mine.error = `Could not load the full text: ${err?.message || err}`;
      this.fail(mine.error);
    }
    this.fill(win());
  }
}
