/**
 * Colour scales for per-token metrics, and the contrast rule for chip text.
 *
 * Signed metrics use a diverging map symmetric around 0 (so −1 and +1 look equally strong),
 * limited at the 99th percentile of |x| so one outlier does not wash out the rest; KL is
 * sequential from light; probabilities are fixed to [0, 1]; logprobs clamped to [−10, 0].
 * All maps have a light middle/start and avoid red–green pairs.
 */

export type RGB = [number, number, number];
export type MetricKind = "signed" | "kl" | "prob" | "logprob" | "other";

/** A colour scale: values in [lo, hi] map onto `ramp` (listed from lo to hi); beyond are clipped. */
export interface Scale {
  metric: string;
  kind: "diverging" | "sequential";
  lo: number;
  hi: number;
  ramp: RGB[];
  /** How the limits were chosen, for the legend ("p99 of |x|", "fixed"). */
  basis: string;
}

export interface ValueColor {
  /** The scale colour (not yet blended over the page). */
  rgb: RGB;
  /** −1 below lo, +1 above hi, 0 inside. */
  clip: -1 | 0 | 1;
  missing: boolean;
}

const hexToRgb = (h: string): RGB => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];

/** ColorBrewer maps (light middle / light start; no red–green). Listed from low to high value. */
export const RAMPS: Record<string, RGB[]> = {
  // negative = red, positive = blue
  RdBu: ["#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de", "#4393c3", "#2166ac", "#053061"].map(hexToRgb),
  // negative = orange, positive = purple
  PuOr: ["#7f3b08", "#b35806", "#e08214", "#fdb863", "#fee0b6", "#f7f7f7", "#d8daeb", "#b2abd2", "#8073ac", "#542788", "#2d004b"].map(hexToRgb),
  Blues: ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"].map(hexToRgb),
  Purples: ["#fcfbfd", "#efedf5", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#54278f", "#3f007d"].map(hexToRgb),
};

// Reversed copies made once, so equal scales share one ramp object (cheap equality checks).
const BLUES_REV = [...RAMPS.Blues].reverse();
const PURPLES_REV = [...RAMPS.Purples].reverse();

/** Colour of a missing (NaN / masked) value: neutral grey, drawn translucent so it recedes. */
export const MISSING_COLOR: RGB = [150, 150, 150];
export const MISSING_ALPHA = 0.3;

/** Which family of scale a metric name calls for. */
export function metricKind(metric: string): MetricKind {
  const m = metric.toLowerCase();
  if (/(^|_)(ref_)?logprobs?$|^logp$/.test(m)) return "logprob";
  if (/(^|_)(ref_)?probs?$/.test(m)) return "prob";
  if (/(^|_)kl$|^kl_|entropy/.test(m)) return "kl";
  if (/reward|log_ratio|logratio|advantage|value|return|score|prob_delta/.test(m)) return "signed";
  return "other";
}

/** Nearest-rank percentile (p in 0..100) of the finite values; NaN when there are none. */
export function percentile(values: ArrayLike<number>, p: number): number {
  const buf = new Float64Array(values.length);
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Number.isFinite(v)) buf[n++] = v;
  }
  if (!n) return NaN;
  const xs = buf.subarray(0, n).sort(); // typed-array sort: numeric, no comparator calls
  const rank = Math.max(1, Math.ceil((p / 100) * n));
  return xs[Math.min(rank, n) - 1];
}

function absValues(values: ArrayLike<number>): Float64Array {
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = Math.abs(values[i]);
  return out;
}

const positiveOr1 = (x: number) => (Number.isFinite(x) && x > 0 ? x : 1);

/** The ramp a metric uses: PuOr for log-ratios, RdBu for other signed metrics, Purples for KL, Blues otherwise. */
function rampFor(metric: string, kind: MetricKind): RGB[] {
  if (kind === "signed") return /ratio/.test(metric.toLowerCase()) ? RAMPS.PuOr : RAMPS.RdBu;
  if (kind === "kl") return RAMPS.Purples;
  // prob and logprob: low probability (the surprising token) is dark, certain is light
  if (kind === "prob" || kind === "logprob") return BLUES_REV;
  return RAMPS.Purples;
}

/** A diverging scale symmetric around 0 with limit `lim`. */
function diverging(metric: string, lim: number, basis: string, ramp?: RGB[]): Scale {
  const l = positiveOr1(lim);
  return { metric, kind: "diverging", lo: -l, hi: l, ramp: ramp ?? rampFor(metric, "signed"), basis };
}

/**
 * The colour scale for a metric from its values (used for scope "sample" and per-row table
 * scales): signed → symmetric, limit p99 of |x|; kl → [0, p99]; prob → [0, 1]; logprob → [−10, 0].
 */
