// @vitest-environment happy-dom
import { afterEach, describe, expect, test } from "vitest";
import widget from "../src/sample_table";
import { MIN_COLUMN_PX } from "../src/sample_table/header";
import { charsPerLine, distinguishingLengths, fitsLines, headerLabels, labelRoom, shortLabel, type Measure } from "../src/sample_table/labels";
import type { ColumnInfo } from "../src/lib/protocol";
import { FakeModel } from "./fake_model";

const LONG = ["log_ratio_mean_over_response_tokens", "log_ratio_mean_over_prompt_tokens"];

class TableModel extends FakeModel {
  answer(msg: any) {
    if (msg.method !== "rows") return;
    const { offset, limit } = msg.params;
    const n = Math.max(0, Math.min(this.state.row_count, offset + limit) - offset);
    const ids = Array.from({ length: n }, (_, k) => offset + k);
    const rows = ids.map((i) => this.state.columns.map((c: ColumnInfo) => (c.kind === "text" ? `t${i}` : i)));
    this.emit("msg:custom", { type: "rpc", id: msg.id, ok: true, result: { generation: this.state.generation, offset, total: this.state.row_count, ids, rows } });
  }
}

let cleanups: (() => void)[] = [];
afterEach(() => {
  cleanups.forEach((c) => c());
  cleanups = [];
  document.body.replaceChildren();
});

function mount(names: string[]) {
  const columns: ColumnInfo[] = [{ name: "sample_id", kind: "int" }, ...names.map((name) => ({ name, kind: "number" as const, min: 0, max: 1 })), { name: "prompt", kind: "text" }];
  const model = new TableModel({ columns, row_count: 3, sort_by: "", sort_desc: false, search: "", selected_ids: [], generation: 1, error: "", height: 200 });
  const host = document.createElement("div");
  document.body.append(host);
  cleanups.push(widget.render({ model: model as any, el: host }));
  const root = host.querySelector(".rlv-sample-table") as HTMLElement;
  const th = (c: string) => host.querySelector(`.rlv-th[data-col="${c}"]`) as HTMLElement;
  const label = (c: string) => th(c).querySelector(".rlv-th-name")!.textContent!;
  const cols = () => root.style.getPropertyValue("--rlv-cols").split(" ");
  const drag = (c: string, dx: number) => {
    const handle = th(c).querySelector(".rlv-resize") as HTMLElement;
    handle.dispatchEvent(new PointerEvent("pointerdown", { bubbles: true, clientX: 100, pointerId: 1 }));
    document.dispatchEvent(new PointerEvent("pointermove", { bubbles: true, clientX: 100 + dx / 2, pointerId: 1 }));
    document.dispatchEvent(new PointerEvent("pointermove", { bubbles: true, clientX: 100 + dx, pointerId: 1 }));
    document.dispatchEvent(new PointerEvent("pointerup", { bubbles: true, clientX: 100 + dx, pointerId: 1 }));
  };
  return { model, host, root, th, label, cols, drag };
}

