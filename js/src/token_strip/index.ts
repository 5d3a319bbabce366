/**
 * TokenStrip front end: one coloured strip of tokens per sample, a legend, a shared tooltip,
 * keyboard navigation, and (for a single sample) the token × metric table.
 *
 * Data is pulled with rpc "strips" whenever `generation` (or `sample_ids`) changes; colour
 * limits for scope "step"/"run" come from rpc "domain". Model text is only ever inserted with
 * textContent / text nodes, so markup in responses shows as characters and runs nothing.
 *
 * This module wires the parts (header + legend, strips, tooltip, focus, token table, scales) to
 * the model; each part owns its DOM.
 */
import { createRpc, type AnyModel } from "../lib/rpc";
import type { DomainReply, StripsReply } from "../lib/protocol";
import { isDark, pageBackground, watchTheme } from "../lib/theme";
import { el, errorText, ModelEvents } from "../lib/dom";
import type { Scale } from "../lib/color";
import { sampleViews, type At, type SampleView, type Theme } from "./samples";
import { STYLE } from "./style";
import { Header } from "./header";
import { Strips } from "./strips";
import { Tooltip } from "./tooltip";
import { Focus } from "./focus";
import { TokenTable } from "./token_table";
import { ColorScales } from "./scales";

/** One TokenStrip view. */
class TokenStripView {
  private readonly rpc: ReturnType<typeof createRpc>;
  private readonly events: ModelEvents;
  private readonly root: HTMLDivElement;
  private readonly errorLine: HTMLDivElement;
  private readonly header: Header;
  private readonly strips: Strips;
  private readonly tooltip: Tooltip;
  private readonly focus: Focus;
  private readonly table: TokenTable;
  private readonly scales: ColorScales;
  private readonly stopTheme: () => void;

  private reply: StripsReply | null = null;
  private views: SampleView[] = [];
  private localError = "";
  private fetchSeq = 0;
  private fetchQueued = false;
  private theme: Theme = { dark: false, page: [255, 255, 255] };

  constructor(
    private readonly model: AnyModel,
    private readonly host: HTMLElement,
  ) {
    const doc = host.ownerDocument;
    this.rpc = createRpc(model);
    this.events = new ModelEvents(model);

    this.root = el(doc, "div", "rlv-token-strip");
    this.header = new Header(
      doc,
      (metric) => this.userChose("color_by", metric, "colour by"),
      (scope) => this.userChose("scale_scope", scope, "scale scope"),
    );
    this.errorLine = el(doc, "div", "rlv-error");
    this.errorLine.setAttribute("role", "alert");
    this.errorLine.hidden = true;
    this.strips = new Strips(doc);
    this.tooltip = new Tooltip(doc, this.root);
    this.table = new TokenTable(
      doc,
      () => ({ sv: this.tableSample(), order: this.reply?.metrics, theme: this.theme }),
      (fn) => this.guard("table", fn)(),
    );
    this.scales = new ColorScales(
      async (params) => (await this.rpc.call<DomainReply>("domain", params)).result,
      (prev) => this.strips.recolor(this.paint(), prev),
      () => this.renderLegend(),
      (context, e) => this.fail(context, e),
    );
    this.focus = new Focus(
      model,
      this.strips,
      {
        views: () => this.views,
        showTooltip: (at) => this.showTooltip(at),
        hideTooltip: () => this.tooltip.hide(),
        setTooltipPinned: (pinned) => this.tooltip.setPinnedLook(pinned),
        activeMoved: () => {
          if (this.scope() === "sample" && this.views.length > 1) this.renderLegend();
        },
      },
      this.root,
    );
    this.root.append(el(doc, "style", undefined, STYLE), this.header.el, this.errorLine, this.strips.el, this.table.wrap, this.tooltip.el, this.tooltip.live);
    host.appendChild(this.root);

    this.listen();
    this.stopTheme = watchTheme(
      host,
      this.guard("theme", () => {
        this.readTheme();
        this.strips.recolor(this.paint());
        this.renderLegend();
        this.table.render();
      }),
    );
    this.readTheme();
    this.applyHeight();
    this.syncMetricOptions();
    this.header.showScope(this.scope());
    this.showErrors();
    void this.fetchStrips();
  }

  private colorBy = (): string => this.model.get("color_by") || "";
  private scope = (): string => this.model.get("scale_scope") || "sample";

  private paint() {
    return { metric: this.colorBy(), scales: this.scales.current, theme: this.theme };
  }

  private tableSample(): SampleView | null {
    return this.views.length === 1 && this.model.get("show_table") ? this.views[0] : null;
  }

  // ------------------------------------------------------------ errors
  private showErrors(): void {
    const msg = [this.model.get("error") || "", this.localError].filter(Boolean).join("\n");
    this.errorLine.textContent = msg;
    this.errorLine.hidden = !msg;
  }

  private fail(context: string, e: unknown): void {
    this.localError = `${context}: ${errorText(e)}`;
    this.showErrors();
    if (typeof console !== "undefined") console.error("rlviz TokenStrip", context, e);
  }

  /** `fn` as a handler whose exceptions and rejections are shown in the error line. */
  private guard(what: string, fn: () => unknown): () => void {
    return () => {
      try {
        const r = fn();
        if (r instanceof Promise) r.catch((e) => this.fail(what, e));
      } catch (e) {
        this.fail(what, e);
      }
    };
  }

