/**
 * The shared tooltip (one element for every chip) and the screen-reader live region that reads
 * the same facts. Model text goes in as text nodes only.
 */
import { formatValue, type Scale } from "../lib/color";
import { unitLabel, visibleText, type TokenUnit } from "../lib/token_text";
import { el } from "../lib/dom";
import { orderedMetrics, turnOf, unitTrained, unitValue, type SampleView } from "./samples";

/** What the tooltip says about a unit: heading, raw token, shown text, and [metric, value, is-colouring] rows. */
export interface UnitFacts {
  head: string;
  raw: string;
  text: string;
  rows: [string, number, boolean][];
}

/** The facts about unit `u` of `sv`; `metric` is the one colouring the chips, `order` the reply's metric order. */
export function describe(sv: SampleView, u: TokenUnit, metric: string, order: string[] | undefined): UnitFacts {
  let head = u.count > 1 ? `positions ${u.start}–${u.start + u.count - 1} (×${u.count})` : `position ${u.start}`;
  const turn = turnOf(sv, u.start);
  if (turn) head += ` · turn ${turn.turn} (${turn.role})`;
  if (!unitTrained(sv, u)) head += " · not trained";
  if (sv.masked && sv.masked.subarray(u.start, u.start + u.count).includes(1)) head += " · masked";
  let text = u.kind === "text" ? visibleText(u.token.text) : u.count > 1 ? unitLabel(u) : u.token.raw;
  const ci = u.token.charInfo;
  if (ci) {
    const range = ci.bytes > 1 ? `bytes ${ci.firstByte + 1}–${ci.firstByte + ci.bytes}` : `byte ${ci.firstByte + 1}`;
    text = `${range} of ${ci.totalBytes} of “${ci.char}”`;
  }
  if (u.token.invalid) text += " (invalid UTF-8 bytes)";
  const rows = orderedMetrics(sv, order).map((m) => [m, unitValue(sv, u, m), m === metric] as [string, number, boolean]);
  // Policy vs reference: both values are listed; add their difference when the log lacks it.
  for (const [a, b, name] of [
    ["logprob", "ref_logprob", "logprob − ref_logprob"],
    ["prob", "ref_prob", "prob − ref_prob"],
    ["trainer_logprob", "inference_logprob", "trainer − inference logprob"],
  ]) {
    const logged = a === "logprob" ? sv.values.log_ratio : a === "trainer_logprob" ? sv.values.mismatch_log_ratio : undefined;
    if (sv.values[a] && sv.values[b] && !logged) {
      rows.push([name, unitValue(sv, u, a) - unitValue(sv, u, b), false]);
    }
  }
  return { head, raw: JSON.stringify(u.token.raw), text, rows };
}

export class Tooltip {
  readonly el: HTMLDivElement;
  /** Polite live region: what the tooltip shows, for screen readers. */
  readonly live: HTMLDivElement;

  /** `root` is the positioned box the tooltip is placed in. */
  constructor(
    private readonly doc: Document,
    private readonly root: HTMLElement,
  ) {
    this.el = el(doc, "div", "rlv-tooltip");
    this.el.hidden = true;
    this.el.setAttribute("role", "tooltip");
    this.live = el(doc, "div", "rlv-sr");
    this.live.setAttribute("aria-live", "polite");
  }

  /** Shows the facts of unit `u` under its chip; `sc` is the strip's scale (for the clip note). */
  show(sv: SampleView, u: TokenUnit, sc: Scale | undefined, metric: string, order: string[] | undefined, chip: HTMLElement | undefined): void {
    const doc = this.doc;
    const d = describe(sv, u, metric, order);
    const head = el(doc, "div", "rlv-tt-head", `${d.head} · sample ${sv.sample.sample_id}`);
    const raw = el(doc, "div", undefined, "raw ");
    raw.appendChild(el(doc, "code", undefined, d.raw));
    const shown = el(doc, "div", undefined, "text ");
    shown.appendChild(el(doc, "code", undefined, d.text));
    const table = el(doc, "table");
    for (const [m, v, cur] of d.rows) {
      const tr = el(doc, "tr", cur ? "rlv-current" : undefined);
      let note = "";
      if (cur && sc && Number.isFinite(v)) note = v > sc.hi ? " (above limit)" : v < sc.lo ? " (below limit)" : "";
      tr.append(el(doc, "td", undefined, m), el(doc, "td", undefined, formatValue(v, 4) + note));
      table.appendChild(tr);
    }
    this.el.replaceChildren(head, raw, shown, table);
    if (!d.rows.length) this.el.appendChild(el(doc, "div", undefined, "no metrics for this token"));
    this.el.hidden = false;
    this.place(chip);
    this.live.textContent = `${d.head}: ${d.raw}. ${d.rows.map(([m, v]) => `${m} ${formatValue(v, 4)}`).join(", ")}`;
  }

  /** Puts the tooltip under `chip`, kept inside the widget's width. */
  private place(chip: HTMLElement | undefined): void {
    if (!chip) return;
    const r = chip.getBoundingClientRect();
    const base = this.root.getBoundingClientRect();
    const width = this.el.offsetWidth || 0;
    let left = r.left - base.left;
    if (base.width && left + width > base.width) left = Math.max(0, base.width - width);
    this.el.style.left = `${left}px`;
    this.el.style.top = `${r.bottom - base.top + 4}px`;
  }

  hide(): void {
    this.el.hidden = true;
    this.el.classList.remove("rlv-pinned");
  }

  /** A pinned tooltip takes the pointer (its text can be selected). */
  setPinnedLook(pinned: boolean): void {
    this.el.classList.toggle("rlv-pinned", pinned);
  }
}
