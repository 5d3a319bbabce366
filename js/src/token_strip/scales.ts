/**
 * The colour scales, one per shown strip: per sample from its own values, or shared by the step
 * or the run from the kernel's rpc "domain" (limits that need every sample of the step / run).
 */
import { metricKind, scaleFor, scaleFromDomain, type Scale } from "../lib/color";
import type { DomainReply } from "../lib/protocol";
import { trainedValues, type SampleView } from "./samples";

/** Asks the kernel for the colour limits of a metric over some steps or the whole run. */
export type DomainCall = (params: { metric: string; scope: string; steps: number[] }) => Promise<DomainReply>;

/** What the scales are for: the shown samples (and a number naming that set), the metric and the scope. */
export interface ScaleRequest {
  views: SampleView[];
  /** Changes whenever `views` is replaced: the same metric and scope on new samples is new work. */
  dataVersion: number;
  metric: string;
  scope: string;
}

export class ColorScales {
  /** The scales now painted, one per strip. */
  current: Scale[] = [];
  private memo: { metric: string; scales: Scale[] } | null = null;
  private seq = 0;
  private key = "";

  /**
   * `apply(prev)` repaints after `current` changed (`prev`: what was painted); `settled()` runs once
   * an update is in place (synchronously when no domain is asked for: the legend follows at once);
   * `fail` reports a failed domain.
   */
  constructor(
    private readonly domain: DomainCall,
    private readonly apply: (prev: Scale[]) => void,
    private readonly settled: () => void,
    private readonly fail: (context: string, e: unknown) => void,
  ) {}

  /** New samples: the per-sample scales, to colour the chips while they are built. */
  reset(views: SampleView[], metric: string): Scale[] {
    this.memo = null;
    this.current = this.local(views, metric);
    return this.current;
  }

  /** Per-sample scales of a metric, from trained tokens only (memoized: a fetch needs them twice). */
  private local(views: SampleView[], metric: string): Scale[] {
    if (this.memo?.metric !== metric) this.memo = { metric, scales: views.map((sv) => scaleFor(metric, trainedValues(sv, metric))) };
    return this.memo.scales;
  }

  private set(next: Scale[]): void {
    const prev = this.current;
    this.current = next;
    this.apply(prev); // the caller recolours only strips whose scale really changed
  }

  /**
   * Recomputes the scales for the metric and scope (nothing when the request is the last one,
   * unless `force`), then calls `settled` unless a newer request superseded this one.
   */
  async update({ views, dataVersion, metric, scope }: ScaleRequest, force = false): Promise<void> {
    const key = `${metric}|${scope}|${dataVersion}`;
    if (!force && key === this.key) return;
    this.key = key;
    const seq = ++this.seq;
    const local = this.local(views, metric);
    const kind = metricKind(metric);
    if (scope === "sample" || kind === "prob" || kind === "logprob" || !views.length) {
      this.set(local);
      return this.settled();
    }
    if (this.current.length !== views.length || this.current[0]?.metric !== metric) {
      // Paint the new metric at once; the shared domain replaces it when it arrives.
      this.set(local);
    }
    try {
      const steps = [...new Set(views.map((v) => v.sample.step))];
      const result = await this.domain({ metric, scope, steps });
      if (seq !== this.seq) return;
      if (!Number.isFinite(result?.lo) || !Number.isFinite(result?.hi)) throw new Error(`no ${scope} domain for ${metric}`);
      const shared = scaleFromDomain(metric, result.lo, result.hi);
      this.set(views.map(() => shared));
    } catch (e) {
      if (seq !== this.seq) return;
      this.fail(`colour scale (${scope})`, e);
      this.set(local); // stay usable on the per-sample scale
      this.key = "";
    }
    this.settled();
  }
}
