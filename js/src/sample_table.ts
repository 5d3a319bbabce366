/**
 * SampleTable front end (anywidget): a virtualized, server-sorted table of samples.
 *
 * Python owns the data (sort / search / filter run in the database); this view only pulls the
 * pages it needs with rpc "rows" {offset, limit}, keyed by the `generation` trait, and recycles a
 * fixed pool of row elements, so a million rows cost the same as a hundred.
 * All model text is written with textContent (prompts can contain HTML).
 */

import { createRpc, type AnyModel } from "./lib/rpc";
import type { ColumnInfo, RowsReply, CellReply } from "./lib/protocol";
import { computeWindow, scrollTopForRow, scrollTopToReveal, pagesFor, pageKey, LruCache, type RowWindow } from "./lib/virtual";
import { formatCell, formatCount, barGeometry, isIdColumn } from "./lib/format";

/** Rows per "rows" request. */
export const PAGE_SIZE = 100;
/** Fixed row height in px (virtual maths depends on it). */
export const ROW_HEIGHT = 28;
const OVERSCAN = 8; // rows rendered above/below the viewport
const PREFETCH = 30; // rows beyond the overscan whose pages are fetched ahead
const MAX_INFLIGHT = 4; // concurrent "rows" requests; more would only queue stale pages in the kernel
const CACHE_PAGES = 64;
const SEARCH_DEBOUNCE_MS = 250;
const RETRY_AFTER_MS = 3000; // a failed page is not re-requested by scrolling before this
const MAX_SELECTED = 5000; // the kernel's cap on selected rows when its `max_selected` trait is absent

interface Page {
  ids: number[];
  rows: (number | string | null)[][];
  clipped: boolean[][] | null;
}

interface Expanded {
  row: number;
  sampleId: number;
  column: string;
  text: string | null; // null while loading
  error: string;
}

