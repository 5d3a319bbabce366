/**
 * Pure helpers for the ChartWidget front end (charts.ts): column-oriented datasets to Vega rows,
 * finding the selection params of a Vega-Lite spec, comparing selection values without being
 * fooled by float round trips, writing selections back into a spec as initial values, the
 * theme config, and a small debounce. No DOM and no Vega imports, so they test in plain node.
 */

/** A column-oriented dataset as the "data" rpc sends it: column name -> values (all the same length). */
export type Columns = Record<string, ArrayLike<unknown>>;

/** A selection value as the view's top-level signal reports it, e.g. `{step: [10, 20]}`; null = empty. */
export type SelectionValue = Record<string, unknown> | null;

/** A selection param found in a spec. `param` is the object inside the spec (mutate a clone only). */
export interface SelectionParam {
  name: string;
  type: "interval" | "point";
  param: Record<string, any>;
}

/**
 * Turns `{col: [..], ..}` into `[{col: v, ..}, ..]` for vega's changeset. Typed arrays are fine;
 * BigInt (int64 columns) becomes Number because Vega's scales cannot mix the two.
 * Throws when columns differ in length: a silent truncation would plot wrong pairs.
 */
export function columnsToRows(cols: Columns): Record<string, unknown>[] {
  const names = Object.keys(cols ?? {});
  if (names.length === 0) return [];
  const n = cols[names[0]]?.length ?? 0;
  for (const name of names) {
    const col = cols[name];
    if (col == null || typeof col.length !== "number") throw new Error(`column "${name}" is not an array`);
    if (col.length !== n) throw new Error(`column "${name}" has ${col.length} values, "${names[0]}" has ${n}`);
  }
  const rows: Record<string, unknown>[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const row: Record<string, unknown> = {};
    for (const name of names) {
      const v = cols[name][i];
      row[name] = typeof v === "bigint" ? Number(v) : v;
    }
    rows[i] = row;
  }
  return rows;
}

/** Keys under which a Vega-Lite spec nests further specs. */
const CHILD_KEYS = ["hconcat", "vconcat", "concat", "layer"] as const;

/** Visits every (sub)spec: the top level, concat/layer members and facet/repeat inner specs. */
function walkSpecs(spec: any, visit: (s: any) => void): void {
  if (!spec || typeof spec !== "object") return;
  visit(spec);
  for (const key of CHILD_KEYS) {
    const kids = spec[key];
    if (Array.isArray(kids)) for (const kid of kids) walkSpecs(kid, visit);
  }
  if (spec.spec && typeof spec.spec === "object") walkSpecs(spec.spec, visit);
}

/**
 * Every selection param (interval or point) anywhere in the spec. Altair puts them at the top
 * level with `views`; hand-written specs keep them in the unit. Either way Vega-Lite makes a
 * top-level signal with the param's name, which is what the widget listens to.
 */
export function selectionParams(spec: any): SelectionParam[] {
  const out: SelectionParam[] = [];
  const seen = new Set<string>();
  walkSpecs(spec, (s) => {
    if (!Array.isArray(s.params)) return;
    for (const p of s.params) {
      if (!p || typeof p.name !== "string" || p.select == null) continue;
      const type = typeof p.select === "string" ? p.select : p.select.type;
      if ((type !== "interval" && type !== "point") || seen.has(p.name)) continue;
      seen.add(p.name);
      out.push({ name: p.name, type, param: p });
    }
  });
  return out;
}

/** Top-level variable params (no `select`, no `expr`): their values are restored on re-embed. */
export function variableParams(spec: any): string[] {
  if (!spec || !Array.isArray(spec.params)) return [];
  return spec.params.filter((p: any) => p && typeof p.name === "string" && p.select == null && p.expr == null).map((p: any) => p.name);
}

/** Names of the named datasets the spec reads (`{"data": {"name": ...}}`), in first-seen order. */
export function datasetNames(spec: any): string[] {
  const names = new Set<string>();
  walkSpecs(spec, (s) => {
    if (s.data && typeof s.data.name === "string") names.add(s.data.name);
  });
  return [...names];
}

/** A signal's selection value in the widget's form: an empty object (no brush) or undefined is null. */
export function normalizeSelection(value: unknown): SelectionValue {
  if (value == null || typeof value !== "object" || Array.isArray(value)) return null;
  return Object.keys(value).length === 0 ? null : (value as Record<string, unknown>);
}

/**
 * Deep equality where numbers may differ by a relative 1e-9: a brush set from Python comes back
 * through scale -> pixel -> invert and can gain an ulp, which must not count as a user change.
 */
export function approxEqual(a: unknown, b: unknown, rel = 1e-9): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") {
    if (Number.isNaN(a) && Number.isNaN(b)) return true;
    return Math.abs(a - b) <= rel * Math.max(1, Math.abs(a), Math.abs(b));
  }
  if (a == null || b == null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => approxEqual(v, bb[i], rel));
  }
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && approxEqual((a as any)[k], (b as any)[k], rel));
}

/** Same selection? (null and {} are both "no selection"). */
export function sameSelection(a: unknown, b: unknown): boolean {
  return approxEqual(normalizeSelection(a), normalizeSelection(b));
}

/**
 * `current` with `updates` laid over it, as a new object, and the names that really changed:
 * an update (approximately) equal to what `current` holds is no change, so a value Python just
 * set and the view reports back is not sent again.
 */
