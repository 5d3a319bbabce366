// @vitest-environment happy-dom
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import widget, { chartOptions, offlineLoader } from "../src/charts";
import { FakeModel as BaseModel } from "./fake_model";

/** An Altair-like spec (as `chart.to_dict()` gives it, `datasets` removed): line + brush, bars filtered by it. */
function makeSpec(): any {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.20.1.json",
    config: { view: { continuousWidth: 300, continuousHeight: 300 } },
    hconcat: [
      {
        name: "view_1",
        data: { name: "steps" },
        mark: { type: "line" },
        encoding: {
          x: { field: "step", type: "quantitative" },
          y: { field: "reward_mean", type: "quantitative" },
        },
        width: 200,
        height: 100,
      },
      {
        name: "view_2",
        data: { name: "hist" },
        mark: { type: "bar" },
        encoding: {
          x: { field: "bucket", type: "ordinal" },
          y: { aggregate: "sum", field: "count", type: "quantitative" },
        },
        transform: [{ filter: { param: "steps_brush" } }],
        width: 200,
        height: 100,
      },
    ],
    params: [{ name: "steps_brush", select: { type: "interval", encodings: ["x"] }, views: ["view_1"] }],
  };
}

/** Column-oriented data like the Python side sends: `n` steps (0..n-1) and one hist row per step. */
function makeData(n: number, buckets = 5) {
  const step = Array.from({ length: n }, (_, i) => i);
  return {
    steps: { step, reward_mean: step.map((i) => Math.sin(i / 7)) },
    hist: { step, bucket: step.map((i) => i % buckets), count: step.map(() => 1) },
  };
}

/** The chart's model: the data rpc answered from `data`; `sets` records every local `set`. */
class FakeModel extends BaseModel {
  sets: { name: string; value: any }[] = [];
  data: Record<string, Record<string, any[]>> = makeData(100);
  constructor(state: Record<string, any> = {}) {
    super({ spec: makeSpec(), selections: {}, generation: 0, error: "", height: 0, ...state });
  }
  set(name: string, value: any) {
    this.sets.push({ name, value });
    super.set(name, value);
  }
  /** Python setting a trait: the value arrives, the change event fires (no `set` bookkeeping). */
  fromPython(name: string, value: any) {
    this.state[name] = value;
    this.emit(`change:${name}`, value);
  }
  answer(msg: any) {
    if (msg.method === "data") {
      const result = { generation: this.state.generation, datasets: this.data };
      this.emit("msg:custom", { type: "rpc", id: msg.id, ok: true, result });
    }
  }
  dataRequests() {
    return this.sent.filter((m) => m.method === "data").length;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a truthy result of `fn` can be (a `cond && value` check narrows to `value`). */
type Truthy<T> = Exclude<T, false | 0 | "" | null | undefined>;

async function waitFor<T>(fn: () => T, what: string, timeout = 4000): Promise<Truthy<T>> {
  const t0 = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const v = fn();
      if (v) return v as Truthy<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() - t0 > timeout) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    await sleep(5);
  }
}

/** A signal operator of a nested scope (the unit's brush signals live in its group, not at the top). */
function unitSignal(view: any, name: string): any {
  const search = (ctx: any): any => {
    if (ctx.signals && ctx.signals[name]) return ctx.signals[name];
    for (const sub of ctx.subcontext ?? []) {
      const s = search(sub);
      if (s) return s;
    }
    return null;
  };
  const op = search(view._runtime);
  if (!op) throw new Error(`no signal ${name}`);
  return op;
}

/** What a drag over the line chart does: set the unit's pixel extent and run the dataflow. */
async function brushPixels(view: any, px: [number, number]) {
  view.update(unitSignal(view, "steps_brush_x"), px);
  await view.runAsync();
}

function xScale(view: any) {
  // The line unit's x scale lives in its group's scope too.
  const search = (ctx: any): any => {
    if (ctx.scales && ctx.scales.view_1_x) return ctx.scales.view_1_x.value;
    for (const sub of ctx.subcontext ?? []) {
      const s = search(sub);
      if (s) return s;
    }
    return null;
  };
  return search(view._runtime);
}

/** Heights of the bars as data: bucket -> sum of counts, read from the bar mark's scenegraph items. */
function barTotals(view: any): Record<string, number> {
  const out: Record<string, number> = {};
  const visit = (node: any) => {
    if (!node) return;
    if (node.marktype && node.name === "view_2_marks") {
      for (const item of node.items) out[item.datum.bucket] = item.datum.sum_count;
      return;
    }
    for (const item of node.items ?? []) for (const child of item.items ?? [item]) if (child !== item) visit(child);
  };
  visit(view.scenegraph().root);
  return out;
}

