/** Small DOM and model helpers every front end uses. */
import type { AnyModel } from "./rpc";

/** A new element with an optional class and text (textContent: data is never parsed as HTML). */
export function el<K extends keyof HTMLElementTagNameMap>(doc: Document, tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = doc.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** The message of an error, or the thing itself as text. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

type Handler = (...args: any[]) => void;

/** A view's model listeners, remembered so its cleanup removes exactly these (other views keep theirs). */
export class ModelEvents {
  private readonly handlers: [string, Handler][] = [];
  constructor(private readonly model: AnyModel) {}
  on(event: string, cb: Handler): void {
    this.model.on(event, cb);
    this.handlers.push([event, cb]);
  }
  dispose(): void {
    for (const [event, cb] of this.handlers) this.model.off(event, cb);
    this.handlers.length = 0;
  }
}
