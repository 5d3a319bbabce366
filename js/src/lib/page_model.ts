/**
 * A widget model that lives in the page instead of behind a comm: it holds the traits a kernel
 * would sync and fires Backbone-style `change:<name>` events, so a widget's own front end can be
 * mounted on it. The report feeds it from embedded data (report/model.ts); the RunView feeds one
 * per part from its own comm (run_view/part_model.ts). What the front end sends is up to them.
 */
import type { AnyModel } from "./rpc";

type Listener = (...args: any[]) => void;

/** Equal as JSON (traits are JSON values). */
export function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

export class PageModel implements AnyModel {
  private readonly listeners = new Map<string, Set<Listener>>();
  private changed = new Set<string>();

  /** `saved` hears the names the front end changed, at each `save_changes` (what the kernel would take). */
  constructor(
    protected readonly state: Record<string, any>,
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

  /** A custom message of the front end: nowhere to go by default. */
  send(_content: any, _callbacks?: any, _buffers?: ArrayBuffer[]): void {}

  on(event: string, cb: Listener): void {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)!.add(cb);
  }

  off(event?: string, cb?: Listener): void {
    if (event === undefined) this.listeners.clear();
    else if (cb === undefined) this.listeners.delete(event);
    else this.listeners.get(event)?.delete(cb);
  }

  /** Fires `event` (e.g. "msg:custom" with content and buffers) to the front end's listeners. */
  emit(event: string, ...args: unknown[]): void {
    for (const cb of [...(this.listeners.get(event) ?? [])]) cb(...args);
  }
}
