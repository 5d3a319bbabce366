/**
 * Virtual-scroll maths for the SampleTable: which rows are visible for a scroll position,
 * which pages to fetch, and a small LRU page cache. Pure functions, no DOM, so vitest can
 * cover every edge (empty tables, the last row of a million, scaled spacers).
 *
 * Browsers cap an element's height (Firefox ~17.9 M px, Chrome ~33 M px), so a million rows
 * of 28 px cannot have a 1:1 spacer. Above MAX_SCROLL_PX the spacer is capped and the scroll
 * position is mapped *proportionally* to a fractional first row: scrollTop 0 shows row 0 at the
 * top and the maximum scrollTop shows the last row flush with the bottom. Below the cap the same
 * formula reduces to the ordinary `scrollTop / rowHeight`, so there is one code path.
 */

/** Spacer heights above this are scaled (kept under Firefox's ~17.9 M px limit with margin). */
export const MAX_SCROLL_PX = 15_000_000;

export interface WindowInput {
  rowHeight: number;
  viewportHeight: number;
  scrollTop: number;
  total: number;
  overscan?: number;
  maxPx?: number;
}

export interface RowWindow {
  /** Height to give the spacer element (capped at maxPx). */
  spacerHeight: number;
  /** True when the spacer is capped and scrollTop maps proportionally to rows. */
  scaled: boolean;
  /** Rows per scroll pixel (1 / rowHeight unscaled; larger when scaled). */
  rowsPerPx: number;
  /** Fractional index of the row at the top edge of the viewport. */
  firstExact: number;
  /** Visible rows (inclusive); lastVisible < firstVisible when the table is empty. */
  firstVisible: number;
  lastVisible: number;
  /** Rows to render: the visible ones plus overscan, clamped to [0, total - 1]. */
  first: number;
  last: number;
  /** Top of `row` in spacer coordinates (where to position the row element). */
  topOf(row: number): number;
}

/** The spacer height for `total` rows: the real height, or maxPx when that is larger. */
export function spacerHeightFor(total: number, rowHeight: number, maxPx = MAX_SCROLL_PX): number {
  return Math.min(Math.max(0, total) * rowHeight, maxPx);
}

/**
 * The fractional row at the top of the viewport for a scroll position.
 * Proportional mapping: scrollTop / maxScroll of the way through (total - rows per viewport).
 */
function firstExactFor(scrollTop: number, rowHeight: number, viewportHeight: number, total: number, maxPx: number): number {
  const spacer = spacerHeightFor(total, rowHeight, maxPx);
  const maxScroll = spacer - viewportHeight;
  const maxFirst = total - viewportHeight / rowHeight;
  if (maxScroll <= 0 || maxFirst <= 0) return 0;
  if (spacer === total * rowHeight) return Math.min(Math.max(0, scrollTop), maxScroll) / rowHeight; // exact when unscaled
  const frac = Math.min(1, Math.max(0, scrollTop / maxScroll));
  return frac * maxFirst;
}

/**
 * Which rows to render for a scroll position, and where to put them.
 * @param input row height, viewport height, scrollTop, total rows, overscan rows (default 8),
 *   maxPx (default MAX_SCROLL_PX).
 */
export function computeWindow(input: WindowInput): RowWindow {
  const { rowHeight, viewportHeight, total } = input;
  const overscan = input.overscan ?? 8;
  const maxPx = input.maxPx ?? MAX_SCROLL_PX;
  const spacerHeight = spacerHeightFor(total, rowHeight, maxPx);
  const scaled = total * rowHeight > maxPx;
  const scrollTop = Math.max(0, input.scrollTop);
  const firstExact = firstExactFor(scrollTop, rowHeight, viewportHeight, total, maxPx);
  const maxScroll = spacerHeight - viewportHeight;
  const maxFirst = total - viewportHeight / rowHeight;
  const rowsPerPx = scaled && maxScroll > 0 ? maxFirst / maxScroll : 1 / rowHeight;
  if (total <= 0) {
    return { spacerHeight, scaled, rowsPerPx, firstExact: 0, firstVisible: 0, lastVisible: -1, first: 0, last: -1, topOf: (r) => r * rowHeight };
  }
  const firstVisible = Math.min(total - 1, Math.floor(firstExact));
  // A row is visible if any of it is inside the viewport: the last one starts before the bottom edge.
  const lastVisible = Math.min(total - 1, Math.max(firstVisible, Math.ceil(firstExact + viewportHeight / rowHeight) - 1));
  const first = Math.max(0, firstVisible - overscan);
  const last = Math.min(total - 1, lastVisible + overscan);
  // Unscaled: rows sit at their natural offsets (no drift); scaled: relative to the viewport top.
  const clampedTop = Math.min(scrollTop, Math.max(0, maxScroll));
  const topOf = scaled
    ? (row: number) => clampedTop + (row - firstExact) * rowHeight
    : (row: number) => row * rowHeight;
  return { spacerHeight, scaled, rowsPerPx, firstExact, firstVisible, lastVisible, first, last, topOf };
}

