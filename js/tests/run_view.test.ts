// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import widget from "../src/run_view";
import { Parts, type PartModel } from "../src/run_view/part_model";
import { renderDetail, argumentsText, COLLAPSE_CHARS } from "../src/run_view/detail";
import { renderGroupDetail, renderHistory } from "../src/run_view/groups";
import { FakeModel } from "./fake_model";

/** The RunView's model: its messages are recorded; the kernel's are played with `kernel`. */
class ViewModel extends FakeModel {
  reply() {}
  kernel(content: any, buffers: any[] = []) {
    this.emit("msg:custom", content, buffers);
  }
}

const EVIL = '<img src=x onerror="window.__xss=1">';

function viewState(): Record<string, any> {
  return {
    header: ["120 samples", "6 steps", `runs: ${EVIL}`],
    status: "120 samples",
    controls: { band: 1, zero_shift: false, kl_metric: "kl_mean", kl_shown: true, tab: 0 },
    detail: {},
    group_panes: { built: false, summary: "", detail: {}, history: {} },
    error: "",
    generation: 0,
  };
}

afterEach(() => {
  document.body.replaceChildren();
  delete (window as any).__xss;
});

describe("part models", () => {
  it("say hello, take a snapshot, route saves and requests through the parent, skip their own echoes", () => {
    const parent = new ViewModel();
    const made: PartModel[] = [];
    const parts = new Parts(parent as any, (m) => made.push(m));
    expect(parent.sent).toEqual([{ type: "hello" }]);
    parent.kernel({ type: "snapshot", parts: { table: { search: "", row_count: 5 }, strip: { sample_ids: [] } } });
    expect(made.map((m) => m.part)).toEqual(["table", "strip"]);
    const table = made[0];
    let heard = 0;
    table.on("change:row_count", () => heard++);

    table.set("search", "abc");
    table.save_changes();
    expect(parent.sent.at(-1)).toEqual({ type: "part", part: "table", state: { search: "abc" }, client: parts.client });
    // the echo of its own value is skipped; what the kernel made of it is taken
    parent.kernel({ type: "part", part: "table", state: { search: "old" }, origin: parts.client });
    expect(table.get("search")).toBe("abc");
    parent.kernel({ type: "part", part: "table", state: { row_count: 2 } });
    expect(table.get("row_count")).toBe(2);
    expect(heard).toBe(1);
    parent.kernel({ type: "part", part: "table", state: { search: "other view" }, origin: "someone else" });
    expect(table.get("search")).toBe("other view");

    // requests go out namespaced; replies (and their buffers) come back to the part only
    const got: any[] = [];
    table.on("msg:custom", (msg: any, buffers: any[]) => got.push([msg, buffers.length]));
    table.send({ type: "rpc", id: "r1", method: "rows", params: {} });
    expect(parent.sent.at(-1)).toEqual({ type: "part", part: "table", msg: { type: "rpc", id: "r1", method: "rows", params: {} } });
    parent.kernel({ type: "part", part: "table", msg: { type: "rpc", id: "r1", ok: true } }, [new DataView(new ArrayBuffer(8))]);
    parent.kernel({ type: "part", part: "strip", msg: { type: "rpc", id: "r9", ok: true } });
    expect(got).toEqual([[{ type: "rpc", id: "r1", ok: true }, 1]]);

    // a part added later (the groups tab) is made when its state first arrives
    parent.kernel({ type: "part", part: "group_table", state: { row_count: 3 } });
    expect(made.map((m) => m.part)).toEqual(["table", "strip", "group_table"]);
    parts.dispose();
    parent.kernel({ type: "part", part: "table", state: { row_count: 9 } });
    expect(table.get("row_count")).toBe(2);
  });
});

