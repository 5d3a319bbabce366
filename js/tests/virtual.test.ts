import { describe, expect, test } from "vitest";
import {
  computeWindow, scrollTopForRow, scrollTopToReveal, pagesFor, pageKey, spacerHeightFor, LruCache, MAX_SCROLL_PX,
} from "../src/lib/virtual";

const RH = 28;
const VH = 360;

describe("computeWindow, unscaled", () => {
  test("top of a 1,000-row table", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 0, total: 1000, overscan: 5 });
    expect(w.scaled).toBe(false);
    expect(w.spacerHeight).toBe(28000);
    expect(w.firstVisible).toBe(0);
    expect(w.lastVisible).toBe(12); // 360 / 28 = 12.86 -> rows 0..12 are (partly) visible
    expect(w.first).toBe(0);
    expect(w.last).toBe(17);
    expect(w.topOf(3)).toBe(84);
  });

  test("middle scroll position", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 2800, total: 1000, overscan: 5 });
    expect(w.firstVisible).toBe(100);
    expect(w.lastVisible).toBe(112);
    expect(w.first).toBe(95);
    expect(w.last).toBe(117);
    expect(w.topOf(100)).toBe(2800);
  });

  test("partial row at the top counts as visible", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 2814, total: 1000, overscan: 0 });
    expect(w.firstVisible).toBe(100);
    expect(w.lastVisible).toBe(113);
  });

  test("bottom: last row is visible and overscan is clamped", () => {
    const maxScroll = 1000 * RH - VH;
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: maxScroll, total: 1000, overscan: 5 });
    expect(w.lastVisible).toBe(999);
    expect(w.last).toBe(999);
    expect(w.topOf(999) + RH).toBe(maxScroll + VH);
  });

  test("scrollTop past the end (overscroll) is clamped", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 1e9, total: 1000, overscan: 0 });
    expect(w.lastVisible).toBe(999);
    expect(w.firstVisible).toBe(987);
  });

  test("fewer rows than the viewport holds", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 0, total: 5, overscan: 8 });
    expect([w.firstVisible, w.lastVisible, w.first, w.last]).toEqual([0, 4, 0, 4]);
  });

  test("empty table renders nothing", () => {
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 0, total: 0 });
    expect(w.last).toBeLessThan(w.first);
    expect(w.spacerHeight).toBe(0);
  });
});

