// @vitest-environment happy-dom
import { afterEach, describe, expect, test, vi } from "vitest";
import widget, { PAGE_SIZE, ROW_HEIGHT } from "../src/sample_table";
import { MAX_SCROLL_PX } from "../src/lib/virtual";
import type { ColumnInfo, RowsReply } from "../src/lib/protocol";
import { blend, contrastRatio, parseCssColor, type RGB } from "../src/lib/color";

const N = 1_000_000;
const XSS = "<img src=x onerror=alert(1)>";
const COLUMNS: ColumnInfo[] = [
  { name: "sample_id", kind: "int", min: 1_000_000_000, max: 1_000_000_000 + N - 1 },
  { name: "step", kind: "int", min: 0, max: 500 },
  { name: "reward", kind: "number", min: -1, max: 1 },
  { name: "prompt", kind: "text" },
  { name: "response", kind: "text" },
];

/** Row i of a generation: generation 2 reverses the order so a refetch is visible. */
function idFor(i: number, gen: number) {
  return 1_000_000_000 + (gen >= 2 ? N - 1 - i : i);
}
function rowFor(i: number, gen: number): (number | string | null)[] {
  const id = idFor(i, gen);
  return [
    id,
    Math.floor(i / 2000),
    i % 11 === 0 ? null : Math.sin(i),
    i === 7 ? XSS : `prompt ${i}`,
    i % 5 === 0 ? `long response ${i} `.repeat(3) : `ok ${i}`,
  ];
}

type Handler = (...a: any[]) => void;

function fakeModel(init: Record<string, any> = {}) {
  const state: Record<string, any> = {
    columns: COLUMNS, row_count: N, sort_by: "", sort_desc: false, search: "",
    selected_ids: [], generation: 1, error: "", height: 360, ...init,
  };
  const handlers = new Map<string, Set<Handler>>();
  const sent: any[] = [];
  const held: (() => void)[] = [];
  const ctl = {
    saves: 0,
    fail: "" as string, // non-empty: answer rpc calls with ok:false
    hold: false, // queue replies until release()
    replyGeneration: null as number | null, // override the generation stamped on replies
  };
  const emit = (ev: string, ...args: any[]) => handlers.get(ev)?.forEach((h) => h(...args));
  const answer = (content: any) => {
    const { id, method, params } = content;
    if (ctl.fail) return emit("msg:custom", { type: "rpc", id, ok: false, error: ctl.fail }, []);
    if (method === "rows") {
      const gen = ctl.replyGeneration ?? state.generation;
      const total = state.row_count;
      const end = Math.min(total, params.offset + params.limit);
      const idx = Array.from({ length: Math.max(0, end - params.offset) }, (_, k) => params.offset + k);
      const reply: RowsReply = {
        generation: gen, offset: params.offset, total,
        ids: idx.map((i) => idFor(i, gen)),
        rows: idx.map((i) => rowFor(i, gen)),
        clipped: idx.map((i) => [false, false, false, false, i % 5 === 0]),
      };
      emit("msg:custom", { type: "rpc", id, ok: true, result: reply }, []);
    } else if (method === "cell") {
      emit("msg:custom", { type: "rpc", id, ok: true, result: { text: `FULL ${params.column} of ${params.sample_id} <script>alert(1)</script>` } }, []);
    }
  };
  const model = {
    get: (k: string) => state[k],
    set: (k: string, v: any) => {
      state[k] = v;
      emit(`change:${k}`); // Backbone fires local change events on set, as anywidget's model does
    },
    save_changes: () => { ctl.saves++; },
    send: (content: any) => {
      sent.push(content);
      const go = () => answer(content);
      if (ctl.hold) held.push(go);
      else setTimeout(go, 1); // asynchronous, like a kernel round trip
    },
    on: (ev: string, h: Handler) => {
      if (!handlers.has(ev)) handlers.set(ev, new Set());
      handlers.get(ev)!.add(h);
    },
    off: (ev?: string, h?: Handler) => {
      if (!ev) handlers.clear();
      else if (!h) handlers.delete(ev);
      else handlers.get(ev)?.delete(h);
    },
  };
  /** Python-side assignment: state changes and observers fire. */
  const pySet = (k: string, v: any) => model.set(k, v);
  const release = () => held.splice(0).forEach((f) => f());
  const rowsCalls = () => sent.filter((m) => m.method === "rows");
  const listenerCount = () => [...handlers.values()].reduce((s, x) => s + x.size, 0);
  return { model, state, sent, ctl, pySet, release, rowsCalls, listenerCount };
}

