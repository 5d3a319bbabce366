// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import widget from "../src/token_strip";
import { visibleText, decodeTokens, groupUnits, unitLabel } from "../src/lib/token_text";
import type { StripsReply } from "../src/lib/protocol";
import { FakeModel as BaseModel } from "./fake_model";

interface FakeSample {
  sample_id: number;
  step?: number;
  tokens: string[];
  metrics: Record<string, number[]>;
  more?: number;
  flags?: Record<string, number[]>;
  turns?: { start: number; role: string }[];
}

/** The strip's model: rpc "domain" answered from `domain`, "strips" from `samples` (float32 buffers). */
class FakeModel extends BaseModel {
  samples: FakeSample[] = [];
  domain = { lo: -1, hi: 1 };
  constructor(state: Record<string, any> = {}) {
    super({
      sample_ids: [],
      color_by: "token_reward",
      scale_scope: "sample",
      metrics: ["token_reward", "kl", "logprob"],
      show_table: false,
      pinned: null,
      generation: 0,
      error: "",
      height: 0,
      ...state,
    });
  }
  answer(msg: any) {
    if (msg.method === "domain") {
      this.emit("msg:custom", { type: "rpc", id: msg.id, ok: true, result: { metric: msg.params.metric, ...this.domain } });
      return;
    }
    const buffers: ArrayBuffer[] = [];
    const reply: StripsReply = {
      generation: this.state.generation,
      metrics: this.state.metrics,
      samples: this.samples.map((s) => {
        const index: Record<string, number> = {};
        for (const [m, vals] of Object.entries(s.metrics)) {
          index[m] = buffers.length;
          buffers.push(new Float32Array(vals).buffer);
        }
        const flags: Record<string, number> = {};
        for (const [f, vals] of Object.entries(s.flags ?? {})) {
          flags[f] = buffers.length;
          buffers.push(new Uint8Array(vals).buffer);
        }
        return {
          ...(s.flags ? { flags } : {}),
          ...(s.turns ? { turns: s.turns } : {}),
          sample_id: s.sample_id,
          step: s.step ?? 1,
          reward: null,
          label: `step ${s.step ?? 1} · sample ${s.sample_id}`,
          tokens: s.tokens,
          more: s.more,
          buffers: index,
        };
      }),
    };
    this.emit("msg:custom", { type: "rpc", id: msg.id, ok: true, result: reply }, buffers);
  }
}

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));
async function settle() {
  for (let i = 0; i < 5; i++) await tick();
}

let cleanups: (() => void)[] = [];
afterEach(() => {
  cleanups.forEach((c) => c());
  cleanups = [];
  document.body.innerHTML = "";
});

function mount(model: FakeModel) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = widget.render({ model: model as any, el });
  cleanups.push(cleanup);
  return el;
}

const TOKENS = ["Hello", "Ġworld", "Ċ", "Ġ<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "<|endoftext|>", "<PAD>", "<PAD>"];
const REWARD = [0.1, -0.2, 0, 0.3, -0.4, 1.5, NaN, NaN];
const KL = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, NaN, NaN];
const LOGP = [-0.5, -1, -2, -3, -4, -0.1, NaN, NaN];

function basicModel(extra: Record<string, any> = {}) {
  const m = new FakeModel({ sample_ids: [7], ...extra });
  m.samples = [{ sample_id: 7, tokens: TOKENS, metrics: { token_reward: REWARD, kl: KL, logprob: LOGP } }];
  return m;
}

