// make_vectors.mjs builds models/tokenizer/testdata/qwen-synth/tokenizer.json (a
// small Qwen-style byte-level BPE) and vectors.json (ids, tokens and decoded
// text computed by Hugging Face's tokenizers, the Rust library, through its
// Node binding `tokenizers`; cross-checked with the pure-JS
// `@huggingface/tokenizers`).
//
//   npm install tokenizers@0.23.2 @huggingface/tokenizers@0.2.0
//   node make_vectors.mjs OUTDIR
//
// Training: the corpus below is NFC-normalised, split by Qwen2/3's pre-tokenizer
// (the Rust library's Split + ByteLevel), and BPE merges are learned the
// classic way: repeatedly merge the most frequent adjacent pair (ties: the
// smallest pair "a b" in code-unit order), pairs seen at least twice, up to
// MERGES merges. Ids 0..255 are the 256 byte-level symbols in GPT-2's
// bytes_to_unicode order (as Qwen's vocab), then the merged tokens in merge
// order, then the added tokens.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const hf = require("tokenizers"); // Rust tokenizers (napi binding)
import { Tokenizer as JsTokenizer } from "@huggingface/tokenizers";

const out = process.argv[2];
if (!out) throw new Error("usage: node make_vectors.mjs OUTDIR");
fs.mkdirSync(out, { recursive: true });

const QWEN_RE = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const MERGES = 1200;

const corpus = [
  "hello world. Hello World! HELLO, WORLD? hello, hello world",
  "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.",
  "I'm sure it's fine, isn't it? We'll see; they'd've known. You're right, we've done it.",
  "Don't stop. Won't stop. Can't stop. I'll go, she'll go, he'd go, they're going.",
  "The compiler turns models written in Go into device programs for the chip.",
  "A model is built as a graph; passes shard it over a mesh of cards and fuse it.",
  "Every program is checked on its own inputs, and the tokens must match the reference.",
  "tokens, tokenizer, tokenize, tokenized, tokenization: the tokenizer splits text into tokens.",
  "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 365 2024 2025 3.14159 1,000,000 and 12345.",
  "In 2024 there were 366 days; in 2025 there were 365 days. 7 x 6 = 42.",
  "def main():\n    print(\"hello world\")\n    return 0\n\nif __name__ == \"__main__\":\n    main()\n",
  "func main() {\n\tfmt.Println(\"hello world\")\n}\n",
  "for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }",
  "{\"key\": \"value\", \"list\": [1, 2, 3], \"ok\": true, \"none\": null}",
  "https://example.com/path/to/page?query=1&other=2#anchor",
  "Line one\nLine two\n\nLine four after a blank line\r\nWindows line\r\n",
  "    indented with four spaces\n        eight spaces\n\ttab indented\n",
  "café, résumé, naïve, façade, jalapeño, crème brûlée, déjà vu, Ångström, über, straße",
  "Le café est très bon. L'été dernier, nous sommes allés à la mer. Ça va? Très bien, merci!",
  "Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München.",
  "El niño comió una manzana. ¿Dónde está la biblioteca? ¡Qué día más bonito!",
  "Привет, мир! Как дела? Всё хорошо, спасибо.",
  "你好，世界！这是一个测试。中文分词很有意思。我们喜欢学习中文。",
  "日本語のテキストです。東京は大きな都市です。ありがとうございます。",
  "한국어 문장입니다. 안녕하세요, 세계!",
  "مرحبا بالعالم. كيف حالك؟",
  "Emoji: 😀 😃 😄 😁 🎉 👍 👍🏽 ❤️ 🚀 🇫🇷 🇯🇵 👨‍👩‍👧",
  "Math: α β γ δ π σ ω Ω ≈ ≤ ≥ ≠ ∑ ∫ √ ∞ ÷ × ±",
  "Quotes: “double” ‘single’ «guillemets» — em dash – en dash … ellipsis",
  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\nThe capital of France is Paris.<|im_end|>\n",
  "the the the the and and and of of of to to to in in in is is is it it it",
  "running jumping swimming reading writing thinking talking walking",
  "information communication organization implementation optimization",
];

// Repeat the English part so that common words merge whole.
const lines = [];
for (let r = 0; r < 3; r++) lines.push(...corpus);
lines.push(...corpus.slice(0, 16));

// The byte-level alphabet in GPT-2's bytes_to_unicode order.
function bytesToUnicode() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
}
const byteChars = bytesToUnicode(); // [byte, char] in id order