let cleanups: (() => void)[] = [];
afterEach(() => {
  cleanups.forEach((c) => c());
  cleanups = [];
  document.body.replaceChildren();
  document.body.removeAttribute("data-jp-theme-light");
});

function mount(init: Record<string, any> = {}) {
  const f = fakeModel(init);
  const el = document.createElement("div");
  document.body.append(el);
  const cleanup = widget.render({ model: f.model, el });
  cleanups.push(cleanup);
  const scroll = el.querySelector(".rlv-scroll") as HTMLElement;
  const rowEl = (r: number) => el.querySelector(`.rlv-row[data-row="${r}"]`) as HTMLElement | null;
  const loaded = (r: number) => vi.waitFor(() => {
    const e = rowEl(r);
    expect(e?.dataset.id).toBeDefined();
    return e!;
  });
  const scrollTo = (top: number) => {
    scroll.scrollTop = top;
    scroll.dispatchEvent(new Event("scroll"));
  };
  const click = (target: Element, opts: MouseEventInit = {}) =>
    target.dispatchEvent(new MouseEvent("click", { bubbles: true, ...opts }));
  const visibleRows = () => Array.from(el.querySelectorAll(".rlv-row")).filter((r) => (r as HTMLElement).style.display !== "none") as HTMLElement[];
  return { ...f, el, scroll, rowEl, loaded, scrollTo, click, visibleRows, cleanup };
}

describe("rendering", () => {
  test("initial render shows the first rows, header, count and one style element", async () => {
    const t = mount();
    // placeholders first (nothing loaded yet), then data
    expect(t.rowEl(0)?.classList.contains("rlv-loading")).toBe(true);
    const r0 = await t.loaded(0);
    expect(r0.dataset.id).toBe("1000000000");
    expect(r0.classList.contains("rlv-loading")).toBe(false);
    expect(t.el.querySelector('.rlv-row[data-row="3"] .rlv-td[data-col="prompt"]')!.textContent).toContain("prompt 3");
    expect(t.el.querySelector(".rlv-count")!.textContent).toBe("1,000,000 rows");
    const ths = Array.from(t.el.querySelectorAll(".rlv-th")).map((e) => (e as HTMLElement).dataset.col);
    expect(ths).toEqual(COLUMNS.map((c) => c.name));
    expect(t.el.querySelectorAll("style").length).toBe(1);
    expect(t.el.querySelector(".rlv-sample-table")).not.toBeNull();
    expect(t.scroll.style.height).toBe("360px");
    // first request asks for page 0 with the page size
    expect(t.rowsCalls()[0].params).toEqual({ offset: 0, limit: PAGE_SIZE });
  });

  test("numeric cells carry a bar from the zero line; nulls are muted empty cells", async () => {
    const t = mount();
    await t.loaded(1);
    const r1 = t.el.querySelector('.rlv-row[data-row="1"] .rlv-td[data-col="reward"]')!;
    expect(r1.textContent).toBe(String(parseFloat(Math.sin(1).toPrecision(4)))); // "0.8415"
    const bar = r1.querySelector(".rlv-bar") as HTMLElement;
    // sin(1) in [-1, 1]: starts at the zero line (50%), spans 0.8415 / 2 of the width
    expect(bar.style.left).toBe("50.00%");
    expect(bar.style.width).toBe("42.07%");
    const neg = t.el.querySelector('.rlv-row[data-row="4"] .rlv-td[data-col="reward"] .rlv-bar') as HTMLElement; // sin(4) < 0
    expect(neg.classList.contains("rlv-neg")).toBe(true);
    expect(parseFloat(neg.style.left)).toBeLessThan(50);
    const nul = t.el.querySelector('.rlv-row[data-row="0"] .rlv-td[data-col="reward"]')!; // 0 % 11 === 0 -> null
    expect(nul.classList.contains("rlv-null")).toBe(true);
    expect(nul.textContent).toBe("");
  });

  test("model text is never parsed as HTML", async () => {
    const t = mount();
    await t.loaded(7);
    const cell = t.el.querySelector('.rlv-row[data-row="7"] .rlv-td[data-col="prompt"]')!;
    expect(cell.textContent).toContain(XSS);
    expect(t.el.querySelector("img")).toBeNull();
    // expanding a cell whose full text contains a script tag creates no script element
    const row0 = await t.loaded(0);
    t.click(row0.querySelector('.rlv-td[data-col="response"] .rlv-expand')!);
    await vi.waitFor(() => expect(t.el.querySelector(".rlv-expanded")?.textContent).toContain("<script>"));
    expect(t.el.querySelector("script")).toBeNull();
  });

  test("the stylesheet uses colours only through CSS variables", () => {
    const t = mount();
    const css = t.el.querySelector("style")!.textContent!;
    const withoutVars = css.replace(/var\(--[\w-]+,\s*[^)]*\)/g, "VAR");
    expect(withoutVars).not.toMatch(/#[0-9a-f]{3,6}\b/i);
    expect(css).toContain("var(--jp-layout-color1, #fff)");
    expect(css).toContain("var(--jp-brand-color1, #1976d2)");
  });

  test("follows a dark JupyterLab theme", async () => {
    document.body.setAttribute("data-jp-theme-light", "false");
    const t = mount();
    expect(t.el.querySelector(".rlv-sample-table")!.classList.contains("rlv-dark")).toBe(true);
    document.body.setAttribute("data-jp-theme-light", "true");
    await vi.waitFor(() => expect(t.el.querySelector(".rlv-sample-table")!.classList.contains("rlv-dark")).toBe(false));
  });
});

