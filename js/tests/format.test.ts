import { describe, expect, test } from "vitest";
import { formatNumber, formatInt, formatCell, formatCount, barGeometry, isMissing } from "../src/lib/format";

describe("numbers", () => {
  test("4 significant digits, no trailing zeros", () => {
    expect(formatNumber(0.123456)).toBe("0.1235");
    expect(formatNumber(-3.5)).toBe("-3.5");
    expect(formatNumber(12.3456)).toBe("12.35");
    expect(formatNumber(0.1)).toBe("0.1");
    expect(formatNumber(1234.56)).toBe("1235");
    expect(formatNumber(0.00012346)).toBe("0.0001235");
  });
  test("integral floats print as integers, large ones without exponent up to 1e10", () => {
    expect(formatNumber(3)).toBe("3");
    expect(formatNumber(12345.6)).toBe("12346");
    expect(formatNumber(9999999999)).toBe("9999999999");
    expect(formatNumber(-9999999999.4)).toBe("-9999999999");
    expect(formatNumber(-0)).toBe("0");
    expect(formatNumber(-0.00001)).toBe("-1e-5");
  });
  test("tiny values use an exponent with 4 significant digits", () => {
    expect(formatNumber(1.23456e-7)).toBe("1.235e-7");
  });
  test("huge values too: their digits would not fit a number cell (1e12, 1e15 and 1e300 all read 10000000000…)", () => {
    expect(formatNumber(1e10)).toBe("1e+10");
    expect(formatNumber(123456789012.5)).toBe("1.235e+11");
    expect(formatNumber(9999999999.6)).toBe("1e+10"); // it rounds to 11 digits
    expect(formatNumber(-3.2e20)).toBe("-3.2e+20");
    expect(formatNumber(1e21)).toBe("1e+21");
    expect(formatNumber(-1.2346e300)).toBe("-1.235e+300"); // the longest: 11 characters
    expect(formatCell(1e15, { name: "loss", kind: "number" }).text).toBe("1e+15");
  });
  test("infinities and NaN", () => {
    expect(formatNumber(Infinity)).toBe("∞");
    expect(formatNumber(-Infinity)).toBe("-∞");
    expect(formatNumber(NaN)).toBe("");
    // JSON has no infinity: the kernel sends it as text, shown as ∞, not as a missing value
    expect(formatCell("Infinity", { name: "kl_sum", kind: "number" })).toEqual({ text: "∞", missing: false });
    expect(formatCell("-Infinity", { name: "kl_sum", kind: "number" }).text).toBe("-∞");
  });
  test("ints in full", () => {
    expect(formatInt(1000000012)).toBe("1000000012");
    expect(formatInt(9007199254740991)).toBe("9007199254740991");
    expect(formatInt(1e22)).toBe("10000000000000000000000");
    expect(formatInt(-42)).toBe("-42");
  });
});

describe("formatCell", () => {
  const reward = { name: "reward", kind: "number" as const };
  const step = { name: "step", kind: "int" as const };
  const sid = { name: "sample_id", kind: "number" as const };
  const prompt = { name: "prompt", kind: "text" as const };
  test("null / NaN / undefined are empty and missing", () => {
    for (const v of [null, NaN, undefined]) {
      expect(isMissing(v)).toBe(true);
      expect(formatCell(v, reward)).toEqual({ text: "", missing: true });
    }
    expect(isMissing(0)).toBe(false);
    expect(formatCell("", prompt)).toEqual({ text: "", missing: false });
  });
  test("by kind", () => {
    expect(formatCell(0.987654, reward).text).toBe("0.9877");
    expect(formatCell(40, step).text).toBe("40");
    expect(formatCell(1234567, step).text).toBe("1234567");
    // ids are shown in full even if the column is declared as float
    expect(formatCell(1000000012, sid).text).toBe("1000000012");
    expect(formatCell("<img src=x>", prompt).text).toBe("<img src=x>");
    expect(formatCell("0.5", reward).text).toBe("0.5");
    // an integer past 2**53 comes as its digits: shown as they are, not rounded through a number
    expect(formatCell("1152921504606846977", sid).text).toBe("1152921504606846977");
    expect(formatCell("-9007199254740993", step).text).toBe("-9007199254740993");
  });
  test("counts", () => {
    expect(formatCount(12800)).toBe("12,800 rows");
    expect(formatCount(1)).toBe("1 row");
    expect(formatCount(0)).toBe("0 rows");
  });
});

describe("barGeometry", () => {
  test("all-positive range draws from the left edge", () => {
    const g = barGeometry(5, 0, 10)!;
    expect(g.left).toBe(0);
    expect(g.width).toBeCloseTo(0.5);
    expect(g.negative).toBe(false);
    expect(barGeometry(10, 2, 10)!.width).toBeCloseTo(1);
    // axis includes zero even when min > 0
    expect(barGeometry(2, 2, 10)!.width).toBeCloseTo(0.2);
  });
  test("all-negative range draws from the right edge", () => {
    const g = barGeometry(-5, -10, -1)!;
    expect(g.zero).toBe(1);
    expect(g.left).toBeCloseTo(0.5);
    expect(g.width).toBeCloseTo(0.5);
    expect(g.negative).toBe(true);
  });
  test("signed range draws from the zero line", () => {
    const pos = barGeometry(2, -2, 6)!;
    expect(pos.zero).toBeCloseTo(0.25);
    expect(pos.left).toBeCloseTo(0.25);
    expect(pos.width).toBeCloseTo(0.25);
    const neg = barGeometry(-2, -2, 6)!;
    expect(neg.left).toBeCloseTo(0);
    expect(neg.width).toBeCloseTo(0.25);
    expect(neg.negative).toBe(true);
    const zero = barGeometry(0, -2, 6)!;
    expect(zero.width).toBe(0);
  });
  test("out-of-range values are clamped; missing values and ranges give null", () => {
    expect(barGeometry(100, 0, 10)!.width).toBeCloseTo(1);
    expect(barGeometry(-100, -1, 1)!.left).toBeCloseTo(0);
    expect(barGeometry(null, 0, 1)).toBeNull();
    expect(barGeometry(NaN, 0, 1)).toBeNull();
    expect(barGeometry(1, null, 1)).toBeNull();
    expect(barGeometry(0, 0, 0)!.width).toBe(0);
  });
});
