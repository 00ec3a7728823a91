// make_expected.mjs — the same expected.json as make_expected.py, through the npm package
// `tokenizers` (Hugging Face's Rust library), for machines without the Python one:
//   npm install tokenizers@0.23.2 && node tests/tokenizer/make_expected.mjs TOKENIZER_JSON tests/tokenizer
// (run it with NODE_PATH pointing at the node_modules that holds the package, if elsewhere).
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");
const version = require("tokenizers/package.json").version;

// JSON with every non-ASCII character escaped, byte-identical to Python's json.dumps(ensure_ascii=True).
const dump = (v) =>
  JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) =>
    c === "\u007f" ? c : "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");

async function entry(tok, text) {
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  const ids = Array.from(enc.getIds());
  return { text, ids, decoded: await tok.decode(ids, false) };
}

async function main() {
  if (process.argv.length !== 4) {
    console.error("usage: node make_expected.mjs TOKENIZER_JSON DIR");
    process.exit(2);
  }
  const [tokPath, outDir] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const corpusPath = join(outDir, "corpus.txt");
  const text = readFileSync(corpusPath, "utf8");
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  const whole = await entry(tok, text);
  whole.decoded_skip_special = await tok.decode(whole.ids, true);
  const head = {
    generator: `tokenizers ${version} (node)`,
    tokenizer_sha256: sha256(tokPath),
    corpus_sha256: sha256(corpusPath),
  };
  const out = ["{"];
  for (const [k, v] of Object.entries(head)) out.push(`${dump(k)}:${dump(v)},`);
  out.push('"lines":[');
  const items = [];
  for (const line of lines) items.push(dump(await entry(tok, line)));
  out.push(items.join(",\n"));
  out.push("],");
  out.push(`"whole":${dump(whole)}`);
  out.push("}");
  writeFileSync(join(outDir, "expected.json"), out.join("\n") + "\n");
  console.log(`wrote ${join(outDir, "expected.json")}: ${items.length} lines, ${whole.ids.length} ids for the whole file`);
}

main();