/**
 * The scrollTop that brings `row` into view: at the top ("start"), flush with the bottom ("end"),
 * or centred ("center"). Inverse of the proportional mapping, so it works in scaled mode too;
 * browser tests can use it to reach row 500,000 of a million.
 */
export function scrollTopForRow(
  row: number,
  rowHeight: number,
  viewportHeight: number,
  total: number,
  align: "start" | "end" | "center" = "start",
  maxPx = MAX_SCROLL_PX,
): number {
  const spacer = spacerHeightFor(total, rowHeight, maxPx);
  const maxScroll = Math.max(0, spacer - viewportHeight);
  const perView = viewportHeight / rowHeight;
  const maxFirst = total - perView;
  if (maxScroll <= 0 || maxFirst <= 0) return 0;
  let firstExact = row;
  if (align === "end") firstExact = row + 1 - perView;
  else if (align === "center") firstExact = row + 0.5 - perView / 2;
  firstExact = Math.min(maxFirst, Math.max(0, firstExact));
  if (total * rowHeight <= maxPx) return Math.min(maxScroll, firstExact * rowHeight);
  return (firstExact / maxFirst) * maxScroll;
}

/**
 * The scrollTop that makes `row` fully visible while moving as little as possible
 * (unchanged when it already is): used by keyboard navigation.
 */
export function scrollTopToReveal(
  row: number,
  rowHeight: number,
  viewportHeight: number,
  total: number,
  scrollTop: number,
  maxPx = MAX_SCROLL_PX,
): number {
  const w = computeWindow({ rowHeight, viewportHeight, scrollTop, total, overscan: 0, maxPx });
  if (row <= w.firstExact) return scrollTopForRow(row, rowHeight, viewportHeight, total, "start", maxPx);
  if (row + 1 >= w.firstExact + viewportHeight / rowHeight) return scrollTopForRow(row, rowHeight, viewportHeight, total, "end", maxPx);
  return scrollTop;
}

/** Page indices covering rows first..last (inclusive) for a page size; [] when last < first. */
export function pagesFor(first: number, last: number, pageSize: number): number[] {
  if (last < first || pageSize <= 0) return [];
  const out: number[] = [];
  for (let p = Math.floor(Math.max(0, first) / pageSize); p <= Math.floor(last / pageSize); p++) out.push(p);
  return out;
}

/** Cache key for a page of rows of one data generation. */
export function pageKey(generation: number, page: number): string {
  return `${generation}:${page}`;
}

/** Least-recently-used map with a fixed capacity (Map keeps insertion order; re-insert on use). */
export class LruCache<K, V> {
  private map = new Map<K, V>();
  constructor(public readonly capacity: number) {
    if (capacity < 1) throw new Error("LruCache capacity must be >= 1");
  }
  get size(): number {
    return this.map.size;
  }
  has(key: K): boolean {
    return this.map.has(key);
  }
  /** Returns the value and marks it most recently used. */
  get(key: K): V | undefined {
    if (!this.map.has(key)) return undefined;
    const v = this.map.get(key)!;
    this.map.delete(key);
    this.map.set(key, v);
    return v;
  }
  /** Reads without touching recency (for painting loops that must not reorder). */
  peek(key: K): V | undefined {
    return this.map.get(key);
  }
  /** Inserts or replaces; evicts the least recently used entry when over capacity. */
  set(key: K, value: V): void {
    if (this.map.has(key)) this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.capacity) {
      const oldest = this.map.keys().next().value as K;
      this.map.delete(oldest);
    }
  }
  delete(key: K): boolean {
    return this.map.delete(key);
  }
  /** Removes every entry whose key matches (e.g. pages of older generations). */
  deleteWhere(pred: (key: K) => boolean): void {
    for (const k of [...this.map.keys()]) if (pred(k)) this.map.delete(k);
  }
  clear(): void {
    this.map.clear();
  }
  keys(): K[] {
    return [...this.map.keys()];
  }
}
