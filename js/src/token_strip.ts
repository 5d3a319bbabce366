/**
 * TokenStrip front end: one coloured strip of tokens per sample, a legend, a shared tooltip,
 * keyboard navigation, and (for a single sample) the token × metric table.
 *
 * Data is pulled with rpc "strips" whenever `generation` (or `sample_ids`) changes; colour
 * limits for scope "step"/"run" come from rpc "domain". Model text is only ever inserted with
 * textContent / text nodes, so markup in responses shows as characters and runs nothing.
 */
import { createRpc, float32, type AnyModel } from "./lib/rpc";
import type { DomainReply, StripSample, StripsReply } from "./lib/protocol";
import { decodeTokens, groupUnits, needsPieces, textPieces, unitLabel, visibleText, type DisplayToken, type TokenUnit } from "./lib/token_text";
import {
  css,
  cssGradient,
  formatValue,
  metricKind,
  MISSING_ALPHA,
  MISSING_COLOR,
  blend,
  scaleFor,
  sameScale,
  scaleFromDomain,
  layoutTicks,
  colorLut,
  lutIndex,
  clipOf,
  type RGB,
  type Scale,
} from "./lib/color";
import { isDark, pageBackground, watchTheme } from "./lib/theme";


/** Tooltip metric order (the ones RL Logging Board shows first); others follow in reply order. */
const METRIC_ORDER = ["token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value", "advantage"];

/** Tokens built at once; further strips are built when they scroll near (IntersectionObserver). */
const EAGER_TOKENS = 20000;
/** Table columns built at a time. */
const TABLE_CHUNK = 300;
/** Legend ramp width and tick label font size (px): the tick layout is computed from them. */
const RAMP_WIDTH = 180;
const TICK_FONT_PX = 11;

const SCOPES: [string, string][] = [
  ["sample", "this sample"],
  ["step", "this step"],
  ["run", "whole run"],
];

const STYLE = `
.rlv-token-strip{--rlv-fg:var(--jp-ui-font-color1,#222);--rlv-fg2:var(--jp-ui-font-color2,#666);--rlv-bg:var(--jp-layout-color1,#fff);--rlv-border:var(--jp-border-color2,#ddd);--rlv-accent:var(--jp-brand-color1,#1976d2);position:relative;font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--rlv-fg)}
.rlv-token-strip.rlv-dark{--rlv-fg:var(--jp-ui-font-color1,#e0e0e0);--rlv-fg2:var(--jp-ui-font-color2,#aaa);--rlv-bg:var(--jp-layout-color1,#1e1e1e);--rlv-border:var(--jp-border-color2,#444);--rlv-accent:var(--jp-brand-color1,#64b5f6)}
.rlv-header{display:flex;flex-wrap:wrap;align-items:center;gap:6px 14px;margin-bottom:6px}
.rlv-header label{display:inline-flex;align-items:center;gap:4px;color:var(--rlv-fg2)}
.rlv-header select{font:inherit;color:var(--rlv-fg);background:var(--rlv-bg);border:1px solid var(--rlv-border);border-radius:2px}
.rlv-legend{display:inline-flex;align-items:flex-start;gap:10px;color:var(--rlv-fg2);font-size:11px}
.rlv-ramp-box{display:inline-block;width:${RAMP_WIDTH}px}
.rlv-ramp{height:10px;border:1px solid var(--rlv-border)}
.rlv-ticks{position:relative;height:14px;font-size:${TICK_FONT_PX}px;line-height:14px}
.rlv-ticks span{position:absolute;top:0;white-space:nowrap}
.rlv-swatch{display:inline-block;width:12px;height:10px;border:1px solid var(--rlv-border);vertical-align:middle;margin-right:3px}
.rlv-error{color:var(--jp-error-color1,#c62828);margin:4px 0;white-space:pre-wrap}
.rlv-error[hidden],.rlv-tooltip[hidden]{display:none}
.rlv-strips{overflow:auto;outline:none;padding:2px}
.rlv-strips:focus-visible{box-shadow:0 0 0 2px var(--rlv-accent)}
.rlv-strip{margin:0 0 10px}
.rlv-strip-label{color:var(--rlv-fg2);font-size:11px;margin-bottom:2px}
.rlv-strip-more{color:var(--rlv-fg2);font-size:11px;font-style:italic;margin-top:2px}
.rlv-strip-body{font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);line-height:1.75;overflow-wrap:anywhere;white-space:pre-wrap}
.rlv-tok{border-radius:2px;cursor:pointer}
.rlv-ws{opacity:.55}
.rlv-badge{box-shadow:inset 0 0 0 1px currentColor;padding:0 3px;margin:0 1px;font-size:.85em;border-radius:3px}
.rlv-pad{box-shadow:none;border:1px dashed currentColor}
.rlv-partial{text-decoration:underline dotted}
.rlv-cont:empty::after{content:"\\25CC";opacity:.5}
.rlv-invalid{font-style:italic}
.rlv-clip-hi,.rlv-clip-lo,.rlv-tok.rlv-active,.rlv-tok.rlv-pinned{position:relative}
.rlv-clip-hi::after,.rlv-clip-lo::after{content:"";position:absolute;right:0;border:3px solid transparent;pointer-events:none}
.rlv-clip-hi::after{top:0;border-top-color:currentColor;border-right-color:currentColor}
.rlv-clip-lo::after{bottom:0;border-bottom-color:currentColor;border-right-color:currentColor}
.rlv-active{outline:2px solid var(--rlv-accent);outline-offset:1px;z-index:1}
.rlv-pinned{outline:2px solid var(--rlv-fg);outline-offset:1px;z-index:1}
.rlv-empty{color:var(--rlv-fg2);font-style:italic}
.rlv-tooltip{position:absolute;z-index:20;max-width:380px;padding:6px 8px;background:var(--rlv-bg);color:var(--rlv-fg);border:1px solid var(--rlv-border);border-radius:3px;box-shadow:0 2px 8px rgba(0,0,0,.25);font-size:12px;pointer-events:none}
.rlv-tooltip.rlv-pinned{pointer-events:auto;outline:none}
.rlv-tooltip table{border-collapse:collapse;margin-top:4px}
.rlv-tooltip td{padding:0 6px 0 0;font-variant-numeric:tabular-nums}
.rlv-tooltip .rlv-current td{font-weight:bold}
.rlv-tooltip code{font-family:var(--jp-code-font-family,monospace);white-space:pre-wrap;word-break:break-all}
.rlv-tt-head{font-weight:bold}
.rlv-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.rlv-table-wrap{overflow-x:auto;margin-top:6px;border:1px solid var(--rlv-border)}
.rlv-token-table{border-collapse:collapse;font-size:11px;font-variant-numeric:tabular-nums}
.rlv-token-table th,.rlv-token-table td{padding:1px 4px;border:1px solid var(--rlv-border);white-space:pre;text-align:right}
.rlv-token-table th{font-family:var(--jp-code-font-family,monospace);font-weight:normal;background:var(--rlv-bg)}
.rlv-table-more{font:inherit;font-size:11px;margin-top:4px;color:var(--rlv-fg);background:var(--rlv-bg);border:1px solid var(--rlv-border);border-radius:2px;cursor:pointer}
.rlv-table-more[hidden]{display:none}
.rlv-token-table th.rlv-row-head{position:sticky;left:0;z-index:1;text-align:left;font-family:inherit;font-weight:bold}
`;

