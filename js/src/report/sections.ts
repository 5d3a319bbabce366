/**
 * The report's plain parts: run metadata, filters, and each highlighted sample's facts and texts.
 * Every value from the logs is written with textContent (el()), never parsed as HTML.
 */
import { el } from "../lib/dom";
import type { Cell, ReportData, SampleText, StripData } from "./data";
import { base64View } from "./data";
import { LocalModel } from "./model";
import { renderDetail } from "../run_view/detail";

function show(v: Cell | boolean | undefined): string {
  if (v === null || v === undefined) return "none";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toPrecision(4);
  return String(v);
}

/** A two-column table of names and values. */
export function keyValues(doc: Document, cls: string, pairs: [string, string][]): HTMLTableElement {
  const table = el(doc, "table", cls);
  for (const [k, v] of pairs) {
    const tr = el(doc, "tr");
    tr.append(el(doc, "td", undefined, k), el(doc, "td", undefined, v));
    table.append(tr);
  }
  return table;
}

export function metaTable(doc: Document, meta: ReportData["meta"]): HTMLTableElement {
  const problems = Object.entries(meta.problems);
  return keyValues(doc, "rlv-report-meta", [
    ["sources", meta.sources.join("\n") || "none"],
    ...(meta.runs.length ? [["runs", meta.runs.join(", ")] as [string, string]] : []),
    ["samples", show(meta.samples)],
    ["steps", show(meta.steps)],
    ["files", `${meta.files.length}: ${meta.files.join(", ")}`],
    ["token metrics", meta.token_metrics.join(", ") || "none"],
    ["problems", problems.length ? problems.map(([k, n]) => `${k}: ${n.toLocaleString("en-US")}`).join(", ") : "none"],
  ]);
}

export function filtersTable(doc: Document, filters: ReportData["filters"]): HTMLTableElement {
  return keyValues(doc, "rlv-report-filters", Object.entries(filters).map(([k, v]) => [k, show(v)]));
}

/** One sample's facts and its texts side by side. */
export function sampleCard(doc: Document, s: SampleText): HTMLDivElement {
  const card = el(doc, "div", "rlv-report-sample");
  card.dataset.sampleId = String(s.sample_id);
  const facts = [`sample ${s.sample_id}`, ...Object.entries(s.facts).map(([k, v]) => `${k} ${show(v)}`)];
  card.append(el(doc, "div", "rlv-report-facts", facts.join(" · ")));
  if (s.blocks?.length) {
    // the same turn blocks as the RunView's detail pane (role badges, tool calls as JSON text)
    const talk = el(doc, "div", "rlv-report-conversation rlv-run-view");
    renderDetail(talk, { blocks: s.blocks });
    card.append(talk);
  }
  const grid = el(doc, "div", "rlv-report-texts");
  for (const [name, text] of s.texts) {
    const box = el(doc, "div");
    box.append(el(doc, "div", "rlv-report-text-name", name), el(doc, "pre", `rlv-report-${name.replace(/\s+/g, "-")}`, text));
    grid.append(box);
  }
  card.append(grid);
  return card;
}

/** A TokenStrip model answering "strips" and "domain" from the section's embedded reply. */
export function stripModel(strip: StripData, metrics: string[]): LocalModel {
  const buffers = strip.buffers.map(base64View);
  return new LocalModel(
    {
      sample_ids: strip.reply.samples.map((s) => s.sample_id),
      color_by: strip.color_by,
      scale_scope: "sample",
      metrics,
      show_table: false,
      pinned: null,
      generation: 0,
      error: "",
      height: 0,
    },
    {
      strips: () => ({ result: strip.reply, buffers }),
      domain: ({ metric, scope }) => {
        const d = strip.domains[`${metric}|${scope}`];
        if (!d) throw new Error(`no ${scope} colour limits for ${metric} in the report`);
        return { result: { metric, lo: d[0], hi: d[1] } };
      },
    },
  );
}
