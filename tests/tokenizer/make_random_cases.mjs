// make_random_cases.mjs — random_cases.jsonl: random texts encoded, and random id sequences
// decoded, by Hugging Face's tokenizers (the npm package: its Rust library), for test_tokenizer to
// compare tailor's encoder, decoder and streaming decoder with:
//   npm install tokenizers@0.23.2 && node tests/tokenizer/make_random_cases.mjs TOKENIZER_JSON N SEED OUT
// (tests/tokenizer/random_cases.jsonl: the Gemma tokenizer of ../shared/data/gemma3-tokenizer,
// N = 400, SEED = 29). Deterministic for a seed.
//
// First line: {"generator", "tokenizer_sha256", "seed"}. Then N {"text", "ids"} lines (encode
// without special tokens: fragments of words, white space runs, scripts, emoji, combining marks,
// special-token strings and their pieces, random code points) and N {"dec_ids", "skip", "text"}
// lines (decode of 1-16 ids: half of them byte-fallback tokens, some special, the rest anywhere
// in the vocabulary; skip = skip_special_tokens). NUL is left out of both (<0x00> and U+0000):
// the test reads the texts as C strings.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");
const version = require("tokenizers/package.json").version;

if (process.argv.length !== 6) {
  console.error("usage: node make_random_cases.mjs TOKENIZER_JSON N SEED OUT");
  process.exit(2);
}
const [tokPath, nArg, seedArg, outPath] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const N = Number(nArg);
let state = Number(seedArg) >>> 0 || 1;
const rnd = () => { // xorshift32
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];

const fragments = [" ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", "the", " the", "The", "hello",
  "world", ",", ".", "!", "?", "'s", "...", "123", "4567", "3.14", "\u00e9", "e\u0301", "\u00fc",
  "\u00df", "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\u041f\u0440\u0438\u0432\u0435\u0442",
  "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u{1f600}", "\u{1f44d}\u{1f3fd}", "\u{1f1eb}\u{1f1f7}",
  "\u0301", "\u200b", "\ufeff", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>",
  "<mask>", "<start_of_image>", "<start_of", "turn>", "\u2581", "\u2581\u2581", "\u00a0", "\u3000",
  "\ud7ff", "\ue000", "\u{10ffff}", "<0x41>", "[multimodal]", "<b>", "</b>", "```", "    ", "\t\t",
  "def f(x):\n    return x", "http://example.com/a?b=c", "a", "b", "zz", "\u0007", "\u001b[0m"];

const lines = [JSON.stringify({
  generator: `tokenizers ${version} (node)`,
  tokenizer_sha256: createHash("sha256").update(readFileSync(tokPath)).digest("hex"),
  seed: Number(seedArg),
})];
for (let i = 0; i < N; i++) {
  let text = "";
  const nf = 1 + Math.floor(rnd() * 20);
  for (let f = 0; f < nf; f++) {
    if (rnd() < 0.15) {
      const cp = 1 + Math.floor(rnd() * 0x30000);
      if (cp < 0xd800 || cp > 0xdfff) text += String.fromCodePoint(cp);
    } else {
      text += pick(fragments);
    }
  }
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  lines.push(JSON.stringify({ text, ids: Array.from(enc.getIds()) }));
}
const vocab = tok.getVocabSize(true);
const byteIds = [];
for (let b = 1; b < 256; b++) {
  const id = tok.tokenToId(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
  if (id !== null && id !== undefined) byteIds.push(id);
}
const nul = tok.tokenToId("<0x00>");
const special = ["<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>", "<unk>", "<mask>"]
  .map((t) => tok.tokenToId(t)).filter((id) => id !== null && id !== undefined);
for (let i = 0; i < N; i++) {
  const n = 1 + Math.floor(rnd() * 16), ids = [];
  for (let j = 0; j < n; j++) {
    const r = rnd();
    let id = r < 0.5 ? pick(byteIds) : r < 0.6 ? pick(special) : Math.floor(rnd() * vocab);
    if (id === nul) id = pick(byteIds);
    ids.push(id);
  }
  const skip = rnd() < 0.5;
  lines.push(JSON.stringify({ dec_ids: ids, skip: skip ? 1 : 0, text: await tok.decode(ids, skip) }));
}
writeFileSync(outPath, lines.join("\n") + "\n");
console.log(`wrote ${outPath}: ${N} encodings and ${N} decodings by tokenizers ${version}`);
