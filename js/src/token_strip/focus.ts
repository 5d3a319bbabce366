/**
 * Which token the tooltip is about: the hovered one, the keyboard's active one, and the pinned
 * one (clicked or Enter; synced with the `pinned` trait). Wires the mouse and the keys.
 */
import type { AnyModel } from "../lib/rpc";
import { navigate } from "./keyboard";
import type { At, SampleView } from "./samples";
import type { Strips } from "./strips";

/** What the focus needs from the rest of the view. */
export interface FocusHost {
  /** The shown samples. */
  views(): SampleView[];
  /** Fills the tooltip for `at` (hides it when `at` names no unit). */
  showTooltip(at: At): void;
  hideTooltip(): void;
  setTooltipPinned(pinned: boolean): void;
  /** The keyboard moved the active token (the legend may follow it). */
  activeMoved(): void;
}

const same = (a: At | null, b: At | null) => a?.s === b?.s && a?.u === b?.u;

export class Focus {
  active: At | null = null;
  pinned: At | null = null;
  private hover: At | null = null;
  private readonly listeners: [EventTarget, string, EventListener][] = [];

  /** `root` gets the key listener (Escape works anywhere in the widget); `strips` the mouse. */
  constructor(
    private readonly model: AnyModel,
    private readonly strips: Strips,
    private readonly host: FocusHost,
    root: HTMLElement,
  ) {
    this.listen(strips.el, "mouseover", (e) => this.onOver(e));
    this.listen(strips.el, "mouseleave", () => this.onLeave());
    this.listen(strips.el, "click", (e) => this.onClick(e));
    this.listen(root, "keydown", (e) => this.onKey(e as KeyboardEvent));
  }

  private listen(target: EventTarget, type: string, fn: EventListener): void {
    target.addEventListener(type, fn);
    this.listeners.push([target, type, fn]);
  }

  /** New samples were shown: nothing is hovered, active or pinned in them yet. */
  reset(): void {
    this.active = null;
    this.hover = null;
    this.pinned = null;
    this.host.hideTooltip();
  }

  /** Shows the tooltip for what deserves it: pinned first, then keyboard focus, then hover. */
  refreshTooltip(): void {
    const at = this.pinned ?? this.active ?? this.hover;
    if (at) this.host.showTooltip(at);
    else this.host.hideTooltip();
    this.host.setTooltipPinned(!!this.pinned);
  }

  private mark(): void {
    this.strips.mark(this.active, this.pinned);
  }

  /** Pins `at` (null: unpins) and tells Python. */
  setPinned(at: At | null): void {
    this.pinned = at;
    const views = this.host.views();
    const value = at ? { sample_id: views[at.s].sample.sample_id, position: views[at.s].units[at.u].start } : null;
    this.model.set("pinned", value);
    this.model.save_changes();
    this.mark();
    this.refreshTooltip();
  }

  /** Applies the `pinned` trait (set by Python or echoed back) to the view; with `settled` (just after the shown
   * samples loaded: a pin may come with new sample_ids, whose fetch is still queued), a pin on a token they lack
   * is cleared in the trait too, not only in the view. */
  applyPinnedTrait(settled = false): void {
    const p = this.model.get("pinned");
    const views = this.host.views();
    let at: At | null = null;
    if (p && typeof p === "object") {
      const s = views.findIndex((v) => v.sample.sample_id === p.sample_id);
      if (s >= 0 && p.position >= 0 && p.position < views[s].tokens.length) at = { s, u: views[s].unitAt[p.position] };
      if (!at && settled) {
        this.model.set("pinned", null);
        this.model.save_changes();
      }
    }
    if (same(at, this.pinned)) return;
    this.pinned = at;
    this.mark();
    this.refreshTooltip();
  }

  private moveActive(to: At): void {
    this.active = to;
    this.mark();
    this.strips.chipAt(to)?.scrollIntoView?.({ block: "nearest", inline: "nearest" });
    if (this.pinned) this.setPinned(to); // a pinned tooltip follows the keyboard
    else this.refreshTooltip();
    this.host.activeMoved();
  }

  private onOver(e: Event): void {
    const at = this.strips.unitOf(e.target);
    if (!at) return;
    this.hover = at;
    if (!this.pinned) this.host.showTooltip(at);
  }

  private onLeave(): void {
    this.hover = null;
    if (!this.pinned) this.refreshTooltip();
  }

  private onClick(e: Event): void {
    const at = this.strips.unitOf(e.target);
    if (!at) return;
    const unpin = same(this.pinned, at);
    this.active = unpin ? null : at; // unpinned by the mouse: the tooltip follows the mouse again, and leaves with it
    this.setPinned(unpin ? null : at);
  }

  private onKey(e: KeyboardEvent): void {
    if ((e.target as Element | null)?.closest?.("select")) return; // the header's own keys
    if (e.key === "Escape") {
      if (this.pinned) this.setPinned(null);
      this.active = null;
      this.hover = null;
      this.mark();
      this.refreshTooltip();
      return;
    }
    const strips = this.strips.el;
    if (e.target !== strips && !strips.contains(e.target as Node)) return;
    const views = this.host.views();
    if (!views.some((v) => v.units.length)) return;
    const cur = this.active ?? this.pinned;
    if (e.key === "Enter" || e.key === " ") {
      if (cur) {
        e.preventDefault();
        this.setPinned(same(this.pinned, cur) ? null : cur);
      }
      return;
    }
    const next = navigate(views, cur, e.key);
    if (!next) return;
    e.preventDefault();
    this.moveActive(next);
  }

  dispose(): void {
    for (const [target, type, fn] of this.listeners) target.removeEventListener(type, fn);
    this.listeners.length = 0;
  }
}
