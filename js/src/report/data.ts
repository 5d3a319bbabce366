/** The report's embedded data (written by rlviz_widgets/_report.py) and how it is read from the page. */
import type { ColumnInfo, StripsReply } from "../lib/protocol";
import type { Columns } from "../lib/vega_data";
import type { Block } from "../run_view/detail";

export type Cell = number | string | null;

export interface TableData {
  columns: ColumnInfo[];
  total: number; // rows passing the view's filters
  shown: number; // rows written (at most `limit`)
  limit: number;
  order: string; // e.g. "log order", "reward, descending"
  sort_by: string;
  sort_desc: boolean;
  ids: number[];
  rows: Cell[][];
  clipped: boolean[][] | null;
}

export interface SampleText {
  sample_id: number;
  facts: Record<string, Cell>;
  texts: [string, string][];
  /** A conversation's turns, as the RunView's detail pane shows them (instead of its prompt and response). */
  blocks?: Block[];
}

export interface StripData {
  reply: StripsReply;
  buffers: string[]; // base64 little-endian float32
  color_by: string;
  domains: Record<string, [number, number]>; // "metric|scope" -> limits
}

export interface Section {
  title: string;
  samples: SampleText[];
  strip: StripData | null;
}

export interface ReportData {
  title: string;
  meta: {
    name: string;
    runs: string[];
    sources: string[];
    summary: string;
    samples: number;
    steps: number;
    files: string[];
    token_metrics: string[];
    problems: Record<string, number>;
  };
  filters: Record<string, Cell | boolean>;
  chart: { spec: any; selections: Record<string, unknown>; datasets: Record<string, Columns> };
  table: TableData;
  sections: Section[];
}

/** The data of the `<script type="application/json" id="rlviz-data">` element. */
export function readData(doc: Document): ReportData {
  const node = doc.getElementById("rlviz-data");
  if (!node) throw new Error("the report has no data element (#rlviz-data)");
  return JSON.parse(node.textContent || "{}") as ReportData;
}

/** A base64 string as a DataView of its bytes (the kernel sends these as binary buffers). */
export function base64View(b64: string): DataView {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new DataView(bytes.buffer);
}
