/**
 * The strips: one coloured chip per display unit, in one scrollable box. Owns the chips, their
 * colouring and marks (active / pinned), and the IntersectionObserver that builds strips far
 * below the fold when they scroll near.
 */
import { needsPieces, textPieces, unitLabel, type TokenUnit } from "../lib/token_text";
import { clipOf, colorLut, lutIndex, sameScale, type Scale } from "../lib/color";
import { el } from "../lib/dom";
import { unitValue, type At, type SampleView, type Theme } from "./samples";

/** Tokens built at once; further strips are built when they scroll near (IntersectionObserver). */
const EAGER_TOKENS = 20000;

/** What the chips are coloured by: the metric, one scale per strip, and the theme. */
export interface Paint {
  metric: string;
  scales: Scale[];
  theme: Theme;
}

export class Strips {
  readonly el: HTMLDivElement;
  private views: SampleView[] = [];
  private paint: Paint = { metric: "", scales: [], theme: { dark: false, page: [255, 255, 255] } };
  private readonly IO: typeof IntersectionObserver | undefined;
  private io: IntersectionObserver | null = null;
  private active: At | null = null;
  private pinned: At | null = null;
  /** The chips currently marked, so moving a mark touches two chips rather than scanning thousands. */
  private marked: HTMLElement[] = [];

  constructor(private readonly doc: Document) {
    const view = doc.defaultView as (Window & typeof globalThis) | null;
    this.IO = view?.IntersectionObserver ?? (typeof IntersectionObserver !== "undefined" ? IntersectionObserver : undefined);
    this.el = el(doc, "div", "rlv-strips");
    this.el.tabIndex = 0;
    this.el.setAttribute("role", "application");
    this.el.setAttribute("aria-label", "token strips: arrow keys move between tokens, Enter pins, Escape unpins");
  }

  /** Replaces the strips with `views`, coloured by `paint` while still in the fragment (one style pass). */
  show(views: SampleView[], paint: Paint): void {
    const doc = this.doc;
    this.views = views;
    this.paint = paint;
    const frag = doc.createDocumentFragment();
    let budget = EAGER_TOKENS;
    const lazy: HTMLElement[] = [];
    views.forEach((sv, s) => {
      const strip = el(doc, "div", "rlv-strip");
      strip.setAttribute("data-s", String(s));
      strip.appendChild(el(doc, "div", "rlv-strip-label", sv.sample.label || `sample ${sv.sample.sample_id}`));
      const body = el(doc, "div", "rlv-strip-body");
      body.setAttribute("data-s", String(s));
      sv.body = body;
      strip.appendChild(body);
      if (sv.sample.more) {
        const more = `… ${sv.sample.more.toLocaleString("en-US")} more tokens, not sent (strip.tokens has every one)`;
        strip.appendChild(el(doc, "div", "rlv-strip-more", more));
      }
      frag.appendChild(strip);
      if (!sv.units.length) body.appendChild(el(doc, "span", "rlv-empty", "(no tokens logged for this sample)"));
      if (budget > 0 || !this.IO) {
        budget -= sv.units.length;
        this.build(s);
      } else {
        // Far below the fold: reserve roughly its height and build it when it scrolls near.
        body.style.minHeight = `${Math.ceil(sv.units.length / 14) * 1.75}em`;
        lazy.push(body);
      }
    });
    if (!views.length) frag.appendChild(el(doc, "div", "rlv-empty", "no samples selected"));
    this.el.replaceChildren(frag);
    this.io?.disconnect();
    this.io = null;
    if (lazy.length && this.IO) {
      const io = new this.IO(
        (entries) => {
          for (const e of entries) {
            if (!e.isIntersecting) continue;
            io.unobserve(e.target);
            this.build(Number((e.target as HTMLElement).getAttribute("data-s")));
          }
        },
        { root: this.el.style.maxHeight ? this.el : null, rootMargin: "800px" },
      );
      for (const body of lazy) io.observe(body);
      this.io = io;
    }
    this.active = null;
    this.pinned = null;
    this.marked = [];
  }

  /** One chip: a shallow clone of `proto` (class, colour and data-s already set) with its position and text. */
  private chip(proto: HTMLElement, u: TokenUnit, next: TokenUnit | undefined): HTMLElement {
    const chip = proto.cloneNode(false) as HTMLElement;
    chip.setAttribute("data-i", String(u.start));
    if (u.count > 1) chip.setAttribute("data-n", String(u.count));
    if (u.kind !== "text") {
      chip.textContent = unitLabel(u);
      return chip;
    }
    const text = u.token.text;
    if (!needsPieces(text) || (text === "" && u.token.partial)) {
      // the common case (no line end, tab, space run, hidden char): shown as it is; a continuation shows ◌
      chip.textContent = text;
      return chip;
    }
    const pieces = textPieces(text, next?.kind === "text" && next.token.text.startsWith("\n"));
    if (pieces.length === 1 && pieces[0].kind === "text") {
      chip.textContent = pieces[0].text;
      return chip;
    }
    for (const p of pieces) {
      if (p.kind === "text") chip.appendChild(this.doc.createTextNode(p.text));
      else if (p.kind === "ws") chip.appendChild(el(this.doc, "span", "rlv-ws", p.text));
      else chip.appendChild(this.doc.createElement("br"));
    }
    return chip;
  }

