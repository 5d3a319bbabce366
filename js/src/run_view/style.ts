/** The RunView's own styles (the parts bring theirs); JupyterLab's theme variables where they exist. */
export const CSS = `
.rlv-run-view{font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,#222);display:flex;flex-direction:column;gap:6px}
.rlv-run-view .rlv-view-error{color:var(--jp-error-color1,#c62828);white-space:pre-wrap}
.rlv-run-view .rlv-view-error[hidden],.rlv-run-view [hidden]{display:none!important}
.rlv-run-view .rlv-controls,.rlv-run-view .rlv-step-row{display:flex;flex-wrap:wrap;align-items:center;gap:10px}
.rlv-run-view .rlv-controls label,.rlv-run-view .rlv-step-slider{display:inline-flex;align-items:center;gap:6px}
.rlv-run-view .rlv-step-slider{width:420px}
.rlv-run-view .rlv-step-input{flex:1 1 auto}
.rlv-run-view .rlv-step-label,.rlv-run-view .rlv-step-readout{min-width:4em}
.rlv-run-view button{font:inherit;padding:2px 8px;border:1px solid var(--jp-border-color1,#bbb);border-radius:3px;background:var(--jp-layout-color2,#eee);color:inherit;cursor:pointer}
.rlv-run-view .rlv-toggle[aria-pressed=true]{background:var(--jp-brand-color1,#1976d2);color:#fff;border-color:transparent}
.rlv-run-view .rlv-kl-toggle{display:inline-flex;gap:0}
.rlv-run-view .rlv-tabs{display:flex;gap:2px;border-bottom:1px solid var(--jp-border-color2,#ddd)}
.rlv-run-view .rlv-tab{border-radius:3px 3px 0 0;border-bottom:none}
.rlv-run-view .rlv-tab[aria-selected=true]{background:var(--jp-layout-color0,#fff);font-weight:600}
.rlv-run-view .rlv-pane{display:flex;flex-direction:column;gap:6px}
.rlv-run-view .rlv-detail-facts{margin:6px 0}
.rlv-run-view .rlv-detail-note{color:var(--jp-ui-font-color2,#666);margin:6px 0}
.rlv-run-view .rlv-turn{display:block;width:100%;box-sizing:border-box;border:1px solid var(--jp-border-color2,#ddd);border-radius:3px;margin:4px 0;background:var(--jp-layout-color1,#fff)}
.rlv-run-view .rlv-turn-head{display:flex;align-items:center;gap:8px;padding:2px 6px;border-bottom:1px solid var(--jp-border-color2,#ddd)}
.rlv-run-view .rlv-role{font-size:11px;font-weight:600;padding:0 6px;border-radius:8px;background:var(--jp-layout-color3,#ddd)}
.rlv-run-view .rlv-expand{margin-left:auto;font-size:11px;padding:0 6px}
.rlv-run-view pre{white-space:pre-wrap;word-break:break-word;margin:0;padding:6px;font-family:var(--jp-code-font-family,monospace);font-size:12px}
.rlv-run-view .rlv-untrained-turn{font-size:10px;color:var(--jp-ui-font-color2,#666);border:1px dotted currentColor;border-radius:8px;padding:0 5px}
.rlv-run-view .rlv-turn-reasoning{margin:0;padding:2px 6px;font-style:italic;color:var(--jp-ui-font-color2,#666);white-space:pre-wrap;border-bottom:1px dashed var(--jp-border-color2,#ddd)}
.rlv-run-view .rlv-turn-text{max-height:none;overflow:auto}
.rlv-run-view .rlv-turn.rlv-collapsed .rlv-turn-text{max-height:240px;overflow:hidden;-webkit-mask-image:linear-gradient(#000 80%,transparent)}
.rlv-run-view .rlv-tool-args{border-top:1px dashed var(--jp-border-color2,#ddd)}
.rlv-run-view .rlv-group-cards{display:flex;gap:6px;overflow-x:auto}
.rlv-run-view .rlv-group-card{border:1px solid var(--jp-border-color2,#ddd);border-radius:3px;padding:4px;min-width:220px;flex:1}
.rlv-run-view .rlv-group-card-head{font-size:11px}
.rlv-run-view .rlv-group-card pre{max-height:160px;overflow:auto;padding:2px 0}
.rlv-run-view .rlv-prompt-history table{font-size:12px;border-collapse:collapse}
.rlv-run-view .rlv-prompt-history td,.rlv-run-view .rlv-prompt-history th{padding:1px 6px;text-align:left}
`;