describe("selected rows keep their contrast", () => {
  // JupyterLab 4's theme values (theme-light-extension / theme-dark-extension variables)
  const THEMES = {
    light: { bg: "#ffffff", fg: "rgba(0,0,0,.87)", brand: "#1976d2", neg: "#d32f2f" },
    dark: { bg: "#212121", fg: "rgba(255,255,255,.87)", brand: "#2196f3", neg: "#f44336" },
  };
  const over = (c: string, under: RGB): RGB => {
    const p = parseCssColor(c)!;
    return blend(p.rgb, p.alpha, under);
  };
  const mixOver = (brand: string, pct: number, under: RGB): RGB => blend(parseCssColor(brand)!.rgb, pct / 100, under);

  test("the selection is a brand tint under the theme's own text colour, at ≥ 4.5:1 in both themes, bars included", () => {
    const t = mount();
    const css = t.el.querySelector("style")!.textContent!;
    const selRule = /\.rlv-row\.rlv-selected \{([^}]*)\}/.exec(css)![1];
    expect(selRule).toContain("color: var(--rlv-fg)");
    expect(selRule).toContain("color-mix(in srgb, var(--rlv-brand) var(--rlv-sel-pct), transparent)");
    expect(selRule).toContain("inset 3px 0 0 var(--rlv-brand)");
    expect(css).not.toContain("brand-color3"); // the light blue that made dark-theme rows unreadable
    const light = /\.rlv-sample-table \{([^}]*)\}/.exec(css)![1];
    const dark = /\.rlv-sample-table\.rlv-dark \{([^}]*)\}/.exec(css)![1];
    const num = (block: string, name: string) => parseFloat(new RegExp(`${name}:\\s*([\\d.]+)`).exec(block)![1]);
    for (const [name, block] of [["light", light], ["dark", dark]] as const) {
      const th = THEMES[name];
      const page = parseCssColor(th.bg)!.rgb;
      for (const pct of [num(block, "--rlv-sel-pct"), num(block, "--rlv-sel-hover-pct")]) {
        const row = mixOver(th.brand, pct, page);
        expect(contrastRatio(over(th.fg, row), row)).toBeGreaterThanOrEqual(4.5);
        // a numeric bar (brand or error colour at --rlv-bar-alpha) under the text
        const alpha = num(block, "--rlv-bar-alpha");
        for (const barColor of [th.brand, th.neg]) {
          const withBar = blend(parseCssColor(barColor)!.rgb, alpha, row);
          expect(contrastRatio(over(th.fg, withBar), withBar)).toBeGreaterThanOrEqual(4.5);
        }
        // the tint is visible against an unselected row
        expect(contrastRatio(row, page)).toBeGreaterThan(1.1);
      }
      // and the fallback (no color-mix) is just as readable
      const fb = /--rlv-sel-fallback:\s*(rgba\([^)]*\))/.exec(block)![1];
      const row = over(fb, page);
      expect(contrastRatio(over(th.fg, row), row)).toBeGreaterThanOrEqual(4.5);
    }
  });
});

