/**
 * What a column header shows: the name on up to two lines, broken after `_`, or when it does not fit a
 * shortened label that keeps the characters telling it apart from every other column (two columns
 * never read the same, however narrow). The full name is always in the header's tooltip.
 */

/** The ellipsis of a shortened label. */
export const ELLIPSIS = "…";
/** Lines a header shows. */
export const HEADER_LINES = 2;
/** Average width of a bold header character in px (13px UI font): the measure where nothing can be measured. */
const CHAR_PX = 7;
/** Padding, border and a little slack of a header cell in px (the sort arrow shows on one column only). */
const CELL_CHROME_PX = 20;

/** The width of a text in px. */
export type Measure = (text: string) => number;

/** The fallback measure: every character the same width. */
export const charMeasure: Measure = (text) => text.length * CHAR_PX;

/** The width in px a label has inside a header cell `cellPx` wide. */
export function labelRoom(cellPx: number): number {
  return Math.max(3 * CHAR_PX, cellPx - CELL_CHROME_PX);
}

/** How many characters one header line holds at `cellPx`, by the fallback measure. */
export function charsPerLine(cellPx: number): number {
  return Math.floor(labelRoom(cellPx) / CHAR_PX);
}

/** The pieces a label breaks into: after each `_` and the ellipsis (the header puts a <wbr> there). */
export function breakPieces(label: string): string[] {
  return label.split(/(?<=_)|(?<=.…)/); // not after a leading ellipsis: it would stand on a line alone
}

/**
 * True when `text`, broken after `_` (and inside a piece wider than a line), fills at most `lines` lines
 * `roomPx` wide.
 */
export function fitsLines(text: string, roomPx: number, measure: Measure = charMeasure, lines = HEADER_LINES): boolean {
  let used = 0;
  let line = 0;
  for (const piece of breakPieces(text)) {
    const w = measure(piece);
    if (line + w <= roomPx) {
      line += w;
      continue;
    }
    if (line > 0) used++;
    used += Math.floor(w / roomPx); // a piece wider than a line wraps inside itself
    line = w % roomPx;
  }
  if (line > 0) used++;
  return used <= lines;
}

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * For each name, how many leading characters a label must keep to differ from every other name: one past
 * the longest prefix it shares with another. A label that starts with those characters can equal no other
 * label that does the same (both differ at the first position their names differ).
 */
export function distinguishingLengths(names: readonly string[]): number[] {
  return names.map((n, i) => {
    let shared = 0;
    names.forEach((m, j) => {
      if (j !== i && m !== n) shared = Math.max(shared, commonPrefix(n, m));
    });
    return Math.min(n.length, shared + 1);
  });
}

/**
 * The label of `name` in two lines `roomPx` wide: the name itself when it fits; else its first `keep`
 * characters (more if they fit about one line), an ellipsis and as much of its end as still fits; else,
 * when even those characters overflow, an ellipsis and the name from its distinguishing character on.
 */
export function shortLabel(name: string, keep: number, roomPx: number, measure: Measure = charMeasure): string {
  if (fitsLines(name, roomPx, measure)) return name;
  let headLen = keep;
  while (headLen < name.length - 1 && measure(name.slice(0, headLen + 1)) <= roomPx) headLen++;
  const head = name.slice(0, headLen);
  for (let tail = name.length - head.length - 1; tail >= 0; tail--) {
    const label = head + ELLIPSIS + name.slice(name.length - tail);
    if (fitsLines(label, roomPx, measure)) return label;
  }
  // the shared prefix alone overflows: start at the first character no other name has there
  const from = Math.max(1, keep - 1);
  const rest = ELLIPSIS + name.slice(from);
  if (fitsLines(rest, roomPx, measure)) return rest;
  let end = from + 1;
  while (end < name.length && fitsLines(ELLIPSIS + name.slice(from, end + 1) + ELLIPSIS, roomPx, measure)) end++;
  return ELLIPSIS + name.slice(from, end) + ELLIPSIS;
}

/**
 * The labels of a header's columns at their cell widths in px. Labels that still coincide (names that differ
 * only where neither label reaches) fall back to the full names: clipped, but never two alike by choice.
 */
export function headerLabels(names: readonly string[], widthsPx: readonly number[], measure: Measure = charMeasure): string[] {
  const keep = distinguishingLengths(names);
  const labels = names.map((n, i) => shortLabel(n, keep[i], labelRoom(widthsPx[i]), measure));
  const seen = new Map<string, number>();
  labels.forEach((l) => seen.set(l, (seen.get(l) ?? 0) + 1));
  return labels.map((l, i) => ((seen.get(l) ?? 0) > 1 && names[i] !== l ? names[i] : l));
}