const CSS = `
.rlv-sample-table {
  --rlv-fg: var(--jp-ui-font-color1, #222);
  --rlv-muted: var(--jp-ui-font-color2, #777);
  --rlv-bg: var(--jp-layout-color1, #fff);
  --rlv-bg2: var(--jp-layout-color2, #eee);
  --rlv-border: var(--jp-border-color2, #ddd);
  --rlv-brand: var(--jp-brand-color1, #1976d2);
  --rlv-neg: var(--jp-error-color1, #d32f2f);
  /* Selection: a translucent tint of the brand colour over the row (fallback rgba where color-mix
     is missing) plus a solid brand edge; the text keeps the theme's font colour, so it keeps the
     theme's contrast (light: ≈12:1, dark: ≈10:1 on the tint, ≥ 7:1 with a value bar on top). */
  --rlv-sel-fallback: rgba(25, 118, 210, 0.16);
  --rlv-sel-pct: 16%;
  --rlv-sel-hover-pct: 24%;
  --rlv-bar-alpha: .22;
  font-family: var(--jp-ui-font-family, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--rlv-fg);
  background: var(--rlv-bg);
  border: 1px solid var(--rlv-border);
  border-radius: 3px;
  box-sizing: border-box;
  min-width: 0;
}
.rlv-sample-table.rlv-dark {
  --rlv-fg: var(--jp-ui-font-color1, #e0e0e0);
  --rlv-muted: var(--jp-ui-font-color2, #9e9e9e);
  --rlv-bg: var(--jp-layout-color1, #1e1e1e);
  --rlv-bg2: var(--jp-layout-color2, #2d2d2d);
  --rlv-border: var(--jp-border-color2, #444);
  --rlv-brand: var(--jp-brand-color1, #64b5f6);
  --rlv-neg: var(--jp-error-color1, #ef5350);
  --rlv-sel-fallback: rgba(100, 181, 246, 0.2);
  --rlv-sel-pct: 22%;
  --rlv-sel-hover-pct: 30%;
  --rlv-bar-alpha: .3;
}
.rlv-sample-table * { box-sizing: border-box; }
.rlv-toolbar { display: flex; align-items: center; gap: 10px; padding: 4px 6px; border-bottom: 1px solid var(--rlv-border); background: var(--rlv-bg2); }
.rlv-search { flex: 0 1 260px; min-width: 80px; padding: 2px 6px; font: inherit; color: var(--rlv-fg); background: var(--rlv-bg); border: 1px solid var(--rlv-border); border-radius: 2px; }
.rlv-search:focus { outline: 1px solid var(--rlv-brand); }
.rlv-count, .rlv-selcount, .rlv-note { color: var(--rlv-muted); white-space: nowrap; }
.rlv-note:empty { display: none; }
.rlv-clear { font: inherit; color: var(--rlv-fg); background: var(--rlv-bg); border: 1px solid var(--rlv-border); border-radius: 2px; padding: 1px 8px; cursor: pointer; }
.rlv-clear:disabled { opacity: .5; cursor: default; }
.rlv-error { color: var(--rlv-neg); padding: 3px 6px; border-bottom: 1px solid var(--rlv-border); white-space: pre-wrap; }
.rlv-error:empty { display: none; }
.rlv-head-wrap { overflow: hidden; scrollbar-gutter: stable; border-bottom: 1px solid var(--rlv-border); background: var(--rlv-bg2); }
.rlv-head, .rlv-row { display: grid; grid-template-columns: var(--rlv-cols); }
.rlv-th { padding: 0 6px; height: 28px; line-height: 28px; font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer; user-select: none; border-right: 1px solid var(--rlv-border); }
.rlv-th:hover { color: var(--rlv-brand); }
.rlv-th.rlv-sorted { color: var(--rlv-brand); }
.rlv-arrow { margin-left: 3px; }
.rlv-scroll { position: relative; overflow: auto; outline: none; scrollbar-gutter: stable; overflow-anchor: none; }
.rlv-scroll:focus-visible { box-shadow: inset 0 0 0 1px var(--rlv-brand); }
.rlv-spacer { position: relative; }
.rlv-row { position: absolute; left: 0; right: 0; height: ${ROW_HEIGHT}px; line-height: ${ROW_HEIGHT}px; border-bottom: 1px solid var(--rlv-border); cursor: default; }
.rlv-row:hover { background: var(--rlv-bg2); }
.rlv-row.rlv-selected { color: var(--rlv-fg); background: var(--rlv-sel-fallback); background: color-mix(in srgb, var(--rlv-brand) var(--rlv-sel-pct), transparent); box-shadow: inset 3px 0 0 var(--rlv-brand); }
.rlv-row.rlv-selected:hover { background: color-mix(in srgb, var(--rlv-brand) var(--rlv-sel-hover-pct), transparent); }
.rlv-row.rlv-cursor { box-shadow: inset 0 0 0 1px var(--rlv-brand); }
.rlv-row.rlv-selected.rlv-cursor { box-shadow: inset 3px 0 0 var(--rlv-brand), inset 0 0 0 1px var(--rlv-brand); }
.rlv-row.rlv-loading .rlv-td { color: var(--rlv-muted); }
.rlv-td { position: relative; padding: 0 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; border-right: 1px solid var(--rlv-border); }
.rlv-num { text-align: right; font-variant-numeric: tabular-nums; }
.rlv-td.rlv-null { background: repeating-linear-gradient(135deg, transparent 0 4px, var(--rlv-bg2) 4px 8px); }
.rlv-val { position: relative; }
.rlv-bar { position: absolute; top: 5px; bottom: 5px; background: var(--rlv-brand); opacity: var(--rlv-bar-alpha); pointer-events: none; }
.rlv-bar.rlv-neg { background: var(--rlv-neg); }
.rlv-text { padding-left: 16px; }
.rlv-expand { position: absolute; left: 2px; top: 0; width: 13px; border: 0; padding: 0; background: none; color: var(--rlv-muted); cursor: pointer; font: inherit; line-height: ${ROW_HEIGHT}px; visibility: hidden; }
.rlv-td.rlv-can-expand .rlv-expand { visibility: visible; }
.rlv-expand:hover { color: var(--rlv-brand); }
.rlv-expanded { position: absolute; left: 0; right: 0; z-index: 2; max-height: 240px; overflow: auto; padding: 6px 28px 6px 8px; white-space: pre-wrap; word-break: break-word; background: var(--rlv-bg); color: var(--rlv-fg); border: 1px solid var(--rlv-brand); box-shadow: 0 2px 6px rgba(0,0,0,.25); font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 12px); line-height: 1.4; }
.rlv-expanded-title { font-family: var(--jp-ui-font-family, sans-serif); color: var(--rlv-muted); margin-bottom: 4px; }
.rlv-expanded-close { position: absolute; right: 4px; top: 2px; border: 0; background: none; color: var(--rlv-muted); cursor: pointer; font-size: 16px; }
.rlv-expanded-error { color: var(--rlv-neg); }
`;