export function scaleFor(metric: string, values: ArrayLike<number>): Scale {
  const kind = metricKind(metric);
  if (kind === "prob") return { metric, kind: "sequential", lo: 0, hi: 1, ramp: rampFor(metric, kind), basis: "fixed" };
  if (kind === "logprob") return { metric, kind: "sequential", lo: -10, hi: 0, ramp: rampFor(metric, kind), basis: "clamped" };
  if (kind === "signed") return diverging(metric, percentile(absValues(values), 99), "p99 of |x|");
  if (kind === "kl") {
    return { metric, kind: "sequential", lo: 0, hi: positiveOr1(percentile(values, 99)), ramp: rampFor(metric, kind), basis: "p99" };
  }
  // Unknown metric: diverging when it takes both signs, else sequential from 0.
  let neg = false;
  let pos = false;
  for (let i = 0; i < values.length; i++) {
    if (values[i] < 0) neg = true;
    else if (values[i] > 0) pos = true;
  }
  if (neg && pos) return diverging(metric, percentile(absValues(values), 99), "p99 of |x|", RAMPS.RdBu);
  if (neg) {
    const lim = positiveOr1(percentile(absValues(values), 99));
    return { metric, kind: "sequential", lo: -lim, hi: 0, ramp: PURPLES_REV, basis: "p99" };
  }
  return { metric, kind: "sequential", lo: 0, hi: positiveOr1(percentile(values, 99)), ramp: RAMPS.Purples, basis: "p99" };
}

/**
 * The colour scale for a metric from limits computed elsewhere (rpc "domain" for scope
 * "step"/"run"). Signed metrics stay symmetric (limit = max(|lo|, |hi|)); fixed ranges stay fixed.
 */
export function scaleFromDomain(metric: string, lo: number, hi: number): Scale {
  const kind = metricKind(metric);
  if (kind === "prob" || kind === "logprob") return scaleFor(metric, []);
  if (kind === "signed" || (kind === "other" && lo < 0 && hi > 0)) {
    return diverging(metric, Math.max(Math.abs(lo), Math.abs(hi)), "domain", kind === "signed" ? undefined : RAMPS.RdBu);
  }
  if (kind === "kl") return { metric, kind: "sequential", lo: 0, hi: positiveOr1(hi), ramp: rampFor(metric, kind), basis: "domain" };
  if (!(hi > lo)) return scaleFor(metric, [lo, hi]);
  // an unknown metric below zero darkens towards its most negative value, as scaleFor colours it per sample
  const ramp = kind === "other" && hi <= 0 ? PURPLES_REV : rampFor(metric, kind);
  return { metric, kind: "sequential", lo, hi, ramp, basis: "domain" };
}

/** True when two scales colour every value identically (same metric, limits and ramp). */
export function sameScale(a: Scale | undefined, b: Scale | undefined): boolean {
  return !!a && !!b && a.metric === b.metric && a.lo === b.lo && a.hi === b.hi && a.ramp === b.ramp && a.kind === b.kind;
}

/** Linear interpolation along a ramp at t in [0, 1]. */
export function rampColor(ramp: RGB[], t: number): RGB {
  const x = Math.min(1, Math.max(0, t)) * (ramp.length - 1);
  const i = Math.min(ramp.length - 2, Math.floor(x));
  const f = x - i;
  const a = ramp[i];
  const b = ramp[i + 1];
  return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}

/** Colour of one value on a scale, with clip direction; NaN → the missing colour. */
export function valueColor(v: number, scale: Scale): ValueColor {
  if (Number.isNaN(v)) return { rgb: MISSING_COLOR, clip: 0, missing: true };
  const clip: -1 | 0 | 1 = v < scale.lo ? -1 : v > scale.hi ? 1 : 0;
  const t = scale.hi > scale.lo ? (v - scale.lo) / (scale.hi - scale.lo) : 0.5;
  return { rgb: rampColor(scale.ramp, t), clip, missing: false };
}

