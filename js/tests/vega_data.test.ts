import { afterEach, describe, expect, it, vi } from "vitest";
import * as vl from "vega-lite";
import {
  approxEqual,
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
  toInitialValue,
  variableParams,
} from "../src/lib/vega_data";

/** The Altair shape: params at the top level with `views`, units read named datasets. */
function altairSpec(): any {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.20.1.json",
    datasets: { steps: [{ step: 1 }] },
    usermeta: { note: "kept" },
    hconcat: [
      {
        name: "view_1",
        data: { name: "steps" },
        mark: "line",
        encoding: { x: { field: "step", type: "quantitative" }, y: { field: "reward_mean", type: "quantitative" } },
      },
      {
        layer: [
          {
            data: { name: "hist" },
            mark: "bar",
            params: [{ name: "pick", select: { type: "point", fields: ["bucket"] } }],
            encoding: { x: { field: "bucket", type: "ordinal" }, y: { field: "count", type: "quantitative" } },
          },
        ],
      },
    ],
    params: [
      { name: "steps_brush", select: { type: "interval", encodings: ["x"] }, views: ["view_1"], value: { x: [0, 1] } },
      { name: "smooth", value: 0.5, bind: { input: "range", min: 0, max: 1 } },
      { name: "derived", expr: "smooth * 2" },
    ],
  };
}

describe("columnsToRows", () => {
  it("turns columns into row objects", () => {
    expect(columnsToRows({ step: [1, 2], r: [0.5, null] })).toEqual([
      { step: 1, r: 0.5 },
      { step: 2, r: null },
    ]);
  });
  it("accepts typed arrays and turns BigInt into Number", () => {
    const rows = columnsToRows({ a: new Float32Array([1.5, 2.5]), b: new BigInt64Array([3n, 4n]) });
    expect(rows).toEqual([
      { a: 1.5, b: 3 },
      { a: 2.5, b: 4 },
    ]);
    expect(typeof rows[0].b).toBe("number");
  });
  it("gives [] for no columns and rejects ragged or non-array columns", () => {
    expect(columnsToRows({})).toEqual([]);
    expect(columnsToRows({ a: [] })).toEqual([]);
    expect(() => columnsToRows({ a: [1, 2, 3], b: [1] })).toThrow(/"b" has 1 values, "a" has 3/);
    expect(() => columnsToRows({ a: [1], b: 7 as any })).toThrow(/not an array/);
  });
});

describe("spec inspection", () => {
  it("finds selection params at the top level and nested in concat/layer units", () => {
    const found = selectionParams(altairSpec()).map((p) => [p.name, p.type]);
    expect(found).toEqual([
      ["steps_brush", "interval"],
      ["pick", "point"],
    ]);
    expect(selectionParams({ params: [{ name: "s", select: "interval" }] })[0].type).toBe("interval");
    expect(selectionParams({ mark: "bar" })).toEqual([]);
  });
  it("lists top-level variable params except expression ones", () => {
    expect(variableParams(altairSpec())).toEqual(["smooth"]);
  });
  it("lists the named datasets", () => {
    expect(datasetNames(altairSpec())).toEqual(["steps", "hist"]);
    expect(datasetNames({ data: { url: "x.csv" }, mark: "point" })).toEqual([]);
  });
});

