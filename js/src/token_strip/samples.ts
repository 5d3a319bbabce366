/**
 * The shown samples as the parts use them: decoded tokens grouped into display units, the metric
 * values as Float32Arrays, and each unit's base chip class. No DOM is built here; the strips part
 * fills in `chips` and `body`.
 */
import { float32, uint8 } from "../lib/rpc";
import type { StripSample, StripsReply } from "../lib/protocol";
import { decodeTokens, groupUnits, type DisplayToken, type TokenUnit } from "../lib/token_text";
import type { RGB } from "../lib/color";

/** A unit of one shown sample: sample index `s`, unit index `u`. */
export interface At {
  s: number;
  u: number;
}

/** What colours depend on besides the values: the theme and the page colour behind the widget. */
export interface Theme {
  dark: boolean;
  page: RGB;
}

/** Tooltip and table metric order (the ones RL Logging Board shows first); others follow in reply order. */
const METRIC_ORDER = ["token_reward", "kl", "log_ratio", "logprob", "ref_logprob", "prob", "ref_prob", "value", "advantage"];

/** Everything the view keeps about one displayed sample. */
export interface SampleView {
  sample: StripSample;
  tokens: DisplayToken[];
  units: TokenUnit[];
  /** token position → unit index */
  unitAt: Int32Array;
  values: Record<string, Float32Array>;
  /** One chip per unit, once built (strips far below the fold are built when scrolled near). */
  chips: HTMLElement[];
  baseClass: string[];
  /** The strip body holding the chips (set by the strips part). */
  body: HTMLElement | null;
  built: boolean;
  /** Per unit: true when none of its tokens is in the loss mask (drawn muted, never coloured). */
  untrained: boolean[];
  /** Per token: 1 = in the loss mask (null: every token is). */
  trained: Uint8Array | null;
  /** Per token: 1 = masked by the importance-ratio rule (null: none is). */
  masked: Uint8Array | null;
  /** Turn starts in position order (empty: the log has no turns). */
  turns: { start: number; role: string }[];
}

/** Whether any token of unit `u` is set in `flags` (null flags: `none`). */
function anySet(flags: Uint8Array | null, u: TokenUnit, none: boolean): boolean {
  if (!flags) return none;
  for (let k = u.start; k < u.start + u.count; k++) if (flags[k]) return true;
  return false;
}

/** Whether the policy was trained on unit `u` (any of its tokens in the loss mask). */
export function unitTrained(sv: SampleView, u: TokenUnit): boolean {
  return anySet(sv.trained, u, true);
}

/** The turn a token position belongs to: its index and role, or null when the log has no turns. */
export function turnOf(sv: SampleView, position: number): { turn: number; role: string } | null {
  let lo = 0;
  let hi = sv.turns.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (sv.turns[mid].start <= position) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found < 0 ? null : { turn: found, role: sv.turns[found].role };
}

/** A metric's values on trained tokens only: colour limits are computed on what the policy was trained on. */
export function trainedValues(sv: SampleView, metric: string): ArrayLike<number> {
  const arr = sv.values[metric] ?? [];
  const t = sv.trained;
  if (!t) return arr;
  const out: number[] = [];
  for (let i = 0; i < arr.length; i++) if (t[i]) out.push(arr[i]);
  return out;
}

/** The value a unit shows for a metric: the token's, or for a pad run the finite value of largest |x|. */
export function unitValue(sv: SampleView, u: TokenUnit, metric: string): number {
  const arr = sv.values[metric];
  if (!arr) return NaN;
  if (u.count === 1) return arr[u.start];
  let best = NaN;
  for (let k = u.start; k < u.start + u.count; k++) {
    const v = arr[k];
    if (Number.isFinite(v) && !(Math.abs(v) <= Math.abs(best))) best = v;
  }
  return best;
}

/** The metrics of a sample in display order: the known ones first, then the reply's order, then the rest. */
export function orderedMetrics(sv: SampleView, replyOrder: string[] | undefined): string[] {
  const have = Object.keys(sv.values);
  const order = replyOrder ?? have;
  const known = METRIC_ORDER.filter((m) => have.includes(m));
  return [...known, ...order.filter((m) => have.includes(m) && !known.includes(m)), ...have.filter((m) => !known.includes(m) && !order.includes(m))];
}

function baseClassOf(u: TokenUnit, trained: boolean, masked: boolean): string {
  let c = "rlv-tok";
  if (!trained) c += " rlv-untrained";
  if (masked) c += " rlv-masked";
  if (u.kind !== "text") c += " rlv-badge";
  if (u.kind === "pad") c += " rlv-pad";
  if (u.token.partial) c += u.token.text ? " rlv-partial" : " rlv-partial rlv-cont";
  if (u.token.invalid) c += " rlv-invalid";
  return c;
}

/** One sample's view: tokens decoded and grouped, values read from the reply's float32 buffers. */
function sampleView(sample: StripSample, buffers: DataView[]): SampleView {
  const tokens = decodeTokens(sample.tokens || []);
  const units = groupUnits(tokens);
  const unitAt = new Int32Array(tokens.length);
  units.forEach((u, k) => unitAt.fill(k, u.start, u.start + u.count));
  const values: Record<string, Float32Array> = {};
  for (const [m, bi] of Object.entries(sample.buffers || {})) {
    const b = buffers[bi];
    if (!b) throw new Error(`sample ${sample.sample_id}: buffer ${bi} for ${m} is missing`);
    let arr = float32(b);
    if (arr.length !== tokens.length) {
      // Tolerate a length mismatch (values beyond the tokens are ignored, missing ones are NaN).
      const fixed = new Float32Array(tokens.length).fill(NaN);
      fixed.set(arr.subarray(0, Math.min(arr.length, tokens.length)));
      arr = fixed;
    }
    values[m] = arr;
  }
  const flag = (name: string): Uint8Array | null => {
    const bi = sample.flags?.[name];
    if (bi === undefined) return null;
    const b = buffers[bi];
    if (!b) throw new Error(`sample ${sample.sample_id}: buffer ${bi} for flag ${name} is missing`);
    const arr = uint8(b);
    if (arr.length >= tokens.length) return arr;
    const fixed = new Uint8Array(tokens.length).fill(name === "trained" ? 1 : 0);
    fixed.set(arr);
    return fixed;
  };
  const trained = flag("trained");
  const masked = flag("masked");
  const turns = [...(sample.turns ?? [])].filter((t) => t.start >= 0 && t.start < tokens.length).sort((a, b) => a.start - b.start);
  const untrained = units.map((u) => !anySet(trained, u, true));
  const baseClass = units.map((u, k) => baseClassOf(u, !untrained[k], anySet(masked, u, false)));
  return { sample, tokens, units, unitAt, values, chips: [], baseClass, body: null, built: false, untrained, trained, masked, turns };
}

/** The views of every sample of a "strips" reply. */
export function sampleViews(reply: StripsReply, buffers: DataView[]): SampleView[] {
  return reply.samples.map((sample) => sampleView(sample, buffers));
}
