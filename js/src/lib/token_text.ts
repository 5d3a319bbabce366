/**
 * Token strings as logged → text a reader expects.
 *
 * Logs carry tokens as the tokenizer spells them: GPT-2 byte-level BPE maps every byte to a
 * printable code point (`Ġ` = space, `Ċ` = newline, `Ã©` = the two bytes of "é"), SentencePiece
 * writes `▁` for a space and `<0xNN>` for raw bytes. A character may span several tokens, so the
 * bytes of a whole strip are decoded together and tokens holding only part of a character are
 * marked instead of printing U+FFFD.
 */

export type TokenKind = "text" | "special" | "pad";

export interface DisplayToken {
  /** The token exactly as logged. */
  raw: string;
  /** Decoded text ("" for a continuation token whose character is shown on the first token). */
  text: string;
  kind: TokenKind;
  /** True when the token holds only part of a multi-byte character. */
  partial: boolean;
  /** For partial tokens: the whole character and which of its bytes this token holds. */
  charInfo?: { char: string; firstByte: number; bytes: number; totalBytes: number };
  /** True when the token's bytes are not valid UTF-8 (shown as \xNN escapes). */
  invalid: boolean;
}

/** A unit of display: one token, or a collapsed run of padding. */
export interface TokenUnit {
  /** Index of the first token of the unit. */
  start: number;
  /** Number of tokens in the unit (> 1 only for collapsed pad runs). */
  count: number;
  kind: TokenKind;
  token: DisplayToken;
}

// ------------------------------------------------------------------ GPT-2 byte alphabet

let b2u: string[] | null = null;
let u2b: Map<string, number> | null = null;

/** GPT-2's bytes_to_unicode table: printable bytes map to themselves, the rest to U+0100 onward. */
export function bytesToUnicode(): string[] {
  if (b2u) return b2u;
  const table: string[] = new Array(256);
  const keep = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let n = 0;
  for (let b = 0; b < 256; b++) table[b] = String.fromCharCode(keep(b) ? b : 256 + n++);
  b2u = table;
  return table;
}

/** Inverse of {@link bytesToUnicode}: code point (as a one-char string) → byte. */
export function unicodeToBytes(): Map<string, number> {
  if (u2b) return u2b;
  const m = new Map<string, number>();
  bytesToUnicode().forEach((c, b) => m.set(c, b));
  u2b = m;
  return m;
}

/** Bytes of a GPT-2 byte-level token, or null when it holds a char outside the alphabet. */
export function byteLevelBytes(token: string): number[] | null {
  const m = unicodeToBytes();
  const out: number[] = [];
  for (const ch of token) {
    const b = m.get(ch);
    if (b === undefined) return null;
    out.push(b);
  }
  return out;
}

// ------------------------------------------------------------------ special tokens

const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;
const PAD_TOKEN = /^(<pad>|<PAD>|<\|pad\|>|\[PAD\]|<\|padding\|>|<\|finetune_right_pad_id\|>)$/;
const SPECIAL_TOKEN =
  /^(<\|[^|\s]{1,64}\|>|<\/?s>|<\/?(?:pad|unk|eos|bos|eod|mask|sep|cls|start_of_turn|end_of_turn)>|<[A-Z][A-Z0-9_]{1,31}>|\[(?:PAD|CLS|SEP|MASK|UNK|EOS|BOS)\]|<extra_id_\d+>|<\|[a-z_]+\|>)$/;

/** Is this raw token a padding token (`<PAD>`, `<pad>`, `[PAD]`, `<|pad|>`)? */
export function isPadToken(raw: string): boolean {
  return PAD_TOKEN.test(raw);
}

/** Is this raw token a special/control token (`<|endoftext|>`, `</s>`, `<EOD>`, `<|im_end|>`, pads…)? */
export function isSpecialToken(raw: string): boolean {
  return !BYTE_TOKEN.test(raw) && (PAD_TOKEN.test(raw) || SPECIAL_TOKEN.test(raw));
}

// ------------------------------------------------------------------ decoding

const SHIFTED = /[\u0100-\u0143]/; // byte-level BPE's bytes (Ġ, Ċ, ĉ, …), but also letters (ą ę ł ı ğ č …)
const SHIFTED_WS = /[\u0120\u010a]/; // Ġ Ċ: space and newline as byte-level spells them (ĉ, tab, is Esperanto's too)
const SP_SPACE = "\u2581";
const enc = new TextEncoder();
const dec = new TextDecoder();

/** Length of the UTF-8 sequence a lead byte starts, or 0 if it cannot start one. */
function seqLen(b: number): number {
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0;
}

type Mode = "bytelevel" | "sentencepiece" | "plain";