// The Rust library's own pre-tokenizer, from a bootstrap tokenizer.json with
// Qwen's pre_tokenizer (the binding's splitPreTokenizer takes a literal
// string, not a regex).
const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
const preTokenizer = {
  type: "Sequence",
  pretokenizers: [
    { type: "Split", pattern: { Regex: QWEN_RE }, behavior: "Isolated", invert: false },
    byteLevel,
  ],
};
const boot = {
  version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: { type: "NFC" },
  pre_tokenizer: preTokenizer, post_processor: byteLevel, decoder: byteLevel,
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false,
    vocab: Object.fromEntries(byteChars.map(([, ch], i) => [ch, i])), merges: [] },
};
const pre = hf.Tokenizer.fromString(JSON.stringify(boot)).getPreTokenizer();

// Word counts (byte-level strings).
const counts = new Map();
for (const line of lines) {
  for (const [w] of pre.preTokenizeString(line.normalize("NFC"))) {
    counts.set(w, (counts.get(w) || 0) + 1);
  }
}
const words = [...counts.entries()].map(([w, c]) => ({ syms: [...w], c }));

const vocab = {};
byteChars.forEach(([, ch], i) => (vocab[ch] = i));
let nextId = 256;
const merges = [];
while (merges.length < MERGES) {
  const pairs = new Map();
  for (const w of words) {
    for (let i = 0; i + 1 < w.syms.length; i++) {
      const k = w.syms[i] + " " + w.syms[i + 1];
      pairs.set(k, (pairs.get(k) || 0) + w.c);
    }
  }
  let best = null, bestC = 1;
  for (const [k, c] of pairs) {
    if (c > bestC || (c === bestC && best !== null && k < best)) {
      best = k;
      bestC = c;
    }
  }
  if (best === null) break;
  const [a, b] = best.split(" ");
  merges.push(best);
  if (!(a + b in vocab)) vocab[a + b] = nextId++;
  for (const w of words) {
    const s = [];
    for (let i = 0; i < w.syms.length; i++) {
      if (i + 1 < w.syms.length && w.syms[i] === a && w.syms[i + 1] === b) {
        s.push(a + b);
        i++;
      } else s.push(w.syms[i]);
    }
    w.syms = s;
  }
}

const added = [
  ["<|endoftext|>", true],
  ["<|im_start|>", true],
  ["<|im_end|>", true],
  ["<think>", false],
  ["</think>", false],
].map(([content, special]) => {
  if (content in vocab) throw new Error(content + " is in the BPE vocab");
  return {
  id: nextId++,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special,
};});

const tokJSON = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: added,
  normalizer: { type: "NFC" },
  pre_tokenizer: preTokenizer,
  post_processor: byteLevel,
  decoder: byteLevel,
  model: {
    type: "BPE",
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: "",
    end_of_word_suffix: "",
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab,
    merges, // legacy "a b" strings, as Qwen2.5's tokenizer.json
  },
};
const tokPath = path.join(out, "tokenizer.json");
fs.writeFileSync(tokPath, JSON.stringify(tokJSON, null, 1) + "\n");

const chatTemplate =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const tokConfig = {
  add_bos_token: false,
  add_prefix_space: false,
  added_tokens_decoder: Object.fromEntries(
    added.map((t) => [String(t.id), { content: t.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: t.special }]),
  ),
  bos_token: null,
  chat_template: chatTemplate,
  clean_up_tokenization_spaces: false,
  eos_token: "<|im_end|>",
  errors: "replace",
  model_max_length: 4096,
  pad_token: "<|endoftext|>",
  split_special_tokens: false,
  tokenizer_class: "Qwen2Tokenizer",
  unk_token: null,
};
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(tokConfig, null, 2) + "\n");

// Reference encodings.
const rust = hf.Tokenizer.fromFile(tokPath);
const js = new JsTokenizer(tokJSON, tokConfig);

