/**
 * ChartWidget front end: a Vega-Lite spec built in Python (Altair) rendered with the bundled
 * vega-embed, its data pulled over the rpc, and its selection params (brushes) synced both ways.
 *
 * Unlike Altair's JupyterChart it embeds once and replaces data in place (a brush survives a data
 * update), can move brushes when Python sets `selections`, and loads nothing from the network:
 * vega, vega-lite and vega-embed are in this file and the vega loader refuses every URL.
 *
 * Traits: spec (Vega-Lite, named datasets, no `datasets`), selections ({param: value | null}),
 * generation (number: re-fetch the data when it changes), error (string shown when not empty),
 * height (px, 0 = natural size: the chart box scrolls when taller).
 * rpc "data" {} -> {generation, datasets: {name: {column: values[]}}}.
 */
import embed, { type Result } from "vega-embed";
import type * as vega from "vega";
import { createRpc, type AnyModel } from "../lib/rpc";
import {
  columnsToRows,
  debounce,
  mergeSelections,
  normalizeSelection,
  sameSelection,
  selectionParams,
  specWithSelections,
  variableParams,
  type Columns,
  type SelectionParam,
  type SelectionValue,
} from "../lib/vega_data";
import { watchTheme } from "../lib/theme";
import { el, errorText, ModelEvents } from "../lib/dom";
import { chartOptions, embedOptions } from "./embed_options";
import { chartLogger } from "./logger";
import { hasSignal, insertData, viewSelection } from "./vega_view";

export { chartOptions, offlineLoader, SELECTION_DEBOUNCE_MS } from "./embed_options";

/** The `data` rpc reply. */
export interface DataReply {
  generation: number;
  datasets: Record<string, Columns>;
}

const STYLE = `
.rlv-chart{position:relative;font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,inherit)}
.rlv-chart .rlv-error{color:var(--jp-error-color1,#c62828);margin:4px 0;white-space:pre-wrap}
.rlv-chart .rlv-error[hidden]{display:none}
.rlv-chart-view{overflow:auto;max-width:100%}
.rlv-chart-view.vega-embed details summary{background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#1b1e23);border-color:var(--jp-border-color2,#aaa)}
`;

/**
 * Errors by source, so that one source's success does not hide another's failure.
 * load: a URL the loader refused (lasts as long as the view); runtime: vega's dataflow errors.
 */
type ErrorSource = "embed" | "data" | "load" | "runtime";

