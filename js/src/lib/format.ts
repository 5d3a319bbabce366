/**
 * Cell formatting for the SampleTable: short, exponent-free numbers that read at a glance,
 * full sample ids, muted empty cells for missing values, and inline-bar geometry.
 * Pure functions (no DOM) so they are unit-tested directly.
 */

import type { ColumnInfo } from "./protocol";

export type CellValue = number | string | null | undefined;

export interface FormattedCell {
  text: string;
  /** True for null / NaN / undefined: drawn as an empty muted cell. */
  missing: boolean;
}

/** Columns whose values are identifiers: shown in full, never abbreviated or barred. */
export function isIdColumn(name: string): boolean {
  return name === "sample_id" || name === "id" || name.endsWith("_id");
}

/** True for values that mean "no value" (null, undefined, NaN). */
export function isMissing(v: CellValue): boolean {
  return v === null || v === undefined || (typeof v === "number" && Number.isNaN(v));
}

/**
 * An integer in plain digits, however large: `String(1e21)` would give "1e+21", so big values
 * go through BigInt. Sample ids (10+ digits) stay exact as long as they fit in a double.
 */
export function formatInt(v: number): string {
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-∞";
  const r = Math.round(v);
  if (Object.is(r, -0)) return "0";
  return Math.abs(r) >= 1e21 ? BigInt(r).toString() : String(r);
}

/** Past this, a float column's value is shown with an exponent (its digits would not fit a number cell). */
const BIG = 1e10;

/**
 * A float to 4 significant digits without trailing zeros ("0.1235", "-3.5", "12.35").
 * Integral values print as integers; |v| >= 10,000 rounds to an integer rather than using an
 * exponent (12345.6 -> "12346") because users compare magnitudes by length, up to 1e10: past it the
 * digits would not fit a number cell (~11 characters), so huge values (a diverged loss) get an exponent
 * ("1.235e+15"), as tiny non-zero values (|v| < 1e-4) do ("1.235e-5"), whose leading zeros would hide the digits.
 */
export function formatNumber(v: number): string {
  if (Number.isNaN(v)) return "";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-∞";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a < 1e-4 || Math.round(a) >= BIG) {
    const [m, e] = v.toExponential(3).split("e");
    return `${String(parseFloat(m))}e${e}`;
  }
  if (Number.isInteger(v) || a >= 1e4) return formatInt(v);
  const s = String(parseFloat(v.toPrecision(4))); // parseFloat drops trailing zeros
  return s === "-0" ? "0" : s;
}

/** Formats one cell for its column; text is returned as-is (the caller sets it with textContent). */
export function formatCell(v: CellValue, col: Pick<ColumnInfo, "name" | "kind">): FormattedCell {
  if (isMissing(v)) return { text: "", missing: true };
  if (typeof v === "number") {
    if (col.kind === "int" || isIdColumn(col.name)) return { text: formatInt(v), missing: false };
    return { text: formatNumber(v), missing: false };
  }
  if (typeof v === "string") {
    // an integer past 2**53 comes as its digits (a number would round them): shown as they are
    if ((col.kind === "int" || isIdColumn(col.name)) && /^-?\d+$/.test(v.trim())) return { text: v.trim(), missing: false };
    // numeric columns can arrive as strings (e.g. from JSON); show them as numbers when they parse
    if (col.kind !== "text" && v.trim() !== "" && !Number.isNaN(Number(v))) return formatCell(Number(v), col);
    return { text: v, missing: false };
  }
  return { text: String(v), missing: false };
}

/** Row count for the toolbar: "12,800 rows", "1 row". */
export function formatCount(n: number, noun = "row"): string {
  const k = Math.max(0, Math.round(n || 0));
  return `${k.toLocaleString("en-US")} ${noun}${k === 1 ? "" : "s"}`;
}

export interface BarGeometry {
  /** Left edge as a fraction of the cell width, in [0, 1]. */
  left: number;
  /** Width as a fraction of the cell width, in [0, 1]. */
  width: number;
  /** True when the value is below zero (drawn in the "negative" colour). */
  negative: boolean;
  /** Position of the zero line as a fraction of the width (0 for all-positive ranges). */
  zero: number;
}

/**
 * Geometry of the inline bar for `v` in a column whose values span [min, max].
 * The axis always includes zero, so bars grow from the zero line: an all-positive range draws
 * from the left edge, an all-negative one from the right edge, a signed range from the zero
 * line in between (rewards and KL read as "how far from zero, which way").
 * Returns null when there is nothing sensible to draw (missing value or range).
 */
export function barGeometry(v: CellValue, min: number | null | undefined, max: number | null | undefined): BarGeometry | null {
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  if (typeof min !== "number" || typeof max !== "number" || !Number.isFinite(min) || !Number.isFinite(max)) return null;
  const lo = Math.min(0, min, max);
  const hi = Math.max(0, min, max);
  const span = hi - lo;
  if (span <= 0) return { left: 0, width: 0, negative: false, zero: 0 };
  const zero = (0 - lo) / span;
  const pos = (Math.min(hi, Math.max(lo, v)) - lo) / span; // values outside the range are clamped
  const left = Math.min(zero, pos);
  return { left, width: Math.abs(pos - zero), negative: v < 0, zero };
}