  private readTheme(): void {
    this.theme = { dark: isDark(this.host), page: pageBackground(this.host) };
    this.root.classList.toggle("rlv-dark", this.theme.dark);
  }

  private applyHeight(): void {
    this.strips.setMaxHeight(Number(this.model.get("height") || 0));
  }

  // ------------------------------------------------------------ header, legend, tooltip
  private syncMetricOptions(): void {
    const names: string[] = [...(this.model.get("metrics") || [])];
    if (!names.length && this.reply) names.push(...this.reply.metrics);
    this.header.showMetrics(names, this.colorBy());
  }

  private renderLegend(): void {
    const scales = this.scales.current;
    let idx = this.focus.active?.s ?? this.focus.pinned?.s ?? 0;
    if (idx >= scales.length) idx = 0;
    const scope = this.scope();
    const perSample = scope === "sample" && this.views.length > 1;
    this.header.legend.render({
      scale: scales[idx],
      metric: this.colorBy(),
      scope,
      sampleId: perSample ? this.views[idx]?.sample.sample_id : undefined,
      theme: this.theme,
      untrained: this.views.some((v) => v.untrained.includes(true)),
      masked: this.views.some((v) => v.masked?.includes(1)),
    });
  }

  private showTooltip(at: At): void {
    const sv = this.views[at.s];
    const u = sv?.units[at.u];
    if (!u) return this.tooltip.hide();
    this.tooltip.show(sv, u, this.scales.current[at.s], this.colorBy(), this.reply?.metrics, this.strips.chipAt(at));
  }

  /** A choice made in the header: the trait, then the scales (the change event may already have done it). */
  private userChose(trait: string, value: string, what: string): void {
    this.model.set(trait, value);
    this.model.save_changes();
    this.guard(what, () => this.updateScales())();
  }

  // ------------------------------------------------------------ data
  private async updateScales(force = false): Promise<void> {
    const req = { views: this.views, dataVersion: this.fetchSeq, metric: this.colorBy(), scope: this.scope() };
    await this.scales.update(req, force);
  }

  private show(reply: StripsReply, buffers: DataView[]): void {
    this.reply = reply;
    this.views = sampleViews(reply, buffers);
    // Local scales first, so chips are coloured while still in the fragment (one style pass).
    const scales: Scale[] = this.scales.reset(this.views, this.colorBy());
    this.strips.show(this.views, { metric: this.colorBy(), scales, theme: this.theme });
    this.focus.reset();
  }

  private async fetchStrips(): Promise<void> {
    const seq = ++this.fetchSeq;
    this.root.setAttribute("aria-busy", "true");
    try {
      const { result, buffers } = await this.rpc.call<StripsReply>("strips", {});
      if (seq !== this.fetchSeq) return; // a newer request is in flight
      const gen = Number(this.model.get("generation") ?? 0);
      if (typeof result?.generation === "number" && result.generation < gen) return; // stale answer
      if (!result || !Array.isArray(result.samples)) throw new Error("malformed reply (no samples)");
      this.show(result, buffers);
      this.localError = "";
      this.showErrors();
      this.syncMetricOptions();
      await this.updateScales(true);
      this.table.schedule();
      if (seq === this.fetchSeq) this.focus.applyPinnedTrait(true);
    } catch (e) {
      if (seq === this.fetchSeq) this.fail("loading tokens", e);
    } finally {
      if (seq === this.fetchSeq) this.root.removeAttribute("aria-busy");
    }
  }

  /** Several trait changes in one message (e.g. sample_ids + generation) cause one fetch. */
  private queueFetch = (): void => {
    if (this.fetchQueued) return;
    this.fetchQueued = true;
    Promise.resolve().then(() => {
      this.fetchQueued = false;
      void this.fetchStrips();
    });
  };

  private listen(): void {
    const on = (ev: string, cb: () => void) => this.events.on(ev, cb);
    on("change:generation", this.queueFetch);
    on("change:sample_ids", this.queueFetch);
    on("change:error", () => this.showErrors());
    on("change:metrics", this.guard("metrics", () => this.syncMetricOptions()));
    on(
      "change:color_by",
      this.guard("colour by", async () => {
        this.syncMetricOptions();
        await this.updateScales();
        this.focus.refreshTooltip(); // an open tooltip bolds the metric now colouring the chips
      }),
    );
    on(
      "change:scale_scope",
      this.guard("scale scope", () => {
        this.header.showScope(this.scope());
        return this.updateScales();
      }),
    );
    on("change:show_table", this.guard("table", () => this.table.render()));
    on("change:pinned", this.guard("pinned", () => this.focus.applyPinnedTrait()));
    on("change:height", () => this.applyHeight());
  }

  dispose(): void {
    this.table.dispose();
    this.stopTheme();
    this.strips.dispose();
    this.focus.dispose();
    this.rpc.dispose();
    this.events.dispose();
    this.root.remove();
  }
}

/** Renders one TokenStrip view into `el`; returns the cleanup function. */
function render({ model, el: host }: { model: AnyModel; el: HTMLElement }): () => void {
  const view = new TokenStripView(model, host);
  return () => view.dispose();
}

export default { render };