describe("header labels", () => {
  test("two long names sharing a prefix read differently, at every width, within two lines", () => {
    for (let w = 40; w <= 400; w += 4) {
      const [a, b] = headerLabels(LONG, [w, w]);
      expect(a).not.toBe(b);
      expect(fitsLines(a, labelRoom(w)) && fitsLines(b, labelRoom(w))).toBe(true);
      for (const l of [a, b]) expect(l.length <= 2 * charsPerLine(w) || l.endsWith("…")).toBe(true);
    }
    expect(headerLabels(["log_ratio_mean", "log_ratio_sum"], [96, 96])).toEqual(["log_ratio_mean", "log_ratio_sum"]);
  });

  test("names that fit two lines broken after '_' are shown whole; longer ones keep their distinguishing head", () => {
    // the fallback measure: 7px a character
    expect(fitsLines("log_ratio_mean", 70)).toBe(true); // "log_ratio_" / "mean"
    expect(fitsLines("log_ratio_mean_x", 56)).toBe(false); // "log_" / "ratio_" / "mean_x"
    expect(fitsLines("abcdefghijkl", 42)).toBe(true); // one piece wraps inside itself
    const wide: Measure = (t) => t.length * 10; // a wider font: the same name needs more room
    expect(fitsLines("log_ratio_mean", 70, wide)).toBe(false);
    expect(headerLabels(["log_ratio_mean", "log_ratio_sum"], [96, 96], wide)).not.toContain("log_ratio_mean");
    expect(distinguishingLengths(["reward", "reward_gap", "ref_reward"])).toEqual([6, 7, 3]);
    const name = "log_ratio_mean_over_prompt_tokens"; // differs from its neighbour at character 16
    const l = shortLabel(name, 16, 140); // 20 characters a line: the head fits, then the end
    expect(l.startsWith("log_ratio_mean_o")).toBe(true);
    expect(l.endsWith("tokens")).toBe(true);
    // 9 characters a line: the shared prefix alone overflows, so the label starts where the names differ
    expect(shortLabel(name, 16, 63)).toMatch(/^…ov/);
    expect(fitsLines(shortLabel(name, 16, 63), 63)).toBe(true);
  });

  test("labels are distinct for many names sharing prefixes, and whole names are kept when they fit", () => {
    const names = ["a", "a_b", "a_b_c", "x_" + "y".repeat(40), "x_" + "y".repeat(40) + "z", "x_" + "y".repeat(39) + "z", "kl_mean", "kl_sum"];
    for (const w of [40, 60, 96, 160, 500]) {
      const labels = headerLabels(names, names.map(() => w));
      expect(new Set(labels).size).toBe(names.length);
      labels.forEach((l, i) => expect(l === names[i] || fitsLines(l, labelRoom(w))).toBe(true));
    }
    expect(headerLabels(names, names.map(() => 2000))).toEqual(names);
  });
});

describe("the table header", () => {
  test("two long columns sharing a prefix show two different labels, the full names in title and aria-label", () => {
    const t = mount(LONG);
    const [a, b] = LONG;
    expect(t.label(a)).not.toBe(t.label(b));
    expect(t.th(a).title).toBe(a);
    expect(t.th(b).getAttribute("aria-label")).toBe(b);
    // a line-break opportunity after each "_": <wbr> elements between text nodes, no markup from the name
    expect(t.th("log_ratio_mean_over_response_tokens").querySelectorAll(".rlv-th-name wbr").length).toBeGreaterThan(0);
  });

  test("a name is written as text, never parsed", () => {
    const evil = "<img src=x onerror=alert(1)>_x";
    const t = mount([evil]);
    expect(t.th(evil).querySelector("img")).toBeNull();
    expect(t.label(evil)).toContain("<img");
  });

  test("dragging a header's right edge resizes its column, header and rows, without sorting", () => {
    const t = mount(LONG);
    const [a, b] = LONG;
    const before = t.cols();
    expect(before[1]).toBe("96px");
    const labelBefore = t.label(a);
    t.drag(a, 200);
    expect(t.cols()[1]).toBe("296px");
    expect(t.cols()[2]).toBe(before[2]);
    expect(t.label(a)).toBe(a); // wide enough now: the whole name
    expect(labelBefore).not.toBe(a);
    t.th(a).click(); // the click that ends a drag does not sort
    expect(t.model.state.sort_by).toBe("");
    t.drag(b, -500);
    expect(t.cols()[2]).toBe(`${MIN_COLUMN_PX}px`);
    const spacer = t.host.querySelector(".rlv-spacer") as HTMLElement;
    expect(spacer.style.minWidth).toBe(`${110 + 296 + MIN_COLUMN_PX + 160}px`);
  });

  test("widths are kept per view across a new column list; a double-click on the edge restores the default", () => {
    const t = mount(LONG);
    const [a] = LONG;
    t.drag(a, 50);
    expect(t.cols()[1]).toBe("146px");
    const columns = [...t.model.state.columns, { name: "extra_column", kind: "int" }];
    t.model.set("columns", columns);
    expect(t.cols()[1]).toBe("146px");
    t.th(a).querySelector(".rlv-resize")!.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    expect(t.cols()[1]).toBe("96px");
    // another view of the same model starts from the defaults
    const other = document.createElement("div");
    document.body.append(other);
    cleanups.push(widget.render({ model: t.model as any, el: other }));
    expect((other.querySelector(".rlv-sample-table") as HTMLElement).style.getPropertyValue("--rlv-cols").split(" ")[1]).toBe("96px");
  });

  test("a click on a header still sorts", () => {
    const t = mount(LONG);
    t.th(LONG[1]).click();
    expect(t.model.state.sort_by).toBe(LONG[1]);
  });
});
