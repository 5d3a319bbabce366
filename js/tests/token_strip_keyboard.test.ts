import { describe, expect, it } from "vitest";
import { navigate } from "../src/token_strip/keyboard";

/** Strips with these unit counts (only `units.length` matters to navigation). */
const strips = (...counts: number[]) => counts.map((n) => ({ units: new Array(n).fill(0) }));

describe("token strip keyboard navigation", () => {
  it("starts at the first unit of the first non-empty strip", () => {
    const s = strips(0, 3, 2);
    for (const key of ["ArrowRight", "ArrowLeft", "ArrowDown", "Home"]) expect(navigate(s, null, key)).toEqual({ s: 1, u: 0 });
    expect(navigate(s, null, "End")).toEqual({ s: 1, u: 2 });
  });

  it("walks across strips, skipping empty ones, and stops at the ends", () => {
    const s = strips(2, 0, 3);
    expect(navigate(s, { s: 0, u: 1 }, "ArrowRight")).toEqual({ s: 2, u: 0 });
    expect(navigate(s, { s: 2, u: 0 }, "ArrowLeft")).toEqual({ s: 0, u: 1 });
    expect(navigate(s, { s: 2, u: 2 }, "ArrowRight")).toEqual({ s: 2, u: 2 });
    expect(navigate(s, { s: 0, u: 0 }, "ArrowLeft")).toEqual({ s: 0, u: 0 });
  });

  it("moves up and down to the same place, clamped to the shorter strip", () => {
    const s = strips(5, 0, 2);
    expect(navigate(s, { s: 0, u: 4 }, "ArrowDown")).toEqual({ s: 2, u: 1 });
    expect(navigate(s, { s: 2, u: 1 }, "ArrowUp")).toEqual({ s: 0, u: 1 });
    expect(navigate(s, { s: 2, u: 1 }, "ArrowDown")).toEqual({ s: 2, u: 1 });
  });

  it("goes to the ends of the strip with Home and End; other keys do not navigate", () => {
    const s = strips(4);
    expect(navigate(s, { s: 0, u: 2 }, "Home")).toEqual({ s: 0, u: 0 });
    expect(navigate(s, { s: 0, u: 1 }, "End")).toEqual({ s: 0, u: 3 });
    expect(navigate(s, { s: 0, u: 1 }, "Enter")).toBeNull();
    expect(navigate(s, { s: 0, u: 1 }, "a")).toBeNull();
  });
});
