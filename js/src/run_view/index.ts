/**
 * RunView front end: one anywidget whose view composes the chart, the sample table, the token
 * strip, the groups tab and the controls. The parts' own front ends are mounted on part models
 * (part_model.ts) fed through this view's comm; the controls and panes are drawn from the view's
 * traits (header, status, controls, detail, group_panes, error), all as text.
 */
import charts from "../charts/index";
import sampleTable from "../sample_table/index";
import tokenStrip from "../token_strip/index";
import { el, ModelEvents } from "../lib/dom";
import type { AnyModel } from "../lib/rpc";
import { Parts, type PartModel } from "./part_model";
import { Controls } from "./controls";
import { StepRow } from "./step_row";
import { renderDetail } from "./detail";
import { renderGroupDetail, renderHistory, type GroupPanes } from "./groups";
import { CSS } from "./style";

type Render = (args: { model: AnyModel; el: HTMLElement }) => () => void;

/** Which front end each part mounts, and where (a host of the view). */
const FRONT_ENDS: Record<string, Render> = {
  chart: charts.render,
  table: sampleTable.render,
  strip: tokenStrip.render,
  group_table: sampleTable.render,
  group_strip: tokenStrip.render,
};

class RunViewView {
  private readonly root: HTMLDivElement;
  private readonly events: ModelEvents;
  private readonly parts: Parts;
  private readonly hosts: Record<string, HTMLDivElement> = {};
  private readonly cleanups: (() => void)[] = [];
  private readonly header: HTMLDivElement;
  private readonly errorLine: HTMLDivElement;
  private readonly controls: Controls;
  private readonly stepRow: StepRow;
  private readonly tabs: HTMLButtonElement[] = [];
  private readonly panes: HTMLDivElement[] = [];
  private readonly detail: HTMLDivElement;
  private readonly groupSummary: HTMLDivElement;
  private readonly groupDetail: HTMLDivElement;
  private readonly history: HTMLDivElement;

  constructor(
    private readonly model: AnyModel,
    host: HTMLElement,
  ) {
    const doc = host.ownerDocument;
    const div = (cls: string) => el(doc, "div", cls);
    this.root = div("rlv-run-view");
    this.header = div("rlv-run-header");
    this.errorLine = div("rlv-view-error");
    this.controls = new Controls(doc, (name, value) => this.sendControl(name, value));
    this.stepRow = new StepRow(doc, (name) => model.send({ type: "click", name }));
    for (const name of Object.keys(FRONT_ENDS)) this.hosts[name] = div(`rlv-part rlv-part-${name}`);
    this.detail = div("rlv-detail");
    this.groupSummary = div("rlv-groups-summary");
    this.groupDetail = div("rlv-group-detail");
    this.history = div("rlv-history");
    const tabBar = div("rlv-tabs");
    tabBar.setAttribute("role", "tablist");
    ["samples", "GRPO groups"].forEach((title, i) => {
      const b = el(doc, "button", "rlv-tab", title);
      b.type = "button";
      b.setAttribute("role", "tab");
      b.addEventListener("click", () => this.sendControl("tab", i));
      this.tabs.push(b);
      tabBar.append(b);
    });
    const h = this.hosts;
    this.panes.push(div("rlv-pane rlv-samples-pane"), div("rlv-pane rlv-groups-pane"));
    this.panes[0].append(h.table, this.detail, h.strip);
    this.panes[1].append(this.groupSummary, h.group_table, this.groupDetail, h.group_strip, this.history);
    h.strip.hidden = h.group_strip.hidden = true;
    this.root.append(el(doc, "style", undefined, CSS), this.header, this.errorLine, this.controls.root, h.chart,
      this.stepRow.root, tabBar, ...this.panes);
    host.appendChild(this.root);

    this.events = new ModelEvents(model);
    const show: Record<string, () => void> = {
      header: () => (this.header.textContent = (model.get("header") ?? []).join(" · ")),
      status: () => (this.stepRow.count.textContent = String(model.get("status") ?? "")),
      error: () => {
        this.errorLine.textContent = String(model.get("error") ?? "");
        this.errorLine.hidden = !this.errorLine.textContent;
      },
      controls: () => this.showControls(),
      detail: () => renderDetail(this.detail, model.get("detail")),
      group_panes: () => this.showGroups(),
    };
    for (const [name, fn] of Object.entries(show)) {
      this.events.on(`change:${name}`, fn);
      fn();
    }
    this.parts = new Parts(model, (m) => this.mount(m));
  }

  private sendControl(name: string, value: unknown): void {
    this.model.send({ type: "control", name, value });
  }

  private showControls(): void {
    const c = this.model.get("controls") ?? {};
    this.controls.show(c);
    const tab = Number(c.tab ?? 0);
    this.tabs.forEach((b, i) => b.setAttribute("aria-selected", String(i === tab)));
    this.panes.forEach((p, i) => (p.hidden = i !== tab));
  }

  private showGroups(): void {
    const g: GroupPanes = this.model.get("group_panes") ?? {};
    this.groupSummary.textContent = g.built ? String(g.summary ?? "") : "computing groups…";
    renderGroupDetail(this.groupDetail, g.detail);
    renderHistory(this.history, g.history);
  }

  /** A part's state arrived the first time: its front end mounted in its place. */
  private mount(model: PartModel): void {
    const name = model.part;
    if (name === "slider" || name === "slider_label") {
      this.stepRow.attach(name, model);
      return;
    }
    const render = FRONT_ENDS[name];
    const host = this.hosts[name];
    if (!render || !host) return;
    if (name.endsWith("strip")) {
      // a strip shows while it has samples (the kernel empties it when nothing is picked)
      const visible = () => (host.hidden = !(model.get("sample_ids") ?? []).length);
      model.on("change:sample_ids", visible);
      visible();
    }
    this.cleanups.push(render({ model, el: host }));
  }

  dispose(): void {
    for (const c of this.cleanups) c();
    this.cleanups.length = 0;
    this.parts.dispose();
    this.events.dispose();
    this.root.remove();
  }
}

export default {
  /** Renders one RunView into `el`; returns the cleanup function. */
  render({ model, el: host }: { model: AnyModel; el: HTMLElement }): () => void {
    const view = new RunViewView(model, host);
    return () => view.dispose();
  },
};
