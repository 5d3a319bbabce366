import { describe, expect, it } from "vitest";
import {
  RAMPS,
  MISSING_COLOR,
  blend,
  chipAlpha,
  chipColors,
  contrastRatio,
  formatValue,
  metricKind,
  parseCssColor,
  percentile,
  rampColor,
  relativeLuminance,
  scaleFor,
  sameScale,
  scaleFromDomain,
  scaleTicks,
  textColorFor,
  valueColor,
  layoutTicks,
  labelWidth,
  colorLut,
  lutIndex,
  clipOf,
  LUT_STEPS,
  LUT_MISSING,
  type RGB,
} from "../src/lib/color";

const WHITE_PAGE: RGB = [255, 255, 255];
const DARK_PAGE: RGB = [0x11, 0x11, 0x11];

describe("metric kinds", () => {
  it("classifies the logged metrics", () => {
    expect(["token_reward", "log_ratio", "value", "advantage"].map(metricKind)).toEqual(["signed", "signed", "signed", "signed"]);
    expect(metricKind("kl")).toBe("kl");
    expect([metricKind("prob"), metricKind("ref_prob")]).toEqual(["prob", "prob"]);
    expect([metricKind("logprob"), metricKind("ref_logprob")]).toEqual(["logprob", "logprob"]);
  });

  it("colours the rollout-trainer mismatch fields: diverging for ratios and deltas, sequential for KL and entropy", () => {
    expect(["mismatch_log_ratio", "prob_delta", "advantage"].map(metricKind)).toEqual(["signed", "signed", "signed"]);
    expect(["mismatch_kl", "entropy"].map(metricKind)).toEqual(["kl", "kl"]);
    expect(["inference_logprob", "trainer_logprob"].map(metricKind)).toEqual(["logprob", "logprob"]);
  });
});