  /**
   * Builds the chips of strip `s` (once), coloured, in one fragment inserted at once; nothing is
   * read from the layout. Every chip is a shallow clone of a prototype per (class, colour step),
   * so its class and colour style are copied, not parsed again for each of thousands of chips.
   */
  private build(s: number): void {
    const sv = this.views[s];
    if (!sv || sv.built || !sv.body) return;
    sv.built = true;
    const { metric, scales, theme } = this.paint;
    const bf = this.doc.createDocumentFragment();
    const ds = String(s);
    const units = sv.units;
    const base = sv.baseClass;
    const sc = scales[s];
    const arr = sv.values[metric];
    const lut = sc ? colorLut(sc.ramp, theme.page, theme.dark).style : null;
    const protos = new Map<string, HTMLElement[]>();
    const chips: HTMLElement[] = new Array(units.length);
    const turnStarts = new Map<number, string>(sv.turns.map((t) => [sv.unitAt[t.start], t.role]));
    for (let k = 0; k < units.length; k++) {
      const u = units[k];
      let cls = base[k];
      let idx = 0;
      const painted = sc && !sv.untrained[k];
      if (painted) {
        const v = !arr ? NaN : u.count === 1 ? arr[u.start] : unitValue(sv, u, metric);
        idx = lutIndex(v, sc);
        const clip = clipOf(v, sc);
        if (clip > 0) cls += " rlv-clip-hi";
        else if (clip < 0) cls += " rlv-clip-lo";
      }
      let byStep = protos.get(cls);
      if (!byStep) protos.set(cls, (byStep = []));
      let proto = byStep[idx];
      if (!proto) {
        proto = this.doc.createElement("span");
        proto.className = cls;
        proto.setAttribute("data-s", ds);
        if (lut && painted) proto.setAttribute("style", lut[idx]);
        byStep[idx] = proto;
      }
      const chip = this.chip(proto, u, units[k + 1]);
      chips[k] = chip;
      const role = turnStarts.get(k);
      if (role !== undefined) bf.appendChild(this.turnMark(role));
      bf.appendChild(chip);
    }
    sv.chips = chips;
    sv.body.style.minHeight = "";
    sv.body.appendChild(bf);
  }

  /** The mark at a turn boundary: the turn's role, as text. */
  private turnMark(role: string): HTMLElement {
    const mark = el(this.doc, "span", "rlv-turn-mark", role);
    mark.setAttribute("aria-label", `turn: ${role}`);
    return mark;
  }

  /** Recolours every strip for `paint`, or with `prev` only those whose scale changed. */
  recolor(paint: Paint, prev?: Scale[]): void {
    this.paint = paint;
    this.views.forEach((_, s) => {
      if (!prev || !sameScale(prev[s], paint.scales[s])) this.color(s);
    });
  }

  /**
   * Recolours the built chips of strip `s` on its scale: each value is quantized into the scale's
   * precomputed lookup table (background and contrast-chosen text colour, per ramp and theme),
   * so a chip costs one style write and, when its clip state changed, one class write.
   */
  private color(s: number): void {
    const sv = this.views[s];
    const { metric, scales, theme } = this.paint;
    const sc = scales[s];
    if (!sv || !sv.built || !sc) return;
    const lut = colorLut(sc.ramp, theme.page, theme.dark).style;
    const arr = sv.values[metric];
    const units = sv.units;
    const chips = sv.chips;
    const base = sv.baseClass;
    const act = this.active && this.active.s === s ? this.active.u : -1;
    const pin = this.pinned && this.pinned.s === s ? this.pinned.u : -1;
    for (let k = 0; k < units.length; k++) {
      const u = units[k];
      const v = !arr ? NaN : u.count === 1 ? arr[u.start] : unitValue(sv, u, metric);
      const chip = chips[k];
      // outside the loss mask: drawn muted and uncoloured, whatever the metric
      if (sv.untrained[k]) chip.removeAttribute("style");
      else chip.setAttribute("style", lut[lutIndex(v, sc)]); // one attribute write: cheaper than per-property styles
      const clip = sv.untrained[k] ? 0 : clipOf(v, sc);
      let cls = clip > 0 ? base[k] + " rlv-clip-hi" : clip < 0 ? base[k] + " rlv-clip-lo" : base[k];
      if (k === act) cls += " rlv-active";
      if (k === pin) cls += " rlv-pinned";
      if (chip.className !== cls) chip.className = cls;
    }
  }

  /** Marks the active and the pinned chip (building their strips first if they were not yet). */
  mark(active: At | null, pinned: At | null): void {
    this.active = active;
    this.pinned = pinned;
    if (active) this.build(active.s);
    if (pinned) this.build(pinned.s);
    for (const c of this.marked) c.classList.remove("rlv-active", "rlv-pinned");
    const a = this.chipAt(active);
    const p = this.chipAt(pinned);
    if (a) a.classList.add("rlv-active");
    if (p) p.classList.add("rlv-pinned");
    this.marked = [a, p].filter(Boolean) as HTMLElement[];
  }

  /** The chip of a unit, if its strip is built. */
  chipAt(at: At | null): HTMLElement | undefined {
    return at ? this.views[at.s]?.chips[at.u] : undefined;
  }

  /** The unit of the chip an event happened on (null outside the chips). */
  unitOf(target: EventTarget | null): At | null {
    const chip = (target as Element | null)?.closest?.(".rlv-tok");
    if (!chip || !this.el.contains(chip)) return null;
    const s = Number(chip.getAttribute("data-s"));
    const i = Number(chip.getAttribute("data-i"));
    const sv = this.views[s];
    if (!sv || !(i >= 0 && i < sv.tokens.length)) return null;
    return { s, u: sv.unitAt[i] };
  }

  /** The strips' height limit in px (0 = none). */
  setMaxHeight(px: number): void {
    this.el.style.maxHeight = px > 0 ? `${px}px` : "";
  }

  dispose(): void {
    this.io?.disconnect();
    this.io = null;
  }
}
