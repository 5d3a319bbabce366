/**
 * The sample table's rows held in the page: sorted and searched here (the kernel's job in a
 * notebook), answered to the SampleTable front end as its "rows" and "cell" requests.
 */
import type { CellReply, RowsReply } from "../lib/protocol";
import type { Cell, TableData } from "./data";
import { LocalModel } from "./model";

const SEARCH_COLUMNS = ["prompt", "response", "ref_response"];
const CLIPPED_NOTE = "\n… (the report holds the first characters of this text)";

/** Compares two cells as the engine sorts: numbers by value, texts by code point, missing values last. */
function compare(a: Cell, b: Cell, desc: boolean): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
  const c = typeof a === "number" && typeof b === "number" ? a - b : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
  return desc ? -c : c;
}

export class TableRows {
  /** Row positions (into the embedded rows) in the current order and search. */
  private order: number[];
  private generation = 0;
  readonly model: LocalModel;

  constructor(private readonly data: TableData) {
    this.order = data.ids.map((_, i) => i);
    this.model = new LocalModel(
      {
        columns: data.columns,
        row_count: data.ids.length,
        sort_by: data.sort_by,
        sort_desc: data.sort_desc,
        search: "",
        selected_ids: [],
        generation: 0,
        error: "",
        height: 360,
        max_selected: 5000,
      },
      { rows: (p) => ({ result: this.rows(p) }), cell: (p) => ({ result: this.cell(p) }) },
      (names) => {
        if (names.some((n) => n === "sort_by" || n === "sort_desc" || n === "search")) this.reorder();
      },
    );
  }

  /** Applies the model's sort and search, then tells the front end (as the kernel would). */
  private reorder(): void {
    const m = this.model;
    const cols = this.data.columns.map((c) => c.name);
    const needle = String(m.get("search") || "").toLowerCase();
    const searched = SEARCH_COLUMNS.map((c) => cols.indexOf(c)).filter((k) => k >= 0);
    let order = this.data.ids.map((_, i) => i);
    if (needle.trim()) {
      order = order.filter((i) => searched.some((k) => String(this.data.rows[i][k] ?? "").toLowerCase().includes(needle)));
    }
    const k = cols.indexOf(String(m.get("sort_by") || ""));
    if (k >= 0) {
      const desc = !!m.get("sort_desc");
      order.sort((a, b) => compare(this.data.rows[a][k], this.data.rows[b][k], desc) || this.data.ids[a] - this.data.ids[b]);
    }
    this.order = order;
    m.update({ row_count: order.length, generation: ++this.generation });
  }

  private rows({ offset = 0, limit = 100 }: { offset?: number; limit?: number }): RowsReply {
    const start = Math.max(0, Number(offset) || 0);
    const picked = this.order.slice(start, start + Math.max(0, Number(limit) || 0));
    const clipped = this.data.clipped;
    return {
      generation: this.generation,
      offset: start,
      total: this.order.length,
      ids: picked.map((i) => this.data.ids[i]),
      rows: picked.map((i) => this.data.rows[i]),
      clipped: clipped ? picked.map((i) => clipped[i]) : null,
    };
  }

  private cell({ sample_id, column }: { sample_id: number; column: string }): CellReply {
    const i = this.data.ids.indexOf(sample_id);
    const k = this.data.columns.findIndex((c) => c.name === column);
    if (i < 0 || k < 0) throw new Error(`no cell ${column} of sample ${sample_id} in the report`);
    const v = this.data.rows[i][k];
    return { text: (v === null ? "" : String(v)) + (this.data.clipped?.[i]?.[k] ? CLIPPED_NOTE : "") };
  }
}