describe("scales", () => {
  it("makes signed metrics symmetric around 0 even when the values are lopsided", () => {
    const s = scaleFor("token_reward", [-0.1, 0.2, 0.5, 2.0, Number.NaN]);
    expect(s.kind).toBe("diverging");
    expect(s.lo).toBeCloseTo(-2.0);
    expect(s.hi).toBeCloseTo(2.0);
    // the middle of the ramp (0) is the light neutral colour
    expect(valueColor(0, s).rgb).toEqual(RAMPS.RdBu[5]);
    // −x and +x are equally far from the middle: same luminance class, opposite hues
    const neg = valueColor(-1, s).rgb;
    const pos = valueColor(1, s).rgb;
    expect(neg[0]).toBeGreaterThan(neg[2]); // red side
    expect(pos[2]).toBeGreaterThan(pos[0]); // blue side
  });

  it("darkens an unknown all-negative metric towards its most negative value under every scope", () => {
    const darker = (s: ReturnType<typeof scaleFor>) =>
      relativeLuminance(valueColor(-5, s).rgb) < relativeLuminance(valueColor(-1, s).rgb);
    expect(darker(scaleFor("ref_logp", [-5, -3, -1]))).toBe(true); // this sample
    expect(darker(scaleFromDomain("ref_logp", -5, -1))).toBe(true); // this step / the whole run
    expect(darker(scaleFromDomain("my_metric", 1, 5))).toBe(false); // positive: 5 is the dark end
  });

  it("limits at the 99th percentile of |x| so an outlier does not wash out the rest", () => {
    const values = Array.from({ length: 200 }, (_, i) => Math.sin(i) * 0.5);
    values.push(40); // one outlier
    const s = scaleFor("log_ratio", values);
    expect(s.hi).toBeLessThan(0.6);
    expect(s.lo).toBe(-s.hi);
    const out = valueColor(40, s);
    expect(out.clip).toBe(1);
    expect(valueColor(-41, s).clip).toBe(-1);
    expect(valueColor(0.3, s).clip).toBe(0);
    // 0.45 is strongly coloured (far from the light middle), not near-white
    const mid = relativeLuminance(valueColor(0, s).rgb);
    expect(mid - relativeLuminance(valueColor(0.45, s).rgb)).toBeGreaterThan(0.3);
    // log_ratio uses PuOr (orange/purple), not red/green
    expect(s.ramp).toEqual(RAMPS.PuOr);
  });

  it("computes nearest-rank percentiles ignoring NaN", () => {
    expect(percentile([3, 1, 2, Number.NaN], 50)).toBe(2);
    expect(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 99)).toBe(99);
    expect(percentile([Number.NaN], 99)).toBeNaN();
  });

  it("makes kl sequential from a light colour at 0 to p99", () => {
    const values = Array.from({ length: 100 }, (_, i) => i / 100);
    const s = scaleFor("kl", values);
    expect(s.kind).toBe("sequential");
    expect(s.lo).toBe(0);
    expect(s.hi).toBeCloseTo(0.98);
    expect(relativeLuminance(valueColor(0, s).rgb)).toBeGreaterThan(0.9);
    expect(relativeLuminance(valueColor(0.9, s).rgb)).toBeLessThan(0.2);
    expect(valueColor(5, s).clip).toBe(1);
  });

  it("fixes prob to [0, 1] and clamps logprob to [-10, 0] whatever the values", () => {
    const p = scaleFor("prob", [0.5, 0.6]);
    expect([p.lo, p.hi]).toEqual([0, 1]);
    const lp = scaleFor("ref_logprob", [-0.1, -30]);
    expect([lp.lo, lp.hi]).toEqual([-10, 0]);
    expect(valueColor(-30, lp).clip).toBe(-1);
    // a domain from the kernel does not move fixed ranges
    expect(scaleFromDomain("prob", 0.2, 0.3)).toMatchObject({ lo: 0, hi: 1 });
  });

  it("keeps a kernel domain symmetric for signed metrics", () => {
    expect(scaleFromDomain("value", -0.5, 3)).toMatchObject({ lo: -3, hi: 3, kind: "diverging" });
    expect(scaleFromDomain("kl", 0, 0.4)).toMatchObject({ lo: 0, hi: 0.4, kind: "sequential" });
  });

  it("tells equal scales apart from changed ones (so unchanged strips are not recoloured)", () => {
    expect(sameScale(scaleFor("prob", [0.1]), scaleFor("prob", [0.9]))).toBe(true);
    expect(sameScale(scaleFor("kl", [0.1, 0.2]), scaleFor("kl", [0.1, 0.2]))).toBe(true);
    expect(sameScale(scaleFor("kl", [0.1, 0.2]), scaleFor("kl", [0.1, 0.3]))).toBe(false);
    expect(sameScale(scaleFor("kl", [1]), scaleFor("entropy", [1]))).toBe(false);
    expect(sameScale(undefined, scaleFor("kl", [1]))).toBe(false);
  });

  it("survives all-zero and all-NaN values", () => {
    const s = scaleFor("token_reward", [0, 0, 0]);
    expect(s.hi).toBeGreaterThan(0);
    expect(scaleFor("kl", [Number.NaN]).hi).toBeGreaterThan(0);
  });

  it("gives NaN the missing colour", () => {
    const s = scaleFor("token_reward", [1, -1]);
    const c = valueColor(Number.NaN, s);
    expect(c.missing).toBe(true);
    expect(c.rgb).toEqual(MISSING_COLOR);
    expect(c.clip).toBe(0);
  });

  it("has ticks at the limits and 0 for diverging scales", () => {
    const s = scaleFor("advantage", [-2, 1]);
    expect(scaleTicks(s)).toEqual([-2, -1, 0, 1, 2]);
  });
});

