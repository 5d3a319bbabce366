/**
 * The SampleTable's pages of rows, without DOM: which pages the viewport needs, fetching them
 * (visible ones first, a few at a time, one request per page), and a small LRU cache keyed by
 * the data generation, so a reply for data that changed meanwhile is never shown.
 */
import type { RowsReply } from "../lib/protocol";
import { LruCache, pageKey, pagesFor } from "../lib/virtual";

/** Rows per "rows" request. */
export const PAGE_SIZE = 100;
const PREFETCH = 30; // rows beyond the overscan whose pages are fetched ahead
const MAX_INFLIGHT = 4; // concurrent "rows" requests; more would only queue stale pages in the kernel
const CACHE_PAGES = 64;
const RETRY_AFTER_MS = 3000; // a failed page is not re-requested by scrolling before this

export interface Page {
  ids: number[];
  rows: (number | string | null)[][];
  clipped: boolean[][] | null;
}

/** The rows a view shows: the visible ones and, around them, the rendered (overscan) ones. */
export interface Needed {
  firstVisible: number;
  lastVisible: number;
  first: number;
  last: number;
}

export interface PagerOptions {
  /** The rpc "rows" call. */
  fetchRows: (offset: number, limit: number) => Promise<RowsReply>;
  /** A request ended (page stored, stale or failed): repaint, and ask for what is still missing. */
  settled: () => void;
  /** A request failed (the message), or one succeeded (""). */
  report: (error: string) => void;
  /** The clock for retry delays (tests pass their own). */
  now?: () => number;
}

const num = (v: unknown, d: number) => (typeof v === "number" && Number.isFinite(v) ? v : d);

export class Pager {
  /** The data generation pages are fetched for; older replies are dropped. */
  generation = 0;
  private readonly cache = new LruCache<string, Page>(CACHE_PAGES);
  private readonly inflight = new Map<string, Promise<Page | null>>();
  private readonly failedAt = new Map<string, number>();
  private readonly now: () => number;
  private disposed = false;

  constructor(private readonly opts: PagerOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** New data: pages of older generations are useless (a newer one may already hold early replies). */
  setGeneration(generation: number): void {
    this.generation = generation;
    this.cache.deleteWhere((k) => Number(k.split(":")[0]) < generation);
    this.failedAt.clear();
  }

  /** The loaded page holding `row` (without touching the LRU order: painting must not reorder). */
  pageOf(row: number): Page | undefined {
    return this.cache.peek(pageKey(this.generation, Math.floor(row / PAGE_SIZE)));
  }

  /** The sample id of a row if its page is loaded. */
  idOf(row: number): number | undefined {
    const p = this.pageOf(row);
    return p ? p.ids[row % PAGE_SIZE] : undefined;
  }

  private store(page: number, reply: RowsReply): Page | null {
    const g = num(reply.generation, this.generation);
    if (g < this.generation) return null; // stale: the data changed while this was in flight
    const p: Page = { ids: reply.ids || [], rows: reply.rows || [], clipped: reply.clipped || null };
    this.cache.set(pageKey(g, page), p);
    return g === this.generation ? p : null;
  }

  /**
   * Fetches one page for the current generation; concurrent asks share one request.
   * Resolves to null when the reply is stale or the call failed (the error is reported).
   */
  fetch(page: number): Promise<Page | null> {
    const key = pageKey(this.generation, page);
    const hit = this.cache.get(key);
    if (hit) return Promise.resolve(hit);
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const p = this.opts
      .fetchRows(page * PAGE_SIZE, PAGE_SIZE)
      .then(
        (reply) => {
          this.failedAt.delete(key);
          this.opts.report("");
          return this.store(page, reply);
        },
        (err: any) => {
          this.failedAt.set(key, this.now());
          this.opts.report(`Could not load rows ${page * PAGE_SIZE}–${(page + 1) * PAGE_SIZE - 1}: ${err?.message || err}`);
          return null;
        },
      )
      .finally(() => {
        this.inflight.delete(key);
        if (!this.disposed) this.opts.settled();
      });
    this.inflight.set(key, p);
    return p;
  }

  /**
   * Requests the pages `rows` needs, visible ones first, at most MAX_INFLIGHT at a time: when
   * the scrollbar is dragged through a million rows, only pages still in view get asked for.
   */
  pump(rows: Needed, total: number): void {
    if (this.disposed || total <= 0) return;
    const now = this.now();
    const visible = pagesFor(rows.firstVisible, rows.lastVisible, PAGE_SIZE);
    const around = pagesFor(Math.max(0, rows.first - PREFETCH), Math.min(total - 1, rows.last + PREFETCH), PAGE_SIZE);
    const want = [...visible, ...around.filter((p) => !visible.includes(p))];
    for (const page of want) {
      if (this.inflight.size >= MAX_INFLIGHT) break;
      const key = pageKey(this.generation, page);
      if (this.cache.has(key) || this.inflight.has(key)) continue;
      const failed = this.failedAt.get(key);
      if (failed !== undefined && now - failed < RETRY_AFTER_MS) continue;
      void this.fetch(page);
    }
  }

  /**
   * Ids of rows lo..hi (inclusive), fetching missing pages; capped at `cap` rows, keeping the end
   * nearest `from` (the anchor). Null when a page could not be loaded or the data changed meanwhile.
   */
  async idsInRange(lo: number, hi: number, from: number, cap: number): Promise<{ ids: number[]; capped: boolean } | null> {
    let capped = false;
    if (hi - lo + 1 > cap) {
      capped = true;
      if (from <= lo) hi = lo + cap - 1;
      else lo = hi - cap + 1;
    }
    const gen = this.generation;
    const pages = pagesFor(lo, hi, PAGE_SIZE);
    const got = await Promise.all(pages.map((p) => this.fetch(p)));
    if (gen !== this.generation || got.some((p) => !p)) return null;
    const ids: number[] = [];
    pages.forEach((p, k) => {
      const page = got[k]!;
      const start = Math.max(lo, p * PAGE_SIZE);
      const end = Math.min(hi, p * PAGE_SIZE + page.ids.length - 1);
      for (let r = start; r <= end; r++) ids.push(page.ids[r - p * PAGE_SIZE]);
    });
    return { ids, capped };
  }

  /** Replies still on their way are stored but nobody is told any more. */
  dispose(): void {
    this.disposed = true;
  }
}