describe("detail pane", () => {
  it("shows turns as text, with role badges, tool arguments as JSON and long blocks collapsed", () => {
    const host = document.createElement("div");
    document.body.append(host);
    renderDetail(host, {
      sample_id: 7,
      facts: [["id", "r.jsonl:3"], ["sample", "7"]],
      note: "the sample shown left the filter",
      blocks: [
        { role: "prompt", text: EVIL },
        { role: "assistant", text: "x".repeat(COLLAPSE_CHARS + 1), tool_name: "search", tool_arguments: '{"q": "<b>"}' },
      ],
    });
    expect(host.querySelector("img")).toBeNull();
    expect(host.querySelector(".rlv-detail-note")!.textContent).toBe("the sample shown left the filter");
    expect(host.querySelector(".rlv-detail-facts")!.textContent).toBe("id r.jsonl:3 · sample 7");
    const turns = host.querySelectorAll(".rlv-turn");
    expect([...turns].map((t) => t.querySelector(".rlv-role")!.textContent)).toEqual(["prompt", "assistant"]);
    expect(turns[0].querySelector(".rlv-turn-text")!.textContent).toBe(EVIL);
    expect(turns[1].querySelector(".rlv-tool-name")!.textContent).toBe("tool: search");
    expect(turns[1].querySelector(".rlv-tool-args")!.textContent).toBe('{\n  "q": "<b>"\n}');
    expect(turns[0].classList.contains("rlv-collapsed")).toBe(false);
    expect(turns[1].classList.contains("rlv-collapsed")).toBe(true);
    (turns[1].querySelector(".rlv-expand") as HTMLButtonElement).click();
    expect(turns[1].classList.contains("rlv-collapsed")).toBe(false);
    renderDetail(host, {});
    expect(host.textContent).toBe("");
  });

  it("says which turns were not trained and shows reasoning apart, as text", () => {
    const host = document.createElement("div");
    document.body.append(host);
    renderDetail(host, {
      facts: [],
      blocks: [
        { role: "user", text: "q", trained: false },
        { role: "assistant", text: "a", trained: true, reasoning: EVIL },
      ],
    });
    const turns = host.querySelectorAll(".rlv-turn");
    expect(turns[0].querySelector(".rlv-untrained-turn")!.textContent).toBe("not trained");
    expect(turns[1].querySelector(".rlv-untrained-turn")).toBeNull();
    expect(turns[1].querySelector(".rlv-turn-reasoning")!.textContent).toBe(EVIL);
    expect(host.querySelector("img")).toBeNull();
  });

  it("writes arguments that are no JSON as they are", () => {
    expect(argumentsText("not json")).toBe("not json");
    expect(argumentsText({ a: [1] })).toBe('{\n  "a": [\n    1\n  ]\n}');
  });
});

describe("groups panes", () => {
  it("draw cards and the prompt history as text", () => {
    const host = document.createElement("div");
    renderGroupDetail(host, {
      group: "1:c", step: 1, prompt: EVIL, more: 3, more_code: "rw.groups.group_samples(view.run, '1:c')",
      cards: [{ sample_id: 4, reward: 0.5, advantage: null, text: EVIL }],
    });
    expect(host.querySelector("img")).toBeNull();
    expect(host.querySelectorAll(".rlv-group-card").length).toBe(1);
    expect(host.querySelector(".rlv-group-card-text")!.textContent).toBe(EVIL);
    expect(host.textContent).toContain("… and 3 more");
    renderHistory(host, { rows: [[1, 8, 0.5, 0.1, 0, 1], [300, 8, 1, 0, 1, 1]], skipped: 100, skipped_at: 1, note: "all" });
    expect(host.querySelectorAll("tr").length).toBe(1 + 2 + 1);
    expect(host.textContent).toContain("100 steps between");
  });
});

describe("the view", () => {
  it("draws header, controls and panes from its traits and sends what the user does", () => {
    const model = new ViewModel(viewState());
    const host = document.createElement("div");
    document.body.append(host);
    const dispose = widget.render({ model: model as any, el: host });
    const root = host.querySelector(".rlv-run-view")!;
    expect(root.querySelector(".rlv-run-header")!.textContent).toContain(`runs: ${EVIL}`);
    expect(root.querySelector("img")).toBeNull();
    expect(root.querySelector(".rlv-step-row .rlv-count")!.textContent).toBe("120 samples");
    model.kernel({ type: "snapshot", parts: { slider: { min: 0, max: 50, step: 10, value: 0, readout: false, disabled: false },
      slider_label: { value: "all steps" } } });
    expect(root.querySelector(".rlv-step-label")!.textContent).toBe("all steps");
    const input = root.querySelector(".rlv-step-input") as HTMLInputElement;
    input.value = "30";
    input.dispatchEvent(new Event("change"));
    expect(model.sent.at(-1)).toMatchObject({ type: "part", part: "slider", state: { value: 30 } });
    (root.querySelector(".rlv-next") as HTMLButtonElement).click();
    expect(model.sent.at(-1)).toEqual({ type: "click", name: "next" });
    const log = root.querySelectorAll(".rlv-toggle")[1] as HTMLButtonElement;
    log.click();
    expect(model.sent.at(-1)).toEqual({ type: "control", name: "kl_metric", value: "log_ratio_mean" });
    const tabs = root.querySelectorAll(".rlv-tab");
    (tabs[1] as HTMLButtonElement).click();
    expect(model.sent.at(-1)).toEqual({ type: "control", name: "tab", value: 1 });
    model.set("controls", { ...viewState().controls, tab: 1, kl_shown: false });
    expect((root.querySelector(".rlv-groups-pane") as HTMLElement).hidden).toBe(false);
    expect((root.querySelector(".rlv-samples-pane") as HTMLElement).hidden).toBe(true);
    expect((root.querySelector(".rlv-kl-toggle") as HTMLElement).hidden).toBe(true);
    model.set("detail", { sample_id: 3, facts: [["sample", "3"]], blocks: [{ role: "response", text: EVIL }] });
    expect(root.querySelector(".rlv-detail .rlv-turn-text")!.textContent).toBe(EVIL);
    expect((window as any).__xss).toBeUndefined();
    dispose();
    expect(host.querySelector(".rlv-run-view")).toBeNull();
  });
});
