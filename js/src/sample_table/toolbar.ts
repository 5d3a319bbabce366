/** The toolbar: the search box (debounced), the row and selection counts, "clear selection" and a note. */
import { formatCount } from "../lib/format";
import { el } from "../lib/dom";

const SEARCH_DEBOUNCE_MS = 250;

export class Toolbar {
  readonly el: HTMLDivElement;
  private readonly search: HTMLInputElement;
  private readonly count: HTMLSpanElement;
  private readonly selCount: HTMLSpanElement;
  private readonly clearBtn: HTMLButtonElement;
  private readonly note: HTMLSpanElement;
  private searchTimer: ReturnType<typeof setTimeout> | null = null;

  /** `onSearch` gets the search text once typing pauses; `onClear` the "clear selection" click. */
  constructor(doc: Document, onSearch: (text: string) => void, onClear: () => void) {
    this.el = el(doc, "div", "rlv-toolbar");
    this.search = el(doc, "input", "rlv-search");
    this.search.type = "search";
    this.search.placeholder = "Search…";
    this.search.setAttribute("aria-label", "Search samples");
    this.count = el(doc, "span", "rlv-count");
    this.selCount = el(doc, "span", "rlv-selcount");
    this.clearBtn = el(doc, "button", "rlv-clear", "clear selection");
    this.clearBtn.type = "button";
    this.note = el(doc, "span", "rlv-note");
    this.el.append(this.search, this.count, this.selCount, this.clearBtn, this.note);
    this.search.addEventListener("input", () => {
      if (this.searchTimer !== null) clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => {
        this.searchTimer = null;
        onSearch(this.search.value);
      }, SEARCH_DEBOUNCE_MS);
    });
    this.clearBtn.addEventListener("click", onClear);
  }

  /** Shows `text` in the search box; unless `force`, not while the user is typing. */
  showSearch(text: string, force = false): void {
    if (force || (this.searchTimer === null && this.search.value !== text)) this.search.value = text;
  }

  showCounts(total: number, selected: number): void {
    this.count.textContent = formatCount(total);
    this.selCount.textContent = `${selected.toLocaleString("en-US")} selected`;
    this.clearBtn.disabled = selected === 0;
  }

  /** A short note after the counts (e.g. "selection capped at …"); "" hides it. */
  setNote(text: string): void {
    this.note.textContent = text;
  }

  dispose(): void {
    if (this.searchTimer !== null) clearTimeout(this.searchTimer);
  }
}
