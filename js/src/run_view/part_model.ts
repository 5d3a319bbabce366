/**
 * The parts of a RunView (chart, tables, token strips, step slider) as models their own front
 * ends mount on: each part's state and custom messages travel over the RunView's one comm,
 * namespaced by part name (rlviz_widgets/widgets/run_view/hub.py holds the other end).
 *
 * On render the view says "hello" and gets a snapshot of every part's state; changes follow as
 * deltas. A delta carrying this view's own `client` id is the echo of a value it sent: skipped.
 */
import type { AnyModel } from "../lib/rpc";
import { PageModel } from "../lib/page_model";

/** One part's model: saves and messages go to the kernel through the parent's comm. */
export class PartModel extends PageModel {
  constructor(
    private readonly parent: AnyModel,
    readonly part: string,
    state: Record<string, any>,
    client: string,
  ) {
    super(state, (names) => {
      const values: Record<string, any> = {};
      for (const n of names) values[n] = this.get(n);
      parent.send({ type: "part", part, state: values, client });
    });
  }

  send(content: any, callbacks?: any, buffers?: ArrayBuffer[]): void {
    this.parent.send({ type: "part", part: this.part, msg: content }, callbacks, buffers);
  }
}

/** Called with a part's model the first time its state arrives. */
export type OnPart = (model: PartModel) => void;

/** The part models of one view, fed from the parent model's custom messages. */
export class Parts {
  readonly models = new Map<string, PartModel>();
  readonly client = `c${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  private readonly onMsg = (content: any, buffers: any[] = []) => this.receive(content, buffers);

  constructor(
    private readonly parent: AnyModel,
    private readonly onPart: OnPart,
  ) {
    parent.on("msg:custom", this.onMsg);
    parent.send({ type: "hello" });
  }

  /** Takes one message of the kernel (others, such as the view's own rpc replies, are not ours). */
  receive(content: any, buffers: any[]): void {
    if (!content || typeof content !== "object") return;
    if (content.type === "snapshot") {
      for (const [name, state] of Object.entries(content.parts ?? {})) this.apply(name, state as Record<string, any>);
    } else if (content.type === "part" && typeof content.part === "string") {
      if ("msg" in content) this.models.get(content.part)?.emit("msg:custom", content.msg, buffers);
      else if (content.state && content.origin !== this.client) this.apply(content.part, content.state);
    }
  }

  private apply(name: string, state: Record<string, any>): void {
    const model = this.models.get(name);
    if (model) {
      model.update(state);
      return;
    }
    const made = new PartModel(this.parent, name, { ...state }, this.client);
    this.models.set(name, made);
    this.onPart(made);
  }

  dispose(): void {
    this.parent.off("msg:custom", this.onMsg);
    for (const m of this.models.values()) m.off();
    this.models.clear();
  }
}