/** One ChartWidget view. */
class ChartView {
  private readonly root: HTMLDivElement;
  private readonly errorLine: HTMLDivElement;
  private readonly viewEl: HTMLDivElement;
  private readonly rpc: ReturnType<typeof createRpc>;
  private readonly events: ModelEvents;
  private readonly logger: unknown;
  private readonly flush: ReturnType<typeof debounce>;
  private readonly stopTheme: () => void;
  private disposed = false;
  private result: Result | null = null;
  private view: vega.View | null = null;
  private embedToken = 0; // listeners of a replaced view must not talk any more
  private params: SelectionParam[] = [];
  private datasets: Map<string, Record<string, unknown>[]> | null = null; // last data reply, as rows
  private dataRequest = 0;
  private embedding = false;
  private readonly errors: Record<ErrorSource, string> = { embed: "", data: "", load: "", runtime: "" };
  /** What the model held when we last looked: tells which params Python (not we) changed. */
  private modelSelections: Record<string, SelectionValue>;
  /** Brush changes made in the view, not yet sent to Python. */
  private pending: Record<string, SelectionValue> = {};
  /** One task at a time: an embed, a data insert and a selection rebuild must not interleave. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly model: AnyModel,
    host: HTMLElement,
  ) {
    const doc = host.ownerDocument;
    this.root = el(doc, "div", "rlv-chart");
    this.errorLine = el(doc, "div", "rlv-error");
    this.errorLine.hidden = true;
    this.viewEl = el(doc, "div", "rlv-chart-view");
    this.root.append(el(doc, "style", undefined, STYLE), this.errorLine, this.viewEl);
    host.appendChild(this.root);

    this.rpc = createRpc(model);
    this.events = new ModelEvents(model);
    this.modelSelections = { ...(model.get("selections") ?? {}) };
    this.logger = chartLogger({
      error: (msg) => this.fail(msg),
      loadFailed: (msg) => this.fail(msg, "load"),
      embedding: () => this.embedding,
    });
    this.flush = debounce(() => this.sendSelections(), chartOptions.debounceMs);

    this.events.on("change:spec", () => this.enqueue(() => this.embedWith(this.currentSelections())));
    this.events.on("change:selections", () => this.onSelections());
    this.events.on("change:generation", () => void this.loadData());
    this.events.on("change:error", () => this.showErrors());
    this.events.on("change:height", () => this.applyHeight());
    this.stopTheme = watchTheme(this.root, () => this.enqueue(() => this.embedWith(this.currentSelections())));

    this.applyHeight();
    this.showErrors();
    // Read the selections when the embed runs, so a value Python set in between is not lost.
    this.enqueue(() => this.embedWith(this.currentSelections()));
    void this.loadData();
  }

  private showErrors(): void {
    const e = this.errors;
    const text = [this.model.get("error") || "", e.embed, e.data, e.load, e.runtime].filter(Boolean).join("\n");
    this.errorLine.textContent = text;
    this.errorLine.hidden = !text;
  }

  private fail(e: unknown, source: ErrorSource = "runtime"): void {
    if (this.disposed) return;
    console.error("ChartWidget:", e);
    this.errors[source] = errorText(e);
    this.showErrors();
  }

  private clear(source: ErrorSource): void {
    this.errors[source] = "";
    this.showErrors();
  }

  private applyHeight(): void {
    const h = Number(this.model.get("height")) || 0;
    this.viewEl.style.maxHeight = h > 0 ? `${h}px` : "";
  }

  private enqueue(task: () => Promise<void> | void, source: ErrorSource = "embed"): Promise<void> {
    this.chain = this.chain.then(() => (this.disposed ? undefined : task())).catch((e) => this.fail(e, source));
    return this.chain;
  }

  /** Sends the pending brush changes; values Python already holds (its own, echoed) are skipped. */
  private sendSelections(): void {
    if (this.disposed) return;
    const { value, changed } = mergeSelections(this.model.get("selections") ?? {}, this.pending);
    this.pending = {};
    if (!changed.length) return;
    this.modelSelections = { ...value }; // our own change: the change event must not re-embed
    this.model.set("selections", value);
    this.model.save_changes();
  }

  /**
   * (Re-)embeds the spec with the given selections as initial values and the cached data.
   * Variable params keep their current values, so a theme switch or a brush set from Python
   * does not reset sliders either.
   */
  private async embedWith(selections: Record<string, SelectionValue>): Promise<void> {
    const spec = this.model.get("spec");
    if (!spec || typeof spec !== "object" || Object.keys(spec).length === 0) return;
    const variables: Record<string, unknown> = {};
    for (const name of variableParams(spec)) {
      try {
        if (this.view) variables[name] = this.view.signal(name);
      } catch {
        /* new param: keep the spec's value */
      }
    }
    const prepared = specWithSelections(spec, selections, variables);
    // Altair may put embed options in usermeta; they could name a URL config or the online editor.
    if (prepared.usermeta) delete prepared.usermeta.embedOptions;
    const opts = embedOptions(this.root, this.logger);
    const token = ++this.embedToken;
    this.clear("embed");
    this.clear("load"); // the old view's errors go with it
    this.clear("runtime");
    const old = this.result;
    this.result = null;
    this.view = null;
    old?.finalize();
    this.embedding = true;
    let res: Result;
    try {
      res = await embed(this.viewEl, prepared, opts);
    } finally {
      this.embedding = false;
    }
    if (this.disposed || token !== this.embedToken) {
      res.finalize();
      return;
    }
    this.result = res;
    const view = (this.view = res.view);
    this.params = selectionParams(prepared);
    (this.root as any)._rlvView = view;
    try {
      if (this.datasets) await insertData(view, this.datasets, this.model.get("spec"));
    } catch (e) {
      this.fail(e, "data"); // the chart is up; only the data are wrong
    }
    for (const p of this.params) {
      if (!hasSignal(view, p.name)) continue; // a param Vega-Lite did not compile (e.g. unused in a repeat); nothing to sync
      view.addSignalListener(p.name, (_name: string, value: unknown) => {
        if (token !== this.embedToken || this.disposed) return;
        this.pending[p.name] = normalizeSelection(value);
        this.flush();
      });
    }
  }

