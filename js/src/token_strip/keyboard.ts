/**
 * Keyboard navigation between tokens, without DOM: where the active token goes for a key.
 * Right/Left walk through the units and on into the next/previous non-empty strip, Down/Up move
 * to the same place in the next/previous non-empty strip, Home/End go to the ends of the strip.
 */
import type { At } from "./samples";

type Strip = { units: ArrayLike<unknown> };

/** The first strip from `s` on, in direction `dir`, with at least one unit (-1 if none). */
function nonEmpty(strips: readonly Strip[], s: number, dir: number): number {
  for (let k = s; k >= 0 && k < strips.length; k += dir) if (strips[k].units.length) return k;
  return -1;
}

/**
 * The unit `key` moves to from `cur` (the first unit when nothing is active yet), or null for a
 * key that does not navigate. At least one strip must have units.
 */
export function navigate(strips: readonly Strip[], cur: At | null, key: string): At | null {
  const first = strips.findIndex((v) => v.units.length);
  switch (key) {
    case "ArrowRight": {
      if (!cur) return { s: first, u: 0 };
      if (cur.u + 1 < strips[cur.s].units.length) return { s: cur.s, u: cur.u + 1 };
      const s = nonEmpty(strips, cur.s + 1, 1);
      return s >= 0 ? { s, u: 0 } : cur;
    }
    case "ArrowLeft": {
      if (!cur) return { s: first, u: 0 };
      if (cur.u > 0) return { s: cur.s, u: cur.u - 1 };
      const s = nonEmpty(strips, cur.s - 1, -1);
      return s >= 0 ? { s, u: strips[s].units.length - 1 } : cur;
    }
    case "ArrowDown":
    case "ArrowUp": {
      const dir = key === "ArrowDown" ? 1 : -1;
      const s = cur ? nonEmpty(strips, cur.s + dir, dir) : first;
      const ss = s >= 0 ? s : cur!.s;
      return { s: ss, u: Math.min(cur?.u ?? 0, strips[ss].units.length - 1) };
    }
    case "Home":
      return { s: cur?.s ?? first, u: 0 };
    case "End": {
      const s = cur?.s ?? first;
      return { s, u: strips[s].units.length - 1 };
    }
    default:
      return null;
  }
}