describe("contrast", () => {
  it("computes WCAG luminance and contrast", () => {
    expect(relativeLuminance([255, 255, 255])).toBeCloseTo(1);
    expect(relativeLuminance([0, 0, 0])).toBe(0);
    expect(contrastRatio([0, 0, 0], [255, 255, 255])).toBeCloseTo(21);
    expect(contrastRatio([119, 119, 119], [255, 255, 255])).toBeCloseTo(4.48, 1);
  });

  it("blends over the page", () => {
    expect(blend([255, 255, 255], 0.5, [0, 0, 0])).toEqual([128, 128, 128]);
    expect(blend([10, 20, 30], 1, [200, 200, 200])).toEqual([10, 20, 30]);
  });

  for (const [name, ramp] of Object.entries(RAMPS)) {
    for (const [pageName, page, dark] of [
      ["white", WHITE_PAGE, false],
      ["#111111", DARK_PAGE, true],
    ] as [string, RGB, boolean][]) {
      it(`${name}: every one of 21 colours reaches 4.5:1 over a ${pageName} page`, () => {
        for (const alpha of [1, chipAlpha(dark)]) {
          for (let i = 0; i <= 20; i++) {
            const bg = blend(rampColor(ramp, i / 20), alpha, page);
            const fg = textColorFor(bg);
            expect(contrastRatio(fg, bg), `${name} t=${i / 20} alpha=${alpha}`).toBeGreaterThanOrEqual(4.5);
          }
        }
      });
    }
  }

  it("chip colours (value and missing) reach 4.5:1 on both themes", () => {
    const s = scaleFor("token_reward", [-1, 1]);
    for (const [page, dark] of [
      [WHITE_PAGE, false],
      [DARK_PAGE, true],
    ] as [RGB, boolean][]) {
      for (const v of [Number.NaN, -1, -0.5, 0, 0.5, 1, 5]) {
        const { bg, fg } = chipColors(valueColor(v, s), page, dark);
        expect(contrastRatio(fg, bg)).toBeGreaterThanOrEqual(4.5);
      }
    }
    // on a dark page a missing value recedes towards the page instead of glowing
    const miss = chipColors(valueColor(Number.NaN, s), DARK_PAGE, true).bg;
    expect(relativeLuminance(miss)).toBeLessThan(0.15);
  });

  it("chooses white text on dark chips and black on light ones", () => {
    expect(textColorFor([8, 48, 107])).toEqual([255, 255, 255]);
    expect(textColorFor([247, 247, 247])).toEqual([0, 0, 0]);
  });
});

describe("helpers", () => {
  it("parses CSS colours", () => {
    expect(parseCssColor("rgb(17, 17, 17)")).toEqual({ rgb: [17, 17, 17], alpha: 1 });
    expect(parseCssColor("rgba(0, 0, 0, 0)")?.alpha).toBe(0);
    expect(parseCssColor("#fff")?.rgb).toEqual([255, 255, 255]);
    expect(parseCssColor("nonsense")).toBeNull();
  });

  it("formats values to 3-4 significant digits", () => {
    expect(formatValue(0.123456)).toBe("0.123");
    expect(formatValue(0.123456, 4)).toBe("0.1235");
    expect(formatValue(-12.345)).toBe("−12.3");
    expect(formatValue(0.0000123)).toBe("1.23e−5");
    expect(formatValue(Number.NaN)).toBe("–");
    expect(formatValue(0)).toBe("0");
  });
});