  /** The selections to re-embed with: what the view shows now, else what the model holds. */
  private currentSelections(): Record<string, SelectionValue> {
    const fromModel = this.model.get("selections") ?? {};
    const out: Record<string, SelectionValue> = {};
    for (const p of selectionParams(this.model.get("spec"))) {
      out[p.name] = hasSignal(this.view, p.name) ? viewSelection(this.view, p.name) : normalizeSelection(fromModel[p.name]);
    }
    return out;
  }

  private async loadData(): Promise<void> {
    const req = ++this.dataRequest;
    try {
      const { result: reply } = await this.rpc.call<DataReply>("data", {});
      if (this.disposed || req !== this.dataRequest) return; // a newer request is on its way
      const gen = Number(this.model.get("generation")) || 0;
      if (typeof reply?.generation === "number" && reply.generation < gen) return; // stale: the change event asks again
      const converted = new Map<string, Record<string, unknown>[]>();
      for (const [name, cols] of Object.entries(reply?.datasets ?? {})) {
        try {
          converted.set(name, columnsToRows(cols));
        } catch (e) {
          throw new Error(`dataset "${name}": ${errorText(e)}`);
        }
      }
      await this.enqueue(async () => {
        this.datasets = converted;
        if (this.view) {
          this.clear("runtime");
          await insertData(this.view, converted, this.model.get("spec"));
        }
        this.clear("data");
      }, "data");
    } catch (e) {
      this.fail(e, "data");
    }
  }

  private onSelections(): void {
    const sel: Record<string, SelectionValue> = this.model.get("selections") ?? {};
    const changed = this.params.filter((p) => !sameSelection(sel[p.name], this.modelSelections[p.name]));
    this.modelSelections = { ...sel };
    if (!changed.length) return;
    for (const p of changed) delete this.pending[p.name]; // Python's word beats an unsent brush
    void this.enqueue(async () => {
      const now: Record<string, SelectionValue> = this.model.get("selections") ?? {};
      const move = changed.filter((p) => !sameSelection(now[p.name], viewSelection(this.view, p.name)));
      if (!move.length) return;
      // Vega-Lite cannot move an interval brush of a concat unit through top-level signals, so
      // rebuild with initial values: other params keep what the view shows.
      const target = this.currentSelections();
      for (const p of move) target[p.name] = normalizeSelection(now[p.name]);
      await this.embedWith(target);
    });
  }

  dispose(): void {
    this.flush.flush(); // a brush made just before closing still reaches Python
    this.disposed = true;
    this.embedToken++;
    this.stopTheme();
    this.rpc.dispose();
    this.events.dispose();
    this.result?.finalize();
    this.result = null;
    this.view = null;
    this.root.remove();
  }
}

export default {
  /** Renders one ChartWidget view into `el`; returns the cleanup function. */
  render({ model, el: host }: { model: AnyModel; el: HTMLElement }): () => void {
    const view = new ChartView(model, host);
    return () => view.dispose();
  },
};