/** Each non-special token as bytes under a tokenizer mode. */
function tokenBytes(raw: string, mode: Mode): number[] {
  const m = BYTE_TOKEN.exec(raw);
  if (m) return [parseInt(m[1], 16)];
  if (mode === "bytelevel") {
    const b = byteLevelBytes(raw);
    if (b) return b;
    // Not a pure byte-level spelling (e.g. a literal space slipped in): map only the
    // unambiguous shifted chars (Ġ, Ċ, …) and take everything else as text.
    const m2 = unicodeToBytes();
    const out: number[] = [];
    for (const ch of raw) {
      if (SHIFTED.test(ch)) out.push(m2.get(ch)!);
      else out.push(...enc.encode(ch));
    }
    return out;
  }
  const text = mode === "sentencepiece" ? raw.split(SP_SPACE).join(" ") : raw;
  return Array.from(enc.encode(text));
}

/** Guess how a strip was spelled: byte-level BPE, SentencePiece, or plain text. */
function detectMode(tokens: string[]): Mode {
  let sp = false;
  let spelledWs = false;
  let nonAscii = false;
  for (const t of tokens) {
    if (isSpecialToken(t)) continue;
    if (t.includes(SP_SPACE)) sp = true;
    if (SHIFTED_WS.test(t)) spelledWs = true;
    if (/[^\x00-\x7f]/.test(t) && !BYTE_TOKEN.test(t)) nonAscii = true;
  }
  // ▁ is no byte-level char (byte-level spells it "âĸģ"): the ę, ł, ı beside it are letters
  if (sp) return "sentencepiece";
  if (spelledWs) return "bytelevel";
  if (!nonAscii) return "plain";
  // Latin-1-looking or shifted chars, no spelled space: byte-level if every token is in its alphabet and the
  // bytes make text (`Ã©` → é; a CJK answer cut mid-character at max length: a few bad bytes among many
  // characters); Polish "Dzię" would hold the control byte 0x19, Esperanto "ĉiu" a tab without any space, and
  // Latin-1 "café" no character: literal.
  const all: number[] = [];
  for (const t of tokens) {
    if (isSpecialToken(t)) continue;
    const b = BYTE_TOKEN.test(t) ? tokenBytes(t, "plain") : byteLevelBytes(t);
    if (!b) return "plain";
    all.push(...b);
  }
  if (all.some((b) => b < 0x20 || b === 0x7f)) return "plain"; // a tab or control byte but no spelled space
  const { chars, bad } = utf8Counts(all);
  return bad === 0 || (chars >= 2 && bad <= Math.max(3, chars / 20)) ? "bytelevel" : "plain";
}

/** Multi-byte characters and bytes that are no part of one, in a byte stream read as UTF-8. */
function utf8Counts(bytes: number[]): { chars: number; bad: number } {
  let chars = 0;
  let bad = 0;
  for (let i = 0; i < bytes.length; ) {
    const n = seqLen(bytes[i]);
    let ok = n > 0 && i + n <= bytes.length;
    for (let k = 1; ok && k < n; k++) if ((bytes[i + k] & 0xc0) !== 0x80) ok = false;
    if (!ok) {
      bad++;
      i++;
    } else {
      if (n > 1) chars++;
      i += n;
    }
  }
  return { chars, bad };
}

const hex = (b: number) => "\\x" + b.toString(16).padStart(2, "0");

/**
 * Decode a strip's raw tokens to display tokens. Bytes are decoded across token boundaries;
 * a character split over tokens is shown once, on the token holding its first byte, and every
 * token holding part of it is marked `partial`. Invalid bytes show as `\xNN`, never U+FFFD.
 */
export function decodeTokens(tokens: string[]): DisplayToken[] {
  const mode = detectMode(tokens);
  const out: DisplayToken[] = tokens.map((raw) => ({
    raw,
    text: "",
    kind: isPadToken(raw) ? "pad" : isSpecialToken(raw) ? "special" : "text",
    partial: false,
    invalid: false,
  }));
  // One byte stream per run of non-special tokens, with the owning token of every byte.
  let bytes: number[] = [];
  let owner: number[] = [];
  const flush = () => {
    let i = 0;
    while (i < bytes.length) {
      const n = seqLen(bytes[i]);
      let ok = n > 0 && i + n <= bytes.length;
      for (let k = 1; ok && k < n; k++) if ((bytes[i + k] & 0xc0) !== 0x80) ok = false;
      if (!ok) {
        out[owner[i]].text += hex(bytes[i]);
        out[owner[i]].invalid = true;
        i++;
        continue;
      }
      const ch = n === 1 ? String.fromCharCode(bytes[i]) : dec.decode(new Uint8Array(bytes.slice(i, i + n)));
      const first = owner[i];
      out[first].text += ch;
      if (owner[i + n - 1] !== first) {
        // The character spans tokens: mark each token with the share of bytes it holds.
        let k = i;
        while (k < i + n) {
          const t = owner[k];
          let cnt = 0;
          const start = k - i;
          while (k < i + n && owner[k] === t) {
            k++;
            cnt++;
          }
          out[t].partial = true;
          out[t].charInfo = { char: ch, firstByte: start, bytes: cnt, totalBytes: n };
        }
      }
      i += n;
    }
    bytes = [];
    owner = [];
  };
  tokens.forEach((raw, t) => {
    if (out[t].kind !== "text") {
      flush();
      out[t].text = raw;
      return;
    }
    for (const b of tokenBytes(raw, mode)) {
      bytes.push(b);
      owner.push(t);
    }
  });
  flush();
  return out;
}

