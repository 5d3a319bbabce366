/**
 * A widget model that lives in the page: the report mounts the widgets' own front ends on it.
 * It holds the traits a kernel would sync, fires Backbone-style `change:<name>` events, and
 * answers the front ends' rpc requests from data embedded in the page (no comm, no kernel).
 */
import type { AnyModel } from "../lib/rpc";

/** What a request handler answers: the rpc result and its binary buffers. */
export interface Answer {
  result: unknown;
  buffers?: DataView[];
}
export type Handler = (params: any) => Answer;
type Listener = (...args: any[]) => void;

function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

export class LocalModel implements AnyModel {
  private readonly listeners = new Map<string, Set<Listener>>();
  private changed = new Set<string>();

  /** `saved` hears the names the front end changed, at each `save_changes` (what the kernel would take). */
  constructor(
    private readonly state: Record<string, any>,
    private readonly requests: Record<string, Handler>,
    private readonly saved: (names: string[]) => void = () => {},
  ) {}

  get(name: string): any {
    return this.state[name];
  }

  set(name: string, value: any): void {
    if (same(this.state[name], value)) return;
    this.state[name] = value;
    this.changed.add(name);
    this.emit(`change:${name}`);
  }

  /** Sets traits as the kernel would: the front end hears the change, nothing is "saved". */
  update(values: Record<string, any>): void {
    for (const [k, v] of Object.entries(values)) {
      if (same(this.state[k], v)) continue;
      this.state[k] = v;
      this.emit(`change:${k}`);
    }
  }

  save_changes(): void {
    const names = [...this.changed];
    this.changed = new Set();
    if (names.length) this.saved(names);
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

  on(event: string, cb: Listener): void {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)!.add(cb);
  }

  off(event?: string, cb?: Listener): void {
    if (event === undefined) this.listeners.clear();
    else if (cb === undefined) this.listeners.delete(event);
    else this.listeners.get(event)?.delete(cb);
  }

  private emit(event: string, ...args: unknown[]): void {
    for (const cb of [...(this.listeners.get(event) ?? [])]) cb(...args);
  }
}
