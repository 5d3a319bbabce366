/**
 * The step row: a slider over the run's steps (the kernel's StepSlider: over the steps
 * themselves when evenly spaced, else over positions, with the step shown beside it), the
 * previous / next / clear buttons and the count line. The slider's state is a part of the view
 * ("slider", "slider_label"): what it sends goes through the kernel slider's own checks.
 */
import { el } from "../lib/dom";
import type { AnyModel } from "../lib/rpc";
import { keepSliderKeys } from "./controls";

export type Click = (name: "prev" | "next" | "clear") => void;

export class StepRow {
  readonly root: HTMLDivElement;
  readonly count: HTMLSpanElement;
  private readonly input: HTMLInputElement;
  private readonly readout: HTMLSpanElement;
  private readonly label: HTMLSpanElement;
  private slider: AnyModel | null = null;
  private labelModel: AnyModel | null = null;

  constructor(doc: Document, click: Click) {
    this.root = el(doc, "div", "rlv-step-row");
    const box = el(doc, "label", "rlv-step-slider");
    this.input = el(doc, "input", "rlv-step-input");
    this.input.type = "range";
    this.input.setAttribute("aria-label", "step");
    keepSliderKeys(this.input);
    this.readout = el(doc, "span", "rlv-step-readout");
    this.label = el(doc, "span", "rlv-step-label");
    box.append(el(doc, "span", "rlv-control-name", "step"), this.input, this.readout, this.label);
    // the readout follows the handle; the kernel hears the value when it is let go (or a key moves it)
    this.input.addEventListener("input", () => {
      if (this.slider?.get("readout")) this.readout.textContent = this.input.value;
    });
    this.input.addEventListener("change", () => {
      if (!this.slider) return;
      this.slider.set("value", Number(this.input.value));
      this.slider.save_changes();
    });
    this.root.append(box);
    for (const [name, text] of [["prev", "◀ prev"], ["next", "next ▶"], ["clear", "clear filters"]] as const) {
      const b = el(doc, "button", `rlv-button rlv-${name}`, text);
      b.type = "button";
      b.addEventListener("click", () => click(name));
      this.root.append(b);
    }
    this.count = el(doc, "span", "rlv-count");
    this.root.append(this.count);
  }

  /** The slider's models (parts "slider" and "slider_label"), as they arrive. */
  attach(name: string, model: AnyModel): void {
    if (name === "slider") this.slider = model;
    else this.labelModel = model;
    for (const key of ["min", "max", "step", "value", "readout", "disabled"]) model.on(`change:${key}`, () => this.show());
    this.show();
  }

  show(): void {
    const s = this.slider;
    if (s) {
      this.input.min = String(s.get("min"));
      this.input.max = String(s.get("max"));
      this.input.step = String(s.get("step") || 1);
      this.input.value = String(s.get("value"));
      this.input.disabled = !!s.get("disabled");
    }
    const readout = !!s?.get("readout");
    this.readout.hidden = !readout;
    this.readout.textContent = readout ? String(s?.get("value")) : "";
    this.label.hidden = readout;
    this.label.textContent = String(this.labelModel?.get("value") ?? "");
  }
}
