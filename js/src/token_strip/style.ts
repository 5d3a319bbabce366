/** The TokenStrip's stylesheet (one <style> inside the widget; nothing is fetched). */

/** Legend ramp width and tick label font size (px): the tick layout is computed from them. */
export const RAMP_WIDTH = 180;
export const TICK_FONT_PX = 11;

export const STYLE = `
.rlv-token-strip{--rlv-fg:var(--jp-ui-font-color1,#222);--rlv-fg2:var(--jp-ui-font-color2,#666);--rlv-bg:var(--jp-layout-color1,#fff);--rlv-border:var(--jp-border-color2,#ddd);--rlv-accent:var(--jp-brand-color1,#1976d2);position:relative;font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--rlv-fg)}
.rlv-token-strip.rlv-dark{--rlv-fg:var(--jp-ui-font-color1,#e0e0e0);--rlv-fg2:var(--jp-ui-font-color2,#aaa);--rlv-bg:var(--jp-layout-color1,#1e1e1e);--rlv-border:var(--jp-border-color2,#444);--rlv-accent:var(--jp-brand-color1,#64b5f6)}
.rlv-header{display:flex;flex-wrap:wrap;align-items:center;gap:6px 14px;margin-bottom:6px}
.rlv-header label{display:inline-flex;align-items:center;gap:4px;color:var(--rlv-fg2)}
.rlv-header select{font:inherit;color:var(--rlv-fg);background:var(--rlv-bg);border:1px solid var(--rlv-border);border-radius:2px}
.rlv-legend{display:inline-flex;align-items:flex-start;gap:10px;color:var(--rlv-fg2);font-size:11px}
.rlv-ramp-box{display:inline-block;width:${RAMP_WIDTH}px}
.rlv-ramp{height:10px;border:1px solid var(--rlv-border)}
.rlv-ticks{position:relative;height:14px;font-size:${TICK_FONT_PX}px;line-height:14px}
.rlv-ticks span{position:absolute;top:0;white-space:nowrap}
.rlv-swatch{display:inline-block;width:12px;height:10px;border:1px solid var(--rlv-border);vertical-align:middle;margin-right:3px}
.rlv-error{color:var(--jp-error-color1,#c62828);margin:4px 0;white-space:pre-wrap}
.rlv-error[hidden],.rlv-tooltip[hidden]{display:none}
.rlv-strips{overflow:auto;outline:none;padding:2px}
.rlv-strips:focus-visible{box-shadow:0 0 0 2px var(--rlv-accent)}
.rlv-strip{margin:0 0 10px}
.rlv-strip-label{color:var(--rlv-fg2);font-size:11px;margin-bottom:2px}
.rlv-strip-more{color:var(--rlv-fg2);font-size:11px;font-style:italic;margin-top:2px}
.rlv-strip-body{font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);line-height:1.75;overflow-wrap:anywhere;white-space:pre-wrap}
.rlv-tok{border-radius:2px;cursor:pointer}
.rlv-ws{opacity:.55}
.rlv-badge{box-shadow:inset 0 0 0 1px currentColor;padding:0 3px;margin:0 1px;font-size:.85em;border-radius:3px}
.rlv-pad{box-shadow:none;border:1px dashed currentColor}
.rlv-partial{text-decoration:underline dotted}
.rlv-cont:empty::after{content:"\\25CC";opacity:.5}
.rlv-invalid{font-style:italic}
.rlv-clip-hi,.rlv-clip-lo,.rlv-tok.rlv-active,.rlv-tok.rlv-pinned{position:relative}
.rlv-clip-hi::after,.rlv-clip-lo::after{content:"";position:absolute;right:0;border:3px solid transparent;pointer-events:none}
.rlv-clip-hi::after{top:0;border-top-color:currentColor;border-right-color:currentColor}
.rlv-clip-lo::after{bottom:0;border-bottom-color:currentColor;border-right-color:currentColor}
.rlv-active{outline:2px solid var(--rlv-accent);outline-offset:1px;z-index:1}
.rlv-pinned{outline:2px solid var(--rlv-fg);outline-offset:1px;z-index:1}
.rlv-tok.rlv-untrained{color:var(--rlv-fg2);opacity:.6}
.rlv-swatch.rlv-untrained{background:transparent;border-style:dotted}
.rlv-masked{background-image:repeating-linear-gradient(135deg,transparent 0 3px,rgba(127,127,127,.6) 3px 4.5px);box-shadow:inset 0 0 0 1px rgba(127,127,127,.8)}
.rlv-token-strip .rlv-turn-mark{display:inline-block;margin:2px 4px 0 0;padding:0 5px;border-radius:8px;font-family:var(--jp-ui-font-family,sans-serif);font-size:10px;line-height:1.5;color:var(--rlv-bg);background:var(--rlv-fg2);white-space:nowrap;vertical-align:baseline;user-select:none}
.rlv-empty{color:var(--rlv-fg2);font-style:italic}
.rlv-tooltip{position:absolute;z-index:20;max-width:380px;padding:6px 8px;background:var(--rlv-bg);color:var(--rlv-fg);border:1px solid var(--rlv-border);border-radius:3px;box-shadow:0 2px 8px rgba(0,0,0,.25);font-size:12px;pointer-events:none}
.rlv-tooltip.rlv-pinned{pointer-events:auto;outline:none}
.rlv-tooltip table{border-collapse:collapse;margin-top:4px}
.rlv-tooltip td{padding:0 6px 0 0;font-variant-numeric:tabular-nums}
.rlv-tooltip .rlv-current td{font-weight:bold}
.rlv-tooltip code{font-family:var(--jp-code-font-family,monospace);white-space:pre-wrap;word-break:break-all}
.rlv-tt-head{font-weight:bold}
.rlv-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.rlv-table-wrap{overflow-x:auto;margin-top:6px;border:1px solid var(--rlv-border)}
.rlv-token-table{border-collapse:collapse;font-size:11px;font-variant-numeric:tabular-nums}
.rlv-token-table th,.rlv-token-table td{padding:1px 4px;border:1px solid var(--rlv-border);white-space:pre;text-align:right}
.rlv-token-table th{font-family:var(--jp-code-font-family,monospace);font-weight:normal;background:var(--rlv-bg)}
.rlv-table-more{font:inherit;font-size:11px;margin-top:4px;color:var(--rlv-fg);background:var(--rlv-bg);border:1px solid var(--rlv-border);border-radius:2px;cursor:pointer}
.rlv-table-more[hidden]{display:none}
.rlv-token-table th.rlv-row-head{position:sticky;left:0;z-index:1;text-align:left;font-family:inherit;font-weight:bold}
`;