export function mergeSelections(
  current: Record<string, unknown>,
  updates: Record<string, SelectionValue>,
): { value: Record<string, SelectionValue>; changed: string[] } {
  const value: Record<string, SelectionValue> = {};
  for (const [k, v] of Object.entries(current ?? {})) value[k] = v as SelectionValue;
  const changed: string[] = [];
  for (const [k, v] of Object.entries(updates)) {
    const nv = normalizeSelection(v);
    if (sameSelection(value[k], nv)) continue; // missing and null both mean no selection
    value[k] = nv;
    changed.push(k);
  }
  return { value, changed };
}

/**
 * A signal value as a Vega-Lite initial `value`.
 * - interval: the signal form `{field: [lo, hi]}` is accepted as is (Vega-Lite looks each
 *   projection up by channel, then by field).
 * - point: Vega-Lite wants a list of tuples; the signal carries them as `vlPoint.or`, else the
 *   per-field value lists are zipped (exact for one field, best effort for several).
 */
export function toInitialValue(type: "interval" | "point", value: SelectionValue): unknown {
  if (value == null) return undefined;
  if (type === "interval") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = Array.isArray(v) ? [...v] : v;
    return out;
  }
  const vlPoint = (value as any).vlPoint ?? (value as any).vlMulti;
  if (vlPoint && Array.isArray(vlPoint.or)) return vlPoint.or.map((t: any) => ({ ...t }));
  const fields = Object.keys(value).filter((k) => k !== "vlPoint" && k !== "vlMulti");
  const n = Math.max(0, ...fields.map((f) => (Array.isArray(value[f]) ? (value[f] as unknown[]).length : 1)));
  const tuples: Record<string, unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const t: Record<string, unknown> = {};
    for (const f of fields) {
      const v = value[f];
      t[f] = Array.isArray(v) ? v[Math.min(i, v.length - 1)] : v;
    }
    tuples.push(t);
  }
  return tuples;
}

/**
 * A deep copy of `spec` ready to embed with the given selections as initial values: each
 * selection param gets `value` from `selections[name]` (null or missing clears it: no brush),
 * each top-level variable param in `variables` gets its value. `$schema` and `datasets` are
 * dropped: the data come through the rpc, and the schema URL would only make vega-embed warn
 * about the version it names.
 */
export function specWithSelections(
  spec: any,
  selections: Record<string, SelectionValue>,
  variables: Record<string, unknown> = {},
): any {
  const out = structuredCloneJson(spec ?? {});
  delete out.$schema;
  delete out.datasets;
  for (const p of selectionParams(out)) {
    const init = toInitialValue(p.type, normalizeSelection(selections[p.name]));
    if (init === undefined) delete p.param.value;
    else p.param.value = init;
  }
  if (Array.isArray(out.params)) {
    for (const p of out.params) {
      if (p && p.select == null && p.expr == null && Object.prototype.hasOwnProperty.call(variables, p.name)) {
        p.value = variables[p.name];
      }
    }
  }
  return out;
}

/** JSON-shaped deep copy (specs are plain JSON; structuredClone would keep odd prototypes). */
function structuredCloneJson<T>(x: T): T {
  return JSON.parse(JSON.stringify(x));
}

/** Colours the chart takes from the page (CSS variables already resolved). */
export interface ThemeColors {
  text: string; // --jp-ui-font-color1: titles
  text2: string; // --jp-ui-font-color2: labels
  border: string; // --jp-border-color2: axis lines, grid, view outline
}

/** Theme defaults when a CSS variable is not set (outside JupyterLab). */
export function defaultColors(dark: boolean): ThemeColors {
  return dark
    ? { text: "#e0e0e0", text2: "#aaaaaa", border: "#555555" }
    : { text: "#222222", text2: "#616161", border: "#dddddd" };
}

/**
 * A Vega-Lite config following the page theme: transparent background (the notebook shows
 * through) and every text / line colour from the page. Spec `config` still wins over this.
 */
export function themeConfig(c: ThemeColors): Record<string, any> {
  return {
    background: "transparent",
    axis: { labelColor: c.text2, titleColor: c.text, domainColor: c.border, tickColor: c.border, gridColor: c.border },
    legend: { labelColor: c.text2, titleColor: c.text },
    header: { labelColor: c.text2, titleColor: c.text },
    title: { color: c.text, subtitleColor: c.text2 },
    view: { stroke: c.border },
    style: { "guide-label": { fill: c.text2 }, "guide-title": { fill: c.text } },
    // Vega-Lite's brush fill is a fixed dark grey, invisible on a dark page: tint with the text colour.
    selection: { interval: { mark: { fill: c.text, fillOpacity: 0.125 } } },
  };
}

/** A debounced function with `flush` (run now if pending) and `cancel`. */
export interface Debounced<A extends unknown[]> {
  (...args: A): void;
  flush(): void;
  cancel(): void;
  readonly pending: boolean;
}

/** Calls `fn` with the latest arguments once `ms` have passed without another call. */
export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number): Debounced<A> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let last: A | null = null;
  const run = () => {
    timer = null;
    const args = last;
    last = null;
    if (args) fn(...args);
  };
  const d = ((...args: A) => {
    last = args;
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(run, ms);
  }) as Debounced<A>;
  d.flush = () => {
    if (timer !== null) {
      clearTimeout(timer);
      run();
    }
  };
  d.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    last = null;
  };
  Object.defineProperty(d, "pending", { get: () => timer !== null });
  return d;
}