const strings = [
  "hello world",
  "Hello, World!",
  "I'm sure it's fine, isn't it? We'll see; they'd've known.",
  "IT'S ALL CAPS: DON'T, WON'T, I'LL, YOU'RE, WE'VE, I'M, HE'D",
  "'s 're 've 'm 'll 'd 't",
  "it'ſ a long s; the Kelvin sign K",
  "'Twas O'Neil's: I'MMA WE'REady, it'ſelf, 'Sabc 'Dx 'LLama",
  "don’t (a curly apostrophe)",
  "The year 2024 had 366 days; pi is 3.14159 and a million is 1,000,000.",
  "12345678901234567890",
  "  two leading spaces",
  "trailing spaces   ",
  "multiple    spaces   between words",
  "tabs\tand\t\tmore tabs",
  "line one\nline two\n\nline four\r\nwindows\r\n",
  "\n\n\n",
  "   \n   \n  x",
  "a \n b",
  "end with space and newline \n",
  "café résumé naïve",
  "cafe\u0301 re\u0301sume\u0301 (combining accents, NFC composes them)",
  "Ångström über straße",
  "ãéîõü ÀÉÎÕÜ",
  "日本語のテキスト",
  "中文分词测试，你好世界。",
  "한국어 문장",
  "Привет, мир!",
  "مرحبا بالعالم",
  "emoji 😀🎉 and 👍🏽 and 👨‍👩‍👧 and ❤️",
  "flags 🇫🇷🇯🇵",
  "Ω≈ç√∫˜µ≤≥÷",
  "spaces: no\u00a0break, em\u2003space, ideographic\u3000space, nel\u0085, zero\u200bwidth",
  "<|endoftext|>",
  "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
  "text<|im_end|>more",
  "<|im_start|><|im_end|><|endoftext|>",
  "<think>\nreasoning\n</think>\n\nanswer",
  "<|im_start and <|im_end| are not special",
  "def f(x):\n    return x**2  # square\n",
  "{\"key\": [1, 2, 3], \"ok\": true}",
  "https://example.com/path?q=1&r=2",
  "x = a+b-c*d/e; y != z && w || v",
  "...!!!???",
  "GPT-4o costs $0.01/1K tokens — cheap!",
  "bell\u0007 and nul\u0000 controls",
  "",
  " ",
  "a",
  "The quick brown fox jumps over the lazy dog. Don't you think so? I'm sure we'll see.",
];

const vectors = [];
let jsAgree = 0;
for (const s of strings) {
  const enc = await rust.encode(s, null, { addSpecialTokens: true });
  const ids = enc.getIds();
  const decoded = await rust.decode(ids, false);
  const decodedSkip = await rust.decode(ids, true);
  const j = js.encode(s);
  const jsIds = Array.from(j.ids ?? j);
  const same = JSON.stringify(jsIds) === JSON.stringify(ids) && (ids.length === 0 ? decoded === "" : js.decode(ids) === decoded);
  if (same) jsAgree++;
  else console.error("JS differs for", JSON.stringify(s), ids, jsIds);
  // The pre-tokenizer alone on the normalised text (no added-token split).
  const normalized = rust.getNormalizer().normalizeString(s);
  const pretokens = rust.getPreTokenizer().preTokenizeString(normalized).map(([t]) => t);
  vectors.push({ text: s, normalized, pretokens, ids, tokens: enc.getTokens(), decoded, decoded_skip_special: decodedSkip });
}

// Decode-only vectors: byte tokens that do not form valid UTF-8 (lossy
// decoding replaces each maximal invalid subpart with U+FFFD) and prefixes of
// multi-byte encodings.
const byteId = new Map(byteChars.map(([b, ch], i) => [b, i]));
const bytesCases = [
  [0xf0, 0x9f],
  [0xf0, 0x9f, 0x98],
  [0xe2, 0x82, 0x41],
  [0x80],
  [0x80, 0x80, 0x41],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5],
  [0xe0, 0x80, 0x80],
  [0x41, 0xc3],
  [0xc3, 0xa9, 0xe6, 0x97, 0xa5, 0xe6],
];
const decodes = [];
for (const bs of bytesCases) {
  const ids = bs.map((b) => byteId.get(b));
  decodes.push({ ids, decoded: await rust.decode(ids, false) });
}
for (const s of ["😀🎉", "日本語", "👨‍👩‍👧"]) {
  const ids = (await rust.encode(s)).getIds();
  for (let n = 1; n <= ids.length; n++) {
    decodes.push({ ids: ids.slice(0, n), decoded: await rust.decode(ids.slice(0, n), false) });
  }
}
const specials = added.map((t) => t.id);
decodes.push({ ids: [...specials, 0, 1], decoded: await rust.decode([...specials, 0, 1], false), decoded_skip_special: await rust.decode([...specials, 0, 1], true) });

const meta = {
  reference: "tokenizers 0.23.2 (Hugging Face's Rust tokenizers, Node binding): Tokenizer.fromFile(tokenizer.json), encode(text, null, {addSpecialTokens: true}), decode(ids, skipSpecialTokens)",
  cross_check: `@huggingface/tokenizers 0.2.0 (pure JS): ${jsAgree} of ${strings.length} encodings and decodings agree`,
  vocab: Object.keys(vocab).length,
  merges: merges.length,
  added_tokens: added.length,
};
fs.writeFileSync(path.join(out, "vectors.json"), JSON.stringify({ meta, encode: vectors, decode: decodes }, null, 1) + "\n");
console.log(JSON.stringify(meta, null, 1));
