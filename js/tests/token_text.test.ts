import { describe, expect, it } from "vitest";
import {
  bytesToUnicode,
  byteLevelBytes,
  decodeTokens,
  groupUnits,
  isPadToken,
  isSpecialToken,
  textPieces,
  unicodeToBytes,
  unitLabel,
  visibleText,
} from "../src/lib/token_text";

const texts = (toks: string[]) => decodeTokens(toks).map((t) => t.text);

describe("GPT-2 byte-level BPE", () => {
  it("maps Ġ, Ċ and ĉ to space, newline and tab", () => {
    expect(texts(["Hello", "Ġworld", "Ċ", "ĉx"])).toEqual(["Hello", " world", "\n", "\tx"]);
  });

  it("has a 256-entry alphabet that round-trips every byte", () => {
    const table = bytesToUnicode();
    expect(new Set(table).size).toBe(256);
    expect(table[0x20]).toBe("Ġ");
    expect(table[0x0a]).toBe("Ċ");
    expect(table[0x09]).toBe("ĉ");
    expect(table[0x41]).toBe("A");
    const back = unicodeToBytes();
    for (let b = 0; b < 256; b++) expect(back.get(table[b])).toBe(b);
  });

  it("decodes a non-ASCII char spelled in the byte alphabet (Ã© → é)", () => {
    expect(byteLevelBytes("Ã©")).toEqual([0xc3, 0xa9]);
    expect(texts(["caf", "Ã©"])).toEqual(["caf", "é"]);
    // the same bytes spelled with a leading Ġ: " é"
    expect(texts(["ĠÃ©t", "Ã©"])).toEqual([" ét", "é"]);
  });

  it("round-trips arbitrary UTF-8 text through the byte alphabet", () => {
    const s = "naïve 中文 🙂\n\tend";
    const spelled = Array.from(new TextEncoder().encode(s))
      .map((b) => bytesToUnicode()[b])
      .join("");
    expect(texts([spelled]).join("")).toBe(s);
  });

  it("keeps literal Latin-1 text that is not valid as bytes (plain 'café')", () => {
    expect(texts(["café", " au lait"])).toEqual(["café", " au lait"]);
  });
});

describe("SentencePiece and byte tokens", () => {
  it("maps ▁ to a space and <0x0A> to a newline", () => {
    expect(texts(["▁Hello", "▁world", "<0x0A>", "ok"])).toEqual([" Hello", " world", "\n", "ok"]);
  });

  it("decodes a 3-byte char split over three byte tokens once and marks the parts", () => {
    // 中 = E4 B8 AD
    const d = decodeTokens(["▁a", "<0xE4>", "<0xB8>", "<0xAD>", "b"]);
    expect(d.map((t) => t.text)).toEqual([" a", "中", "", "", "b"]);
    expect(d.map((t) => t.partial)).toEqual([false, true, true, true, false]);
    expect(d[2].charInfo).toEqual({ char: "中", firstByte: 1, bytes: 1, totalBytes: 3 });
    expect(d.some((t) => t.text.includes("\ufffd"))).toBe(false);
    expect(d.map((t) => t.text).join("")).toBe(" a中b");
  });

  it("marks a char split unevenly between byte-level tokens", () => {
    // 中 = E4 B8 AD spelled in the GPT-2 alphabet, split 1 + 2
    const [e4, b8, ad] = [0xe4, 0xb8, 0xad].map((b) => bytesToUnicode()[b]);
    const d = decodeTokens(["Ġx", e4, b8 + ad + "y"]);
    expect(d.map((t) => t.text)).toEqual([" x", "中", "y"]);
    expect(d[1].partial && d[2].partial).toBe(true);
    expect(d[2].charInfo).toMatchObject({ firstByte: 1, bytes: 2, totalBytes: 3 });
  });

  it("shows a truncated character as \\x escapes, never U+FFFD", () => {
    const d = decodeTokens(["ok", "<0xE4>", "<0xB8>"]);
    expect(d[1].text).toBe("\\xe4");
    expect(d[1].invalid).toBe(true);
    expect(d.map((t) => t.text).join("")).not.toContain("\ufffd");
  });
});

describe("special tokens and padding", () => {
  it("detects special tokens", () => {
    for (const t of ["<EOD>", "<|endoftext|>", "</s>", "<s>", "<PAD>", "<pad>", "<|im_end|>", "<|im_start|>", "<unk>"]) {
      expect(isSpecialToken(t), t).toBe(true);
    }
    for (const t of ["<0x0A>", "Ġthe", "<img", "<b>", "a<|b"]) expect(isSpecialToken(t), t).toBe(false);
    expect(isPadToken("<PAD>") && isPadToken("<pad>")).toBe(true);
    expect(isPadToken("</s>")).toBe(false);
  });

  it("keeps special tokens verbatim and out of the byte stream", () => {
    const d = decodeTokens(["Ġhi", "<|im_end|>", "Ċ"]);
    expect(d.map((t) => [t.text, t.kind])).toEqual([
      [" hi", "text"],
      ["<|im_end|>", "special"],
      ["\n", "text"],
    ]);
  });

  it("collapses a run of padding into one ×N pad unit", () => {
    const units = groupUnits(decodeTokens(["Ġyes", "<|endoftext|>", "<PAD>", "<PAD>", "<PAD>"]));
    expect(units.map((u) => [u.start, u.count, u.kind])).toEqual([
      [0, 1, "text"],
      [1, 1, "special"],
      [2, 3, "pad"],
    ]);
    expect(unitLabel(units[2])).toBe("×3 pad");
    expect(unitLabel(units[1])).toBe("<|endoftext|>");
  });

  it("collapses repeated end-of-text used as padding, but not a single pad", () => {
    const units = groupUnits(decodeTokens(["a", "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", "b", "<pad>"]));
    expect(units.map((u) => [u.start, u.count])).toEqual([
      [0, 1],
      [1, 3],
      [4, 1],
      [5, 1],
    ]);
    expect(unitLabel(units[1])).toBe("×3 <|endoftext|>");
    expect(units[3].kind).toBe("pad");
  });
});

