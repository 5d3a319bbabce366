import { describe, expect, test } from "vitest";
import { PAGE_SIZE, Pager, type PagerOptions } from "../src/sample_table/pager";
import type { RowsReply } from "../src/lib/protocol";

/** A "rows" peer over `total` rows whose ids are 1000 + row; requests wait until released. */
class FakeRows {
  calls: { offset: number; limit: number; resolve: (r: RowsReply) => void; reject: (e: Error) => void }[] = [];
  generation = 0;
  fetchRows = (offset: number, limit: number) =>
    new Promise<RowsReply>((resolve, reject) => {
      this.calls.push({ offset, limit, resolve, reject });
    });
  reply(k = 0, generation = this.generation, total = 1000) {
    const { offset, limit, resolve } = this.calls.splice(k, 1)[0];
    const n = Math.max(0, Math.min(limit, total - offset));
    const ids = Array.from({ length: n }, (_, i) => 1000 + offset + i);
    resolve({ generation, offset, total, ids, rows: ids.map((id) => [id, `text ${id}`]), clipped: null });
  }
  fail(k = 0, message = "kernel gone") {
    this.calls.splice(k, 1)[0].reject(new Error(message));
  }
  offsets() {
    return this.calls.map((c) => c.offset);
  }
}

function setup(extra: Partial<PagerOptions> = {}) {
  const peer = new FakeRows();
  const log = { settled: 0, reports: [] as string[] };
  let clock = 0;
  const pager = new Pager({
    fetchRows: peer.fetchRows,
    settled: () => log.settled++,
    report: (e) => log.reports.push(e),
    now: () => clock,
    ...extra,
  });
  return { peer, pager, log, advance: (ms: number) => (clock += ms) };
}

const flush = () => new Promise((r) => setTimeout(r, 0));
const rows = (firstVisible: number, lastVisible: number, first = firstVisible, last = lastVisible) => ({ firstVisible, lastVisible, first, last });

describe("Pager", () => {
  test("fetches a page once, shares the request, then serves it from the cache", async () => {
    const { peer, pager, log } = setup();
    const a = pager.fetch(2);
    const b = pager.fetch(2);
    expect(a).toBe(b);
    expect(peer.calls.map((c) => [c.offset, c.limit])).toEqual([[2 * PAGE_SIZE, PAGE_SIZE]]);
    peer.reply();
    const page = await a;
    expect(page!.ids[0]).toBe(1000 + 2 * PAGE_SIZE);
    expect(log.settled).toBe(1);
    expect(log.reports).toEqual([""]);
    expect(await pager.fetch(2)).toBe(page);
    expect(peer.calls).toHaveLength(0);
    expect(pager.idOf(2 * PAGE_SIZE + 5)).toBe(1000 + 2 * PAGE_SIZE + 5);
    expect(pager.pageOf(0)).toBeUndefined();
    expect(pager.idOf(0)).toBeUndefined();
  });

  test("asks for visible pages first, then those around, at most four at a time", () => {
    const { peer, pager } = setup();
    pager.pump(rows(450, 470, 442, 478), 1000);
    // visible: page 4; around (rows 412..508): pages 4 and 5; nothing else
    expect(peer.offsets()).toEqual([400, 500]);
    const big = setup();
    big.pager.pump(rows(500, 520, 0, 999), 1000);
    expect(big.peer.offsets()).toEqual([500, 0, 100, 200]);
  });

  test("asks for nothing without rows, and for a page already on its way only once", () => {
    const { peer, pager } = setup();
    pager.pump(rows(0, 10), 0);
    expect(peer.calls).toHaveLength(0);
    pager.pump(rows(0, 10), 1000);
    pager.pump(rows(0, 10), 1000);
    expect(peer.offsets()).toEqual([0]);
  });

  test("reports a failed page and does not ask again before the retry delay", async () => {
    const { peer, pager, log, advance } = setup();
    const p = pager.fetch(0);
    peer.fail(0, "kernel gone");
    expect(await p).toBeNull();
    expect(log.reports).toEqual(["Could not load rows 0–99: kernel gone"]);
    expect(log.settled).toBe(1);
    pager.pump(rows(0, 10), 1000);
    expect(peer.calls).toHaveLength(0);
    advance(3000);
    pager.pump(rows(0, 10), 1000);
    expect(peer.offsets()).toEqual([0]);
  });

  test("drops replies of an older generation and keeps those of a newer one for later", async () => {
    const { peer, pager } = setup();
    pager.setGeneration(1);
    const old = pager.fetch(0);
    peer.reply(0, 0);
    expect(await old).toBeNull();
    expect(pager.pageOf(0)).toBeUndefined();
    const early = pager.fetch(1);
    peer.reply(0, 2); // the kernel already moved on
    expect(await early).toBeNull();
    pager.setGeneration(2);
    expect(pager.pageOf(PAGE_SIZE)?.ids[0]).toBe(1000 + PAGE_SIZE);
  });

  test("a new generation forgets older pages and failures", async () => {
    const { peer, pager } = setup();
    const p = pager.fetch(0);
    peer.reply();
    await p;
    const f = pager.fetch(1);
    peer.fail();
    await f;
    pager.setGeneration(1);
    expect(pager.pageOf(0)).toBeUndefined();
    pager.pump(rows(0, 150), 1000);
    expect(peer.offsets()).toEqual([0, 100]);
  });

  test("ids in a range come from every page it spans, capped at the end nearest the anchor", async () => {
    const { peer, pager } = setup();
    const all = pager.idsInRange(50, 250, 50, 1000);
    await flush();
    expect(peer.offsets()).toEqual([0, 100, 200]);
    while (peer.calls.length) peer.reply();
    const got = await all;
    expect(got!.capped).toBe(false);
    expect(got!.ids).toEqual(Array.from({ length: 201 }, (_, i) => 1050 + i));
    const down = await pager.idsInRange(50, 250, 50, 10);
    expect(down).toEqual({ ids: Array.from({ length: 10 }, (_, i) => 1050 + i), capped: true });
    const up = await pager.idsInRange(50, 250, 250, 10);
    expect(up).toEqual({ ids: Array.from({ length: 10 }, (_, i) => 1241 + i), capped: true });
  });

  test("a range is null when a page fails or the data change meanwhile", async () => {
    const { peer, pager } = setup();
    const failed = pager.idsInRange(0, 150, 0, 1000);
    peer.reply(0);
    peer.fail(0);
    expect(await failed).toBeNull();
    const moved = pager.idsInRange(300, 310, 300, 1000);
    pager.setGeneration(1);
    peer.reply(0, 0);
    expect(await moved).toBeNull();
  });

  test("after dispose, landing replies are stored but nobody is told", async () => {
    const { peer, pager, log } = setup();
    const p = pager.fetch(0);
    pager.dispose();
    peer.reply();
    await p;
    expect(log.settled).toBe(0);
    pager.pump(rows(0, 10), 1000);
    expect(peer.calls).toHaveLength(0);
  });
});
