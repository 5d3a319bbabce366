import { afterEach, describe, expect, it, vi } from "vitest";
import { createRpc } from "../src/lib/rpc";

/** A comm with nothing behind it: what is sent is kept, replies are emitted by the test. */
function comm() {
  const handlers = new Set<(...a: any[]) => void>();
  const sent: any[] = [];
  return {
    sent,
    reply: (msg: any) => handlers.forEach((h) => h(msg, [])),
    model: {
      get: () => undefined,
      set: () => {},
      save_changes: () => {},
      send: (content: any) => sent.push(content),
      on: (_: string, cb: (...a: any[]) => void) => handlers.add(cb),
      off: (_?: string, cb?: (...a: any[]) => void) => cb && handlers.delete(cb),
    },
  };
}

afterEach(() => vi.useRealTimers());

describe("rpc", () => {
  it("matches replies by id and rejects on timeout", async () => {
    vi.useFakeTimers();
    const c = comm();
    const rpc = createRpc(c.model, 1000);
    const a = rpc.call("rows", { offset: 0 });
    const b = rpc.call("rows", { offset: 100 });
    c.reply({ type: "rpc", id: c.sent[0].id, ok: true, result: 42 });
    await expect(a).resolves.toMatchObject({ result: 42 });
    vi.advanceTimersByTime(1001);
    await expect(b).rejects.toThrow(/no answer from the kernel within 1s/);
  });

  it("drops a closed view's pending requests instead of rejecting them later", async () => {
    vi.useFakeTimers();
    const c = comm();
    const rpc = createRpc(c.model, 1000);
    const settled = vi.fn();
    rpc.call("strips").then(settled, settled);
    rpc.dispose();
    vi.advanceTimersByTime(5000);
    await Promise.resolve();
    expect(settled).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });
});