describe("TokenStrip render", () => {
  it("renders one chip per display unit with the decoded text", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    expect(el.querySelectorAll(".rlv-token-strip")).toHaveLength(1);
    expect(el.querySelectorAll(".rlv-strip")).toHaveLength(1);
    expect(el.querySelector(".rlv-strip-label")!.textContent).toBe("step 1 · sample 7");
    const chips = [...el.querySelectorAll<HTMLElement>(".rlv-tok")];
    const units = groupUnits(decodeTokens(TOKENS));
    expect(chips).toHaveLength(units.length);
    units.forEach((u, k) => {
      const expected = u.kind === "text" ? visibleText(u.token.text) : unitLabel(u);
      expect(chips[k].textContent).toBe(expected);
      expect(chips[k].dataset.i).toBe(String(u.start));
      expect(chips[k].dataset.s).toBe("0");
    });
    expect(chips[1].textContent).toBe(" world");
    // the newline chip shows ↵ and really breaks the line
    expect(chips[2].textContent).toBe("↵");
    expect(chips[2].querySelector("br")).not.toBeNull();
    // special token badge and one collapsed pad badge
    const badges = [...el.querySelectorAll(".rlv-badge")].map((b) => b.textContent);
    expect(badges).toEqual(["<|endoftext|>", "×2 pad"]);
    // chips are coloured: background and contrasting text colour set
    expect(chips[0].style.backgroundColor).not.toBe("");
    expect(chips[0].style.color).not.toBe("");
    // one <style> inside the widget, nothing fetched
    expect(el.querySelectorAll("style")).toHaveLength(1);
    expect(el.querySelector("style")!.textContent).not.toMatch(/@import|url\(/);
    expect(m.sent.map((s) => s.method)).toEqual(["strips"]);
  });

  it("shows markup in model text as characters and creates no elements from it", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    expect(el.querySelector("img")).toBeNull();
    expect(el.querySelector("script")).toBeNull();
    const texts = [...el.querySelectorAll(".rlv-tok")].map((c) => c.textContent);
    expect(texts).toContain(" <img src=x onerror=alert(1)>");
    expect(texts).toContain("<script>alert(1)</script>");
    // hovering the hostile token keeps it as text in the tooltip too
    const chip = [...el.querySelectorAll<HTMLElement>(".rlv-tok")].find((c) => c.textContent!.includes("<img"))!;
    chip.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(el.querySelector(".rlv-tooltip")!.textContent).toContain("<img src=x onerror=alert(1)>");
    expect(el.querySelector("img")).toBeNull();
  });

  it("fills the shared tooltip with every metric on hover", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const tip = el.querySelector<HTMLElement>(".rlv-tooltip")!;
    expect(tip.hidden).toBe(true);
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-i="1"]')!;
    chip.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(tip.hidden).toBe(false);
    const t = tip.textContent!;
    expect(t).toContain("position 1");
    expect(t).toContain('"Ġworld"'); // raw, escaped
    expect(t).toContain(" world");
    expect(t).toMatch(/token_reward\s*−0\.2/);
    expect(t).toMatch(/kl\s*0\.02/);
    expect(t).toMatch(/logprob\s*−1/);
    expect(el.querySelectorAll(".rlv-tooltip")).toHaveLength(1);
    el.querySelector(".rlv-strips")!.dispatchEvent(new MouseEvent("mouseleave"));
    expect(tip.hidden).toBe(true);
  });

  it("shows policy and reference values with their difference", async () => {
    const m = new FakeModel({ sample_ids: [3], metrics: ["logprob", "ref_logprob"], color_by: "logprob" });
    m.samples = [{ sample_id: 3, tokens: ["a", "b"], metrics: { logprob: [-1, -2], ref_logprob: [-1.5, -1] } }];
    const el = mount(m);
    await settle();
    el.querySelector('.rlv-tok[data-i="1"]')!.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    const t = el.querySelector(".rlv-tooltip")!.textContent!;
    expect(t).toMatch(/logprob\s*−2/);
    expect(t).toMatch(/ref_logprob\s*−1/);
    expect(t).toMatch(/logprob − ref_logprob\s*−1/);
  });

  it("pins on click, unpins on a second click and on Escape", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-i="3"]')!;
    chip.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.get("pinned")).toEqual({ sample_id: 7, position: 3 });
    expect(m.saves).toBeGreaterThan(0);
    expect(chip.classList.contains("rlv-pinned")).toBe(true);
    const tip = el.querySelector<HTMLElement>(".rlv-tooltip")!;
    expect(tip.hidden).toBe(false);
    // hovering elsewhere does not move a pinned tooltip
    el.querySelector('.rlv-tok[data-i="0"]')!.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(tip.textContent).toContain("position 3");
    chip.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.get("pinned")).toBeNull();
    chip.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.get("pinned")).not.toBeNull();
    el.querySelector(".rlv-strips")!.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(m.get("pinned")).toBeNull();
    expect(tip.hidden).toBe(true);
  });

  it("lets the tooltip go with the mouse once a click unpinned it", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-i="1"]')!;
    chip.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    chip.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    chip.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.get("pinned")).toBeNull();
    el.querySelector(".rlv-strips")!.dispatchEvent(new MouseEvent("mouseleave"));
    expect(el.querySelector<HTMLElement>(".rlv-tooltip")!.hidden).toBe(true);
  });

  it("clears a pin whose token the reloaded samples lack, in the trait too", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    el.querySelector('.rlv-tok[data-i="4"]')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(m.get("pinned")).toEqual({ sample_id: 7, position: 4 });
    m.samples = [{ sample_id: 7, tokens: ["Ġa", "Ġb"], metrics: { token_reward: [0.1, 0.2], kl: [0, 0], logprob: [-1, -1] } }];
    m.set("generation", 1); // a poll rewrote the sample shorter
    await settle();
    expect(el.querySelectorAll(".rlv-strip-body .rlv-tok")).toHaveLength(2);
    expect(el.querySelector<HTMLElement>(".rlv-tooltip")!.hidden).toBe(true);
    expect(m.get("pinned")).toBeNull();
    m.set("pinned", { sample_id: 7, position: 1 }); // a pin that exists is kept
    expect(m.get("pinned")).toEqual({ sample_id: 7, position: 1 });
  });

  it("gives every token a visible chip, and a CRLF over two tokens one line break", async () => {
    const m = new FakeModel({ sample_ids: [1] });
    const tokens = ["▁line", "<0x0D>", "<0x0A>", "next", "", "\u200b", "\u202e", "x"];
    m.samples = [{ sample_id: 1, tokens, metrics: { token_reward: tokens.map(() => 0.1) } }];
    const el = mount(m);
    await settle();
    const chips = [...el.querySelectorAll<HTMLElement>(".rlv-strip-body .rlv-tok")];
    expect(chips).toHaveLength(tokens.length);
    expect(el.querySelectorAll(".rlv-strip-body br")).toHaveLength(1);
    expect(chips.map((c) => c.textContent)).toEqual([" line", "␍", "↵", "next", "∅", "\\u200b", "\\u202e", "x"]);
  });

  it("says how many tokens of a long sample were not sent", async () => {
    const m = new FakeModel({ sample_ids: [1, 2] });
    m.samples = [
      { sample_id: 1, tokens: ["Ġa", "Ġb"], metrics: { token_reward: [0.1, 0.2] }, more: 40_000 },
      { sample_id: 2, tokens: ["Ġc"], metrics: { token_reward: [0.3] } },
    ];
    const el = mount(m);
    await settle();
    const notes = [...el.querySelectorAll(".rlv-strip-more")].map((e) => e.textContent);
    expect(notes).toEqual(["… 40,000 more tokens, not sent (strip.tokens has every one)"]);
    expect(el.querySelector('.rlv-strip[data-s="0"] .rlv-strip-more')).not.toBeNull();
  });

  it("keeps a pin set from Python together with new samples (it came before their fetch)", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    m.samples = [{ sample_id: 8, tokens: ["Ġc", "Ġd", "Ġe"], metrics: { token_reward: [0.1, 0.2, 0.3] } }];
    m.set("sample_ids", [8]); // `with strip.hold_sync(): strip.sample_ids = [8]; strip.pinned = {...}`: one message
    m.set("pinned", { sample_id: 8, position: 2 });
    m.set("generation", 1);
    await settle();
    expect(m.get("pinned")).toEqual({ sample_id: 8, position: 2 });
    expect(el.querySelector('.rlv-tok[data-i="2"]')!.classList.contains("rlv-pinned")).toBe(true);
  });

  it("follows a pinned value set from Python", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    m.set("pinned", { sample_id: 7, position: 7 }); // inside the collapsed pad run
    const badge = el.querySelector<HTMLElement>('.rlv-tok[data-i="6"]')!;
    expect(badge.classList.contains("rlv-pinned")).toBe(true);
    expect(el.querySelector(".rlv-tooltip")!.textContent).toContain("positions 6–7");
  });

  it("moves the active token with the arrow keys and reads it in a live region", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const strips = el.querySelector<HTMLElement>(".rlv-strips")!;
    expect(strips.tabIndex).toBe(0);
    const key = (k: string) => strips.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
    key("ArrowRight");
    expect(el.querySelector(".rlv-active")!.getAttribute("data-i")).toBe("0");
    key("ArrowRight");
    expect(el.querySelector(".rlv-active")!.getAttribute("data-i")).toBe("1");
    expect(el.querySelectorAll(".rlv-active")).toHaveLength(1);
    const live = el.querySelector("[aria-live]")!;
    expect(live.textContent).toContain("position 1");
    expect(live.textContent).toContain("token_reward");
    expect(el.querySelector(".rlv-tooltip")!.textContent).toContain("position 1");
    key("ArrowLeft");
    expect(el.querySelector(".rlv-active")!.getAttribute("data-i")).toBe("0");
    key("End");
    expect(el.querySelector(".rlv-active")!.getAttribute("data-i")).toBe("6");
    // Enter pins the active token
    key("Enter");
    expect(m.get("pinned")).toEqual({ sample_id: 7, position: 6 });
    key("ArrowLeft");
    expect(m.get("pinned")).toEqual({ sample_id: 7, position: 5 });
  });

  it("binds the metric and scope choosers to the traits both ways", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const sel = el.querySelector<HTMLSelectElement>(".rlv-metric-select")!;
    expect([...sel.options].map((o) => o.value)).toEqual(["token_reward", "kl", "logprob"]);
    expect(sel.value).toBe("token_reward");
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-i="4"]')!;
    const before = chip.style.backgroundColor;
    sel.value = "kl";
    sel.dispatchEvent(new Event("change"));
    expect(m.get("color_by")).toBe("kl");
    await settle();
    expect(chip.style.backgroundColor).not.toBe(before);
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("kl");
    m.set("color_by", "logprob");
    expect(sel.value).toBe("logprob");
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("[−10, 0]");

    const scope = el.querySelector<HTMLSelectElement>(".rlv-scope-select")!;
    m.set("color_by", "token_reward");
    scope.value = "run";
    scope.dispatchEvent(new Event("change"));
    expect(m.get("scale_scope")).toBe("run");
    await settle();
    const domainCall = m.sent.find((s) => s.method === "domain");
    expect(domainCall.params).toEqual({ metric: "token_reward", scope: "run", steps: [1] });
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("±1");
    m.set("scale_scope", "sample");
    expect(scope.value).toBe("sample");
  });

  it("draws a legend with ramp, ticks, clip limits and a missing swatch", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const legend = el.querySelector<HTMLElement>(".rlv-legend")!;
    expect(legend.querySelector<HTMLElement>(".rlv-ramp")!.style.background).toContain("linear-gradient");
    const ticks = [...legend.querySelectorAll(".rlv-ticks span")].map((t) => t.textContent);
    expect(ticks).toEqual(["−1.5", "−0.75", "0", "0.75", "1.5"]);
    expect(legend.textContent).toContain("±1.5");
    expect(legend.textContent).toContain("missing");
    expect(legend.querySelector(".rlv-swatch")).not.toBeNull();
  });

  it("draws tokens outside the loss mask muted and uncoloured, marks turns, and scales on trained tokens", async () => {
    const m = new FakeModel({ sample_ids: [3], color_by: "kl" });
    const tokens = ["<|im_start|>", "user", "Ċ", "hi", "<|im_end|>", "<|im_start|>", "assistant", "Ċ", "yes", "<|im_end|>"];
    // a huge KL on the prompt must not set the limits of the trained tokens
    const kl = [9, 9, 9, 9, 9, 9, 9, 9, 0.5, 0.25];
    m.samples = [{
      sample_id: 3, tokens, metrics: { kl },
      flags: { trained: [0, 0, 0, 0, 0, 0, 0, 0, 1, 1], masked: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1] },
      turns: [{ start: 0, role: "user" }, { start: 5, role: "<b>tool</b>" }],
    }];
    const el = mount(m);
    await settle();
    const chip = (i: number) => el.querySelector<HTMLElement>(`.rlv-tok[data-i="${i}"]`)!;
    expect(chip(3).classList.contains("rlv-untrained")).toBe(true);
    expect(chip(3).style.backgroundColor).toBe("");
    expect(chip(8).classList.contains("rlv-untrained")).toBe(false);
    expect(chip(8).style.backgroundColor).not.toBe("");
    expect(chip(9).classList.contains("rlv-masked")).toBe(true);
    // limits from trained tokens only: p99 of [0.5, 0.25], not 9
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("limits 0…0.5 (p99");
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("not trained");
    expect(el.querySelector(".rlv-legend")!.textContent).toContain("masked");
    // turn marks before the first chip of each turn, the role shown as text
    const marks = [...el.querySelectorAll<HTMLElement>(".rlv-turn-mark")];
    expect(marks.map((t) => t.textContent)).toEqual(["user", "<b>tool</b>"]);
    expect(el.querySelector("b")).toBeNull();
    expect(marks[1].nextElementSibling).toBe(chip(5));
    chip(3).dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    await settle();
    const tip = el.querySelector(".rlv-tooltip")!.textContent!;
    expect(tip).toContain("turn 0 (user)");
    expect(tip).toContain("not trained");
  });

  it("lays the legend ticks out without overlap (−1.63 and −0.816 once drew on top of each other)", async () => {
    const m = new FakeModel({ sample_ids: [1] });
    m.samples = [{ sample_id: 1, tokens: ["a", "b", "c"], metrics: { token_reward: [-1.63, 0.4, 1.63] } }];
    const el = mount(m);
    await settle();
    const spans = [...el.querySelectorAll<HTMLElement>(".rlv-legend .rlv-ticks span")];
    expect(spans.map((t) => t.textContent)).toEqual(["−1.63", "0", "1.63"]);
    const lefts = spans.map((t) => parseFloat(t.style.left));
    expect(lefts[0]).toBe(0);
    expect(lefts[1]).toBeGreaterThan(lefts[0] + 30);
    expect(lefts[2]).toBeGreaterThan(lefts[1] + 10);
    expect(spans.every((t) => t.style.left.endsWith("px"))).toBe(true);
  });

  it("marks clipped tokens", async () => {
    const m = new FakeModel({ sample_ids: [1] });
    const vals = Array.from({ length: 300 }, (_, i) => Math.sin(i) * 0.1);
    vals[10] = 50;
    vals[11] = -50;
    m.samples = [{ sample_id: 1, tokens: vals.map((_, i) => `t${i}`), metrics: { token_reward: vals } }];
    const el = mount(m);
    await settle();
    expect(el.querySelector('.rlv-tok[data-i="10"]')!.classList.contains("rlv-clip-hi")).toBe(true);
    expect(el.querySelector('.rlv-tok[data-i="11"]')!.classList.contains("rlv-clip-lo")).toBe(true);
    // the limit is p99 of |x|: at most 1% of the 300 tokens are clipped, not a whole side
    const clipped = el.querySelectorAll(".rlv-clip-hi, .rlv-clip-lo").length;
    expect(clipped).toBeGreaterThanOrEqual(2);
    expect(clipped).toBeLessThanOrEqual(3);
  });

  it("shows a rejected rpc in the error line and stays usable", async () => {
    const m = basicModel();
    m.failNext = "KeyError: sample 99 not in run";
    const el = mount(m);
    await settle();
    const err = el.querySelector<HTMLElement>(".rlv-error")!;
    expect(err.hidden).toBe(false);
    expect(err.textContent).toContain("KeyError: sample 99 not in run");
    // a later generation fetches again, succeeds, and clears the error
    m.set("generation", 1);
    await settle();
    expect(el.querySelectorAll(".rlv-tok").length).toBeGreaterThan(0);
    expect(err.hidden).toBe(true);
  });

  it("falls back to the sample scale when the domain call fails, and says so", async () => {
    const m = basicModel({ scale_scope: "step" });
    const el = mount(m);
    await settle();
    m.failNext = "domain exploded";
    m.set("color_by", "kl");
    await settle();
    expect(el.querySelector(".rlv-error")!.textContent).toContain("domain exploded");
    expect(el.querySelector<HTMLElement>(".rlv-tok")!.style.backgroundColor).not.toBe("");
  });

  it("shows the trait error", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    m.set("error", "ValueError: no such metric");
    const err = el.querySelector<HTMLElement>(".rlv-error")!;
    expect(err.hidden).toBe(false);
    expect(err.textContent).toBe("ValueError: no such metric");
    m.set("error", "");
    expect(err.hidden).toBe(true);
  });

  it("drops answers whose generation is stale", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    m.samples = [{ sample_id: 8, tokens: ["x"], metrics: { token_reward: [1] } }];
    const real = m.answer.bind(m);
    // the kernel answers the first new request from generation 4 while the view is already at 5
    let first = true;
    m.answer = (msg: any) => {
      if (first && msg.method === "strips") {
        first = false;
        m.state.generation = 4;
        real(msg);
        m.state.generation = 5;
        return;
      }
      real(msg);
    };
    m.state.generation = 5;
    m.emit("change:generation");
    await settle();
    expect(el.querySelector(".rlv-strip-label")!.textContent).toBe("step 1 · sample 7");
    m.emit("change:generation");
    await settle();
    expect(el.querySelector(".rlv-strip-label")!.textContent).toBe("step 1 · sample 8");
  });

  it("shows the token × metric table for a single sample", async () => {
    const m = basicModel({ show_table: true });
    const el = mount(m);
    await settle();
    const table = el.querySelector<HTMLTableElement>(".rlv-token-table")!;
    expect(table).not.toBeNull();
    const rows = [...table.querySelectorAll("tbody tr")].map((r) => r.querySelector("th")!.textContent);
    expect(rows).toEqual(["token_reward", "kl", "logprob"]);
    const head = [...table.querySelectorAll("thead th")].map((h) => h.textContent);
    expect(head.slice(1, 3)).toEqual(["Hello", " world"]);
    expect(head).toHaveLength(1 + 7);
    const klCells = [...table.querySelectorAll("tbody tr")[1].querySelectorAll("td")];
    expect(klCells[0].textContent).toBe("0.01");
    expect(klCells[0].style.backgroundColor).not.toBe("");
    // each row on its own scale: kl's largest value (0.06) takes the darkest Purples colour,
    // although it is tiny next to token_reward's 1.5 in the row above
    expect(klCells[5].textContent).toBe("0.06");
    expect(klCells[5].getAttribute("style")).toContain("rgb(63,0,125)");
    expect(klCells[5].getAttribute("style")).toContain("color:rgb(255,255,255)");
    expect(table.closest(".rlv-table-wrap")).not.toBeNull();
    m.set("show_table", false);
    expect(el.querySelector(".rlv-token-table")).toBeNull();
  });

  it("paints the strip first and builds the table after that frame", async () => {
    const m = basicModel({ show_table: true });
    const el = document.createElement("div");
    let tableWithFirstChips: boolean | null = null;
    let seen = false;
    const mo = new MutationObserver(() => {
      if (seen || !el.querySelector(".rlv-tok")) return;
      seen = true;
      // the first task after the chips went in (everything synchronous after them has run)
      setTimeout(() => (tableWithFirstChips = !!el.querySelector(".rlv-token-table")), 0);
    });
    mo.observe(el, { childList: true, subtree: true });
    document.body.appendChild(el);
    cleanups.push(widget.render({ model: m as any, el }));
    await settle();
    mo.disconnect();
    expect(tableWithFirstChips).toBe(false); // the chips went in alone
    // ...and the table followed, complete
    expect(el.querySelectorAll(".rlv-token-table tbody tr")).toHaveLength(3);
    expect(el.querySelectorAll(".rlv-token-table thead th")).toHaveLength(1 + 7);
    expect(el.querySelector<HTMLElement>(".rlv-table-wrap")!.hidden).toBe(false);
    // new data: the old table goes at once, the new one follows the new strip
    m.samples = [{ sample_id: 8, tokens: ["x", "y"], metrics: { kl: [0.1, 0.2] } }];
    m.set("generation", 1);
    await tick(3);
    await vi.waitFor(() => expect(el.querySelector(".rlv-strip-label")!.textContent).toContain("sample 8"));
    await settle();
    expect(el.querySelectorAll(".rlv-token-table thead th")).toHaveLength(1 + 2);
    expect([...el.querySelectorAll(".rlv-token-table tbody th")].map((t) => t.textContent)).toEqual(["kl"]);
  });

  it("does not build a deferred table after cleanup or once it is switched off", async () => {
    const m = basicModel({ show_table: true });
    const el = mount(m);
    await vi.waitFor(() => expect(el.querySelector(".rlv-tok")).not.toBeNull());
    m.set("show_table", false);
    await settle();
    expect(el.querySelector(".rlv-token-table")).toBeNull();
    expect(el.querySelector<HTMLElement>(".rlv-table-wrap")!.hidden).toBe(true);
  });

  it("builds a long table in column chunks", async () => {
    const n = 700;
    const m = new FakeModel({ sample_ids: [1], show_table: true });
    m.samples = [{ sample_id: 1, tokens: Array.from({ length: n }, (_, i) => `t${i}`), metrics: { kl: Array.from({ length: n }, (_, i) => i / n) } }];
    const el = mount(m);
    await settle();
    const heads = () => el.querySelectorAll(".rlv-token-table thead th").length - 1;
    expect(heads()).toBe(300);
    expect(el.querySelectorAll(".rlv-token-table tbody td")).toHaveLength(300);
    const more = el.querySelector<HTMLButtonElement>(".rlv-table-more")!;
    expect(more.hidden).toBe(false);
    expect(more.textContent).toContain("400 not shown");
    more.click();
    more.click();
    expect(heads()).toBe(n);
    expect(el.querySelectorAll(".rlv-token-table tbody td")).toHaveLength(n);
    expect(more.hidden).toBe(true);
  });

  it("hides the table when several samples are shown", async () => {
    const m = new FakeModel({ sample_ids: [1, 2], show_table: true });
    m.samples = [
      { sample_id: 1, tokens: ["a"], metrics: { kl: [0.1] } },
      { sample_id: 2, tokens: ["b", "c"], metrics: { kl: [0.2, 0.3] } },
    ];
    const el = mount(m);
    await settle();
    expect(el.querySelectorAll(".rlv-strip")).toHaveLength(2);
    expect(el.querySelector(".rlv-token-table")).toBeNull();
    expect(el.querySelector('.rlv-tok[data-s="1"][data-i="1"]')!.textContent).toBe("c");
  });

  it("applies the height limit to the strips area", async () => {
    const m = basicModel({ height: 120 });
    const el = mount(m);
    await settle();
    expect(el.querySelector<HTMLElement>(".rlv-strips")!.style.maxHeight).toBe("120px");
    m.set("height", 0);
    expect(el.querySelector<HTMLElement>(".rlv-strips")!.style.maxHeight).toBe("");
  });

  it("recolours for a dark JupyterLab theme with readable text", async () => {
    const m = basicModel();
    const el = mount(m);
    await settle();
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-i="0"]')!;
    const light = chip.style.backgroundColor;
    document.body.dataset.jpThemeLight = "false";
    await settle();
    expect(el.querySelector(".rlv-token-strip")!.classList.contains("rlv-dark")).toBe(true);
    expect(chip.style.backgroundColor).not.toBe(light);
    delete document.body.dataset.jpThemeLight;
  });

  it("renders a 4,000-token strip at once (its time is measured by benchmarks/widgets.py, in Chromium)", async () => {
    const n = 4000;
    const m = new FakeModel({ sample_ids: [1] });
    const tokens = Array.from({ length: n }, (_, i) => (i % 50 === 49 ? "Ċ" : `Ġtok${i}`));
    const vals = Array.from({ length: n }, (_, i) => Math.sin(i));
    m.samples = [{ sample_id: 1, tokens, metrics: { token_reward: vals, kl: vals.map(Math.abs), logprob: vals.map((v) => -Math.abs(v) * 5) } }];
    const el = mount(m);
    await settle();
    expect(el.querySelectorAll(".rlv-tok")).toHaveLength(n);
    expect(el.querySelectorAll(".rlv-strip-body br")).toHaveLength(n / 50);
  });

  it("builds strips far below the fold only when needed", async () => {
    const n = 12000;
    const m = new FakeModel({ sample_ids: [1, 2, 3] });
    const tokens = Array.from({ length: n }, (_, i) => `Ġw${i % 7}`);
    const vals = Array.from({ length: n }, (_, i) => Math.cos(i));
    m.samples = [1, 2, 3].map((id) => ({ sample_id: id, tokens, metrics: { token_reward: vals } }));
    const el = mount(m);
    await settle();
    expect(el.querySelectorAll(".rlv-strip")).toHaveLength(3);
    expect(el.querySelectorAll('.rlv-tok[data-s="0"]')).toHaveLength(n);
    expect(el.querySelectorAll('.rlv-tok[data-s="2"]')).toHaveLength(0);
    // pinning a token of the unbuilt strip (from Python) builds and colours it
    m.set("pinned", { sample_id: 3, position: 5 });
    expect(el.querySelectorAll('.rlv-tok[data-s="2"]')).toHaveLength(n);
    const chip = el.querySelector<HTMLElement>('.rlv-tok[data-s="2"][data-i="5"]')!;
    expect(chip.classList.contains("rlv-pinned")).toBe(true);
    expect(chip.style.backgroundColor).not.toBe("");
  }, 20000);

  it("cleans up: removes its DOM and model listeners", async () => {
    const m = basicModel();
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = widget.render({ model: m as any, el });
    await settle();
    cleanup();
    expect(el.querySelector(".rlv-token-strip")).toBeNull();
    const left = [...m.listeners.values()].reduce((n, s) => n + s.size, 0);
    expect(left).toBe(0);
  });
});