describe("legend tick layout", () => {
  const W = 180;
  const noOverlap = (ticks: { left: number; width: number }[], gap = 6) => {
    for (let i = 1; i < ticks.length; i++) expect(ticks[i].left).toBeGreaterThanOrEqual(ticks[i - 1].left + ticks[i - 1].width + gap - 1e-9);
    for (const t of ticks) {
      expect(t.left).toBeGreaterThanOrEqual(0);
      expect(t.left + t.width).toBeLessThanOrEqual(W + 1e-9);
    }
  };

  it("estimates label widths generously (digits 0.6em, the minus sign a little more)", () => {
    expect(labelWidth("0", 10)).toBeCloseTo(6);
    expect(labelWidth("−1.63", 10)).toBeGreaterThan(labelWidth("1.63", 10));
    expect(labelWidth("−0.816", 11)).toBeGreaterThan(30);
  });

  it("never draws −1.63 and −0.816 on top of each other: the limits stay, the halves go", () => {
    const s = scaleFor("token_reward", [-1.63, 1.63]);
    expect(scaleTicks(s).map((v) => formatValue(v))).toEqual(["−1.63", "−0.815", "0", "0.815", "1.63"]);
    const ticks = layoutTicks(s, W, 11);
    expect(ticks.map((t) => t.label)).toEqual(["−1.63", "0", "1.63"]);
    noOverlap(ticks);
    // the limits are anchored at the ends of the ramp, 0 is centred on its position
    expect(ticks[0].left).toBe(0);
    expect(ticks[2].left + ticks[2].width).toBeCloseTo(W);
    expect(ticks[1].left + ticks[1].width / 2).toBeCloseTo(W / 2);
  });

  it("keeps every tick when there is room", () => {
    const s = scaleFor("token_reward", [-1.5, 1.5]);
    expect(layoutTicks(s, W, 11).map((t) => t.label)).toEqual(["−1.5", "−0.75", "0", "0.75", "1.5"]);
    const seq = scaleFor("prob", []);
    expect(layoutTicks(seq, W, 11).map((t) => t.label)).toEqual(["0", "0.5", "1"]);
  });

  it("drops inner ticks on a narrow ramp but keeps both limits while they fit", () => {
    const s = scaleFor("logprob", []);
    const ticks = layoutTicks(s, 60, 11);
    expect(ticks.map((t) => t.label)).toEqual(["−10", "0"]);
    noOverlap(ticks);
  });

  it("lays out ticks without overlap for all kinds of limits", () => {
    const lims = [1e-6, 3.3e-4, 0.0123, 0.816, 1.63, 7.77, 12.5, 123.456, 9999, 123456, 2.5e7];
    for (const lim of lims) {
      for (const s of [scaleFromDomain("token_reward", -lim, lim), scaleFromDomain("kl", 0, lim), scaleFromDomain("score_x", -lim * 3, -lim)]) {
        const ticks = layoutTicks(s, W, 11);
        expect(ticks.length).toBeGreaterThanOrEqual(2);
        expect(ticks[0].value).toBe(s.lo);
        expect(ticks[ticks.length - 1].value).toBe(s.hi);
        noOverlap(ticks);
      }
    }
  });
});

describe("colour lookup tables", () => {
  it("matches the exact colours at the ends and the middle, and quantizes in between", () => {
    const s = scaleFor("token_reward", [-2, 2]);
    const lut = colorLut(s.ramp, WHITE_PAGE, false);
    expect(lut.style).toHaveLength(LUT_STEPS + 1);
    for (const v of [-2, 2, -5, 5]) {
      const exact = chipColors(valueColor(v, s), WHITE_PAGE, false);
      expect(lut.bg[lutIndex(v, s)]).toEqual(exact.bg);
      expect(lut.fg[lutIndex(v, s)]).toEqual(exact.fg);
    }
    for (let v = -2; v <= 2; v += 0.037) {
      const exact = chipColors(valueColor(v, s), WHITE_PAGE, false).bg;
      const q = lut.bg[lutIndex(v, s)];
      for (let c = 0; c < 3; c++) expect(Math.abs(q[c] - exact[c])).toBeLessThanOrEqual(3);
    }
    expect(lutIndex(NaN, s)).toBe(LUT_MISSING);
    expect(lut.bg[LUT_MISSING]).toEqual(chipColors(valueColor(NaN, s), WHITE_PAGE, false).bg);
    expect([clipOf(-3, s), clipOf(0, s), clipOf(3, s), clipOf(NaN, s)]).toEqual([-1, 0, 1, 0]);
  });

  it("is computed once per ramp, page and theme, and every entry keeps 4.5:1 text contrast", () => {
    const s = scaleFor("kl", [0, 1]);
    expect(colorLut(s.ramp, DARK_PAGE, true)).toBe(colorLut(s.ramp, DARK_PAGE, true));
    expect(colorLut(s.ramp, DARK_PAGE, true)).not.toBe(colorLut(s.ramp, WHITE_PAGE, false));
    for (const [page, dark] of [[WHITE_PAGE, false], [DARK_PAGE, true]] as [RGB, boolean][]) {
      for (const ramp of Object.values(RAMPS)) {
        const lut = colorLut(ramp, page, dark);
        lut.bg.forEach((bg, k) => expect(contrastRatio(bg, lut.fg[k])).toBeGreaterThanOrEqual(4.5));
        expect(lut.style[0]).toMatch(/^background-color:rgb\(\d+,\d+,\d+\);color:rgb\(\d+,\d+,\d+\)$/);
      }
    }
  });
});