describe("visible whitespace", () => {
  it("draws newlines as ↵ followed by a real break, tabs as ⇥", () => {
    expect(textPieces("a\nb")).toEqual([
      { text: "a", kind: "text" },
      { text: "↵", kind: "ws" },
      { text: "", kind: "br" },
      { text: "b", kind: "text" },
    ]);
    expect(visibleText("\tx")).toBe("⇥x");
  });

  it("shows runs of spaces and all-space tokens as ·, keeps a single word space", () => {
    expect(visibleText(" the")).toBe(" the");
    expect(visibleText("    x")).toBe("····x");
    expect(visibleText(" ")).toBe("·");
  });
});

describe("mixed spellings", () => {
  it("maps Ġ in a byte-level token that also holds a literal space", () => {
    expect(texts(["Ġa", "Ġ<img src=x>"])).toEqual([" a", " <img src=x>"]);
  });
});

describe("letters in U+0100–U+0143 are not byte-level marks by themselves", () => {
  it("reads SentencePiece Polish and Turkish (ę, ı beside ▁) as SentencePiece", () => {
    expect(texts(["▁Dzię", "kuję", "▁bardzo"])).toEqual([" Dzię", "kuję", " bardzo"]);
    expect(texts(["▁Bu", "▁ılık", "▁su"])).toEqual([" Bu", " ılık", " su"]);
  });

  it("keeps decoded text with literal spaces or control bytes as it is", () => {
    const d = decodeTokens(["Hello", " world", " ł", "ódź"]);
    expect(d.map((t) => t.text)).toEqual(["Hello", " world", " ł", "ódź"]);
    expect(d.some((t) => t.invalid)).toBe(false);
    expect(texts(["Dzię", "kuję"])).toEqual(["Dzię", "kuję"]); // byte-level would make ę the control byte 0x19
  });

  it("still decodes byte-level BPE, with or without a spelled space", () => {
    expect(texts(["ĠÅĤ", "Ã³dÅº"])).toEqual([" ł", "ódź"]);
    expect(texts(["ÅĤ", "Ã³dÅº"])).toEqual(["ł", "ódź"]);
  });
});

describe("characters that show nothing", () => {
  it("are shown escaped, faint; an empty token as ∅", () => {
    expect(textPieces("a\u200bb")).toEqual([
      { text: "a", kind: "text" },
      { text: "\\u200b", kind: "ws" },
      { text: "b", kind: "text" },
    ]);
    expect(visibleText("\u202e")).toBe("\\u202e"); // a bidi override never reaches the page raw
    expect(visibleText("\x00\x1b")).toBe("\\x00\\x1b");
    expect(visibleText("x\u{e0041}")).toBe("x\\u{e0041}"); // a tag character (hidden ASCII)
    expect(visibleText("\ud800")).toBe("\\ud800"); // a lone surrogate
    expect(visibleText("")).toBe("∅");
    expect(visibleText("👨\u200d👩")).toBe("👨\u200d👩"); // the joiner inside emoji stays
    expect(unitLabel(groupUnits(decodeTokens(["<|a\u202eb|>"]))[0])).toBe("<|a\\u202eb|>");
  });

  it("draws one line end for a CR whose LF opens the next token", () => {
    expect(visibleText("x\r")).toBe("x↵");
    expect(textPieces("x\r", true)).toEqual([
      { text: "x", kind: "text" },
      { text: "␍", kind: "ws" },
    ]);
    expect(textPieces("\r\n").filter((p) => p.kind === "br")).toHaveLength(1);
  });
});

describe("byte-level strips without a spelled space", () => {
  const table = bytesToUnicode();
  const spell = (bytes: number[]) => bytes.map((b) => table[b]).join("");
  const utf8 = (s: string) => Array.from(new TextEncoder().encode(s));

  it("decode a CJK answer cut mid-character at max length, and emoji around a stray byte", () => {
    const b = utf8("你好世界。");
    const toks = [0, 3, 6, 9].map((i) => spell(b.slice(i, i + 3))).concat(spell(b.slice(12, 14)));
    expect(texts(toks).slice(0, 4)).toEqual(["你", "好", "世", "界"]);
    const e = utf8("😀👍");
    expect(texts([spell(e.slice(0, 4)), spell([0xff]), spell(e.slice(4, 8))])).toEqual(["😀", "\\xff", "👍"]);
  });

  it("leave decoded Esperanto (ĉ is a tab in byte-level) as letters", () => {
    expect(texts(["ĉiu", "j"])).toEqual(["ĉiu", "j"]);
  });
});

describe("joiners", () => {
  it("are spelling between letters or emoji (Persian, Hindi, 👨‍👩‍👧), escaped elsewhere", () => {
    for (const word of ["می\u200cخواهم", "क्\u200dष", "👨\u200d👩\u200d👧", "👍🏽\u200d"]) {
      if (word.endsWith("\u200d")) expect(visibleText(word)).toBe("👍🏽\\u200d");
      else expect(visibleText(word)).toBe(word);
    }
    expect(visibleText("\u200c")).toBe("\\u200c");
    expect(visibleText("a \u200db")).toBe("a \\u200db");
    expect(visibleText("x\u2028y\u3164")).toBe("x\\u2028y\\u3164"); // a line separator, a blank filler
  });
});
