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
import embed, { type EmbedOptions, type Result } from "vega-embed";
import * as vega from "vega";
import { createRpc, type AnyModel } from "./lib/rpc";
import {
  columnsToRows,
  datasetNames,
  debounce,
  defaultColors,
  mergeSelections,
  normalizeSelection,
  sameSelection,
  selectionParams,
  specWithSelections,
  themeConfig,
  variableParams,
  type Columns,
  type SelectionParam,
  type SelectionValue,
} from "./lib/vega_data";
import { isDark, watchTheme } from "./lib/theme";

/** JS -> Python selection updates wait this long for the brush to settle (drags fire per frame). */
export const SELECTION_DEBOUNCE_MS = 150;

/**
 * Knobs for tests and hosts. `renderer` "auto" picks canvas (fast with many points) where a 2-D
 * canvas context exists, else svg (happy-dom and other DOMs without canvas).
 */
export const chartOptions: { renderer: "auto" | "canvas" | "svg" | "none"; debounceMs: number } = {
  renderer: "auto",
  debounceMs: SELECTION_DEBOUNCE_MS,
};

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

function blocked(uri: unknown): Promise<never> {
  return Promise.reject(new Error(`ChartWidget loads nothing from the network (refused: ${String(uri)})`));
}

/**
 * A vega loader that refuses every URL (data, images, hrefs): the chart's data arrive through the
 * rpc, and a notebook must not reach out to the network behind the user's back.
 */
export const offlineLoader = {
  options: {},
  fileAccess: false,
  load: blocked,
  sanitize: blocked,
  http: blocked,
  file: blocked,
};

/** canvas when the DOM can really draw on one, else svg. */
function pickRenderer(): "canvas" | "svg" | "none" {
  if (chartOptions.renderer !== "auto") return chartOptions.renderer;
  try {
    const c = document.createElement("canvas") as HTMLCanvasElement;
    if (c.getContext && c.getContext("2d")) return "canvas";
  } catch {
    /* no canvas: fall through */
  }
  return "svg";
}

/** The page colours, from JupyterLab's CSS variables where set, else theme defaults. */
function pageColors(el: Element) {
  const dark = isDark(el);
  const d = defaultColors(dark);
  // Browsers inherit custom properties, so the first element answers; the walk up is for DOMs
  // that do not (happy-dom) and costs a few lookups per embed.
  const v = (name: string, fallback: string) => {
    for (let e: Element | null = el; e; e = e.parentElement) {
      const value = getComputedStyle(e).getPropertyValue(name).trim();
      if (value) return value;
    }
    return fallback;
  };
  return {
    dark,
    colors: { text: v("--jp-ui-font-color1", d.text), text2: v("--jp-ui-font-color2", d.text2), border: v("--jp-border-color2", d.border) },
  };
}

/** The view's current value of a selection signal (null when empty or when the view lacks it). */
function viewSelection(view: vega.View | null, name: string): SelectionValue {
  if (!view) return null;
  try {
    return normalizeSelection(view.signal(name));
  } catch {
    return null;
  }
}

