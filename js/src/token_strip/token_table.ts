/**
 * The token × metric table of a single sample, each metric row coloured on its own scale. It is
 * built in column chunks (thousands of columns cost far more layout than the strip) and after the
 * strip has painted.
 */
import { colorLut, formatValue, lutIndex, scaleFor, type Scale } from "../lib/color";
import { unitLabel, visibleText } from "../lib/token_text";
import { el } from "../lib/dom";
import { orderedMetrics, unitValue, type SampleView, type Theme } from "./samples";

/** Table columns built at a time. */
const TABLE_CHUNK = 300;

/** What the table shows: the sample (null: no table), the reply's metric order and the theme. */
export interface TableSource {
  sv: SampleView | null;
  order: string[] | undefined;
  theme: Theme;
}

interface Built {
  sv: SampleView;
  head: HTMLTableRowElement;
  rows: { tr: HTMLTableRowElement; m: string; sc: Scale }[];
  theme: Theme;
  shown: number;
}

export class TokenTable {
  readonly wrap: HTMLDivElement;
  private readonly more: HTMLButtonElement;
  private table: Built | null = null;
  private seq = 0;
  private disposed = false;

  /**
   * `source` is read when the table is (re)built; `guard` runs a build and shows what it throws.
   */
  constructor(
    private readonly doc: Document,
    private readonly source: () => TableSource,
    private readonly guard: (fn: () => void) => void,
  ) {
    this.wrap = el(doc, "div", "rlv-table-wrap");
    this.wrap.hidden = true;
    this.more = el(doc, "button", "rlv-table-more");
    this.more.type = "button";
    this.more.addEventListener("click", () => this.appendColumns());
    // Scrolling to the right edge of the table loads the next columns.
    this.wrap.addEventListener("scroll", () => {
      const w = this.wrap;
      if (w.scrollLeft + w.clientWidth > w.scrollWidth - 300) this.appendColumns();
    });
  }

  private clear(): void {
    this.wrap.replaceChildren();
    this.wrap.hidden = true;
    this.more.hidden = true;
    this.table = null;
  }

  /**
   * The table after new data: the strip goes first. The old table (other data) is removed at
   * once; the new one is built after the next frame, i.e. once the chips are painted (then a
   * task, so the build does not delay that paint). A 250 ms timer stands in for the frame in a
   * hidden tab, where animation frames do not run.
   */
  schedule(): void {
    if (!this.source().sv) return this.render(); // nothing to build: clear now
    this.clear();
    const seq = ++this.seq;
    let started = false;
    const go = () => {
      if (started) return;
      started = true;
      setTimeout(() => {
        if (seq === this.seq && !this.disposed) this.guard(() => this.render());
      }, 0);
    };
    const view = this.doc.defaultView;
    if (view?.requestAnimationFrame) view.requestAnimationFrame(go);
    setTimeout(go, 250);
  }

  /** Builds the table now (or removes it when there is no single sample to show). */
  render(): void {
    this.seq++; // a deferred build still pending is superseded
    const { sv, order, theme } = this.source();
    if (!this.more.isConnected) this.wrap.after(this.more);
    this.clear();
    this.wrap.hidden = !sv;
    if (!sv) return;
    const doc = this.doc;
    const t = el(doc, "table", "rlv-token-table");
    const thead = el(doc, "thead");
    const head = el(doc, "tr");
    head.appendChild(el(doc, "th", "rlv-row-head", "metric \\ token"));
    thead.appendChild(head);
    const tbody = el(doc, "tbody");
    const rows = orderedMetrics(sv, order).map((m) => {
      const tr = el(doc, "tr");
      tr.appendChild(el(doc, "th", "rlv-row-head", m));
      tbody.appendChild(tr);
      return { tr, m, sc: scaleFor(m, sv.values[m]) }; // each row on its own scale
    });
    t.append(thead, tbody);
    this.table = { sv, head, rows, theme, shown: 0 };
    this.appendColumns();
    this.wrap.appendChild(t);
  }

  private appendColumns(): void {
    const table = this.table;
    if (!table) return;
    const doc = this.doc;
    const { sv, head, rows, theme } = table;
    const end = Math.min(sv.units.length, table.shown + TABLE_CHUNK);
    const hf = doc.createDocumentFragment();
    for (let k = table.shown; k < end; k++) {
      const u = sv.units[k];
      const th = el(doc, "th", undefined, u.kind === "text" ? visibleText(u.token.text) : unitLabel(u));
      th.setAttribute("data-i", String(u.start));
      th.title = `position ${u.start}`;
      hf.appendChild(th);
    }
    head.appendChild(hf);
    for (const { tr, m, sc } of rows) {
      const lut = colorLut(sc.ramp, theme.page, theme.dark).style;
      const frag = doc.createDocumentFragment();
      for (let k = table.shown; k < end; k++) {
        const v = unitValue(sv, sv.units[k], m);
        const td = el(doc, "td", undefined, formatValue(v, 4));
        td.setAttribute("style", lut[lutIndex(v, sc)]);
        frag.appendChild(td);
      }
      tr.appendChild(frag);
    }
    table.shown = end;
    const left = sv.units.length - end;
    this.more.hidden = left <= 0;
    this.more.textContent = `show ${Math.min(left, TABLE_CHUNK)} more tokens (${left} not shown)`;
  }

  dispose(): void {
    this.disposed = true;
  }
}