/**
 * Group display tokens into display units: runs of padding (two or more pad tokens, or two or
 * more identical special tokens in a row, e.g. `<|endoftext|>` reused as pad) collapse into one.
 */
export function groupUnits(tokens: DisplayToken[]): TokenUnit[] {
  const units: TokenUnit[] = [];
  let i = 0;
  while (i < tokens.length) {
    const t = tokens[i];
    let j = i + 1;
    if (t.kind !== "text") {
      const padLike = t.kind === "pad";
      while (j < tokens.length && (padLike ? tokens[j].kind === "pad" : tokens[j].raw === t.raw)) j++;
    }
    const count = j - i;
    units.push({ start: i, count, kind: count > 1 ? "pad" : t.kind, token: t });
    i = j;
  }
  return units;
}

/** Badge text for a unit: the token itself, or "×N pad" / "×N <tok>" for a collapsed run. */
export function unitLabel(u: TokenUnit): string {
  const label = u.count <= 1 ? u.token.text : `×${u.count} ${u.token.kind === "pad" ? "pad" : u.token.raw}`;
  return label.replace(INVISIBLE_G, escapeChar); // `<|\u202e|>` would reverse the tokens after it
}

/** One piece of a token's visible text: plain text, a faint whitespace glyph, or a line break. */
export interface TextPiece {
  text: string;
  kind: "text" | "ws" | "br";
}

/** Characters that show nothing: controls (tab and line ends have glyphs), format characters (zero-width
 * space, bidi overrides, tag characters…), line and paragraph separators, blank fillers, lone surrogates, and
 * the zero-width (non-)joiners but between letters or emoji, where they are spelling (Persian, Hindi, 👨‍👩‍👧). */
const INVISIBLE =
  /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0\ufff9-\ufffb]|[\u{e0000}-\u{e007f}]|[\ud800-\udfff]|(?<![\p{L}\p{M}\p{Extended_Pictographic}\u{1f3fb}-\u{1f3ff}\ufe0f])[\u200c\u200d]|[\u200c\u200d](?![\p{L}\p{M}\p{Extended_Pictographic}])/u;
const INVISIBLE_G = new RegExp(INVISIBLE.source, "gu");

/** `\xNN` / `\uNNNN` / `\u{NNNNN}` for a character that shows nothing. */
function escapeChar(ch: string): string {
  const c = ch.codePointAt(0)!;
  if (c < 0x100) return "\\x" + c.toString(16).padStart(2, "0");
  if (c < 0x10000) return "\\u" + c.toString(16).padStart(4, "0");
  return `\\u{${c.toString(16)}}`;
}

/** Does this token text need {@link textPieces} (a line end, tab, space run, all spaces, nothing, or a char that shows nothing)? */
export function needsPieces(text: string): boolean {
  return text === "" || /[\n\r\t]| {2}|^ +$/.test(text) || INVISIBLE.test(text);
}

/**
 * Split display text into pieces with visible whitespace: `↵` then a real line break for a
 * newline, `⇥` for a tab, `·` for spaces in a run of two or more or in an all-space token,
 * `\xNN` / `\uNNNN` for a character that shows nothing (a control, a zero-width or bidi character:
 * hidden text is what an inspector must show), `∅` for an empty token. A `\r` ending the token
 * when the next token starts with `\n` (`<0x0D>` `<0x0A>`) is `␍` without a break: one line end.
 * Single spaces between words stay spaces so prose stays readable.
 */
export function textPieces(text: string, lfFollows = false): TextPiece[] {
  if (text === "") return [{ text: "\u2205", kind: "ws" }];
  const pieces: TextPiece[] = [];
  const allSpace = /^ +$/.test(text);
  const re = new RegExp(`\\n|\\r\\n?|\\t| {2,}| |${INVISIBLE.source}`, "gu");
  let last = 0;
  let m: RegExpExecArray | null;
  const push = (t: string, kind: TextPiece["kind"]) => {
    const p = pieces[pieces.length - 1];
    if (p && p.kind === kind && kind !== "br") p.text += t;
    else pieces.push({ text: t, kind });
  };
  while ((m = re.exec(text))) {
    if (m.index > last) push(text.slice(last, m.index), "text");
    const s = m[0];
    if (s === "\t") push("\u21e5", "ws");
    else if (s === "\r" && lfFollows && m.index + 1 === text.length) push("\u240d", "ws");
    else if (s[0] === "\n" || s[0] === "\r") {
      push("\u21b5", "ws");
      pieces.push({ text: "", kind: "br" });
    } else if (s[0] === " ") {
      if (s.length > 1 || allSpace) push("\u00b7".repeat(s.length), "ws");
      else push(" ", "text");
    } else push(s.replace(INVISIBLE_G, escapeChar), "ws");
    last = m.index + s.length;
  }
  if (last < text.length) push(text.slice(last), "text");
  return pieces;
}

/** The visible text of a token chip (glyphs included, line breaks excluded): equals the chip's textContent. */
export function visibleText(text: string): string {
  return textPieces(text)
    .map((p) => p.text)
    .join("");
}
