/**
 * The shown samples as the parts use them: decoded tokens grouped into display units, the metric
 * values as Float32Arrays, and each unit's base chip class. No DOM is built here; the strips part
 * fills in `chips` and `body`.
 */
import { float32 } from "../lib/rpc";
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

function baseClassOf(u: TokenUnit): string {
  let c = "rlv-tok";
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
  return { sample, tokens, units, unitAt, values, chips: [], baseClass: units.map(baseClassOf), body: null, built: false };
}

/** The views of every sample of a "strips" reply. */
export function sampleViews(reply: StripsReply, buffers: DataView[]): SampleView[] {
  return reply.samples.map((sample) => sampleView(sample, buffers));
}