/** WCAG 2 relative luminance of an sRGB colour (0 = black, 1 = white). */
export function relativeLuminance([r, g, b]: RGB): number {
  const lin = (c: number) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/** WCAG contrast ratio between two opaque colours (1..21). */
export function contrastRatio(a: RGB, b: RGB): number {
  const la = relativeLuminance(a);
  const lb = relativeLuminance(b);
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** `fg` at opacity `alpha` composited over the opaque `bg`. */
export function blend(fg: RGB, alpha: number, bg: RGB): RGB {
  return [0, 1, 2].map((k) => Math.round(fg[k] * alpha + bg[k] * (1 - alpha))) as RGB;
}

export const BLACK: RGB = [0, 0, 0];
export const WHITE: RGB = [255, 255, 255];

/** Black or white, whichever contrasts more with the opaque background (always ≥ 4.58:1). */
export function textColorFor(bg: RGB): RGB {
  return contrastRatio(bg, BLACK) >= contrastRatio(bg, WHITE) ? BLACK : WHITE;
}

/** Opacity of scale colours on chips: opaque on a light page, slightly see-through on a dark one. */
export function chipAlpha(dark: boolean): number {
  return dark ? 0.8 : 1;
}

/**
 * The final chip colours: the value colour blended over the real page background, and the
 * text colour chosen against that blended colour.
 */
export function chipColors(c: ValueColor, page: RGB, dark: boolean): { bg: RGB; fg: RGB } {
  const bg = blend(c.rgb, c.missing ? MISSING_ALPHA : chipAlpha(dark), page);
  return { bg, fg: textColorFor(bg) };
}

/** `rgb(r,g,b)` CSS text. */
export function css([r, g, b]: RGB): string {
  return `rgb(${r},${g},${b})`;
}

/** Parses `rgb()/rgba()/#rgb/#rrggbb` into a colour and alpha; null when unparseable. */
export function parseCssColor(s: string | null | undefined): { rgb: RGB; alpha: number } | null {
  if (!s) return null;
  const t = s.trim().toLowerCase();
  let m = /^#([0-9a-f]{3})$/.exec(t);
  if (m) return { rgb: [0, 1, 2].map((k) => parseInt(m![1][k] + m![1][k], 16)) as RGB, alpha: 1 };
  m = /^#([0-9a-f]{6})([0-9a-f]{2})?$/.exec(t);
  if (m) return { rgb: hexToRgb("#" + m[1]), alpha: m[2] ? parseInt(m[2], 16) / 255 : 1 };
  m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:[\s,/]+([\d.]+%?))?\s*\)$/.exec(t);
  if (m) {
    let a = m[4] === undefined ? 1 : parseFloat(m[4]);
    if (m[4]?.endsWith("%")) a /= 100;
    return { rgb: [+m[1], +m[2], +m[3]].map((x) => Math.round(Math.min(255, x))) as RGB, alpha: a };
  }
  if (t === "transparent") return { rgb: [0, 0, 0], alpha: 0 };
  if (t === "white") return { rgb: WHITE, alpha: 1 };
  if (t === "black") return { rgb: BLACK, alpha: 1 };
  return null;
}

/** CSS linear-gradient of a scale's ramp (left = lo), blended over the page like the chips. */
export function cssGradient(scale: Scale, page: RGB, dark: boolean): string {
  const n = 21;
  const stops: string[] = [];
  for (let i = 0; i < n; i++) {
    const c = blend(rampColor(scale.ramp, i / (n - 1)), chipAlpha(dark), page);
    stops.push(`${css(c)} ${((i / (n - 1)) * 100).toFixed(1)}%`);
  }
  return `linear-gradient(to right, ${stops.join(", ")})`;
}

/** Legend tick values: −lim, 0, +lim for diverging (plus halves), lo/mid/hi for sequential. */
export function scaleTicks(scale: Scale): number[] {
  const { lo, hi } = scale;
  if (scale.kind === "diverging") return [lo, lo / 2, 0, hi / 2, hi];
  return [lo, (lo + hi) / 2, hi];
}

/** A number in 3–4 significant digits (exponent for very small/large), "–" for NaN. */
export function formatValue(v: number, digits = 3): string {
  if (Number.isNaN(v)) return "–";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "−∞";
  if (v === 0) return "0";
  const a = Math.abs(v);
  const s = a < 1e-3 || a >= 1e5 ? v.toExponential(digits - 1) : String(Number(v.toPrecision(digits)));
  return s.replace(/-/g, "−");
}

// ------------------------------------------------------------------ colour lookup tables

/** Quantization steps of a colour lookup table (per scale ramp, page and theme). */
export const LUT_STEPS = 256;
/** Index of the missing (NaN / masked) colour in a lookup table. */
export const LUT_MISSING = LUT_STEPS;

/**
 * Chip colours precomputed for one ramp over one page background: step k (0..LUT_STEPS−1) is
 * the ramp at t = k / (LUT_STEPS − 1), blended over the page, with its contrast-chosen text
 * colour; the last entry (LUT_MISSING) is the missing colour. `style` holds the ready CSS text.
 */
export interface ColorLut {
  bg: RGB[];
  fg: RGB[];
  /** `background-color:rgb(…);color:rgb(…)` per entry. */
  style: string[];
}

const lutCache = new WeakMap<RGB[], Map<string, ColorLut>>();