describe("virtual scrolling", () => {
  test("scrolling to the middle renders rows near 500,000 after the fetch", async () => {
    const t = mount();
    await t.loaded(0);
    const spacer = t.el.querySelector(".rlv-spacer") as HTMLElement;
    expect(spacer.style.height).toBe(`${MAX_SCROLL_PX}px`); // scaled: a million 28 px rows
    t.scrollTo((MAX_SCROLL_PX - 360) / 2);
    // immediately: placeholders with the right indices
    const rows = t.visibleRows().map((r) => Number(r.dataset.row));
    expect(Math.min(...rows)).toBeGreaterThan(499_900);
    expect(Math.max(...rows)).toBeLessThan(500_100);
    expect(t.rowEl(500_000)).not.toBeNull();
    const r = await t.loaded(500_000);
    expect(r.dataset.id).toBe(String(1_000_000_000 + 500_000));
    expect(r.textContent).toContain("prompt 500000");
    // the request was for the page holding row 500,000
    expect(t.rowsCalls().some((m) => m.params.offset === 500_000 && m.params.limit === PAGE_SIZE)).toBe(true);
  });

  test("the last row is reachable at max scroll", async () => {
    const t = mount();
    t.scrollTo(MAX_SCROLL_PX - 360);
    const last = await t.loaded(N - 1);
    expect(last.dataset.id).toBe(String(1_000_000_000 + N - 1));
    // flush with the bottom of the viewport
    expect(parseFloat(last.style.top) + ROW_HEIGHT).toBeCloseTo(MAX_SCROLL_PX, 3);
  });

  test("DOM row count stays bounded and nodes are recycled", async () => {
    const t = mount();
    await t.loaded(0);
    const before = t.el.querySelectorAll(".rlv-row").length;
    const maxRows = Math.ceil(360 / ROW_HEIGHT) + 2 * 8 + 2;
    expect(before).toBeLessThanOrEqual(maxRows);
    for (let k = 1; k <= 60; k++) t.scrollTo(k * 250_000 - 37 * k);
    await new Promise((r) => setTimeout(r, 30));
    expect(t.el.querySelectorAll(".rlv-row").length).toBe(before);
    expect(t.visibleRows().length).toBeLessThanOrEqual(maxRows);
    // small scroll: rows that stay visible keep their element
    t.scrollTo(0);
    const el5 = t.rowEl(5);
    t.scrollTo(ROW_HEIGHT * 2);
    expect(t.rowEl(5)).toBe(el5);
  });

  test("requests for the same page are deduplicated and stale scroll positions are not fetched", async () => {
    const t = mount();
    t.ctl.hold = true;
    await new Promise((r) => setTimeout(r, 5));
    const mid = (MAX_SCROLL_PX - 360) / 2;
    t.scrollTo(mid);
    t.scrollTo(mid + 1);
    t.scrollTo(mid);
    const forPage = t.rowsCalls().filter((m) => m.params.offset === 500_000);
    expect(forPage.length).toBe(1);
    // drag through many positions while the kernel is busy: at most 4 requests are in flight
    const n0 = t.rowsCalls().length;
    for (let k = 0; k < 50; k++) t.scrollTo(k * 200_000);
    expect(t.rowsCalls().length - n0).toBeLessThanOrEqual(4);
    t.ctl.hold = false;
    t.release();
    await t.loaded(Number(t.visibleRows()[10].dataset.row));
  });
});

