/** The legend: the colour ramp with ticks that never overlap, the limits, the clip marks and the missing swatch. */
import { blend, css, cssGradient, formatValue, layoutTicks, MISSING_ALPHA, MISSING_COLOR, type Scale } from "../lib/color";
import { el } from "../lib/dom";
import type { Theme } from "./samples";
import { RAMP_WIDTH, TICK_FONT_PX } from "./style";

/** What the legend shows: the scale of one strip, and which strip when each has its own. */
export interface LegendInput {
  scale: Scale | undefined;
  metric: string;
  scope: string;
  /** The sample whose scale is shown, when several samples each have their own (scope "sample"). */
  sampleId?: number;
  theme: Theme;
  /** Some shown token is outside the loss mask (drawn muted): say what muted means. */
  untrained?: boolean;
  /** Some shown token is masked by the importance-ratio rule (hatched). */
  masked?: boolean;
}

export class Legend {
  readonly el: HTMLDivElement;

  constructor(private readonly doc: Document) {
    this.el = el(doc, "div", "rlv-legend");
  }

  render({ scale: sc, metric, scope, sampleId, theme, untrained, masked }: LegendInput): void {
    const doc = this.doc;
    this.el.replaceChildren();
    if (!sc) return;
    const box = el(doc, "div", "rlv-ramp-box");
    const ramp = el(doc, "div", "rlv-ramp");
    ramp.style.background = cssGradient(sc, theme.page, theme.dark);
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
    const where = sampleId !== undefined ? ` · sample ${sampleId}` : "";
    const limits =
      sc.basis === "fixed" || sc.basis === "clamped"
        ? `${sc.basis} [${formatValue(sc.lo)}, ${formatValue(sc.hi)}]`
        : `limits ${sc.kind === "diverging" ? "±" + formatValue(sc.hi) : formatValue(sc.lo) + "…" + formatValue(sc.hi)} (${sc.basis}, ${scope} scope${where})`;
    info.append(el(doc, "div", undefined, `${metric}: ${limits}`));
    info.append(el(doc, "div", undefined, "◥ above limit · ◢ below limit (clipped)"));
    const miss = el(doc, "div");
    const sw = el(doc, "span", "rlv-swatch");
    sw.style.background = css(blend(MISSING_COLOR, MISSING_ALPHA, theme.page));
    miss.append(sw, doc.createTextNode("missing (NaN / masked)"));
    info.append(miss);
    if (untrained) info.append(this.entry("rlv-swatch rlv-tok rlv-untrained", "not trained (outside the loss mask: uncoloured)"));
    if (masked) info.append(this.entry("rlv-swatch rlv-tok rlv-masked", "masked (hatched: dropped by the ratio rule)"));
    this.el.append(box, info);
  }

  private entry(swatchClass: string, text: string): HTMLElement {
    const row = el(this.doc, "div");
    row.append(el(this.doc, "span", swatchClass), this.doc.createTextNode(text));
    return row;
  }
}
