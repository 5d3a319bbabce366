/**
 * Row selection: click, Ctrl/Cmd-click, Shift-click ranges (over pages not loaded yet), arrow
 * keys with and without Shift; capped at the kernel's `max_selected`. Synced with the
 * `selected_ids` trait. No DOM: the view paints what `selected` and `cursor` say.
 */
import type { AnyModel } from "../lib/rpc";
import { PAGE_SIZE, type Pager } from "./pager";

const MAX_SELECTED = 5000; // the kernel's cap on selected rows when its `max_selected` trait is absent

/** What selecting needs from the view. */
export interface SelectionHost {
  pager: Pager;
  note(text: string): void;
  /** The selection or the cursor changed: update the counts and repaint. */
  changed(): void;
  /** Scrolls `row` into view and repaints. */
  reveal(row: number): void;
  isDisposed(): boolean;
}

export class Selection {
  selected = new Set<number>();
  /** Row index of the last plain/ctrl click (shift ranges start here). */
  anchor: number | null = null;
  /** Row index keyboard navigation moves from. */
  cursor: number | null = null;
  private token = 0; // cancels stale async selections (shift ranges / keyboard over unloaded pages)

  constructor(
    private readonly model: AnyModel,
    private readonly host: SelectionHost,
  ) {
    this.readTrait();
  }

  /** Takes the `selected_ids` trait (set by Python or echoed back). */
  readTrait(): void {
    this.selected = new Set((this.model.get("selected_ids") as number[]) || []);
  }

  /** Drops selections still being computed (e.g. a range over pages of data that just changed). */
  cancel(): void {
    this.token++;
  }

  private write(ids: Iterable<number>): void {
    this.selected = new Set(ids);
    this.model.set("selected_ids", [...this.selected]); // a fresh array: traits only sync on assignment
    this.model.save_changes();
    this.host.changed();
  }

  /** The most rows the kernel lets be selected (its validator refuses more, keeping the old selection). */
  private max(): number {
    return Number(this.model.get("max_selected")) || MAX_SELECTED;
  }

  /** Selects from the anchor to `row` (added to the selection with `additive`). */
  async range(row: number, additive: boolean): Promise<void> {
    if (this.anchor === null) this.anchor = row; // a shift-move with no anchor yet starts its range where it lands
    const from = this.anchor;
    const token = ++this.token;
    const lo = Math.min(from, row);
    const hi = Math.max(from, row);
    const cap = this.max();
    this.host.note(hi - lo + 1 > PAGE_SIZE ? "selecting…" : "");
    const res = await this.host.pager.idsInRange(lo, hi, from, cap);
    if (token !== this.token || this.host.isDisposed()) return;
    if (!res) {
      this.host.note("range selection failed: rows could not be loaded");
      return;
    }
    let ids = res.ids;
    let capped = res.capped;
    if (additive) {
      // added to what is selected: the union is capped too, keeping the rows nearest the anchor
      const next = new Set(this.selected);
      const order = from <= lo ? ids : [...ids].reverse();
      for (const id of order) {
        if (next.size >= cap && !next.has(id)) {
          capped = true;
          break;
        }
        next.add(id);
      }
      ids = [...next];
    }
    this.host.note(capped ? `selection capped at ${cap.toLocaleString("en-US")} rows` : "");
    this.cursor = row;
    this.write(ids);
  }

  /** A click on `row`: select it, toggle it (`additive`), or extend to it (`shift`). */
  click(row: number, shift: boolean, additive: boolean): void {
    const id = this.host.pager.idOf(row);
    if (shift && this.anchor !== null) {
      void this.range(row, additive);
      return;
    }
    if (id === undefined) return; // placeholder row: nothing to select yet
    this.token++;
    this.host.note("");
    this.anchor = row;
    this.cursor = row;
    if (additive) {
      const next = new Set(this.selected);
      if (next.has(id)) next.delete(id);
      else if (next.size >= this.max()) {
        this.host.note(`at most ${this.max().toLocaleString("en-US")} rows can be selected`);
        return;
      } else next.add(id);
      this.write(next);
    } else {
      this.write([id]);
    }
  }

  /**
   * Moves the cursor by `delta` rows (from `firstVisible` when there is none yet) and selects
   * that row, or extends the range to it (`extend`).
   */
  async move(delta: number, extend: boolean, total: number, firstVisible: number | null): Promise<void> {
    if (total <= 0) return;
    const base = this.cursor ?? (firstVisible !== null ? firstVisible - (delta > 0 ? 1 : -1) : 0);
    const row = Math.min(total - 1, Math.max(0, base + delta));
    const token = ++this.token;
    if (extend && this.anchor === null) this.anchor = this.cursor ?? row; // Shift+arrow before any click: the range starts here
    this.cursor = row;
    this.host.reveal(row);
    if (extend) {
      void this.range(row, false);
      return;
    }
    const page = await this.host.pager.fetch(Math.floor(row / PAGE_SIZE));
    if (token !== this.token || this.host.isDisposed() || !page) return;
    const id = page.ids[row % PAGE_SIZE];
    if (id === undefined) return;
    this.anchor = row;
    this.write([id]);
  }

  /** "clear selection". */
  clear(): void {
    this.token++;
    this.anchor = null;
    this.host.note("");
    this.write([]);
  }
}
