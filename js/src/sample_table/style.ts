/** The SampleTable's stylesheet (one <style> inside the widget; nothing is fetched). */
import { ROW_HEIGHT } from "./rows";

export const CSS = `
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
/* Two lines of name, broken at the <wbr> after each "_" (labels.ts picks a label that fits them); the
   full name is the cell's title. */
.rlv-th { position: relative; display: flex; align-items: center; padding: 0 8px 0 6px; height: 36px; line-height: 15px; font-weight: 600; overflow: hidden; cursor: pointer; user-select: none; border-right: 1px solid var(--rlv-border); }
.rlv-th.rlv-num { justify-content: flex-end; text-align: right; }
.rlv-th-name { display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2; line-clamp: 2; overflow: hidden; white-space: normal; overflow-wrap: anywhere; min-width: 0; }
.rlv-th:hover { color: var(--rlv-brand); }
.rlv-th.rlv-sorted { color: var(--rlv-brand); }
.rlv-arrow { margin-left: 3px; flex: none; }
.rlv-arrow:empty { display: none; }
.rlv-resize { position: absolute; top: 0; right: 0; width: 7px; height: 100%; cursor: col-resize; z-index: 1; }
.rlv-resize:hover, .rlv-resizing .rlv-resize:active { background: linear-gradient(to right, transparent 3px, var(--rlv-brand) 3px 5px, transparent 5px); }
.rlv-head.rlv-resizing, .rlv-head.rlv-resizing .rlv-th { cursor: col-resize; }
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
