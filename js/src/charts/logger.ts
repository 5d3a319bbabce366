/** A vega logger that also puts vega's errors (e.g. a bad expression at run time) in the widget's error line. */
import * as vega from "vega";
import { errorText } from "../lib/dom";

export interface LoggerHooks {
  /** A runtime error. */
  error(message: string): void;
  /** A data load failed (vega only warns then; the user must see why the chart is empty). */
  loadFailed(message: string): void;
  /** True while embedding: the first run has no data yet, so its "Infinite extent" warnings are noise. */
  embedding(): boolean;
}

export function chartLogger(hooks: LoggerHooks) {
  const base = vega.logger(vega.Warn);
  const text = (a: unknown[]) => a.map(errorText).join(" ");
  const logger: any = {
    level(l?: number) {
      if (l === undefined) return base.level();
      base.level(l);
      return logger;
    },
    error(...a: unknown[]) {
      base.error(...a);
      hooks.error(text(a));
      return logger;
    },
    warn(...a: unknown[]) {
      if (hooks.embedding() && typeof a[0] === "string" && a[0].startsWith("Infinite extent")) return logger;
      base.warn(...a);
      if (typeof a[0] === "string" && /^(Loading|Data ingestion) failed/.test(a[0])) hooks.loadFailed(text(a));
      return logger;
    },
    info(...a: unknown[]) {
      base.info(...a);
      return logger;
    },
    debug(...a: unknown[]) {
      base.debug(...a);
      return logger;
    },
  };
  return logger;
}
