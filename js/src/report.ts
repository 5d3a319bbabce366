/**
 * Entry of the self-contained report (built to rlviz_widgets/static/report.js, inlined by
 * rlviz_widgets/_report.py): reads the page's embedded data and mounts the widgets' own front
 * ends (chart, sample table, token strip) on in-page models instead of a kernel.
 */
import charts from "./charts/index";
import sampleTable from "./sample_table/index";
import tokenStrip from "./token_strip/index";
import { el, errorText } from "./lib/dom";
import { readData, type ReportData } from "./report/data";
import { LocalModel } from "./report/model";
import { TableRows } from "./report/table";
import { filtersTable, metaTable, sampleCard, stripModel } from "./report/sections";
import { CSS as TURN_CSS } from "./run_view/style";

function tableNote(t: ReportData["table"]): string {
  const total = t.total.toLocaleString("en-US");
  if (t.shown >= t.total) return `All ${total} filtered samples, by ${t.order}. Click a header to sort.`;
  return `First ${t.shown.toLocaleString("en-US")} of ${total} filtered samples by ${t.order} (the report holds at most ${t.limit.toLocaleString("en-US")}). Click a header to sort.`;
}

function chartModel(chart: ReportData["chart"]): LocalModel {
  return new LocalModel(
    { spec: chart.spec, selections: chart.selections ?? {}, generation: 0, error: "", height: 0 },
    { data: () => ({ result: { generation: 0, datasets: chart.datasets } }) },
  );
}

/** Builds the report into `root`. */
export function mount(doc: Document, root: HTMLElement, data: ReportData): void {
  const h2 = (text: string) => el(doc, "h2", undefined, text);
  // the conversation blocks are the RunView's detail pane: its stylesheet, once
  root.replaceChildren(el(doc, "style", undefined, TURN_CSS), el(doc, "h1", undefined, data.title));
  root.append(h2("Run"), metaTable(doc, data.meta), el(doc, "pre", "rlv-report-summary", data.meta.summary));
  root.append(h2("Filters and options"), filtersTable(doc, data.filters));

  root.append(h2("Curves and reward distribution"));
  const chartHost = el(doc, "div", "rlv-report-chart");
  root.append(chartHost);
  charts.render({ model: chartModel(data.chart), el: chartHost });

  root.append(h2("Samples"), el(doc, "p", "rlv-report-note", tableNote(data.table)));
  const tableHost = el(doc, "div", "rlv-report-table");
  root.append(tableHost);
  sampleTable.render({ model: new TableRows(data.table).model, el: tableHost });

  for (const section of data.sections) {
    const box = el(doc, "section", "rlv-report-section");
    box.append(h2(section.title));
    for (const s of section.samples) box.append(sampleCard(doc, s));
    if (section.strip) {
      box.append(el(doc, "h3", undefined, "token strips"));
      const host = el(doc, "div", "rlv-report-strip");
      box.append(host);
      tokenStrip.render({ model: stripModel(section.strip, data.meta.token_metrics), el: host });
    }
    root.append(box);
  }
}

const root = typeof document !== "undefined" ? document.getElementById("rlviz-report") : null;
if (root) {
  try {
    mount(document, root, readData(document));
  } catch (e) {
    root.append(el(document, "pre", "rlv-error", `The report could not be drawn: ${errorText(e)}`));
  }
}