describe("sorting and search", () => {
  test("clicking a header sets sort_by / sort_desc and shows an arrow", () => {
    const t = mount();
    const th = (c: string) => t.el.querySelector(`.rlv-th[data-col="${c}"]`) as HTMLElement;
    t.click(th("reward"));
    expect(t.state.sort_by).toBe("reward");
    expect(t.state.sort_desc).toBe(true); // numeric: largest first
    expect(t.ctl.saves).toBeGreaterThan(0);
    expect(th("reward").querySelector(".rlv-arrow")!.textContent).toBe("▼");
    t.click(th("reward"));
    expect(t.state.sort_desc).toBe(false);
    expect(th("reward").querySelector(".rlv-arrow")!.textContent).toBe("▲");
    t.click(th("prompt"));
    expect(t.state.sort_by).toBe("prompt");
    expect(t.state.sort_desc).toBe(false); // text: A→Z first
    expect(th("reward").querySelector(".rlv-arrow")!.textContent).toBe("");
    expect(th("prompt").getAttribute("aria-sort")).toBe("ascending");
  });

  test("a sort set from Python scrolls to the top and updates the arrow", () => {
    const t = mount();
    t.scrollTo(10_000);
    t.pySet("sort_by", "step");
    t.pySet("sort_desc", true);
    expect(t.scroll.scrollTop).toBe(0);
    expect(t.el.querySelector('.rlv-th[data-col="step"] .rlv-arrow')!.textContent).toBe("▼");
  });

  test("search is written once, after the debounce", async () => {
    const t = mount();
    const input = t.el.querySelector(".rlv-search") as HTMLInputElement;
    const sets: string[] = [];
    t.model.on("change:search", () => sets.push(t.state.search));
    for (const s of ["r", "re", "rew"]) {
      input.value = s;
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(t.state.search).toBe("");
    await vi.waitFor(() => expect(t.state.search).toBe("rew"), { timeout: 1000 });
    expect(sets).toEqual(["rew"]);
  });

  test("search and row count set from Python are shown", () => {
    const t = mount();
    t.pySet("search", "hello");
    expect((t.el.querySelector(".rlv-search") as HTMLInputElement).value).toBe("hello");
    t.pySet("row_count", 12_800);
    expect(t.el.querySelector(".rlv-count")!.textContent).toBe("12,800 rows");
    expect((t.el.querySelector(".rlv-spacer") as HTMLElement).style.height).toBe(`${12_800 * ROW_HEIGHT}px`);
  });
});

describe("selection", () => {
  const id = (i: number) => 1_000_000_000 + i;

  test("click, ctrl-click and shift-click", async () => {
    const t = mount();
    await t.loaded(10);
    t.click(t.rowEl(2)!.querySelector(".rlv-td")!);
    expect(t.state.selected_ids).toEqual([id(2)]);
    expect(t.rowEl(2)!.classList.contains("rlv-selected")).toBe(true);
    t.click(t.rowEl(5)!, { ctrlKey: true });
    expect([...t.state.selected_ids].sort()).toEqual([id(2), id(5)]);
    t.click(t.rowEl(6)!, { metaKey: true });
    expect(t.state.selected_ids.length).toBe(3);
    t.click(t.rowEl(5)!, { ctrlKey: true }); // toggles off; anchor is now row 5
    expect([...t.state.selected_ids].sort()).toEqual([id(2), id(6)]);
    expect(t.rowEl(5)!.classList.contains("rlv-selected")).toBe(false);
    t.click(t.rowEl(9)!, { shiftKey: true });
    await vi.waitFor(() => expect(t.state.selected_ids).toEqual([5, 6, 7, 8, 9].map(id)));
    expect(t.el.querySelector(".rlv-selcount")!.textContent).toBe("5 selected");
    // plain click replaces
    t.click(t.rowEl(1)!);
    expect(t.state.selected_ids).toEqual([id(1)]);
    // clear selection
    t.click(t.el.querySelector(".rlv-clear")!);
    expect(t.state.selected_ids).toEqual([]);
    expect(t.el.querySelectorAll(".rlv-selected").length).toBe(0);
  });

  test("shift-click across unloaded pages fetches them and caps the range", async () => {
    const t = mount();
    await t.loaded(3);
    t.click(t.rowEl(3)!);
    (t.el.querySelector(".rlv-sample-table") as any).rlvScrollToRow(20_000);
    const far = await t.loaded(20_000);
    t.click(far, { shiftKey: true });
    // at the kernel's cap (its validator refuses more and would keep the old selection): 5,000 by default
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(5_000), { timeout: 3000 });
    expect(t.state.selected_ids[0]).toBe(id(3));
    expect(t.state.selected_ids[4_999]).toBe(id(5_002));
    expect(t.el.querySelector(".rlv-note")!.textContent).toMatch(/capped at 5,000/);
  });

  test("the cap is the kernel's max_selected, for ranges added with ctrl+shift and for ctrl-clicks", async () => {
    const t = mount({ max_selected: 300 });
    await t.loaded(0);
    t.click(t.rowEl(0)!);
    (t.el.querySelector(".rlv-sample-table") as any).rlvScrollToRow(199);
    t.click(await t.loaded(199), { shiftKey: true });
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(200));
    (t.el.querySelector(".rlv-sample-table") as any).rlvScrollToRow(1_000);
    t.click(await t.loaded(1_000), { ctrlKey: true }); // 201 rows, anchor 1,000
    (t.el.querySelector(".rlv-sample-table") as any).rlvScrollToRow(1_400);
    t.click(await t.loaded(1_400), { shiftKey: true, ctrlKey: true });
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(300));
    expect(t.state.selected_ids).toContain(id(1_099)); // the rows nearest the anchor are kept
    expect(t.state.selected_ids).not.toContain(id(1_100));
    expect(t.el.querySelector(".rlv-note")!.textContent).toMatch(/capped at 300/);
    t.click(t.rowEl(1_400)!, { ctrlKey: true }); // one more: refused, said so
    expect(t.state.selected_ids.length).toBe(300);
    expect(t.el.querySelector(".rlv-note")!.textContent).toMatch(/at most 300 rows/);
  });

  test("shift+arrow before any click starts its range where the cursor lands", async () => {
    const t = mount();
    await t.loaded(0);
    const key = () => t.scroll.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", shiftKey: true, bubbles: true }));
    key();
    await vi.waitFor(() => expect(t.state.selected_ids).toEqual([id(0)]));
    key();
    key();
    await vi.waitFor(() => expect([...t.state.selected_ids].sort()).toEqual([id(0), id(1), id(2)]));
    t.pySet("sort_by", "reward"); // a sort forgets the anchor and cursor: the next range starts afresh
    t.pySet("generation", 2);
    await t.loaded(0);
    key();
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(1));
    key();
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(2));
  });

  test("a short shift range over pages fetches them", async () => {
    const t = mount();
    await t.loaded(0);
    t.click(t.rowEl(0)!);
    (t.el.querySelector(".rlv-sample-table") as any).rlvScrollToRow(450);
    const r = await t.loaded(450);
    t.click(r, { shiftKey: true });
    await vi.waitFor(() => expect(t.state.selected_ids.length).toBe(451));
    expect(new Set(t.state.selected_ids).size).toBe(451);
    expect(t.state.selected_ids[450]).toBe(id(450));
  });

  test("arrow keys move the selection", async () => {
    const t = mount();
    await t.loaded(2);
    t.click(t.rowEl(2)!);
    t.scroll.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    await vi.waitFor(() => expect(t.state.selected_ids).toEqual([id(3)]));
    t.scroll.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp", bubbles: true }));
    t.scroll.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp", bubbles: true }));
    await vi.waitFor(() => expect(t.state.selected_ids).toEqual([id(1)]));
    // moving down past the viewport scrolls it
    for (let k = 0; k < 30; k++) t.scroll.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    await vi.waitFor(() => expect(t.state.selected_ids).toEqual([id(31)]));
    // row 31 is now flush with the viewport's bottom edge (the spacer is scaled, so compare positions)
    const top31 = parseFloat(t.rowEl(31)!.style.top) - t.scroll.scrollTop;
    expect(top31 + ROW_HEIGHT).toBeCloseTo(360, 3);
  });

  test("selection set from Python is reflected", async () => {
    const t = mount();
    await t.loaded(4);
    t.pySet("selected_ids", [id(4)]);
    expect(t.rowEl(4)!.classList.contains("rlv-selected")).toBe(true);
    expect(t.el.querySelector(".rlv-selcount")!.textContent).toBe("1 selected");
  });
});

