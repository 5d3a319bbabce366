/**
 * SampleTable front end (anywidget): a virtualized, server-sorted table of samples.
 *
 * Python owns the data (sort / search / filter run in the database); this view only pulls the
 * pages it needs with rpc "rows" {offset, limit}, keyed by the `generation` trait (pager.ts), and
 * recycles a fixed pool of row elements (rows.ts), so a million rows cost the same as a hundred.
 * All model text is written with textContent (prompts can contain HTML).
 *
 * This module wires the parts (toolbar, header, rows, selection, expanded cell, pager) to the
 * model; each part owns its DOM.
 */
import { createRpc, type AnyModel } from "../lib/rpc";
import type { CellReply, ColumnInfo, RowsReply } from "../lib/protocol";
import { scrollTopForRow, scrollTopToReveal } from "../lib/virtual";
import { el, ModelEvents } from "../lib/dom";
import { CSS } from "./style";
import { Pager } from "./pager";
import { Rows, ROW_HEIGHT } from "./rows";
import { Header, type Tracks } from "./header";
import { Toolbar } from "./toolbar";
import { Selection } from "./selection";
import { ExpandedCell } from "./expanded";

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

const num = (v: unknown, d: number) => (typeof v === "number" && Number.isFinite(v) ? v : d);

/** One SampleTable view. */
class SampleTableView {
  private readonly rpc: ReturnType<typeof createRpc>;
  private readonly events: ModelEvents;
  private readonly root: HTMLDivElement;
  private readonly errorLine: HTMLDivElement;
  private readonly toolbar: Toolbar;
  private readonly header: Header;
  private readonly rows: Rows;
  private readonly pager: Pager;
  private readonly selection: Selection;
  private readonly expanded: ExpandedCell;
  private readonly themeObserver: MutationObserver | null = null;

  private columns: ColumnInfo[] = [];
  private total = 0;
  private height = 360;
  private rpcError = "";
  private disposed = false;

  constructor(
    private readonly model: AnyModel,
    host: HTMLElement,
  ) {
    const doc = host.ownerDocument;
    this.rpc = createRpc(model);
    this.events = new ModelEvents(model);
    this.pager = new Pager({
      fetchRows: async (offset, limit) => (await this.rpc.call<RowsReply>("rows", { offset, limit })).result,
      settled: () => this.update(),
      report: (msg) => {
        if (msg || this.rpcError) this.setRpcError(msg);
      },
    });

    this.root = el(doc, "div", "rlv-sample-table");
    this.toolbar = new Toolbar(
      doc,
      (text) => {
        if (text === String(model.get("search") || "")) return;
        model.set("search", text);
        model.save_changes();
      },
      () => this.selection.clear(),
    );
    this.errorLine = el(doc, "div", "rlv-error");
    this.errorLine.setAttribute("role", "alert");
    this.header = new Header(doc, (name) => this.sortBy(name), (tracks) => this.applyTracks(tracks));
    this.rows = new Rows(doc, () => this.height);
    this.expanded = new ExpandedCell(
      doc,
      this.rows.spacer,
      async (sampleId, column) => String((await this.rpc.call<CellReply>("cell", { sample_id: sampleId, column })).result?.text ?? ""),
      (msg) => this.setRpcError(msg),
    );
    this.selection = new Selection(model, {
      pager: this.pager,
      note: (text) => this.toolbar.setNote(text),
      changed: () => {
        this.updateCounts();
        this.paint();
      },
      reveal: (row) => {
        const scroll = this.rows.scroll;
        scroll.scrollTop = scrollTopToReveal(row, ROW_HEIGHT, this.rows.viewportHeight(), this.total, scroll.scrollTop);
        this.update();
      },
      isDisposed: () => this.disposed,
    });
    this.root.append(el(doc, "style", undefined, CSS), this.toolbar.el, this.errorLine, this.header.wrap, this.rows.scroll);
    host.append(this.root);

    const applyTheme = () => this.root.classList.toggle("rlv-dark", isDarkHost());
    applyTheme();
    if (typeof MutationObserver !== "undefined" && document.body) {
      this.themeObserver = new MutationObserver(applyTheme);
      this.themeObserver.observe(document.body, { attributes: true, attributeFilter: ["class", "data-jp-theme-light"] });
    }

    this.listenDom();
    this.listenModel();
    this.readAll();
    this.buildHeader();
    this.buildPool();
    this.updateCounts();
    this.showErrors();
    this.update();

    // Lets browser tests (and users in the console) jump to a row index, scaled spacer included.
    (this.root as any).rlvScrollToRow = (row: number, align: "start" | "end" | "center" = "center") => {
      const scroll = this.rows.scroll;
      scroll.scrollTop = scrollTopForRow(row, ROW_HEIGHT, this.rows.viewportHeight(), this.total, align);
      this.update();
      return scroll.scrollTop;
    };
  }

  // ------------------------------------------------------------------ errors and counts
  private showErrors(): void {
    const traitErr = String(this.model.get("error") || "");
    this.errorLine.textContent = [traitErr, this.rpcError].filter(Boolean).join("\n");
  }

  private setRpcError(msg: string): void {
    this.rpcError = msg;
    this.showErrors();
  }

  private updateCounts(): void {
    this.toolbar.showCounts(this.total, this.selection.selected.size);
  }

  // ------------------------------------------------------------------ header and rows
  private buildHeader(): void {
    this.applyTracks(this.header.build(this.columns));
    this.showSort();
  }

  /** The header's grid columns, on the rows too (a resized column resizes its cells). */
  private applyTracks({ template, minWidth }: Tracks): void {
    this.root.style.setProperty("--rlv-cols", template);
    this.rows.spacer.style.minWidth = `${minWidth}px`;
  }

