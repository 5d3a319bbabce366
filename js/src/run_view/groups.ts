/**
 * The "GRPO groups" tab's panes, drawn as text from the view's `group_panes` trait: the summary
 * line, the picked group's responses side by side, and its prompt across steps.
 */
import { el } from "../lib/dom";

export interface GroupCard {
  sample_id: number;
  reward: number | null;
  advantage: number | null;
  text: string;
}
export interface GroupDetail {
  group?: string;
  step?: number;
  prompt?: string;
  cards?: GroupCard[];
  more?: number;
  more_code?: string;
}
export interface History {
  rows?: (number | null)[][]; // step, responses, reward mean, std, min, max
  skipped?: number;
  skipped_at?: number;
  note?: string;
}
export interface GroupPanes {
  built?: boolean;
  summary?: string;
  detail?: GroupDetail;
  history?: History;
}

const g4 = (v: number | null | undefined) => (v === null || v === undefined ? "–" : Number(v.toPrecision(4)).toString());

function card(doc: Document, c: GroupCard): HTMLElement {
  const box = el(doc, "div", "rlv-group-card");
  const adv = c.advantage === null || c.advantage === undefined ? "" : ` · advantage ${g4(c.advantage)}`;
  box.append(el(doc, "div", "rlv-group-card-head", `sample ${c.sample_id} · reward ${g4(c.reward)}${adv}`));
  box.append(el(doc, "pre", "rlv-group-card-text", String(c.text ?? "")));
  return box;
}

export function renderGroupDetail(host: HTMLElement, d: GroupDetail | undefined): void {
  const doc = host.ownerDocument;
  host.replaceChildren();
  if (!d || d.group === undefined) return;
  const head = el(doc, "div", "rlv-group-head");
  head.append("group ", el(doc, "code", undefined, String(d.group)), ` · step ${d.step} · prompt:`);
  const cards = el(doc, "div", "rlv-group-cards");
  for (const c of d.cards ?? []) cards.append(card(doc, c));
  if (d.more) {
    const more = el(doc, "div", "rlv-group-more", `… and ${d.more.toLocaleString("en-US")} more (lower rewards): `);
    more.append(el(doc, "code", undefined, String(d.more_code ?? "")));
    cards.append(more);
  }
  host.append(head, el(doc, "pre", "rlv-group-prompt", String(d.prompt ?? "")), cards);
}

function row(doc: Document, cells: string[]): HTMLTableRowElement {
  const tr = el(doc, "tr");
  for (const c of cells) tr.append(el(doc, "td", undefined, c));
  return tr;
}

export function renderHistory(host: HTMLElement, h: History | undefined): void {
  const doc = host.ownerDocument;
  host.replaceChildren();
  if (!h || (!h.rows && !h.note)) return;
  const box = el(doc, "div", "rlv-prompt-history");
  if (!h.rows?.length) {
    box.append(el(doc, "i", undefined, String(h.note ?? "")));
    host.append(box);
    return;
  }
  box.append(el(doc, "b", undefined, "The same prompt across steps"));
  const table = el(doc, "table");
  const head = el(doc, "tr");
  for (const t of ["step", "responses", "reward mean", "std", "range"]) head.append(el(doc, "th", undefined, t));
  table.append(head);
  h.rows.forEach((r, i) => {
    if (h.skipped && i === h.skipped_at) {
      const gap = el(doc, "tr");
      const td = el(doc, "td", undefined, `… ${h.skipped.toLocaleString("en-US")} steps between: ${h.note ?? ""}`);
      td.colSpan = 5;
      gap.append(td);
      table.append(gap);
    }
    table.append(row(doc, [String(r[0]), String(r[1]), g4(r[2]), g4(r[3]), `${g4(r[4])} … ${g4(r[5])}`]));
  });
  box.append(table);
  host.append(box);
}