/** Everything the view keeps about one displayed sample. */
interface SampleView {
  sample: StripSample;
  tokens: DisplayToken[];
  units: TokenUnit[];
  /** token position → unit index */
  unitAt: Int32Array;
  values: Record<string, Float32Array>;
  /** One chip per unit, once built (strips far below the fold are built when scrolled near). */
  chips: HTMLElement[];
  baseClass: string[];
  body: HTMLElement;
  built: boolean;
}

/** The value a unit shows for a metric: the token's, or for a pad run the finite value of largest |x|. */
function unitValue(sv: SampleView, u: TokenUnit, metric: string): number {
  const arr = sv.values[metric];
  if (!arr) return NaN;
  if (u.count === 1) return arr[u.start];
  let best = NaN;
  for (let k = u.start; k < u.start + u.count; k++) {
    const v = arr[k];
    if (Number.isFinite(v) && !(Math.abs(v) <= Math.abs(best))) best = v;
  }
  return best;
}

function el<K extends keyof HTMLElementTagNameMap>(doc: Document, tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = doc.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Renders one TokenStrip view into `el`; returns the cleanup function. */
function render({ model, el: host }: { model: AnyModel; el: HTMLElement }): () => void {
  const doc = host.ownerDocument;
  const rpc = createRpc(model);
  const handlers: [string, (...a: any[]) => void][] = [];
  const on = (ev: string, cb: (...a: any[]) => void) => {
    model.on(ev, cb);
    handlers.push([ev, cb]);
  };

  // ------------------------------------------------------------ skeleton
  const root = el(doc, "div", "rlv-token-strip");
  const style = el(doc, "style", undefined, STYLE);
  const header = el(doc, "div", "rlv-header");
  const metricLabel = el(doc, "label", undefined, "colour by ");
  const metricSelect = el(doc, "select", "rlv-metric-select");
  metricSelect.setAttribute("aria-label", "colour tokens by metric");
  metricLabel.appendChild(metricSelect);
  const scopeLabel = el(doc, "label", undefined, "scale ");
  const scopeSelect = el(doc, "select", "rlv-scope-select");
  scopeSelect.setAttribute("aria-label", "colour scale scope");
  for (const [v, t] of SCOPES) {
    const o = el(doc, "option", undefined, t);
    o.value = v;
    scopeSelect.appendChild(o);
  }
  scopeLabel.appendChild(scopeSelect);
  const legend = el(doc, "div", "rlv-legend");
  header.append(metricLabel, scopeLabel, legend);
  const errorLine = el(doc, "div", "rlv-error");
  errorLine.setAttribute("role", "alert");
  errorLine.hidden = true;
  const strips = el(doc, "div", "rlv-strips");
  strips.tabIndex = 0;
  strips.setAttribute("role", "application");
  strips.setAttribute("aria-label", "token strips: arrow keys move between tokens, Enter pins, Escape unpins");
  const tableWrap = el(doc, "div", "rlv-table-wrap");
  tableWrap.hidden = true;
  const tooltip = el(doc, "div", "rlv-tooltip");
  tooltip.hidden = true;
  tooltip.setAttribute("role", "tooltip");
  const live = el(doc, "div", "rlv-sr");
  live.setAttribute("aria-live", "polite");
  root.append(style, header, errorLine, strips, tableWrap, tooltip, live);
  host.appendChild(root);

  // ------------------------------------------------------------ state
  let reply: StripsReply | null = null;
  let views: SampleView[] = [];
  let localMemo: { metric: string; scales: Scale[] } | null = null;
  let scales: Scale[] = [];
  let localError = "";
  let fetchSeq = 0;
  let scaleSeq = 0;
  let scaleKey = "";
  let dark = false;
  let page: RGB = [255, 255, 255];
  let active: { s: number; u: number } | null = null;
  let pinned: { s: number; u: number } | null = null;
  let hover: { s: number; u: number } | null = null;
  const view = doc.defaultView as (Window & typeof globalThis) | null;
  const IO = view?.IntersectionObserver ?? (typeof IntersectionObserver !== "undefined" ? IntersectionObserver : undefined);
  let io: IntersectionObserver | null = null;

  const colorBy = (): string => model.get("color_by") || "";
  const scope = (): string => model.get("scale_scope") || "sample";

  function showErrors() {
    const msg = [model.get("error") || "", localError].filter(Boolean).join("\n");
    errorLine.textContent = msg;
    errorLine.hidden = !msg;
  }
  function fail(context: string, e: unknown) {
    localError = `${context}: ${errorText(e)}`;
    showErrors();
    if (typeof console !== "undefined") console.error("rlviz TokenStrip", context, e);
  }

  function readTheme() {
    dark = isDark(host);
    page = pageBackground(host);
    root.classList.toggle("rlv-dark", dark);
  }

  // ------------------------------------------------------------ header
  function syncMetricOptions() {
    const names: string[] = [...(model.get("metrics") || [])];
    if (!names.length && reply) names.push(...reply.metrics);
    const cur = colorBy();
    if (cur && !names.includes(cur)) names.unshift(cur);
    const frag = doc.createDocumentFragment();
    for (const n of names) {
      const o = el(doc, "option", undefined, n);
      o.value = n;
      frag.appendChild(o);
    }
    metricSelect.replaceChildren(frag);
    metricSelect.value = cur;
  }
  function syncScope() {
    scopeSelect.value = scope();
  }

  function renderLegend() {
    const metric = colorBy();
    let idx = active?.s ?? pinned?.s ?? 0;
    if (idx >= scales.length) idx = 0;
    const sc = scales[idx];
    legend.replaceChildren();
    if (!sc) return;
    const box = el(doc, "div", "rlv-ramp-box");
    const ramp = el(doc, "div", "rlv-ramp");
    ramp.style.background = cssGradient(sc, page, dark);
    ramp.setAttribute("role", "img");
    ramp.setAttribute("aria-label", `${metric} colour scale from ${formatValue(sc.lo)} to ${formatValue(sc.hi)}`);
    const ticks = el(doc, "div", "rlv-ticks");
    // Labels placed so they never overlap (the ones that would are left out; the limits stay).
    for (const t of layoutTicks(sc, RAMP_WIDTH, TICK_FONT_PX)) {
      const span = el(doc, "span", undefined, t.label);
      span.style.left = `${t.left.toFixed(1)}px`;
      ticks.appendChild(span);
    }
    box.append(ramp, ticks);
    const info = el(doc, "div", "rlv-legend-info");
    const where = scope() === "sample" && views.length > 1 ? ` · sample ${views[idx]?.sample.sample_id}` : "";
    const limits =
      sc.basis === "fixed" || sc.basis === "clamped"
        ? `${sc.basis} [${formatValue(sc.lo)}, ${formatValue(sc.hi)}]`
        : `limits ${sc.kind === "diverging" ? "±" + formatValue(sc.hi) : formatValue(sc.lo) + "…" + formatValue(sc.hi)} (${sc.basis}, ${scope()} scope${where})`;
    info.append(el(doc, "div", undefined, `${metric}: ${limits}`));
    info.append(el(doc, "div", undefined, "◥ above limit · ◢ below limit (clipped)"));
    const miss = el(doc, "div");
    const sw = el(doc, "span", "rlv-swatch");
    sw.style.background = css(blend(MISSING_COLOR, MISSING_ALPHA, page));
    miss.append(sw, doc.createTextNode("missing (NaN / masked)"));
    info.append(miss);
    legend.append(box, info);
  }

  // ------------------------------------------------------------ strips
  /** One chip: a shallow clone of `proto` (class, colour and data-s already set) with its position and text. */
  function buildChip(proto: HTMLElement, u: TokenUnit, next: TokenUnit | undefined): HTMLElement {
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
      if (p.kind === "text") chip.appendChild(doc.createTextNode(p.text));
      else if (p.kind === "ws") chip.appendChild(el(doc, "span", "rlv-ws", p.text));
      else chip.appendChild(doc.createElement("br"));
    }
    return chip;
  }

  function buildViews(r: StripsReply, buffers: DataView[]) {
    views = r.samples.map((sample) => {
      const tokens = decodeTokens(sample.tokens || []);
      const units = groupUnits(tokens);
      const unitAt = new Int32Array(tokens.length);
      units.forEach((u, k) => unitAt.fill(k, u.start, u.start + u.count));
      const values: Record<string, Float32Array> = {};
      for (const [m, bi] of Object.entries(sample.buffers || {})) {
        const b = buffers[bi];
        if (!b) throw new Error(`sample ${sample.sample_id}: buffer ${bi} for ${m} is missing`);
        let arr = float32(b);
        if (arr.length !== tokens.length) {
          // Tolerate a length mismatch (values beyond the tokens are ignored, missing ones are NaN).
          const fixed = new Float32Array(tokens.length).fill(NaN);
          fixed.set(arr.subarray(0, Math.min(arr.length, tokens.length)));
          arr = fixed;
        }
        values[m] = arr;
      }
      const baseClass = units.map((u) => {
        let c = "rlv-tok";
        if (u.kind !== "text") c += " rlv-badge";
        if (u.kind === "pad") c += " rlv-pad";
        if (u.token.partial) c += u.token.text ? " rlv-partial" : " rlv-partial rlv-cont";
        if (u.token.invalid) c += " rlv-invalid";
        return c;
      });
      return { sample, tokens, units, unitAt, values, chips: [], baseClass, built: false } as unknown as SampleView;
    });
    // Local scales first, so chips are coloured while still in the fragment (one style pass).
    localMemo = null;
    scales = localScales(colorBy());
    const frag = doc.createDocumentFragment();
    let budget = EAGER_TOKENS;
    const lazy: SampleView[] = [];
    views.forEach((sv, s) => {
      const strip = el(doc, "div", "rlv-strip");
      strip.setAttribute("data-s", String(s));
      strip.appendChild(el(doc, "div", "rlv-strip-label", sv.sample.label || `sample ${sv.sample.sample_id}`));
      sv.body = el(doc, "div", "rlv-strip-body");
      sv.body.setAttribute("data-s", String(s));
      strip.appendChild(sv.body);
      if (sv.sample.more) {
        const more = `… ${sv.sample.more.toLocaleString("en-US")} more tokens, not sent (strip.tokens has every one)`;
        strip.appendChild(el(doc, "div", "rlv-strip-more", more));
      }
      frag.appendChild(strip);
      if (!sv.units.length) sv.body.appendChild(el(doc, "span", "rlv-empty", "(no tokens logged for this sample)"));
      if (budget > 0 || !IO) {
        budget -= sv.units.length;
        buildStrip(s);
      } else {
        // Far below the fold: reserve roughly its height and build it when it scrolls near.
        sv.body.style.minHeight = `${Math.ceil(sv.units.length / 14) * 1.75}em`;
        lazy.push(sv);
      }
    });
    if (!views.length) frag.appendChild(el(doc, "div", "rlv-empty", "no samples selected"));
    strips.replaceChildren(frag);
    io?.disconnect();
    io = null;
    if (lazy.length && IO) {
      io = new IO(
        (entries) => {
          for (const e of entries) {
            if (!e.isIntersecting) continue;
            const s = Number((e.target as HTMLElement).getAttribute("data-s"));
            io?.unobserve(e.target);
            buildStrip(s);
          }
        },
        { root: strips.style.maxHeight ? strips : null, rootMargin: "800px" },
      );
      for (const sv of lazy) io.observe(sv.body);
    }
    active = null;
    hover = null;
    pinned = null;
    marked = [];
    hideTooltip();
  }

  /**
   * Builds the chips of strip `s` (once), coloured, in one fragment inserted at once; nothing is
   * read from the layout. Every chip is a shallow clone of a prototype per (class, colour step),
   * so its class and colour style are copied, not parsed again for each of thousands of chips.
   */
  function buildStrip(s: number) {
    const sv = views[s];
    if (!sv || sv.built) return;
    sv.built = true;
    const bf = doc.createDocumentFragment();
    const ds = String(s);
    const units = sv.units;
    const base = sv.baseClass;
    const sc = scales[s];
    const metric = colorBy();
    const arr = sv.values[metric];
    const lut = sc ? colorLut(sc.ramp, page, dark).style : null;
    const protos = new Map<string, HTMLElement[]>();
    const chips: HTMLElement[] = new Array(units.length);
    for (let k = 0; k < units.length; k++) {
      const u = units[k];
      let cls = base[k];
      let idx = 0;
      if (sc) {
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
        proto = doc.createElement("span");
        proto.className = cls;
        proto.setAttribute("data-s", ds);
        if (lut) proto.setAttribute("style", lut[idx]);
        byStep[idx] = proto;
      }
      const chip = buildChip(proto, u, units[k + 1]);
      chips[k] = chip;
      bf.appendChild(chip);
    }
    sv.chips = chips;
    sv.body.style.minHeight = "";
    sv.body.appendChild(bf);
  }

  function buildAndColor(s: number) {
    if (views[s] && !views[s].built) buildStrip(s);
  }

  /** Recolours every strip, or with `prev` only those whose scale changed. */
  function recolor(prev?: Scale[]) {
    views.forEach((_, s) => {
      if (!prev || !sameScale(prev[s], scales[s])) colorStrip(s);
    });
  }

  /**
   * Recolours the built chips of strip `s` on its scale: each value is quantized into the scale's
   * precomputed lookup table (background and contrast-chosen text colour, per ramp and theme),
   * so a chip costs one style write and, when its clip state changed, one class write.
   */
  function colorStrip(s: number) {
    const sv = views[s];
    const sc = scales[s];
    if (!sv || !sv.built || !sc) return;
    const metric = colorBy();
    const lut = colorLut(sc.ramp, page, dark).style;
    const arr = sv.values[metric];
    const units = sv.units;
    const chips = sv.chips;
    const base = sv.baseClass;
    const act = active && active.s === s ? active.u : -1;
    const pin = pinned && pinned.s === s ? pinned.u : -1;
    for (let k = 0; k < units.length; k++) {
      const u = units[k];
      const v = !arr ? NaN : u.count === 1 ? arr[u.start] : unitValue(sv, u, metric);
      const chip = chips[k];
      chip.setAttribute("style", lut[lutIndex(v, sc)]); // one attribute write: cheaper than per-property styles
      const clip = clipOf(v, sc);
      let cls = clip > 0 ? base[k] + " rlv-clip-hi" : clip < 0 ? base[k] + " rlv-clip-lo" : base[k];
      if (k === act) cls += " rlv-active";
      if (k === pin) cls += " rlv-pinned";
      if (chip.className !== cls) chip.className = cls;
    }
  }

  /** Per-sample scales of a metric for the current views (memoized: a fetch needs them twice). */
  function localScales(metric: string): Scale[] {
    if (localMemo?.metric !== metric) localMemo = { metric, scales: views.map((sv) => scaleFor(metric, sv.values[metric] ?? [])) };
    return localMemo.scales;
  }

  /** Recomputes the colour scales for the current metric and scope, then recolours. */
  async function updateScales(force = false) {
    const metric = colorBy();
    const sc = scope();
    const key = `${metric}|${sc}|${fetchSeq}`;
    if (!force && key === scaleKey) return;
    scaleKey = key;
    const seq = ++scaleSeq;
    const local = localScales(metric);
    const kind = metricKind(metric);
    const setScales = (next: Scale[]) => {
      const prev = scales;
      scales = next;
      recolor(prev); // only strips whose scale really changed
    };
    if (sc === "sample" || kind === "prob" || kind === "logprob" || !views.length) {
      setScales(local);
    } else {
      if (scales.length !== views.length || scales[0]?.metric !== metric) {
        // Paint the new metric at once; the shared domain replaces it when it arrives.
        setScales(local);
      }
      try {
        const steps = [...new Set(views.map((v) => v.sample.step))];
        const { result } = await rpc.call<DomainReply>("domain", { metric, scope: sc, steps });
        if (seq !== scaleSeq) return;
        if (!Number.isFinite(result?.lo) || !Number.isFinite(result?.hi)) throw new Error(`no ${sc} domain for ${metric}`);
        const shared = scaleFromDomain(metric, result.lo, result.hi);
        setScales(views.map(() => shared));
      } catch (e) {
        if (seq !== scaleSeq) return;
        fail(`colour scale (${sc})`, e);
        setScales(local); // stay usable on the per-sample scale
        scaleKey = "";
      }
    }
    renderLegend();
  }

  // ------------------------------------------------------------ table
  // The table is built in column chunks: thousands of columns cost far more layout than the strip.
  let table: { sv: SampleView; head: HTMLTableRowElement; rows: { tr: HTMLTableRowElement; m: string; sc: Scale }[]; shown: number } | null = null;
  const tableMore = el(doc, "button", "rlv-table-more");
  tableMore.type = "button";

  let tableSeq = 0;
  let disposed = false;

  /**
   * The table after new data: the strip goes first. The old table (other data) is removed at
   * once; the new one is built after the next frame, i.e. once the chips are painted (then a
   * task, so the build does not delay that paint). A 250 ms timer stands in for the frame in a
   * hidden tab, where animation frames do not run.
   */
  function scheduleTable() {
    if (!(views.length === 1 && model.get("show_table"))) return renderTable(); // nothing to build: clear now
    tableWrap.replaceChildren();
    tableWrap.hidden = true;
    tableMore.hidden = true;
    table = null;
    const seq = ++tableSeq;
    let started = false;
    const go = () => {
      if (started) return;
      started = true;
      setTimeout(() => {
        if (seq === tableSeq && !disposed) guard("table", renderTable)();
      }, 0);
    };
    if (view?.requestAnimationFrame) view.requestAnimationFrame(go);
    setTimeout(go, 250);
  }

  function renderTable() {
    tableSeq++; // a deferred build still pending is superseded
    const sv = views.length === 1 && model.get("show_table") ? views[0] : null;
    if (!tableMore.isConnected) tableWrap.after(tableMore);
    tableWrap.replaceChildren();
    tableWrap.hidden = !sv;
    tableMore.hidden = true;
    table = null;
    if (!sv) return;
    const t = el(doc, "table", "rlv-token-table");
    const thead = el(doc, "thead");
    const head = el(doc, "tr");
    head.appendChild(el(doc, "th", "rlv-row-head", "metric \\ token"));
    thead.appendChild(head);
    const tbody = el(doc, "tbody");
    const rows = orderedMetrics(sv).map((m) => {
      const tr = el(doc, "tr");
      tr.appendChild(el(doc, "th", "rlv-row-head", m));
      tbody.appendChild(tr);
      return { tr, m, sc: scaleFor(m, sv.values[m]) }; // each row on its own scale
    });
    t.append(thead, tbody);
    table = { sv, head, rows, shown: 0 };
    appendTableColumns();
    tableWrap.appendChild(t);
  }

  function appendTableColumns() {
    if (!table) return;
    const { sv, head, rows } = table;
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
      const lut = colorLut(sc.ramp, page, dark).style;
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
    tableMore.hidden = left <= 0;
    tableMore.textContent = `show ${Math.min(left, TABLE_CHUNK)} more tokens (${left} not shown)`;
  }

  tableMore.addEventListener("click", () => appendTableColumns());
  // Scrolling to the right edge of the table loads the next columns.
  tableWrap.addEventListener("scroll", () => {
    if (tableWrap.scrollLeft + tableWrap.clientWidth > tableWrap.scrollWidth - 300) appendTableColumns();
  });

  function orderedMetrics(sv: SampleView): string[] {
    const have = Object.keys(sv.values);
    const order = reply?.metrics ?? have;
    const known = METRIC_ORDER.filter((m) => have.includes(m));
    return [...known, ...order.filter((m) => have.includes(m) && !known.includes(m)), ...have.filter((m) => !known.includes(m) && !order.includes(m))];
  }

  // ------------------------------------------------------------ tooltip, focus, pin
  function chipOf(t: EventTarget | null): { s: number; u: number } | null {
    const chip = (t as Element | null)?.closest?.(".rlv-tok");
    if (!chip || !strips.contains(chip)) return null;
    const s = Number(chip.getAttribute("data-s"));
    const i = Number(chip.getAttribute("data-i"));
    const sv = views[s];
    if (!sv || !(i >= 0 && i < sv.tokens.length)) return null;
    return { s, u: sv.unitAt[i] };
  }

  function describe(sv: SampleView, u: TokenUnit): { head: string; raw: string; text: string; rows: [string, number, boolean][] } {
    const head =
      u.count > 1 ? `positions ${u.start}–${u.start + u.count - 1} (×${u.count})` : `position ${u.start}`;
    let text = u.kind === "text" ? visibleText(u.token.text) : u.count > 1 ? unitLabel(u) : u.token.raw;
    const ci = u.token.charInfo;
    if (ci) {
      const range = ci.bytes > 1 ? `bytes ${ci.firstByte + 1}–${ci.firstByte + ci.bytes}` : `byte ${ci.firstByte + 1}`;
      text = `${range} of ${ci.totalBytes} of “${ci.char}”`;
    }
    if (u.token.invalid) text += " (invalid UTF-8 bytes)";
    const metric = colorBy();
    const rows = orderedMetrics(sv).map((m) => [m, unitValue(sv, u, m), m === metric] as [string, number, boolean]);
    // Policy vs reference: both values are listed; add their difference when the log lacks it.
    for (const [a, b, name] of [
      ["logprob", "ref_logprob", "logprob − ref_logprob"],
      ["prob", "ref_prob", "prob − ref_prob"],
    ]) {
      if (sv.values[a] && sv.values[b] && !(a === "logprob" && sv.values.log_ratio)) {
        rows.push([name, unitValue(sv, u, a) - unitValue(sv, u, b), false]);
      }
    }
    return { head, raw: JSON.stringify(u.token.raw), text, rows };
  }

  function fillTooltip(at: { s: number; u: number }) {
    const sv = views[at.s];
    const u = sv?.units[at.u];
    if (!u) return hideTooltip();
    const d = describe(sv, u);
    const sc = scales[at.s];
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
    tooltip.replaceChildren(head, raw, shown, table);
    if (!d.rows.length) tooltip.appendChild(el(doc, "div", undefined, "no metrics for this token"));
    tooltip.hidden = false;
    positionTooltip(sv.chips[at.u]);
    live.textContent = `${d.head}: ${d.raw}. ${d.rows.map(([m, v]) => `${m} ${formatValue(v, 4)}`).join(", ")}`;
  }

  function positionTooltip(chip: HTMLElement | undefined) {
    if (!chip) return;
    const r = chip.getBoundingClientRect();
    const base = root.getBoundingClientRect();
    const width = tooltip.offsetWidth || 0;
    let left = r.left - base.left;
    if (base.width && left + width > base.width) left = Math.max(0, base.width - width);
    tooltip.style.left = `${left}px`;
    tooltip.style.top = `${r.bottom - base.top + 4}px`;
  }

  function hideTooltip() {
    tooltip.hidden = true;
    tooltip.classList.remove("rlv-pinned");
  }

  /** Shows the tooltip for what deserves it: pinned first, then keyboard focus, then hover. */
  function refreshTooltip() {
    const at = pinned ?? active ?? hover;
    if (at) fillTooltip(at);
    else hideTooltip();
    tooltip.classList.toggle("rlv-pinned", !!pinned);
  }

  // The chips currently marked, so moving a mark touches two chips rather than scanning thousands.
  let marked: HTMLElement[] = [];
  function markChips() {
    if (active) buildAndColor(active.s);
    if (pinned) buildAndColor(pinned.s);
    for (const c of marked) c.classList.remove("rlv-active", "rlv-pinned");
    marked = [];
    const a = active && views[active.s]?.chips[active.u];
    const p = pinned && views[pinned.s]?.chips[pinned.u];
    if (a) a.classList.add("rlv-active");
    if (p) p.classList.add("rlv-pinned");
    marked = [a, p].filter(Boolean) as HTMLElement[];
  }

  function setPinned(at: { s: number; u: number } | null) {
    pinned = at;
    const value = at ? { sample_id: views[at.s].sample.sample_id, position: views[at.s].units[at.u].start } : null;
    model.set("pinned", value);
    model.save_changes();
    markChips();
    refreshTooltip();
  }

  /** Applies the `pinned` trait (set by Python or echoed back) to the view; with `settled` (just after the shown
   * samples loaded: a pin may come with new sample_ids, whose fetch is still queued), a pin on a token they lack
   * is cleared in the trait too, not only in the view. */
  function applyPinnedTrait(settled = false) {
    const p = model.get("pinned");
    let at: { s: number; u: number } | null = null;
    if (p && typeof p === "object") {
      const s = views.findIndex((v) => v.sample.sample_id === p.sample_id);
      if (s >= 0 && p.position >= 0 && p.position < views[s].tokens.length) at = { s, u: views[s].unitAt[p.position] };
      if (!at && settled) {
        model.set("pinned", null);
        model.save_changes();
      }
    }
    if (at?.s === pinned?.s && at?.u === pinned?.u) return;
    pinned = at;
    markChips();
    refreshTooltip();
  }

  function moveActive(to: { s: number; u: number }) {
    active = to;
    markChips();
    views[to.s]?.chips[to.u]?.scrollIntoView?.({ block: "nearest", inline: "nearest" });
    if (pinned) setPinned(to); // a pinned tooltip follows the keyboard
    else refreshTooltip();
    if (scope() === "sample" && views.length > 1) renderLegend();
  }

  const onOver = (e: Event) => {
    const at = chipOf(e.target);
    if (!at) return;
    hover = at;
    if (!pinned) fillTooltip(at);
  };
  const onLeave = () => {
    hover = null;
    if (!pinned) refreshTooltip();
  };
  const onClick = (e: Event) => {
    const at = chipOf(e.target);
    if (!at) return;
    const unpin = pinned && pinned.s === at.s && pinned.u === at.u;
    active = unpin ? null : at; // unpinned by the mouse: the tooltip follows the mouse again, and leaves with it
    setPinned(unpin ? null : at);
  };
  const onKey = (e: KeyboardEvent) => {
    if ((e.target as Element | null)?.closest?.("select")) return; // the header's own keys
    if (e.key === "Escape") {
      if (pinned) setPinned(null);
      active = null;
      hover = null;
      markChips();
      refreshTooltip();
      return;
    }
    if (e.target !== strips && !strips.contains(e.target as Node)) return;
    if (!views.some((v) => v.units.length)) return;
    const cur = active ?? pinned;
    const first = views.findIndex((v) => v.units.length);
    let next: { s: number; u: number } | null = null;
    const nonEmpty = (s: number, dir: number) => {
      for (let k = s; k >= 0 && k < views.length; k += dir) if (views[k].units.length) return k;
      return -1;
    };
    switch (e.key) {
      case "ArrowRight":
        if (!cur) next = { s: first, u: 0 };
        else if (cur.u + 1 < views[cur.s].units.length) next = { s: cur.s, u: cur.u + 1 };
        else {
          const s = nonEmpty(cur.s + 1, 1);
          next = s >= 0 ? { s, u: 0 } : cur;
        }
        break;
      case "ArrowLeft":
        if (!cur) next = { s: first, u: 0 };
        else if (cur.u > 0) next = { s: cur.s, u: cur.u - 1 };
        else {
          const s = nonEmpty(cur.s - 1, -1);
          next = s >= 0 ? { s, u: views[s].units.length - 1 } : cur;
        }
        break;
      case "ArrowDown":
      case "ArrowUp": {
        const s = cur ? nonEmpty(cur.s + (e.key === "ArrowDown" ? 1 : -1), e.key === "ArrowDown" ? 1 : -1) : first;
        const ss = s >= 0 ? s : cur!.s;
        next = { s: ss, u: Math.min(cur?.u ?? 0, views[ss].units.length - 1) };
        break;
      }
      case "Home":
        next = { s: cur?.s ?? first, u: 0 };
        break;
      case "End": {
        const s = cur?.s ?? first;
        next = { s, u: views[s].units.length - 1 };
        break;
      }
      case "Enter":
      case " ":
        if (cur) {
          e.preventDefault();
          if (pinned && pinned.s === cur.s && pinned.u === cur.u) setPinned(null);
          else setPinned(cur);
        }
        return;
      default:
        return;
    }
    e.preventDefault();
    if (next) moveActive(next);
  };
  strips.addEventListener("mouseover", onOver);
  strips.addEventListener("mouseleave", onLeave);
  strips.addEventListener("click", onClick);
  root.addEventListener("keydown", onKey as EventListener); // Escape works anywhere in the widget

  // ------------------------------------------------------------ data
  async function fetchStrips() {
    const seq = ++fetchSeq;
    root.setAttribute("aria-busy", "true");
    try {
      const { result, buffers } = await rpc.call<StripsReply>("strips", {});
      if (seq !== fetchSeq) return; // a newer request is in flight
      const gen = Number(model.get("generation") ?? 0);
      if (typeof result?.generation === "number" && result.generation < gen) return; // stale answer
      if (!result || !Array.isArray(result.samples)) throw new Error("malformed reply (no samples)");
      reply = result;
      buildViews(result, buffers);
      localError = "";
      showErrors();
      syncMetricOptions();
      await updateScales(true);
      scheduleTable();
      if (seq === fetchSeq) applyPinnedTrait(true);
    } catch (e) {
      if (seq === fetchSeq) fail("loading tokens", e);
    } finally {
      if (seq === fetchSeq) root.removeAttribute("aria-busy");
    }
  }

  // Several trait changes in one message (e.g. sample_ids + generation) cause one fetch.
  let fetchQueued = false;
  function queueFetch() {
    if (fetchQueued) return;
    fetchQueued = true;
    Promise.resolve().then(() => {
      fetchQueued = false;
      void fetchStrips();
    });
  }

  const guard = (what: string, fn: () => unknown) => () => {
    try {
      const r = fn();
      if (r instanceof Promise) r.catch((e) => fail(what, e));
    } catch (e) {
      fail(what, e);
    }
  };

  on("change:generation", queueFetch);
  on("change:sample_ids", queueFetch);
  on("change:error", showErrors);
  on("change:metrics", guard("metrics", syncMetricOptions));
  on(
    "change:color_by",
    guard("colour by", async () => {
      syncMetricOptions();
      await updateScales();
      refreshTooltip(); // an open tooltip bolds the metric now colouring the chips
    }),
  );
  on(
    "change:scale_scope",
    guard("scale scope", () => {
      syncScope();
      return updateScales();
    }),
  );
  on("change:show_table", guard("table", renderTable));
  on("change:pinned", guard("pinned", () => applyPinnedTrait()));
  on("change:height", () => applyHeight());

  metricSelect.addEventListener("change", () => {
    model.set("color_by", metricSelect.value);
    model.save_changes();
    guard("colour by", updateScales)();
  });
  scopeSelect.addEventListener("change", () => {
    model.set("scale_scope", scopeSelect.value);
    model.save_changes();
    guard("scale scope", updateScales)();
  });

  function applyHeight() {
    const h = Number(model.get("height") || 0);
    strips.style.maxHeight = h > 0 ? `${h}px` : "";
  }

  const stopTheme = watchTheme(
    host,
    guard("theme", () => {
      readTheme();
      recolor();
      renderLegend();
      renderTable();
    }),
  );

  readTheme();
  applyHeight();
  syncMetricOptions();
  syncScope();
  showErrors();
  void fetchStrips();

  return () => {
    disposed = true;
    stopTheme();
    io?.disconnect();
    rpc.dispose();
    for (const [ev, cb] of handlers) model.off(ev, cb);
    root.remove();
  };
}

export default { render };