/** Grid track for a column: fixed for numbers, flexible for text. */
function trackFor(c: ColumnInfo): [string, number] {
  if (c.kind === "text") return ["minmax(160px, 1fr)", 160];
  if (isIdColumn(c.name)) return ["110px", 110];
  return c.kind === "int" ? ["80px", 80] : ["96px", 96];
}

/** Small local theme probe: JupyterLab marks <body data-jp-theme-light>, VS Code adds vscode-dark. */
function isDarkHost(): boolean {
  const b = typeof document !== "undefined" ? document.body : null;
  if (!b) return false;
  if (b.dataset.jpThemeLight === "false") return true;
  if (b.dataset.jpThemeLight === "true") return false;
  if (b.classList.contains("vscode-dark") || b.classList.contains("vscode-high-contrast")) return true;
  if (b.classList.contains("vscode-light")) return false;
  try {
    return typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches;
  } catch {
    return false;
  }
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

interface RowEl {
  el: HTMLDivElement;
  cells: { td: HTMLDivElement; val: HTMLSpanElement; bar: HTMLSpanElement | null; expand: HTMLButtonElement | null }[];
  key: string; // what the element currently shows, to skip rewriting unchanged rows
}

/** Renders one SampleTable view into `el`; returns the cleanup function. */
function render({ model, el }: { model: AnyModel; el: HTMLElement }): () => void {
  const rpc = createRpc(model);
  const listeners: [string, (...a: any[]) => void][] = [];
  const on = (ev: string, cb: (...a: any[]) => void) => {
    model.on(ev, cb);
    listeners.push([ev, cb]);
  };
  let disposed = false;

  // ------------------------------------------------------------------ DOM skeleton
  const root = h("div", "rlv-sample-table");
  const style = h("style");
  style.textContent = CSS;
  const toolbar = h("div", "rlv-toolbar");
  const search = h("input", "rlv-search");
  search.type = "search";
  search.placeholder = "Search…";
  search.setAttribute("aria-label", "Search samples");
  const count = h("span", "rlv-count");
  const selCount = h("span", "rlv-selcount");
  const clearBtn = h("button", "rlv-clear", "clear selection");
  clearBtn.type = "button";
  const note = h("span", "rlv-note");
  toolbar.append(search, count, selCount, clearBtn, note);
  const errorLine = h("div", "rlv-error");
  errorLine.setAttribute("role", "alert");
  const headWrap = h("div", "rlv-head-wrap");
  const head = h("div", "rlv-head");
  headWrap.append(head);
  const scroll = h("div", "rlv-scroll");
  scroll.tabIndex = 0;
  scroll.setAttribute("role", "grid");
  const spacer = h("div", "rlv-spacer");
  scroll.append(spacer);
  root.append(style, toolbar, errorLine, headWrap, scroll);
  el.append(root);

  const applyTheme = () => root.classList.toggle("rlv-dark", isDarkHost());
  applyTheme();
  let themeObserver: MutationObserver | null = null;
  if (typeof MutationObserver !== "undefined" && document.body) {
    themeObserver = new MutationObserver(applyTheme);
    themeObserver.observe(document.body, { attributes: true, attributeFilter: ["class", "data-jp-theme-light"] });
  }

  // ------------------------------------------------------------------ state
  let columns: ColumnInfo[] = [];
  let total = 0;
  let generation = 0;
  let height = 360;
  const cache = new LruCache<string, Page>(CACHE_PAGES);
  const inflight = new Map<string, Promise<Page | null>>();
  const failedAt = new Map<string, number>();
  let pool: RowEl[] = [];
  let selected = new Set<number>();
  let anchor: number | null = null; // row index of the last plain/ctrl click (shift ranges start here)
  let cursor: number | null = null; // row index keyboard navigation moves from
  let expanded: Expanded | null = null;
  let expandedEl: HTMLDivElement | null = null;
  let rpcError = "";
  let win: RowWindow | null = null;
  let searchTimer: any = null;
  let selectToken = 0; // cancels stale async selections (shift ranges / keyboard over unloaded pages)

  const num = (v: any, d: number) => (typeof v === "number" && Number.isFinite(v) ? v : d);
  const viewportHeight = () => scroll.clientHeight || height; // clientHeight is 0 without layout (tests)

  function showErrors() {
    const traitErr = String(model.get("error") || "");
    errorLine.textContent = [traitErr, rpcError].filter(Boolean).join("\n");
  }
  function setRpcError(msg: string) {
    rpcError = msg;
    showErrors();
  }

  function updateCounts() {
    count.textContent = formatCount(total);
    selCount.textContent = `${selected.size.toLocaleString("en-US")} selected`;
    clearBtn.disabled = selected.size === 0;
  }

  // ------------------------------------------------------------------ header
  function buildHeader() {
    head.replaceChildren();
    const tracks = columns.map(trackFor);
    const minWidth = tracks.reduce((s, t) => s + t[1], 0);
    root.style.setProperty("--rlv-cols", tracks.map((t) => t[0]).join(" ") || "1fr");
    head.style.minWidth = `${minWidth}px`;
    spacer.style.minWidth = `${minWidth}px`;
    for (const c of columns) {
      const th = h("div", "rlv-th" + (c.kind === "text" ? "" : " rlv-num"));
      th.dataset.col = c.name;
      th.title = c.name;
      th.setAttribute("role", "columnheader");
      th.append(h("span", "rlv-th-name", c.name), h("span", "rlv-arrow"));
      head.append(th);
    }
    updateSortArrows();
  }

  function updateSortArrows() {
    const by = String(model.get("sort_by") || "");
    const desc = !!model.get("sort_desc");
    for (const th of Array.from(head.children) as HTMLElement[]) {
      const active = th.dataset.col === by;
      th.classList.toggle("rlv-sorted", active);
      th.setAttribute("aria-sort", active ? (desc ? "descending" : "ascending") : "none");
      (th.querySelector(".rlv-arrow") as HTMLElement).textContent = active ? (desc ? "▼" : "▲") : "";
    }
  }

  head.addEventListener("click", (ev) => {
    const th = (ev.target as HTMLElement).closest(".rlv-th") as HTMLElement | null;
    if (!th || !th.dataset.col) return;
    const name = th.dataset.col;
    const col = columns.find((c) => c.name === name);
    if (String(model.get("sort_by") || "") === name) {
      model.set("sort_desc", !model.get("sort_desc")); // second click flips
    } else {
      model.set("sort_by", name);
      // users look for the largest reward / KL first; text reads naturally A→Z
      model.set("sort_desc", col ? col.kind !== "text" : false);
    }
    model.save_changes();
    updateSortArrows();
    scroll.scrollTop = 0;
  });

  // ------------------------------------------------------------------ row pool
  function buildPool() {
    const n = Math.ceil(viewportHeight() / ROW_HEIGHT) + 2 * OVERSCAN + 2;
    for (const r of pool) r.el.remove();
    pool = [];
    for (let i = 0; i < n; i++) {
      const rowEl = h("div", "rlv-row");
      rowEl.setAttribute("role", "row");
      rowEl.style.display = "none";
      const cells: RowEl["cells"] = [];
      for (const c of columns) {
        const numeric = c.kind !== "text";
        const td = h("div", "rlv-td" + (numeric ? " rlv-num" : " rlv-text"));
        td.dataset.col = c.name;
        td.setAttribute("role", "gridcell");
        let bar: HTMLSpanElement | null = null;
        let expand: HTMLButtonElement | null = null;
        if (numeric && !isIdColumn(c.name)) {
          bar = h("span", "rlv-bar");
          td.append(bar);
        }
        if (!numeric) {
          expand = h("button", "rlv-expand", "▸");
          expand.type = "button";
          expand.tabIndex = -1;
          expand.title = "Show the full text";
          td.append(expand);
        }
        const val = h("span", "rlv-val");
        td.append(val);
        rowEl.append(td);
        cells.push({ td, val, bar, expand });
      }
      spacer.append(rowEl);
      pool.push({ el: rowEl, cells, key: "" });
    }
    if (expandedEl) spacer.append(expandedEl); // keep the panel above the rows
  }

  function pageOf(row: number): Page | undefined {
    return cache.peek(pageKey(generation, Math.floor(row / PAGE_SIZE)));
  }

  /** The sample id of a row if its page is loaded. */
  function idOf(row: number): number | undefined {
    const p = pageOf(row);
    return p ? p.ids[row % PAGE_SIZE] : undefined;
  }

  function paintRow(r: RowEl, row: number, top: number) {
    const page = pageOf(row);
    const i = row % PAGE_SIZE;
    const loaded = !!page && i < page.ids.length;
    const id = loaded ? page!.ids[i] : undefined;
    const isSel = id !== undefined && selected.has(id);
    r.el.style.display = "";
    r.el.style.top = `${top}px`;
    r.el.classList.toggle("rlv-selected", isSel);
    r.el.classList.toggle("rlv-cursor", cursor === row);
    r.el.setAttribute("aria-selected", String(isSel));
    const key = `${generation}:${row}:${loaded ? 1 : 0}`;
    if (r.key === key) return; // content unchanged: only position/selection needed updating
    r.key = key;
    r.el.dataset.row = String(row);
    r.el.classList.toggle("rlv-loading", !loaded);
    if (loaded) r.el.dataset.id = String(id);
    else delete r.el.dataset.id;
    const values = loaded ? page!.rows[i] || [] : null;
    const clipped = loaded && page!.clipped ? page!.clipped[i] || null : null;
    columns.forEach((c, ci) => {
      const cell = r.cells[ci];
      if (!cell) return;
      if (!values) {
        cell.val.textContent = ci === 0 ? "…" : "";
        cell.td.classList.remove("rlv-null", "rlv-can-expand");
        if (cell.bar) cell.bar.style.width = "0";
        return;
      }
      const v = values[ci];
      const f = formatCell(v, c);
      cell.val.textContent = f.text; // textContent only: model text may contain markup
      cell.td.classList.toggle("rlv-null", f.missing);
      if (cell.bar) {
        const g = barGeometry(typeof v === "number" ? v : f.missing ? null : Number(v), c.min, c.max);
        cell.bar.style.left = g ? `${(g.left * 100).toFixed(2)}%` : "0";
        cell.bar.style.width = g ? `${(g.width * 100).toFixed(2)}%` : "0";
        cell.bar.classList.toggle("rlv-neg", !!g && g.negative);
      }
      if (cell.expand) {
        const wasClipped = !!(clipped && clipped[ci]);
        const long = typeof v === "string" && (v.length > 24 || v.includes("\n"));
        cell.td.classList.toggle("rlv-can-expand", wasClipped || long);
        cell.td.dataset.clipped = wasClipped ? "1" : "";
      }
    });
  }

  /** Positions and fills the pooled rows for the current scroll position (no fetching). */
  function paint() {
    if (disposed) return;
    win = computeWindow({ rowHeight: ROW_HEIGHT, viewportHeight: viewportHeight(), scrollTop: scroll.scrollTop, total, overscan: OVERSCAN });
    spacer.style.height = `${win.spacerHeight}px`;
    if (win.last - win.first + 1 > pool.length && columns.length > 0) buildPool(); // viewport grew
    const used = new Set<number>();
    if (pool.length > 0) {
      for (let row = win.first; row <= win.last; row++) {
        const slot = row % pool.length; // row-modulo slots: rows that stay visible keep their element
        if (used.has(slot)) continue; // cannot happen while pool >= window; guard anyway
        used.add(slot);
        paintRow(pool[slot], row, win.topOf(row));
      }
    }
    pool.forEach((r, slot) => {
      if (!used.has(slot) && r.el.style.display !== "none") {
        r.el.style.display = "none";
        r.key = "";
        delete r.el.dataset.row;
        delete r.el.dataset.id;
      }
    });
    paintExpanded();
  }

  // ------------------------------------------------------------------ fetching
  function storeReply(page: number, reply: RowsReply): Page | null {
    const g = num(reply.generation, generation);
    if (g < generation) return null; // stale: the data changed while this was in flight
    const p: Page = { ids: reply.ids || [], rows: reply.rows || [], clipped: reply.clipped || null };
    cache.set(pageKey(g, page), p);
    return g === generation ? p : null;
  }

  /**
   * Fetches one page for the current generation; concurrent asks share one request.
   * Resolves to null when the reply is stale or the call failed (the error is shown).
   */
  function fetchPage(page: number): Promise<Page | null> {
    const key = pageKey(generation, page);
    const hit = cache.get(key);
    if (hit) return Promise.resolve(hit);
    const pending = inflight.get(key);
    if (pending) return pending;
    const p = rpc
      .call<RowsReply>("rows", { offset: page * PAGE_SIZE, limit: PAGE_SIZE })
      .then(
        ({ result }) => {
          failedAt.delete(key);
          if (rpcError) setRpcError("");
          return storeReply(page, result);
        },
        (err: any) => {
          failedAt.set(key, Date.now());
          setRpcError(`Could not load rows ${page * PAGE_SIZE}–${(page + 1) * PAGE_SIZE - 1}: ${err?.message || err}`);
          return null;
        },
      )
      .finally(() => {
        inflight.delete(key);
        if (!disposed) {
          paint();
          pump();
        }
      });
    inflight.set(key, p);
    return p;
  }

  /**
   * Requests the pages the viewport needs, visible ones first, at most MAX_INFLIGHT at a time:
   * when the scrollbar is dragged through a million rows, only pages still in view get asked for.
   */
  function pump() {
    if (disposed || !win || total <= 0 || columns.length === 0) return;
    const now = Date.now();
    const visible = pagesFor(win.firstVisible, win.lastVisible, PAGE_SIZE);
    const around = pagesFor(Math.max(0, win.first - PREFETCH), Math.min(total - 1, win.last + PREFETCH), PAGE_SIZE);
    const want = [...visible, ...around.filter((p) => !visible.includes(p))];
    for (const page of want) {
      if (inflight.size >= MAX_INFLIGHT) break;
      const key = pageKey(generation, page);
      if (cache.has(key) || inflight.has(key)) continue;
      const failed = failedAt.get(key);
      if (failed !== undefined && now - failed < RETRY_AFTER_MS) continue;
      fetchPage(page);
    }
  }

  function update() {
    paint();
    pump();
  }

  scroll.addEventListener("scroll", () => {
    headWrap.scrollLeft = scroll.scrollLeft;
    update(); // synchronous: scroll events already arrive once per frame
  });

  // ------------------------------------------------------------------ selection
  function writeSelection(ids: Iterable<number>) {
    selected = new Set(ids);
    model.set("selected_ids", [...selected]); // a fresh array: traits only sync on assignment
    model.save_changes();
    updateCounts();
    paint();
  }

  /** The most rows the kernel lets be selected (its validator refuses more, keeping the old selection). */
  const maxSelected = (): number => Number(model.get("max_selected")) || MAX_SELECTED;

  /** Ids of rows lo..hi (inclusive), fetching missing pages; capped at `cap` rows, nearest the anchor. */
  async function idsInRange(lo: number, hi: number, from: number, cap: number): Promise<{ ids: number[]; capped: boolean } | null> {
    let capped = false;
    if (hi - lo + 1 > cap) {
      capped = true;
      if (from <= lo) hi = lo + cap - 1; // keep the end nearest the anchor
      else lo = hi - cap + 1;
    }
    const gen = generation;
    const pages = pagesFor(lo, hi, PAGE_SIZE);
    const got = await Promise.all(pages.map((p) => fetchPage(p)));
    if (gen !== generation || got.some((p) => !p)) return null;
    const ids: number[] = [];
    pages.forEach((p, k) => {
      const page = got[k]!;
      const start = Math.max(lo, p * PAGE_SIZE);
      const end = Math.min(hi, p * PAGE_SIZE + page.ids.length - 1);
      for (let r = start; r <= end; r++) ids.push(page.ids[r - p * PAGE_SIZE]);
    });
    return { ids, capped };
  }

  async function selectRange(row: number, additive: boolean) {
    if (anchor === null) anchor = row; // a shift-move with no anchor yet starts its range where it lands
    const from = anchor;
    const token = ++selectToken;
    const lo = Math.min(from, row);
    const hi = Math.max(from, row);
    const cap = maxSelected();
    note.textContent = hi - lo + 1 > PAGE_SIZE ? "selecting…" : "";
    const res = await idsInRange(lo, hi, from, cap);
    if (token !== selectToken || disposed) return;
    if (!res) {
      note.textContent = "range selection failed: rows could not be loaded";
      return;
    }
    let ids = res.ids;
    let capped = res.capped;
    if (additive) {
      // added to what is selected: the union is capped too, keeping the rows nearest the anchor
      const next = new Set(selected);
      const order = from <= lo ? ids : [...ids].reverse();
      for (const id of order) {
        if (next.size >= cap && !next.has(id)) {
          capped = true;
          break;
        }
        next.add(id);
      }
      ids = [...next];
    }
    note.textContent = capped ? `selection capped at ${cap.toLocaleString("en-US")} rows` : "";
    cursor = row;
    writeSelection(ids);
  }

  function clickRow(row: number, ev: MouseEvent) {
    const id = idOf(row);
    if (ev.shiftKey && anchor !== null) {
      void selectRange(row, ev.ctrlKey || ev.metaKey);
      return;
    }
    if (id === undefined) return; // placeholder row: nothing to select yet
    selectToken++;
    note.textContent = "";
    anchor = row;
    cursor = row;
    if (ev.ctrlKey || ev.metaKey) {
      const next = new Set(selected);
      if (next.has(id)) next.delete(id);
      else if (next.size >= maxSelected()) {
        note.textContent = `at most ${maxSelected().toLocaleString("en-US")} rows can be selected`;
        return;
      } else next.add(id);
      writeSelection(next);
    } else {
      writeSelection([id]);
    }
  }

  async function moveCursor(delta: number, extend: boolean) {
    if (total <= 0) return;
    const base = cursor ?? (win ? win.firstVisible - (delta > 0 ? 1 : -1) : 0);
    const row = Math.min(total - 1, Math.max(0, base + delta));
    const token = ++selectToken;
    if (extend && anchor === null) anchor = cursor ?? row; // Shift+arrow before any click: the range starts here
    cursor = row;
    scroll.scrollTop = scrollTopToReveal(row, ROW_HEIGHT, viewportHeight(), total, scroll.scrollTop);
    update();
    if (extend) {
      void selectRange(row, false);
      return;
    }
    const page = await fetchPage(Math.floor(row / PAGE_SIZE));
    if (token !== selectToken || disposed || !page) return;
    const id = page.ids[row % PAGE_SIZE];
    if (id === undefined) return;
    anchor = row;
    writeSelection([id]);
  }

  scroll.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      void moveCursor(ev.key === "ArrowDown" ? 1 : -1, ev.shiftKey);
    } else if (ev.key === "Escape" && expanded) {
      closeExpanded();
    }
  });

  clearBtn.addEventListener("click", () => {
    selectToken++;
    anchor = null;
    note.textContent = "";
    writeSelection([]);
  });

  // ------------------------------------------------------------------ expanded cell
  function closeExpanded() {
    expanded = null;
    if (expandedEl) expandedEl.remove();
    expandedEl = null;
  }

  function paintExpanded() {
    if (!expandedEl || !expanded || !win) return;
    const inView = expanded.row >= win.first && expanded.row <= win.last;
    expandedEl.style.display = inView ? "" : "none";
    if (inView) expandedEl.style.top = `${win.topOf(expanded.row) + ROW_HEIGHT}px`;
  }

  function fillExpanded() {
    if (!expanded) return;
    if (!expandedEl) {
      expandedEl = h("div", "rlv-expanded");
      spacer.append(expandedEl);
    }
    const title = h("div", "rlv-expanded-title", `${expanded.column} · sample ${expanded.sampleId}`);
    const close = h("button", "rlv-expanded-close", "×");
    close.type = "button";
    close.title = "Close";
    close.addEventListener("click", (e) => {
      e.stopPropagation();
      closeExpanded();
    });
    const body = h("div", expanded.error ? "rlv-expanded-text rlv-expanded-error" : "rlv-expanded-text");
    body.textContent = expanded.error || (expanded.text ?? "loading…"); // never innerHTML
    expandedEl.replaceChildren(close, title, body);
    expandedEl.addEventListener("click", (e) => e.stopPropagation());
    paintExpanded();
  }

  async function expandCell(row: number, colName: string) {
    const page = pageOf(row);
    const i = row % PAGE_SIZE;
    if (!page || i >= page.ids.length) return;
    const ci = columns.findIndex((c) => c.name === colName);
    if (ci < 0 || columns[ci].kind !== "text") return;
    const sampleId = page.ids[i];
    if (expanded && expanded.sampleId === sampleId && expanded.column === colName) {
      closeExpanded(); // the affordance toggles
      return;
    }
    const local = page.rows[i]?.[ci];
    const wasClipped = !!page.clipped?.[i]?.[ci];
    expanded = { row, sampleId, column: colName, text: wasClipped ? null : String(local ?? ""), error: "" };
    fillExpanded();
    if (!wasClipped) return; // the whole text is already here
    const mine = expanded;
    try {
      const { result } = await rpc.call<CellReply>("cell", { sample_id: sampleId, column: colName });
      if (expanded !== mine) return;
      mine.text = String(result?.text ?? "");
    } catch (err: any) {
      if (expanded !== mine) return;
      mine.error = `Could not load the full text: ${err?.message || err}`;
      setRpcError(mine.error);
    }
    fillExpanded();
  }

  spacer.addEventListener("click", (ev) => {
    const target = ev.target as HTMLElement;
    const rowEl = target.closest(".rlv-row") as HTMLElement | null;
    if (!rowEl || rowEl.dataset.row === undefined) return;
    const row = Number(rowEl.dataset.row);
    if (target.closest(".rlv-expand")) {
      const td = target.closest(".rlv-td") as HTMLElement;
      void expandCell(row, td.dataset.col || "");
      return;
    }
    clickRow(row, ev as MouseEvent);
  });

  spacer.addEventListener("mousedown", (ev) => {
    // shift-click extends the row selection, not the browser's text selection
    if (ev.shiftKey || ev.detail > 1) ev.preventDefault();
  });

  spacer.addEventListener("dblclick", (ev) => {
    const target = ev.target as HTMLElement;
    const rowEl = target.closest(".rlv-row") as HTMLElement | null;
    const td = target.closest(".rlv-td.rlv-text") as HTMLElement | null;
    if (!rowEl || !td || rowEl.dataset.row === undefined || target.closest(".rlv-expand")) return;
    ev.preventDefault();
    void expandCell(Number(rowEl.dataset.row), td.dataset.col || "");
  });

  // ------------------------------------------------------------------ search
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      searchTimer = null;
      if (search.value === String(model.get("search") || "")) return;
      model.set("search", search.value);
      model.save_changes();
    }, SEARCH_DEBOUNCE_MS);
  });

  // ------------------------------------------------------------------ traits
  function readAll() {
    columns = (model.get("columns") as ColumnInfo[]) || [];
    total = Math.max(0, num(model.get("row_count"), 0));
    generation = num(model.get("generation"), 0);
    height = Math.max(60, num(model.get("height"), 360));
    selected = new Set((model.get("selected_ids") as number[]) || []);
    search.value = String(model.get("search") || "");
    scroll.style.height = `${height}px`;
  }

  on("change:generation", () => {
    generation = num(model.get("generation"), 0);
    // pages of older generations are useless; a newer one may already hold early replies
    cache.deleteWhere((k) => Number(k.split(":")[0]) < generation);
    failedAt.clear();
    anchor = null;
    selectToken++;
    closeExpanded();
    for (const r of pool) r.key = "";
    update();
  });
  on("change:row_count", () => {
    total = Math.max(0, num(model.get("row_count"), 0));
    if (cursor !== null && cursor >= total) cursor = null;
    updateCounts();
    update();
  });
  on("change:columns", () => {
    columns = (model.get("columns") as ColumnInfo[]) || [];
    closeExpanded();
    buildHeader();
    buildPool();
    update();
  });
  const resetScroll = () => {
    updateSortArrows();
    anchor = null;
    cursor = null;
    closeExpanded();
    scroll.scrollTop = 0; // a new order or filter starts at the top
    update();
  };
  on("change:sort_by", resetScroll);
  on("change:sort_desc", resetScroll);
  on("change:search", () => {
    const s = String(model.get("search") || "");
    if (searchTimer === null && search.value !== s) search.value = s; // don't clobber typing
    resetScroll();
  });
  on("change:selected_ids", () => {
    selected = new Set((model.get("selected_ids") as number[]) || []);
    updateCounts();
    paint();
  });
  on("change:error", showErrors);
  on("change:height", () => {
    height = Math.max(60, num(model.get("height"), 360));
    scroll.style.height = `${height}px`;
    buildPool();
    update();
  });

  readAll();
  buildHeader();
  buildPool();
  updateCounts();
  showErrors();
  update();

  // Lets browser tests (and users in the console) jump to a row index, scaled spacer included.
  (root as any).rlvScrollToRow = (row: number, align: "start" | "end" | "center" = "center") => {
    scroll.scrollTop = scrollTopForRow(row, ROW_HEIGHT, viewportHeight(), total, align);
    update();
    return scroll.scrollTop;
  };

  return () => {
    disposed = true;
    clearTimeout(searchTimer);
    for (const [ev, cb] of listeners) model.off(ev, cb);
    rpc.dispose();
    themeObserver?.disconnect();
    root.remove();
  };
}

export default { render };