describe("computeWindow, scaled (a million rows)", () => {
  const N = 1_000_000;
  test("spacer is capped below the browser limit", () => {
    expect(N * RH).toBeGreaterThan(MAX_SCROLL_PX);
    expect(spacerHeightFor(N, RH)).toBe(MAX_SCROLL_PX);
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 0, total: N });
    expect(w.scaled).toBe(true);
    expect(w.spacerHeight).toBe(MAX_SCROLL_PX);
    expect(w.firstVisible).toBe(0);
    expect(w.topOf(0)).toBe(0);
  });

  test("max scroll reaches the last row exactly", () => {
    const maxScroll = MAX_SCROLL_PX - VH;
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: maxScroll, total: N, overscan: 3 });
    expect(w.lastVisible).toBe(N - 1);
    expect(w.last).toBe(N - 1);
    // the last row's bottom edge is flush with the viewport's bottom edge
    expect(w.topOf(N - 1) + RH).toBeCloseTo(maxScroll + VH, 6);
    // and the row above the viewport's first row is not needed
    expect(w.firstVisible).toBe(N - Math.ceil(VH / RH));
  });

  test("the middle of the scrollbar shows row 500,000", () => {
    const maxScroll = MAX_SCROLL_PX - VH;
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: maxScroll / 2, total: N, overscan: 0 });
    expect(w.firstVisible).toBeLessThanOrEqual(500_000);
    expect(w.lastVisible).toBeGreaterThanOrEqual(500_000);
    // visible rows tile the viewport: row firstVisible starts at or above the top edge
    expect(w.topOf(w.firstVisible)).toBeLessThanOrEqual(maxScroll / 2);
    expect(w.topOf(w.lastVisible) + RH).toBeGreaterThanOrEqual(maxScroll / 2 + VH);
  });

  test("scrolling is monotonic and each pixel moves < 2 rows", () => {
    let prev = -1;
    for (let st = 0; st < MAX_SCROLL_PX; st += 1_234_567) {
      const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: st, total: N });
      expect(w.firstExact).toBeGreaterThan(prev);
      prev = w.firstExact;
    }
    const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: 10, total: N });
    expect(w.rowsPerPx).toBeGreaterThan(1 / RH);
    expect(w.rowsPerPx).toBeLessThan(2 / RH * 1.0001);
  });

  test("scrollTopForRow inverts the mapping in both modes", () => {
    for (const total of [1000, N]) {
      for (const row of [0, 1, 499, 500_000, total - 1]) {
        if (row >= total) continue;
        for (const align of ["start", "end", "center"] as const) {
          const st = scrollTopForRow(row, RH, VH, total, align);
          const w = computeWindow({ rowHeight: RH, viewportHeight: VH, scrollTop: st, total, overscan: 0 });
          expect(row).toBeGreaterThanOrEqual(w.firstVisible);
          expect(row).toBeLessThanOrEqual(w.lastVisible);
        }
      }
    }
    expect(scrollTopForRow(N - 1, RH, VH, N, "end")).toBeCloseTo(MAX_SCROLL_PX - VH, 3);
    expect(scrollTopForRow(0, RH, VH, N)).toBe(0);
    expect(scrollTopForRow(100, RH, VH, 1000)).toBe(2800);
  });

  test("scrollTopToReveal only moves when the row is hidden", () => {
    expect(scrollTopToReveal(5, RH, VH, 1000, 0)).toBe(0);
    // row 20 is below a viewport at 0: bring it flush with the bottom
    const st = scrollTopToReveal(20, RH, VH, 1000, 0);
    expect(st).toBe(21 * RH - VH);
    // row 3 is above a viewport at row 10: bring it to the top
    expect(scrollTopToReveal(3, RH, VH, 1000, 280)).toBe(84);
  });
});

describe("pages", () => {
  test("pagesFor covers the range", () => {
    expect(pagesFor(0, 17, 100)).toEqual([0]);
    expect(pagesFor(95, 117, 100)).toEqual([0, 1]);
    expect(pagesFor(499_990, 500_010, 100)).toEqual([4999, 5000]);
    expect(pagesFor(200, 199, 100)).toEqual([]);
    expect(pagesFor(-5, 3, 100)).toEqual([0]);
  });
  test("pageKey separates generations", () => {
    expect(pageKey(1, 3)).not.toBe(pageKey(2, 3));
    expect(pageKey(2, 3)).toBe("2:3");
  });
});

describe("LruCache", () => {
  test("evicts the least recently used entry", () => {
    const c = new LruCache<string, number>(3);
    c.set("a", 1);
    c.set("b", 2);
    c.set("c", 3);
    expect(c.get("a")).toBe(1); // a is now most recent
    c.set("d", 4); // evicts b
    expect(c.has("b")).toBe(false);
    expect(c.keys()).toEqual(["c", "a", "d"]);
    expect(c.size).toBe(3);
  });
  test("peek does not refresh recency; set replaces", () => {
    const c = new LruCache<string, number>(2);
    c.set("a", 1);
    c.set("b", 2);
    expect(c.peek("a")).toBe(1);
    c.set("c", 3); // a was only peeked: evicted
    expect(c.has("a")).toBe(false);
    c.set("b", 20);
    expect(c.get("b")).toBe(20);
    expect(c.size).toBe(2);
  });
  test("deleteWhere drops older generations", () => {
    const c = new LruCache<string, number>(10);
    for (const g of [1, 2, 3]) for (const p of [0, 1]) c.set(pageKey(g, p), g * 10 + p);
    c.deleteWhere((k) => Number(k.split(":")[0]) < 3);
    expect(c.keys()).toEqual(["3:0", "3:1"]);
    c.clear();
    expect(c.size).toBe(0);
  });
  test("rejects a zero capacity", () => {
    expect(() => new LruCache(0)).toThrow();
  });
});
