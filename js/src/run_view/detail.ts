/**
 * The picked sample's pane: its facts on one line, then one block per turn (role badge, text,
 * the tool called and its arguments as JSON). Everything is text (textContent): model output
 * never becomes HTML. Long blocks start collapsed, with a control to show them whole.
 */
import { el } from "../lib/dom";

export interface Block {
  role: string;
  text: string;
  tool_name?: string | null;
  tool_arguments?: unknown;
  /** false: no token of this turn is in the loss mask (absent: the log does not say). */
  trained?: boolean;
  /** The model's reasoning before this turn's text, where the log keeps it apart. */
  reasoning?: string;
}
export interface Detail {
  sample_id?: number;
  facts?: [string, string][];
  blocks?: Block[];
  note?: string;
}

export const COLLAPSE_CHARS = 1500; // a longer block starts collapsed
export const COLLAPSE_LINES = 24;

/** Tool arguments as pretty JSON text (a string that holds JSON is parsed first). */
export function argumentsText(args: unknown): string {
  if (typeof args === "string") {
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      return args;
    }
  }
  return JSON.stringify(args, null, 2) ?? String(args);
}

function isLong(text: string): boolean {
  return text.length > COLLAPSE_CHARS || text.split("\n").length > COLLAPSE_LINES;
}

function blockElement(doc: Document, b: Block): HTMLElement {
  const box = el(doc, "div", "rlv-turn");
  box.dataset.role = String(b.role ?? "");
  const head = el(doc, "div", "rlv-turn-head");
  head.append(el(doc, "span", "rlv-role", String(b.role ?? "")));
  box.append(head);
  if (b.tool_name) {
    head.append(el(doc, "span", "rlv-tool-name", `tool: ${b.tool_name}`));
  }
  if (b.trained === false) head.append(el(doc, "span", "rlv-untrained-turn", "not trained"));
  if (b.reasoning) box.append(el(doc, "pre", "rlv-turn-reasoning", String(b.reasoning)));
  const text = String(b.text ?? "");
  const pre = el(doc, "pre", "rlv-turn-text", text);
  box.append(pre);
  if (b.tool_arguments !== undefined && b.tool_arguments !== null) {
    box.append(el(doc, "pre", "rlv-tool-args", argumentsText(b.tool_arguments)));
  }
  if (isLong(text)) {
    box.classList.add("rlv-collapsed");
    const toggle = el(doc, "button", "rlv-expand", `show all (${text.length.toLocaleString("en-US")} characters)`);
    toggle.type = "button";
    toggle.addEventListener("click", () => {
      const collapsed = box.classList.toggle("rlv-collapsed");
      toggle.textContent = collapsed ? `show all (${text.length.toLocaleString("en-US")} characters)` : "show less";
    });
    head.append(toggle);
  }
  return box;
}

/** Draws `detail` into `host` (emptied first); nothing for an empty pane. */
export function renderDetail(host: HTMLElement, detail: Detail | null | undefined): void {
  const doc = host.ownerDocument;
  host.replaceChildren();
  const d = detail ?? {};
  if (d.note) host.append(el(doc, "div", "rlv-detail-note", d.note));
  if (!d.facts && !d.blocks) return;
  const facts = el(doc, "div", "rlv-detail-facts");
  (d.facts ?? []).forEach(([name, value], i) => {
    if (i) facts.append(" · ");
    facts.append(`${name} `, el(doc, "b", undefined, String(value)));
  });
  const turns = el(doc, "div", "rlv-turns");
  for (const b of d.blocks ?? []) turns.append(blockElement(doc, b));
  host.append(facts, turns);
}