  private showSort(): void {
    this.header.showSort(String(this.model.get("sort_by") || ""), !!this.model.get("sort_desc"));
  }

  private sortBy(name: string): void {
    const model = this.model;
    const col = this.columns.find((c) => c.name === name);
    if (String(model.get("sort_by") || "") === name) {
      model.set("sort_desc", !model.get("sort_desc")); // second click flips
    } else {
      model.set("sort_by", name);
      // users look for the largest reward / KL first; text reads naturally A→Z
      model.set("sort_desc", col ? col.kind !== "text" : false);
    }
    model.save_changes();
    this.showSort();
    this.rows.scroll.scrollTop = 0;
  }

  private buildPool(): void {
    this.rows.build(this.columns);
    this.expanded.raise(); // keep the panel above the rows
  }

  /** Positions and fills the pooled rows for the current scroll position (no fetching). */
  private paint(): void {
    if (this.disposed) return;
    const win = this.rows.paint(
      {
        columns: this.columns,
        total: this.total,
        generation: this.pager.generation,
        pageOf: (row) => this.pager.pageOf(row),
        selected: this.selection.selected,
        cursor: this.selection.cursor,
      },
      () => this.buildPool(),
    );
    this.expanded.paint(win);
  }

  /** Paints, then asks for the pages the window needs. */
  private update(): void {
    this.paint();
    const win = this.rows.win;
    if (this.disposed || !win || this.columns.length === 0) return;
    this.pager.pump(win, this.total);
  }

  // ------------------------------------------------------------------ events
  private listenDom(): void {
    const { scroll, spacer } = this.rows;
    scroll.addEventListener("scroll", () => {
      this.header.wrap.scrollLeft = scroll.scrollLeft;
      this.update(); // synchronous: scroll events already arrive once per frame
    });
    scroll.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        void this.selection.move(ev.key === "ArrowDown" ? 1 : -1, ev.shiftKey, this.total, this.rows.win?.firstVisible ?? null);
      } else if (ev.key === "Escape" && this.expanded.isOpen) {
        this.expanded.close();
      }
    });
    spacer.addEventListener("click", (ev) => {
      const target = ev.target as HTMLElement;
      const rowEl = target.closest(".rlv-row") as HTMLElement | null;
      if (!rowEl || rowEl.dataset.row === undefined) return;
      const row = Number(rowEl.dataset.row);
      if (target.closest(".rlv-expand")) {
        const td = target.closest(".rlv-td") as HTMLElement;
        void this.expand(row, td.dataset.col || "");
        return;
      }
      this.selection.click(row, ev.shiftKey, ev.ctrlKey || ev.metaKey);
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
      void this.expand(Number(rowEl.dataset.row), td.dataset.col || "");
    });
  }

  private expand(row: number, column: string): Promise<void> {
    return this.expanded.toggle(row, column, this.pager.pageOf(row), this.columns, () => this.rows.win);
  }

  private readAll(): void {
    const model = this.model;
    this.columns = (model.get("columns") as ColumnInfo[]) || [];
    this.total = Math.max(0, num(model.get("row_count"), 0));
    this.pager.generation = num(model.get("generation"), 0);
    this.height = Math.max(60, num(model.get("height"), 360));
    this.selection.readTrait();
    this.toolbar.showSearch(String(model.get("search") || ""), true);
    this.rows.scroll.style.height = `${this.height}px`;
  }

  /** A new order or filter starts at the top. */
  private resetScroll = (): void => {
    this.showSort();
    this.selection.anchor = null;
    this.selection.cursor = null;
    this.expanded.close();
    this.rows.scroll.scrollTop = 0;
    this.update();
  };

  private listenModel(): void {
    const model = this.model;
    const on = (ev: string, cb: () => void) => this.events.on(ev, cb);
    on("change:generation", () => {
      this.pager.setGeneration(num(model.get("generation"), 0));
      this.selection.anchor = null;
      this.selection.cancel();
      this.expanded.close();
      this.rows.invalidate();
      this.update();
    });
    on("change:row_count", () => {
      this.total = Math.max(0, num(model.get("row_count"), 0));
      const sel = this.selection;
      if (sel.cursor !== null && sel.cursor >= this.total) sel.cursor = null;
      this.updateCounts();
      this.update();
    });
    on("change:columns", () => {
      this.columns = (model.get("columns") as ColumnInfo[]) || [];
      this.expanded.close();
      this.buildHeader();
      this.buildPool();
      this.update();
    });
    on("change:sort_by", this.resetScroll);
    on("change:sort_desc", this.resetScroll);
    on("change:search", () => {
      this.toolbar.showSearch(String(model.get("search") || "")); // don't clobber typing
      this.resetScroll();
    });
    on("change:selected_ids", () => {
      this.selection.readTrait();
      this.updateCounts();
      this.paint();
    });
    on("change:error", () => this.showErrors());
    on("change:height", () => {
      this.height = Math.max(60, num(model.get("height"), 360));
      this.rows.scroll.style.height = `${this.height}px`;
      this.buildPool();
      this.update();
    });
  }

  dispose(): void {
    this.disposed = true;
    this.pager.dispose();
    this.toolbar.dispose();
    this.header.dispose();
    this.events.dispose();
    this.rpc.dispose();
    this.themeObserver?.disconnect();
    this.root.remove();
  }
}

/** Renders one SampleTable view into `el`; returns the cleanup function. */
function render({ model, el: host }: { model: AnyModel; el: HTMLElement }): () => void {
  const view = new SampleTableView(model, host);
  return () => view.dispose();
}

export default { render };