describe("expanding clipped cells", () => {
  test("the ▸ fetches the full text via rpc 'cell'; double-click on another cell too", async () => {
    const t = mount();
    const r0 = await t.loaded(0);
    const td = r0.querySelector('.rlv-td[data-col="response"]')!;
    expect(td.classList.contains("rlv-can-expand")).toBe(true);
    t.click(td.querySelector(".rlv-expand")!);
    await vi.waitFor(() => expect(t.el.querySelector(".rlv-expanded")?.textContent).toContain("FULL response of 1000000000"));
    const call = t.sent.find((m) => m.method === "cell");
    expect(call.params).toEqual({ sample_id: 1_000_000_000, column: "response" });
    expect(t.state.selected_ids).toEqual([]); // the affordance does not select
    // double-click a non-clipped text cell: shown from local data, no rpc
    const nCell = t.sent.filter((m) => m.method === "cell").length;
    t.rowEl(3)!.querySelector('.rlv-td[data-col="prompt"] .rlv-val')!.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    await vi.waitFor(() => expect(t.el.querySelector(".rlv-expanded")?.textContent).toContain("prompt 3"));
    expect(t.sent.filter((m) => m.method === "cell").length).toBe(nCell);
    expect(t.el.querySelectorAll(".rlv-expanded").length).toBe(1);
    t.click(t.el.querySelector(".rlv-expanded-close")!);
    expect(t.el.querySelector(".rlv-expanded")).toBeNull();
  });
});