function hasDataset(view: vega.View, name: string): boolean {
  try {
    view.data(name);
    return true;
  } catch {
    return false;
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export default {
  render({ model, el }: { model: AnyModel; el: HTMLElement }) {
    const root = document.createElement("div");
    root.className = "rlv-chart";
    const style = document.createElement("style");
    style.textContent = STYLE;
    const errorLine = document.createElement("div");
    errorLine.className = "rlv-error";
    errorLine.hidden = true;
    const viewEl = document.createElement("div");
    viewEl.className = "rlv-chart-view";
    root.append(style, errorLine, viewEl);
    el.appendChild(root);

    const rpc = createRpc(model);
    let disposed = false;
    let result: Result | null = null;
    let view: vega.View | null = null;
    let embedToken = 0; // listeners of a replaced view must not talk any more
    let params: SelectionParam[] = [];
    let datasets: Map<string, Record<string, unknown>[]> | null = null; // last data reply, as rows
    let dataRequest = 0;
    let embedding = false; // vega-embed's first run has no data yet: its "Infinite extent" warnings are noise
    // Errors by source, so that one source's success does not hide another's failure.
    // load: a URL the loader refused (lasts as long as the view); runtime: vega's dataflow errors.
    const errors = { embed: "", data: "", load: "", runtime: "" };
    // What the model held when we last looked: tells which params Python (not we) changed.
    let modelSelections: Record<string, SelectionValue> = { ...(model.get("selections") ?? {}) };
    // Brush changes made in the view, not yet sent to Python.
    let pending: Record<string, SelectionValue> = {};

    const showErrors = () => {
      const text = [model.get("error") || "", errors.embed, errors.data, errors.load, errors.runtime].filter(Boolean).join("\n");
      errorLine.textContent = text;
      errorLine.hidden = !text;
    };
    const fail = (e: unknown, source: keyof typeof errors = "runtime") => {
      if (disposed) return;
      console.error("ChartWidget:", e);
      errors[source] = message(e);
      showErrors();
    };
    const clear = (source: keyof typeof errors) => {
      errors[source] = "";
      showErrors();
    };
    const applyHeight = () => {
      const h = Number(model.get("height")) || 0;
      viewEl.style.maxHeight = h > 0 ? `${h}px` : "";
    };

    // One task at a time: an embed, a data insert and a selection rebuild must not interleave.
    let chain: Promise<void> = Promise.resolve();
    const enqueue = (task: () => Promise<void> | void, source: keyof typeof errors = "embed"): Promise<void> => {
      chain = chain.then(() => (disposed ? undefined : task())).catch((e) => fail(e, source));
      return chain;
    };

    /** Sends the pending brush changes; values Python already holds (its own, echoed) are skipped. */
    const flush = debounce(() => {
      if (disposed) return;
      const { value, changed } = mergeSelections(model.get("selections") ?? {}, pending);
      pending = {};
      if (!changed.length) return;
      modelSelections = { ...value }; // our own change: the change event must not re-embed
      model.set("selections", value);
      model.save_changes();
    }, chartOptions.debounceMs);

    /** A logger that also puts vega's errors (e.g. a bad expression at run time) in the error line. */
    const base = vega.logger(vega.Warn);
    const logger: any = {
      level(l?: number) {
        if (l === undefined) return base.level();
        base.level(l);
        return logger;
      },
      error(...a: unknown[]) {
        base.error(...a);
        fail(a.map(message).join(" "));
        return logger;
      },
      warn(...a: unknown[]) {
        if (embedding && typeof a[0] === "string" && a[0].startsWith("Infinite extent")) return logger;
        base.warn(...a);
        // Vega only warns when a data load fails; the user must see why the chart is empty.
        if (typeof a[0] === "string" && /^(Loading|Data ingestion) failed/.test(a[0])) fail(a.map(message).join(" "), "load");
        return logger;
      },
      info(...a: unknown[]) {
        base.info(...a);
        return logger;
      },
      debug(...a: unknown[]) {
        base.debug(...a);
        return logger;
      },
    };

    /** Puts every cached dataset into `v` (in place: same View, brushes kept in data space). */
    const insertData = async (v: vega.View) => {
      if (!datasets) return;
      for (const [name, rows] of datasets) {
        if (!hasDataset(v, name)) continue; // a dataset the spec does not use
        v.change(
          name,
          vega
            .changeset()
            .remove(() => true)
            .insert(rows),
        );
      }
      // Autosize ran when the view was empty (no axis labels yet) and by default runs only once.
      v.resize();
      await v.runAsync();
      const missing = datasetNames(model.get("spec")).filter((n) => !datasets!.has(n));
      if (missing.length) throw new Error(`the data reply has no dataset ${missing.map((n) => `"${n}"`).join(", ")}`);
    };

    /**
     * (Re-)embeds the spec with the given selections as initial values and the cached data.
     * Variable params keep their current values, so a theme switch or a brush set from Python
     * does not reset sliders either.
     */
    const embedWith = async (selections: Record<string, SelectionValue>) => {
      const spec = model.get("spec");
      if (!spec || typeof spec !== "object" || Object.keys(spec).length === 0) return;
      const variables: Record<string, unknown> = {};
      for (const name of variableParams(spec)) {
        try {
          if (view) variables[name] = view.signal(name);
        } catch {
          /* new param: keep the spec's value */
        }
      }
      const prepared = specWithSelections(spec, selections, variables);
      // Altair may put embed options in usermeta; they could name a URL config or the online editor.
      if (prepared.usermeta) delete prepared.usermeta.embedOptions;
      const { dark, colors } = pageColors(root);
      const opts: EmbedOptions = {
        mode: "vega-lite",
        renderer: pickRenderer() as any,
        // Export works offline (the image is made in the page); source/editor would open windows or URLs.
        actions: { export: { svg: true, png: true }, source: false, compiled: false, editor: false },
        loader: offlineLoader as any,
        config: themeConfig(colors) as any,
        tooltip: { theme: dark ? "dark" : "light" } as any,
        logger,
        downloadFileName: "chart",
      };
      const token = ++embedToken;
      clear("embed");
      clear("load"); // the old view's errors go with it
      clear("runtime");
      const old = result;
      result = null;
      view = null;
      old?.finalize();
      embedding = true;
      let res: Result;
      try {
        res = await embed(viewEl, prepared, opts);
      } finally {
        embedding = false;
      }
      if (disposed || token !== embedToken) {
        res.finalize();
        return;
      }
      result = res;
      view = res.view;
      params = selectionParams(prepared);
      (root as any)._rlvView = view;
      try {
        await insertData(view);
      } catch (e) {
        fail(e, "data"); // the chart is up; only the data are wrong
      }
      for (const p of params) {
        try {
          view.signal(p.name);
        } catch {
          continue; // a param Vega-Lite did not compile (e.g. unused in a repeat); nothing to sync
        }
        view.addSignalListener(p.name, (_name: string, value: unknown) => {
          if (token !== embedToken || disposed) return;
          pending[p.name] = normalizeSelection(value);
          flush();
        });
      }
    };

    /** The selections to re-embed with: what the view shows now, else what the model holds. */
    const currentSelections = (): Record<string, SelectionValue> => {
      const fromModel = model.get("selections") ?? {};
      const out: Record<string, SelectionValue> = {};
      for (const p of selectionParams(model.get("spec"))) {
        let inView = false;
        try {
          inView = !!view && (view.signal(p.name), true);
        } catch {
          /* a param the current view does not have (new spec) */
        }
        out[p.name] = inView ? viewSelection(view, p.name) : normalizeSelection(fromModel[p.name]);
      }
      return out;
    };

    const loadData = async () => {
      const req = ++dataRequest;
      try {
        const { result: reply } = await rpc.call<DataReply>("data", {});
        if (disposed || req !== dataRequest) return; // a newer request is on its way
        const gen = Number(model.get("generation")) || 0;
        if (typeof reply?.generation === "number" && reply.generation < gen) return; // stale: the change event asks again
        const converted = new Map<string, Record<string, unknown>[]>();
        for (const [name, cols] of Object.entries(reply?.datasets ?? {})) {
          try {
            converted.set(name, columnsToRows(cols));
          } catch (e) {
            throw new Error(`dataset "${name}": ${message(e)}`);
          }
        }
        await enqueue(async () => {
          datasets = converted;
          if (view) {
            clear("runtime");
            await insertData(view);
          }
          clear("data");
        }, "data");
      } catch (e) {
        fail(e, "data");
      }
    };

    const onSelections = () => {
      const sel: Record<string, SelectionValue> = model.get("selections") ?? {};
      const changed = params.filter((p) => !sameSelection(sel[p.name], modelSelections[p.name]));
      modelSelections = { ...sel };
      if (!changed.length) return;
      for (const p of changed) delete pending[p.name]; // Python's word beats an unsent brush
      enqueue(async () => {
        const now: Record<string, SelectionValue> = model.get("selections") ?? {};
        const move = changed.filter((p) => !sameSelection(now[p.name], viewSelection(view, p.name)));
        if (!move.length) return;
        // Vega-Lite cannot move an interval brush of a concat unit through top-level signals, so
        // rebuild with initial values: other params keep what the view shows.
        const target = currentSelections();
        for (const p of move) target[p.name] = normalizeSelection(now[p.name]);
        await embedWith(target);
      });
    };

    const onSpec = () => {
      enqueue(() => embedWith(currentSelections()));
    };
    const onGeneration = () => {
      void loadData();
    };
    const onError = () => showErrors();
    const onHeight = () => applyHeight();

    model.on("change:spec", onSpec);
    model.on("change:selections", onSelections);
    model.on("change:generation", onGeneration);
    model.on("change:error", onError);
    model.on("change:height", onHeight);
    const stopTheme = watchTheme(root, () => enqueue(() => embedWith(currentSelections())));

    applyHeight();
    showErrors();
    // Read the selections when the embed runs, so a value Python set in between is not lost.
    enqueue(() => embedWith(currentSelections()));
    void loadData();

    return () => {
      flush.flush(); // a brush made just before closing still reaches Python
      disposed = true;
      embedToken++;
      stopTheme();
      rpc.dispose();
      model.off("change:spec", onSpec);
      model.off("change:selections", onSelections);
      model.off("change:generation", onGeneration);
      model.off("change:error", onError);
      model.off("change:height", onHeight);
      result?.finalize();
      result = null;
      view = null;
      root.remove();
    };
  },
};
