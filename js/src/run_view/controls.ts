/**
 * The chart's controls: the band (× std) slider, the zero-shift checkbox, the KL / log-ratio
 * toggle. They show the view's `controls` trait and send what the user picks; the kernel checks
 * it and answers with the new `controls`.
 */
import { el } from "../lib/dom";

export interface ControlValues {
  band?: number;
  zero_shift?: boolean;
  kl_metric?: string;
  kl_shown?: boolean;
  tab?: number;
}
export type SendControl = (name: string, value: unknown) => void;

const SLIDER_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"]);

/** A range input keeps its keys: the page's own shortcuts (JupyterLab's, on the notebook) must not take them. */
export function keepSliderKeys(input: HTMLInputElement): void {
  input.addEventListener("keydown", (e) => {
    if (SLIDER_KEYS.has(e.key)) e.stopPropagation();
  });
}

const METRICS: [string, string][] = [
  ["kl_mean", "KL"],
  ["log_ratio_mean", "log-ratio"],
];

export class Controls {
  readonly root: HTMLDivElement;
  private readonly band: HTMLInputElement;
  private readonly bandValue: HTMLSpanElement;
  private readonly zero: HTMLInputElement;
  private readonly toggle: HTMLDivElement;
  private readonly metricButtons: HTMLButtonElement[] = [];

  constructor(doc: Document, send: SendControl) {
    this.root = el(doc, "div", "rlv-controls");
    const bandLabel = el(doc, "label", "rlv-band");
    this.band = el(doc, "input");
    Object.assign(this.band, { type: "range", min: "0", max: "3", step: "0.1" });
    keepSliderKeys(this.band);
    this.bandValue = el(doc, "span", "rlv-band-value");
    bandLabel.append(el(doc, "span", "rlv-control-name", "band ×std"), this.band, this.bandValue);
    this.band.addEventListener("input", () => (this.bandValue.textContent = Number(this.band.value).toFixed(1)));
    this.band.addEventListener("change", () => send("band", Number(this.band.value)));

    const zeroLabel = el(doc, "label", "rlv-zero-shift");
    this.zero = el(doc, "input");
    this.zero.type = "checkbox";
    zeroLabel.append(this.zero, el(doc, "span", undefined, "zero shift"));
    this.zero.addEventListener("change", () => send("zero_shift", this.zero.checked));

    this.toggle = el(doc, "div", "rlv-kl-toggle");
    this.toggle.setAttribute("role", "group");
    for (const [value, text] of METRICS) {
      const b = el(doc, "button", "rlv-toggle", text);
      b.type = "button";
      b.dataset.value = value;
      b.addEventListener("click", () => send("kl_metric", value));
      this.metricButtons.push(b);
      this.toggle.append(b);
    }
    this.root.append(bandLabel, zeroLabel, this.toggle);
  }

  show(c: ControlValues): void {
    const band = Number(c.band ?? 1);
    this.band.value = String(band);
    this.bandValue.textContent = band.toFixed(1);
    this.zero.checked = !!c.zero_shift;
    this.toggle.hidden = c.kl_shown === false;
    for (const b of this.metricButtons) b.setAttribute("aria-pressed", String(b.dataset.value === c.kl_metric));
  }
}
