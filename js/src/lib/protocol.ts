/**
 * What the Python widgets and the front ends say to each other. Small state lives in synced
 * traits; data is pulled with `rpc.call(method, params)` (see rpc.ts) whenever the
 * `generation` trait changes, and answers whose generation is stale are dropped.
 */

// ---------------------------------------------------------------- TokenStrip (token_strip.ts)
// Traits: sample_ids: number[]; color_by: string; scale_scope: "sample" | "step" | "run";
//   metrics: string[] (available metric names, in display order); show_table: boolean;
//   pinned: {sample_id, position} | null (the clicked token, set by JS); generation: number;
//   error: string (shown in the widget when not empty); height: number (max px, 0 = auto).

/** rpc "strips" {} -> StripsReply, with one float32 buffer per (sample, metric). */
export interface StripsReply {
  generation: number;
  metrics: string[];
  samples: StripSample[];
}
export interface StripSample {
  sample_id: number;
  step: number;
  reward: number | null;
  label: string; // e.g. "step 40 · sample 1000000012 · reward 0.93"
  tokens: string[]; // raw token strings as logged (may be "Ġthe", "<0x0A>", "<PAD>"); [] if none
  more?: number; // tokens of the sample past those sent (a reply holds ~32k tokens at most)
  buffers: Record<string, number>; // metric -> index into the reply's buffers (Float32Array, NaN = missing)
  /** Per-token flags -> index into the buffers (Uint8Array, 1 = set): "trained" (in the loss mask), "masked"
   * (dropped by the importance-ratio rule). Absent: every token trained, none masked. */
  flags?: Record<string, number>;
  /** Where each turn starts (a conversation): token position and the role as the log writes it. */
  turns?: StripTurn[];
}
export interface StripTurn {
  start: number;
  role: string;
}

/** rpc "domain" {metric, scope, steps: number[]} -> DomainReply: colour limits for scope "step"/"run". */
export interface DomainReply {
  metric: string;
  lo: number;
  hi: number;
}

// --------------------------------------------------------------- SampleTable (sample_table.ts)
// Traits: columns: ColumnInfo[]; row_count: number; sort_by: string; sort_desc: boolean;
//   search: string; selected_ids: number[]; generation: number; error: string;
//   height: number (px of the scroll area).

export interface ColumnInfo {
  name: string;
  kind: "number" | "int" | "text";
  min?: number | null; // for numeric columns: range for the inline bars
  max?: number | null;
}

/** rpc "rows" {offset, limit} -> RowsReply (rows in the current sort / search / filter). */
export interface RowsReply {
  generation: number;
  offset: number;
  total: number;
  ids: number[]; // sample_id of each row
  rows: (number | string | null)[][]; // one array per row, in `columns` order; text clipped to ~300 chars
  clipped: boolean[][] | null; // true where a text cell was clipped
}

/** rpc "cell" {sample_id, column} -> {text}: the full text of one clipped cell. */
export interface CellReply {
  text: string;
}
