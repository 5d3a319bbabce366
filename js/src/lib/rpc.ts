/**
 * Request/response over the widget comm: the front end asks, Python answers.
 *
 * JS -> Python: {type: "rpc", id, method, params}
 * Python -> JS: {type: "rpc", id, ok: true, result} plus binary buffers, or {type: "rpc", id, ok: false, error}
 * Messages Python sends before a view exists are lost, so the front end always pulls.
 */

export interface AnyModel {
  get(name: string): any;
  set(name: string, value: any): void;
  save_changes(): void;
  send(content: any, callbacks?: any, buffers?: ArrayBuffer[]): void;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
}

export interface RpcReply<T = any> {
  result: T;
  buffers: DataView[];
}

let counter = 0;

/** Normalises what a comm hands over (DataView, ArrayBuffer or typed array) to DataView. */
export function toDataView(b: any): DataView {
  if (b instanceof DataView) return b;
  if (b instanceof ArrayBuffer) return new DataView(b);
  if (ArrayBuffer.isView(b)) return new DataView(b.buffer, b.byteOffset, b.byteLength);
  throw new Error("unexpected buffer type");
}

/** A Float32Array view of a little-endian float32 buffer (copied if unaligned). */
export function float32(b: DataView): Float32Array {
  if (b.byteOffset % 4 === 0) return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

/** A Uint8Array view of a byte buffer. */
export function uint8(b: DataView): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/** Creates `call(method, params)`; replies are matched by id, timeouts reject. */
export function createRpc(model: AnyModel, timeoutMs = 30000) {
  const waiting = new Map<string, { resolve: (r: RpcReply) => void; reject: (e: Error) => void; timer: any }>();
  const onMsg = (msg: any, buffers: any[] = []) => {
    if (!msg || msg.type !== "rpc" || !waiting.has(msg.id)) return;
    const w = waiting.get(msg.id)!;
    waiting.delete(msg.id);
    clearTimeout(w.timer);
    if (msg.ok) w.resolve({ result: msg.result, buffers: (buffers || []).map(toDataView) });
    else w.reject(new Error(msg.error || "request failed"));
  };
  model.on("msg:custom", onMsg);
  function call<T = any>(method: string, params: Record<string, any> = {}): Promise<RpcReply<T>> {
    const id = `r${++counter}-${Date.now()}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`${method}: no answer from the kernel within ${timeoutMs / 1000}s`));
      }, timeoutMs);
      waiting.set(id, { resolve, reject, timer });
      model.send({ type: "rpc", id, method, params });
    });
  }
  const dispose = () => {
    model.off("msg:custom", onMsg);
    // a closed view's requests are dropped: their timers would reject (and log) 30 s after it closed
    for (const w of waiting.values()) clearTimeout(w.timer);
    waiting.clear();
  };
  return { call, dispose };
}