function extent(view: any): [number, number] | null {
  const v = view.signal("steps_brush");
  return v && v.step ? v.step : null;
}

let host: HTMLElement;
let cleanups: (() => void)[] = [];

function renderWidget(model: FakeModel) {
  const cleanup = widget.render({ model: model as any, el: host });
  cleanups.push(cleanup);
  return cleanup;
}

async function mount(model: FakeModel) {
  const cleanup = renderWidget(model);
  const root = host.querySelector(".rlv-chart") as any;
  const view = await waitFor(() => root._rlvView && root._rlvView.data("steps").length > 0 && root._rlvView, "the chart with data");
  return { root, view, cleanup };
}

beforeEach(() => {
  host = document.createElement("div");
  document.body.appendChild(host);
  document.body.dataset.jpThemeLight = "true";
});

afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  host.remove();
  vi.restoreAllMocks();
});

describe("ChartWidget", () => {
  it("renders the spec with both datasets and draws marks", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    expect(root.querySelector(".rlv-chart-view")).not.toBeNull();
    expect(view.data("steps")).toHaveLength(100);
    expect(view.data("hist")).toHaveLength(100);
    // happy-dom has no 2-D canvas, so the widget fell back to svg: the marks are in the DOM.
    expect(root.querySelector(".rlv-chart-view svg")).not.toBeNull();
    const line = root.querySelector(".mark-line path");
    expect(line?.getAttribute("d")?.length).toBeGreaterThan(100);
    // No brush yet: the filter lets every step through, 20 per bucket.
    expect(root.querySelectorAll(".view_2_marks path")).toHaveLength(5);
    expect(barTotals(view)).toEqual({ 0: 20, 1: 20, 2: 20, 3: 20, 4: 20 });
    expect(view.signal("steps_brush")).toEqual({});
    expect(model.dataRequests()).toBe(1);
    expect(root.querySelector(".rlv-error").hidden).toBe(true);
    // Layout was redone once the axes had labels: room on the left for the y labels and title.
    expect(view.origin()[0]).toBeGreaterThan(30);
  });

  it("replaces data in place on a generation change and keeps the brush", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    await brushPixels(view, [40, 80]); // x domain 0..100 over 200 px -> steps 20..40
    expect(extent(view)).toEqual([20, 40]);

    model.data = makeData(300);
    model.fromPython("generation", 1);
    await waitFor(() => view.data("steps").length === 300, "the new rows");
    expect(root._rlvView).toBe(view); // same View: not re-embedded
    expect(view.data("hist")).toHaveLength(300);
    expect(model.dataRequests()).toBe(2);
    // The brush stayed in data space; its pixels follow the wider domain (0..300 over 200 px).
    const ext = extent(view)!;
    expect(ext[0]).toBeCloseTo(20, 9);
    expect(ext[1]).toBeCloseTo(40, 9);
    const px = unitSignal(view, "steps_brush_x").value;
    expect(px[0]).toBeCloseTo(xScale(view)(20), 6);
    expect(px[1]).toBeCloseTo(xScale(view)(40), 6);
    expect(px[1]).toBeLessThan(40); // moved left: the domain grew
  });

  it("drops a data reply that is older than the current generation", async () => {
    const model = new FakeModel();
    const { view } = await mount(model);
    // The reply says generation 0 while the model already is at 2: stale, must not be shown.
    model.state.generation = 2;
    const answer = model.answer.bind(model);
    model.answer = (msg: any) => {
      model.emit("msg:custom", { type: "rpc", id: msg.id, ok: true, result: { generation: 0, datasets: makeData(7) } });
      model.answer = answer;
    };
    model.emit("change:generation", 2);
    await sleep(60);
    expect(view.data("steps")).toHaveLength(100);
    model.data = makeData(50);
    model.emit("change:generation", 2);
    await waitFor(() => view.data("steps").length === 50, "the fresh reply");
  });

  it("moves the brush when Python sets selections, and clears it with null", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    model.fromPython("selections", { steps_brush: { step: [10, 30] } });
    const v2 = await waitFor(() => root._rlvView !== view && extent(root._rlvView) && root._rlvView, "the rebuilt view");
    expect(extent(v2)).toEqual([10, 30]);
    // The data came along, and the brush is drawn where the scale puts 10 and 30.
    expect(v2.data("steps")).toHaveLength(100);
    const px = unitSignal(v2, "steps_brush_x").value;
    expect(px[0]).toBeCloseTo(xScale(v2)(10), 6);
    expect(px[1]).toBeCloseTo(xScale(v2)(30), 6);
    // The bars are filtered by the brush: steps 10..30, bucket = step % 5.
    expect(barTotals(v2)).toEqual({ 0: 5, 1: 4, 2: 4, 3: 4, 4: 4 });
    // Nothing echoed back to Python.
    await sleep(chartOptions.debounceMs + 80);
    expect(model.sets.filter((s) => s.name === "selections")).toHaveLength(0);
    expect(model.saves).toBe(0);

    model.fromPython("selections", { steps_brush: null });
    await waitFor(() => root._rlvView !== v2 && root._rlvView.signal("steps_brush") && Object.keys(root._rlvView.signal("steps_brush")).length === 0, "the cleared brush");
    expect(unitSignal(root._rlvView, "steps_brush_step").value ?? null).toBeNull();
    await sleep(chartOptions.debounceMs + 80);
    expect(model.saves).toBe(0);
  });

  it("starts with the brush Python set before the view existed", async () => {
    const model = new FakeModel({ selections: { steps_brush: { step: [10, 30] } } });
    const { view } = await mount(model);
    await waitFor(() => extent(view), "the initial brush");
    expect(extent(view)).toEqual([10, 30]);
    // Pixels were recomputed once the data gave the scale its domain.
    const px = unitSignal(view, "steps_brush_x").value;
    expect(px[0]).toBeCloseTo(xScale(view)(10), 6);
    expect(px[1]).toBeCloseTo(xScale(view)(30), 6);
    expect(barTotals(view)).toEqual({ 0: 5, 1: 4, 2: 4, 3: 4, 4: 4 });
    await sleep(chartOptions.debounceMs + 50);
    expect(model.saves).toBe(0);
  });

  it("keeps the brush when Python replaces the spec", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    await brushPixels(view, [40, 80]);
    const spec = makeSpec();
    spec.hconcat[0].mark = { type: "line", point: true };
    model.fromPython("spec", spec);
    const v2 = await waitFor(() => root._rlvView !== view && root._rlvView, "the re-embed");
    expect(extent(v2)![0]).toBeCloseTo(20, 9);
    expect(extent(v2)![1]).toBeCloseTo(40, 9);
    expect(v2.data("steps")).toHaveLength(100);
    expect(root.querySelectorAll(".mark-symbol path").length).toBe(100);
  });

  it("does not rebuild when Python sets what the view already shows", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    await brushPixels(view, [40, 80]);
    model.fromPython("selections", { steps_brush: { step: [20, 40.0000000000001] } });
    await sleep(50);
    expect(root._rlvView).toBe(view);
  });

  it("sends a brush made in the view to Python once, after the debounce", async () => {
    const model = new FakeModel({ selections: { other: null } });
    const { view } = await mount(model);
    await brushPixels(view, [10, 30]);
    await brushPixels(view, [20, 60]);
    await brushPixels(view, [40, 80]);
    expect(model.saves).toBe(0); // still settling
    await waitFor(() => model.saves > 0, "the selection to be saved");
    await sleep(chartOptions.debounceMs + 50);
    expect(model.saves).toBe(1);
    const sel = model.state.selections;
    expect(sel.other).toBeNull(); // other entries are kept
    expect(sel.steps_brush.step[0]).toBeCloseTo(20, 9);
    expect(sel.steps_brush.step[1]).toBeCloseTo(40, 9);

    // Clearing the brush in the view (zero-width drag) sends null.
    await brushPixels(view, [50, 50]);
    await waitFor(() => model.saves === 2, "the cleared selection");
    expect(model.state.selections.steps_brush).toBeNull();
  });

  it("shows an rpc failure in the error line", async () => {
    const model = new FakeModel();
    model.failNext = "run not found: /tmp/nowhere";
    renderWidget(model);
    const err = await waitFor(() => {
      const e = host.querySelector(".rlv-chart .rlv-error") as HTMLElement;
      return e && !e.hidden && e;
    }, "the error line");
    expect(err.textContent).toContain("run not found: /tmp/nowhere");
    // A later successful fetch clears it.
    model.fromPython("generation", 1);
    await waitFor(() => err.hidden, "the error to clear");
  });

  it("shows the error trait and bad data replies", async () => {
    const model = new FakeModel();
    const { root } = await mount(model);
    model.fromPython("error", "observer failed: KeyError 'step'");
    const err = root.querySelector(".rlv-error");
    expect(err.hidden).toBe(false);
    expect(err.textContent).toContain("KeyError");
    model.fromPython("error", "");
    expect(err.hidden).toBe(true);

    model.data = { steps: { step: [1, 2, 3], reward_mean: [1, 2] }, hist: makeData(3).hist };
    model.fromPython("generation", 1);
    await waitFor(() => !err.hidden, "the column error");
    expect(err.textContent).toContain('dataset "steps"');

    model.data = { steps: makeData(3).steps } as any;
    model.fromPython("generation", 2);
    await waitFor(() => err.textContent.includes('no dataset "hist"'), "the missing-dataset error");
  });

  it("shows an embed error (bad spec)", async () => {
    const spec = makeSpec();
    spec.hconcat[0].encoding.y.type = "no-such-type";
    const model = new FakeModel({ spec });
    renderWidget(model);
    const err = await waitFor(() => {
      const e = host.querySelector(".rlv-error") as HTMLElement;
      return e && !e.hidden && e;
    }, "the error line");
    expect(err.textContent!.length).toBeGreaterThan(0);
  });

  it("never touches the network; the loader refuses URLs", async () => {
    const fetchSpy = vi.fn(() => Promise.reject(new Error("network")));
    const realFetch = globalThis.fetch;
    (globalThis as any).fetch = fetchSpy;
    const xhrOpen = vi.spyOn((globalThis as any).XMLHttpRequest.prototype, "open");
    try {
      const model = new FakeModel();
      const { view } = await mount(model);
      await brushPixels(view, [10, 20]);
      model.fromPython("selections", { steps_brush: { step: [1, 2] } });
      await waitFor(() => (host.querySelector(".rlv-chart") as any)._rlvView !== view, "a re-embed");
      await sleep(50);

      // A spec that names a URL: the chart must say so, not fetch it.
      const spec = { data: { url: "https://example.invalid/data.csv" }, mark: "point", encoding: { x: { field: "a", type: "quantitative" } } };
      const m2 = new FakeModel({ spec });
      renderWidget(m2);
      await waitFor(() => [...host.querySelectorAll(".rlv-error")].some((e) => (e.textContent ?? "").includes("loads nothing from the network")), "the refusal");
      expect(fetchSpy).not.toHaveBeenCalled();
      expect(xhrOpen).not.toHaveBeenCalled();
      await expect(offlineLoader.load("http://x")).rejects.toThrow(/network/);
      await expect(offlineLoader.sanitize("http://x")).rejects.toThrow(/network/);
    } finally {
      (globalThis as any).fetch = realFetch;
    }
  });

  it("follows the JupyterLab theme, re-embedding with the brush kept", async () => {
    const model = new FakeModel();
    const { root, view } = await mount(model);
    expect(view.background()).toBe("transparent");
    await brushPixels(view, [40, 80]);
    const lightFill = root.querySelector(".role-axis-label text")?.getAttribute("fill");
    expect(lightFill).toBe("#616161");

    document.body.dataset.jpThemeLight = "false";
    const v2 = await waitFor(() => root._rlvView !== view && root._rlvView, "the re-embed");
    await waitFor(() => root.querySelector(".role-axis-label text")?.getAttribute("fill") === "#aaaaaa", "dark labels");
    expect(extent(v2)![0]).toBeCloseTo(20, 9);
    expect(extent(v2)![1]).toBeCloseTo(40, 9);
    expect(v2.data("steps")).toHaveLength(100);
  });

  it("takes label and title colours from the JupyterLab CSS variables", async () => {
    document.body.style.setProperty("--jp-ui-font-color2", "#123456");
    document.body.style.setProperty("--jp-ui-font-color1", "#654321");
    try {
      const model = new FakeModel();
      const { root } = await mount(model);
      expect(root.querySelector(".role-axis-label text")?.getAttribute("fill")).toBe("#123456");
      expect(root.querySelector(".role-axis-title text")?.getAttribute("fill")).toBe("#654321");
    } finally {
      document.body.style.removeProperty("--jp-ui-font-color2");
      document.body.style.removeProperty("--jp-ui-font-color1");
    }
  });

  it("limits its height when `height` is set", async () => {
    const model = new FakeModel({ height: 120 });
    const { root } = await mount(model);
    const box = root.querySelector(".rlv-chart-view") as HTMLElement;
    expect(box.style.maxHeight).toBe("120px");
    model.fromPython("height", 0);
    expect(box.style.maxHeight).toBe("");
  });

  it("stops talking to the model after cleanup", async () => {
    const model = new FakeModel();
    const { root, view, cleanup } = await mount(model);
    cleanup();
    cleanups = cleanups.filter((c) => c !== cleanup);
    expect(host.querySelector(".rlv-chart")).toBeNull();
    expect(root.isConnected).toBe(false);
    const n = model.dataRequests();
    model.fromPython("generation", 5);
    await sleep(30);
    expect(model.dataRequests()).toBe(n);
    expect(model.listeners.get("change:selections")?.size ?? 0).toBe(0);
    expect(view.data("steps")).toHaveLength(100);
  });
});