describe("selection values", () => {
  it("normalizes empty and missing values to null", () => {
    expect(normalizeSelection({})).toBeNull();
    expect(normalizeSelection(undefined)).toBeNull();
    expect(normalizeSelection([1, 2])).toBeNull();
    expect(normalizeSelection({ step: [1, 2] })).toEqual({ step: [1, 2] });
  });
  it("compares with a relative tolerance, deeply", () => {
    expect(approxEqual({ step: [20, 40] }, { step: [20.000000000000004, 39.99999999999999] })).toBe(true);
    expect(approxEqual({ step: [20, 40] }, { step: [20, 40.001] })).toBe(false);
    expect(approxEqual({ step: [1e12, 2e12] }, { step: [1e12 + 1, 2e12] })).toBe(true); // relative
    expect(approxEqual({ a: [1] }, { b: [1] })).toBe(false);
    expect(approxEqual([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(approxEqual(["a", "b"], ["a", "b"])).toBe(true);
    expect(sameSelection(null, {})).toBe(true);
    expect(sameSelection(undefined, { step: [1, 2] })).toBe(false);
  });
  it("merges updates over current values and reports only real changes", () => {
    const current = { steps_brush: { step: [10, 20] }, other: null };
    const { value, changed } = mergeSelections(current, {
      steps_brush: { step: [10.000000000000002, 20] }, // echo of what Python holds
      other: {}, // empty == null
      new_one: { step: [1, 2] },
      gone: null, // missing == null
    });
    expect(changed).toEqual(["new_one"]);
    expect(value).toEqual({ steps_brush: { step: [10, 20] }, other: null, new_one: { step: [1, 2] } });
    expect(value).not.toBe(current);
    const cleared = mergeSelections(current, { steps_brush: {} });
    expect(cleared.changed).toEqual(["steps_brush"]);
    expect(cleared.value.steps_brush).toBeNull();
  });
});

describe("initial values", () => {
  it("keeps interval values keyed by field and copies their arrays", () => {
    const v = { step: [1, 2] };
    const init = toInitialValue("interval", v) as any;
    expect(init).toEqual({ step: [1, 2] });
    expect(init.step).not.toBe(v.step);
    expect(toInitialValue("interval", null)).toBeUndefined();
  });
  it("turns point signal values into Vega-Lite tuples", () => {
    expect(toInitialValue("point", { bucket: [1, 3], vlPoint: { or: [{ bucket: 1 }, { bucket: 3 }] } })).toEqual([{ bucket: 1 }, { bucket: 3 }]);
    expect(toInitialValue("point", { bucket: [1, 3] })).toEqual([{ bucket: 1 }, { bucket: 3 }]);
    expect(toInitialValue("point", { a: [1, 2], b: ["x", "y"] })).toEqual([
      { a: 1, b: "x" },
      { a: 2, b: "y" },
    ]);
  });
  it("writes selections and variable values into a copy of the spec", () => {
    const spec = altairSpec();
    const before = JSON.stringify(spec);
    const out = specWithSelections(spec, { steps_brush: { step: [5, 9] }, pick: { bucket: [2] } }, { smooth: 0.8, derived: 99 });
    expect(JSON.stringify(spec)).toBe(before); // input untouched
    expect(out.$schema).toBeUndefined();
    expect(out.datasets).toBeUndefined();
    expect(out.usermeta).toEqual({ note: "kept" });
    expect(out.params[0].value).toEqual({ step: [5, 9] });
    expect(out.hconcat[1].layer[0].params[0].value).toEqual([{ bucket: 2 }]);
    expect(out.params[1].value).toBe(0.8);
    expect(out.params[2].value).toBeUndefined(); // expression params are not frozen
    const cleared = specWithSelections(spec, { steps_brush: null });
    expect("value" in cleared.params[0]).toBe(false);
    expect("value" in cleared.hconcat[1].layer[0].params[0]).toBe(false);
  });
  it("produces initial values the installed Vega-Lite compiles into the brush signals", () => {
    const spec = specWithSelections(altairSpec(), { steps_brush: { step: [5, 9] } });
    const vg: any = vl.compile(spec).spec;
    const unit = vg.marks.find((m: any) => (m.signals ?? []).some((s: any) => s.name === "steps_brush_step"));
    const dataSignal = unit.signals.find((s: any) => s.name === "steps_brush_step");
    expect(dataSignal.init).toBe("[5, 9]");
    const pixelSignal = unit.signals.find((s: any) => s.name === "steps_brush_x");
    expect(pixelSignal.init).toContain("scale(");
    expect(vg.signals.some((s: any) => s.name === "steps_brush")).toBe(true); // the top-level signal we listen to
  });
});

describe("theme", () => {
  it("makes a transparent config coloured from the page", () => {
    const c = themeConfig({ text: "#111", text2: "#222", border: "#333" });
    expect(c.background).toBe("transparent");
    expect(c.axis).toMatchObject({ labelColor: "#222", titleColor: "#111", domainColor: "#333", gridColor: "#333" });
    expect(c.legend).toMatchObject({ labelColor: "#222", titleColor: "#111" });
    expect(c.title.color).toBe("#111");
    expect(c.selection.interval.mark.fill).toBe("#111"); // the brush shows on either background
    expect(defaultColors(true).text).not.toBe(defaultColors(false).text);
  });
});

describe("debounce", () => {
  afterEach(() => vi.useRealTimers());
  it("calls once with the last arguments after the quiet period", () => {
    vi.useFakeTimers();
    const fn = vi.fn();
    const d = debounce(fn, 150);
    d(1);
    vi.advanceTimersByTime(100);
    d(2);
    vi.advanceTimersByTime(100);
    expect(fn).not.toHaveBeenCalled();
    expect(d.pending).toBe(true);
    vi.advanceTimersByTime(60);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(fn).toHaveBeenCalledWith(2);
    expect(d.pending).toBe(false);
  });
  it("flushes now and cancels", () => {
    vi.useFakeTimers();
    const fn = vi.fn();
    const d = debounce(fn, 150);
    d("a");
    d.flush();
    expect(fn).toHaveBeenCalledWith("a");
    d.flush(); // nothing pending: no second call
    expect(fn).toHaveBeenCalledTimes(1);
    d("b");
    d.cancel();
    vi.advanceTimersByTime(500);
    expect(fn).toHaveBeenCalledTimes(1);
  });
});
