/** The header: "colour by" metric chooser, scale-scope chooser, and the legend beside them. */
import { el } from "../lib/dom";
import { Legend } from "./legend";

const SCOPES: [string, string][] = [
  ["sample", "this sample"],
  ["step", "this step"],
  ["run", "whole run"],
];

export class Header {
  readonly el: HTMLDivElement;
  readonly legend: Legend;
  private readonly metricSelect: HTMLSelectElement;
  private readonly scopeSelect: HTMLSelectElement;

  /** `onMetric` / `onScope` get the user's choice (not called for values set through `show*`). */
  constructor(
    private readonly doc: Document,
    onMetric: (metric: string) => void,
    onScope: (scope: string) => void,
  ) {
    this.el = el(doc, "div", "rlv-header");
    const metricLabel = el(doc, "label", undefined, "colour by ");
    this.metricSelect = el(doc, "select", "rlv-metric-select");
    this.metricSelect.setAttribute("aria-label", "colour tokens by metric");
    metricLabel.appendChild(this.metricSelect);
    const scopeLabel = el(doc, "label", undefined, "scale ");
    this.scopeSelect = el(doc, "select", "rlv-scope-select");
    this.scopeSelect.setAttribute("aria-label", "colour scale scope");
    for (const [v, t] of SCOPES) {
      const o = el(doc, "option", undefined, t);
      o.value = v;
      this.scopeSelect.appendChild(o);
    }
    scopeLabel.appendChild(this.scopeSelect);
    this.legend = new Legend(doc);
    this.el.append(metricLabel, scopeLabel, this.legend.el);
    this.metricSelect.addEventListener("change", () => onMetric(this.metricSelect.value));
    this.scopeSelect.addEventListener("change", () => onScope(this.scopeSelect.value));
  }

  /** The metric choices (`current` first when it is not among them), with `current` chosen. */
  showMetrics(names: string[], current: string): void {
    const all = current && !names.includes(current) ? [current, ...names] : names;
    const frag = this.doc.createDocumentFragment();
    for (const n of all) {
      const o = el(this.doc, "option", undefined, n);
      o.value = n;
      frag.appendChild(o);
    }
    this.metricSelect.replaceChildren(frag);
    this.metricSelect.value = current;
  }

  showScope(scope: string): void {
    this.scopeSelect.value = scope;
  }
}
