/**
 * What a column header shows: the name on up to two lines, broken after `_`, or when it does not fit a
 * shortened label that keeps the characters telling it apart from every other column (two columns
 * never read the same, however narrow). The full name is always in the header's tooltip.
 */

/** The ellipsis of a shortened label. */
export const ELLIPSIS = "…";
/** Lines a header shows. */
export const HEADER_LINES = 2;
/** Average width of a bold header character in px (13px UI font); a budget, not a measurement. */
const CHAR_PX = 7;
/** Padding and sort arrow of a header cell in px (the arrow shows on one column only: it may overflow). */
const CELL_CHROME_PX = 20;

/** How many characters one header line holds at `widthPx`. */
export function charsPerLine(widthPx: number): number {
  return Math.max(3, Math.floor((widthPx - CELL_CHROME_PX) / CHAR_PX));
}

/** The pieces a label breaks into: after each `_` and the ellipsis (the header puts a <wbr> there). */
export function breakPieces(label: string): string[] {
  return label.split(/(?<=[_…])/);
}

/** True when `text`, broken after `_` (and inside a piece longer than a line), fills at most `lines` lines. */
export function fitsLines(text: string, perLine: number, lines = HEADER_LINES): boolean {
  let used = 0;
  let line = 0;
  for (const piece of breakPieces(text)) {
    if (line + piece.length <= perLine) {
      line += piece.length;
      continue;
    }
    if (line > 0) used++;
    used += Math.floor(piece.length / perLine); // a piece longer than a line wraps inside itself
    line = piece.length % perLine;
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
 * The label of `name` in a header `perLine` characters wide: the name itself when it fits two lines,
 * else its first `keep` characters (at least), an ellipsis and as much of its end as still fits.
 */
export function shortLabel(name: string, keep: number, perLine: number): string {
  if (fitsLines(name, perLine)) return name;
  const room = HEADER_LINES * perLine - 1; // characters besides the ellipsis
  const headLen = Math.max(keep, Math.min(name.length, Math.ceil(room / 2)));
  const head = name.slice(0, headLen);
  for (let tail = Math.min(name.length - head.length, room - head.length); tail > 0; tail--) {
    const label = head + ELLIPSIS + name.slice(name.length - tail);
    if (fitsLines(label, perLine)) return label;
  }
  return head + ELLIPSIS; // the distinguishing head alone; wider than two lines only when it must be
}

/** The labels of a header's columns at their widths in px: distinct whenever the names are. */
export function headerLabels(names: readonly string[], widthsPx: readonly number[]): string[] {
  const keep = distinguishingLengths(names);
  return names.map((n, i) => shortLabel(n, keep[i], charsPerLine(widthsPx[i])));
}
