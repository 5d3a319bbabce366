/**
 * A stand-in for the anywidget model: traits, change events, and an rpc peer answering asynchronously.
 * Subclasses answer the rpc methods of their widget in `answer`; `failNext` makes the next call fail.
 */
export class FakeModel {
  state: Record<string, any>;
  listeners = new Map<string, Set<(...a: any[]) => void>>();
  sent: any[] = [];
  saves = 0;
  failNext: string | null = null;
  constructor(state: Record<string, any> = {}) {
    this.state = state;
  }
  get(name: string) {
    return this.state[name];
  }
  set(name: string, value: any) {
    const changed = this.state[name] !== value;
    this.state[name] = value;
    if (changed) this.emit(`change:${name}`, value);
  }
  save_changes() {
    this.saves++;
  }
  on(ev: string, cb: (...a: any[]) => void) {
    if (!this.listeners.has(ev)) this.listeners.set(ev, new Set());
    this.listeners.get(ev)!.add(cb);
  }
  off(ev?: string, cb?: (...a: any[]) => void) {
    if (!ev) this.listeners.clear();
    else if (!cb) this.listeners.delete(ev);
    else this.listeners.get(ev)?.delete(cb);
  }
  emit(ev: string, ...args: any[]) {
    for (const cb of [...(this.listeners.get(ev) ?? [])]) cb(...args);
  }
  send(content: any) {
    this.sent.push(content);
    setTimeout(() => this.reply(content), 1);
  }
  /** The peer's reply: an error when `failNext` is set (once), else `answer`. */
  reply(msg: any) {
    if (this.failNext) {
      const error = this.failNext;
      this.failNext = null;
      this.emit("msg:custom", { type: "rpc", id: msg.id, ok: false, error });
      return;
    }
    this.answer(msg);
  }
  answer(_msg: any) {}
}