describe("errors and generations", () => {
  test("a rejected rpc shows .rlv-error and the table keeps working", async () => {
    const t = mount();
    await t.loaded(0);
    t.ctl.fail = "database is locked";
    t.scrollTo(MAX_SCROLL_PX * 0.3); // pages there are not cached: their fetch fails
    await vi.waitFor(() => expect(t.el.querySelector(".rlv-error")!.textContent).toContain("database is locked"));
    // the rows stay as placeholders at the right indices instead of breaking the table
    const vis = t.visibleRows();
    expect(vis.length).toBeGreaterThan(0);
    expect(vis.every((r) => r.classList.contains("rlv-loading") && Number(r.dataset.row) > 250_000)).toBe(true);
    t.ctl.fail = "";
    t.scrollTo(0);
    t.scrollTo(MAX_SCROLL_PX / 4);
    const row = Number(t.visibleRows()[12].dataset.row);
    await t.loaded(row);
    expect(t.el.querySelector(".rlv-error")!.textContent).toBe("");
  });

  test("the error trait is shown", () => {
    const t = mount();
    t.pySet("error", "filter failed: no column 'foo'");
    expect(t.el.querySelector(".rlv-error")!.textContent).toBe("filter failed: no column 'foo'");
    t.pySet("error", "");
    expect(t.el.querySelector(".rlv-error")!.textContent).toBe("");
  });

  test("a generation change refetches and drops stale replies", async () => {
    const t = mount();
    const r0 = await t.loaded(0);
    expect(r0.dataset.id).toBe(String(idFor(0, 1)));
    const n = t.rowsCalls().length;
    t.pySet("generation", 2);
    await vi.waitFor(() => expect(t.rowEl(0)!.dataset.id).toBe(String(idFor(0, 2))));
    expect(t.rowsCalls().length).toBeGreaterThan(n);
    expect(t.rowsCalls().at(-1)!.params.offset).toBe(0);

    // a reply stamped with an older generation is dropped
    t.ctl.replyGeneration = 2;
    t.ctl.hold = true;
    t.pySet("generation", 3);
    expect(t.rowEl(0)!.classList.contains("rlv-loading")).toBe(true);
    t.release();
    await new Promise((r) => setTimeout(r, 10));
    expect(t.rowEl(0)!.dataset.id).toBeUndefined();
    expect(t.rowEl(0)!.classList.contains("rlv-loading")).toBe(true);
  });

  test("a reply from a newer generation is used once the trait catches up", async () => {
    const t = mount();
    await t.loaded(0);
    t.ctl.replyGeneration = 2; // Python bumped generation; the trait has not arrived yet
    t.scrollTo(MAX_SCROLL_PX / 2);
    await new Promise((r) => setTimeout(r, 20));
    const n = t.rowsCalls().length;
    t.ctl.hold = true;
    t.pySet("generation", 2);
    // the visible pages were already cached under generation 2: shown without a new request
    const row = Number(t.visibleRows()[12].dataset.row);
    expect(t.rowEl(row)!.dataset.id).toBe(String(idFor(row, 2)));
    const forVisible = t.rowsCalls().slice(n).filter((m) => m.params.offset === Math.floor(row / PAGE_SIZE) * PAGE_SIZE);
    expect(forVisible.length).toBe(0);
  });

  test("cleanup removes the DOM and every listener", () => {
    const t = mount();
    expect(t.listenerCount()).toBeGreaterThan(0);
    t.cleanup();
    cleanups = cleanups.filter((c) => c !== t.cleanup);
    expect(t.listenerCount()).toBe(0);
    expect(t.el.querySelector(".rlv-sample-table")).toBeNull();
  });
});
