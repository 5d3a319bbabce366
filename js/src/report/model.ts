/**
 * A widget model that lives in the page: the report mounts the widgets' own front ends on it.
 * It answers the front ends' rpc requests from data embedded in the page (no comm, no kernel).
 */
import { PageModel } from "../lib/page_model";

/** What a request handler answers: the rpc result and its binary buffers. */
export interface Answer {
  result: unknown;
  buffers?: DataView[];
}
export type Handler = (params: any) => Answer;

export class LocalModel extends PageModel {
  constructor(
    state: Record<string, any>,
    private readonly requests: Record<string, Handler>,
    saved: (names: string[]) => void = () => {},
  ) {
    super(state, saved);
  }

  /** An rpc request, answered after the current task (as a comm's reply would be). */
  send(content: any): void {
    if (!content || content.type !== "rpc") return;
    const { id, method, params } = content;
    void Promise.resolve().then(() => {
      const handler = Object.prototype.hasOwnProperty.call(this.requests, method) ? this.requests[method] : undefined;
      try {
        if (!handler) throw new Error(`${String(method)}: not available in a report`);
        const { result, buffers = [] } = handler(params ?? {});
        this.emit("msg:custom", { type: "rpc", id, ok: true, result }, buffers);
      } catch (e) {
        this.emit("msg:custom", { type: "rpc", id, ok: false, error: e instanceof Error ? e.message : String(e) }, []);
      }
    });
  }
}