/** The (cached) lookup table of a ramp blended over `page` (light or dark theme). */
export function colorLut(ramp: RGB[], page: RGB, dark: boolean): ColorLut {
  let byPage = lutCache.get(ramp);
  if (!byPage) lutCache.set(ramp, (byPage = new Map()));
  const key = `${page.join(",")}|${dark ? 1 : 0}`;
  let lut = byPage.get(key);
  if (lut) return lut;
  const bg: RGB[] = [];
  const fg: RGB[] = [];
  const style: string[] = [];
  const add = (c: ValueColor) => {
    const col = chipColors(c, page, dark);
    bg.push(col.bg);
    fg.push(col.fg);
    style.push(`background-color:${css(col.bg)};color:${css(col.fg)}`);
  };
  for (let k = 0; k < LUT_STEPS; k++) add({ rgb: rampColor(ramp, k / (LUT_STEPS - 1)), clip: 0, missing: false });
  add({ rgb: MISSING_COLOR, clip: 0, missing: true });
  lut = { bg, fg, style };
  byPage.set(key, lut);
  return lut;
}

/** Lookup-table index of a value on a scale (LUT_MISSING for NaN); clipping is {@link clipOf}. */
export function lutIndex(v: number, scale: Scale): number {
  if (v !== v) return LUT_MISSING; // NaN
  let t = scale.hi > scale.lo ? (v - scale.lo) / (scale.hi - scale.lo) : 0.5;
  if (t < 0) t = 0;
  else if (t > 1) t = 1;
  return Math.round(t * (LUT_STEPS - 1));
}

/** −1 below the scale's lower limit, +1 above the upper, 0 inside (and for NaN). */
export function clipOf(v: number, scale: Scale): -1 | 0 | 1 {
  return v < scale.lo ? -1 : v > scale.hi ? 1 : 0;
}

// ------------------------------------------------------------------ legend tick layout

/** Approximate advance widths (em) of the characters tick labels are made of. */
function charEm(ch: string): number {
  if (ch >= "0" && ch <= "9") return 0.6;
  if (ch === "." || ch === "," || ch === ":") return 0.3;
  if (ch === "−" || ch === "-" || ch === "+") return 0.62;
  if (ch === "∞") return 0.75;
  if (ch === "–") return 0.55;
  return 0.62; // e, letters: a generous guess
}

/** Estimated rendered width of a label in px at `fontPx` (slightly generous: never under-estimates digits). */
export function labelWidth(text: string, fontPx: number): number {
  let em = 0;
  for (const ch of text) em += charEm(ch);
  return em * fontPx;
}

export interface TickLayout {
  value: number;
  label: string;
  /** Left edge of the label in px from the start of the ramp. */
  left: number;
  width: number;
  /** Position of the tick on the ramp in px. */
  at: number;
}

/**
 * Which of a scale's ticks to label on a ramp `width` px wide, and where, so that no two
 * labels overlap (at least `gap` px apart) and none leaves the ramp: the limits are anchored at
 * the ends (first label starts at 0, last ends at `width`), inner labels are centred on their
 * value (shifted inwards at the edges). The limits are kept first, then 0 / the middle, then the
 * rest; a label that would collide with one already kept is dropped (on a diverging scale with
 * its mirror image, so the legend stays symmetric).
 */
export function layoutTicks(scale: Scale, width: number, fontPx = 11, gap = 6, values = scaleTicks(scale)): TickLayout[] {
  const { lo, hi } = scale;
  const span = hi - lo;
  const cands = values.map((value, i) => {
    const label = formatValue(value);
    const w = labelWidth(label, fontPx);
    const at = span > 0 ? ((value - lo) / span) * width : i === 0 ? 0 : width;
    let left = at - w / 2;
    if (i === 0) left = 0;
    else if (i === values.length - 1) left = width - w;
    left = Math.max(0, Math.min(width - w, left));
    // priority: the limits, then 0 / the middle, then the others from the middle outwards
    const mid = (lo + hi) / 2;
    const prio = i === 0 || i === values.length - 1 ? 0 : value === 0 || value === mid ? 1 : 2 + Math.abs(value - mid) / (span || 1);
    return { value, label, left, width: w, at, prio, i };
  });
  const kept: typeof cands = [];
  for (const c of [...cands].sort((a, b) => a.prio - b.prio || a.i - b.i)) {
    if (kept.some((k) => c.left < k.left + k.width + gap && k.left < c.left + c.width + gap)) continue;
    // equal labels (e.g. a degenerate scale) are shown once
    if (kept.some((k) => k.label === c.label)) continue;
    kept.push(c);
  }
  // A diverging legend stays symmetric: an inner tick whose mirror image was dropped goes too.
  const shown =
    scale.kind === "diverging"
      ? kept.filter((c) => c.prio === 0 || !cands.some((m) => m.value === -c.value) || kept.some((m) => m.value === -c.value))
      : kept;
  return shown.sort((a, b) => a.i - b.i).map(({ value, label, left, width: w, at }) => ({ value, label, left, width: w, at }));
}
