#!/usr/bin/env python3
"""Regenerates the tokenizer parity data in this folder from Hugging Face's own tokenizer (the Rust
`tokenizers` crate through its Python binding) and chat templates rendered by jinja2 the way
transformers' apply_chat_template renders them. Run from anywhere, with any python3 >= 3.9:

    python3 tests/data/tokenizer_parity/generate.py

The first run creates a venv in <repo>/cache/tokenizer-parity-venv (git-ignored), pip-installs PACKAGES
into it (from PyPI), and every run re-executes itself there. Reads corpus.py (the corpus), variants.json
(the tokenizer.json variants to check), qwen3/ (the vendored Qwen3 tokenizer, Apache-2.0, see its NOTICE),
Llama-3's tokenizer.json and tokenizer_config.json from shared/reference/tokenizers/llama3 beside the
repository, and qwen2_5_chat_template.jinja (Qwen2.5-Instruct's chat_template, Apache-2.0, Qwen team).
Writes, next to this script:
  corpus.jsonl              one JSON string per line (`rlforge tokenize --file` reads it)
  corpus_index.json         the corpus's classes: {class: [first_line, count]}
  expected/<variant>.jsonl  HF's ids and decodes for the corpus lines of each variant (variants.json)
  expected/chat.jsonl       chat-template renderings
  manifest.json             package versions and the sha256 of every tokenizer.json used
Deterministic: running it twice gives identical files. The data was first made by a Node generator
(tokenizers 0.22.2 through @anush008/tokenizers, @huggingface/jinja); this one reproduces it byte for byte.
"""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VENV = REPO / "cache" / "tokenizer-parity-venv"
BASE_DIRS = {
    "qwen3": HERE / "qwen3",
    "llama3": REPO.parent / "shared" / "reference" / "tokenizers" / "llama3",
}
# Pinned, so regenerating never silently moves the reference. Installed without their dependencies:
# tokenizers needs huggingface_hub only for from_pretrained (downloads), which is not used here, so
# these three are all the code that runs.
PACKAGES = {
    "tokenizers": "0.22.2",  # the Rust crate of the same version
    "jinja2": "3.1.6",
    "markupsafe": "3.0.3",  # jinja2's one dependency
}


def run_in_venv():
    """Creates the venv on first use (anew when PACKAGES change), then re-executes this script in it."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    stamp = VENV / "rlforge-packages.txt"
    requirements = [f"{name}=={version}" for name, version in PACKAGES.items()]
    if not python.exists() or not stamp.exists() or stamp.read_text().split() != requirements:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                        *requirements], check=True)
        stamp.write_text("\n".join(requirements) + "\n")
    os.execv(python, [str(python), __file__, *sys.argv[1:]])


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


# The byte format the committed files have: compact JSON lines, and indent-1 JSON documents, with
# non-ASCII characters written as themselves.
def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_json(path, value):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(json.dumps(value, ensure_ascii=False, indent=1) + "\n")


def apply_variant(base_json, variant):
    """A variant's edits (variants.json) on a parsed tokenizer.json: `replace` swaps top-level keys,
    `added_token_flags` overrides flags of added tokens by content. The C++ test does the same."""
    j = json.loads(json.dumps(base_json))
    j.update(variant.get("replace", {}))
    for content, flags in variant.get("added_token_flags", {}).items():
        tokens = [t for t in j["added_tokens"] if t["content"] == content]
        if not tokens:
            raise SystemExit(f"variant {variant['name']}: no added token {content}")
        for token in tokens:
            token.update(flags)
    return j


def selected_lines(corpus, variant):
    classes = variant.get("classes")
    every = variant.get("sample_every", 1)
    return [i for i, (cls, _) in enumerate(corpus) if (classes is None or cls in classes) and i % every == 0]


def expected_rows(tokenizer, corpus, lines):
    rows = []
    for line in lines:
        text = corpus[line][1]
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        ids_special = tokenizer.encode(text, add_special_tokens=True).ids
        rows.append({
            "line": line,
            "ids": ids,
            "ids_special": ids_special,
            "decode": tokenizer.decode(ids_special, skip_special_tokens=False),
            "decode_skip": tokenizer.decode(ids_special, skip_special_tokens=True),
            # Cutting the ids anywhere can split a multi-byte character: HF then decodes lossily (U+FFFD).
            "decode_prefix": tokenizer.decode(ids[:(len(ids) + 1) // 2], skip_special_tokens=False),
        })
    return rows


# Conversations rendered with each chat template; plain text messages only (no tools).
CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi!"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke."}],
    [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Q1"},
     {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2"}],
    [{"role": "user", "content": "Solve x+1=3"},
     {"role": "assistant", "content": "<think>\nSubtract 1.\n</think>\n\nx = 2"}],
    [{"role": "user", "content": "Solve x+1=3"},
     {"role": "assistant", "content": "<think>\nSubtract 1.\n</think>\n\nx = 2"},
     {"role": "user", "content": "And x+2=3?"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "plain answer"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "\n\nleading newlines</think>\n\nafter"},
     {"role": "assistant", "content": "second <think>r</think>x"}],
    [{"role": "user", "content": "first"}, {"role": "system", "content": "a late system message"},
     {"role": "user", "content": "second"}],
    # Only '\n' next to the text Qwen3's template strips with lstrip('\n'). (The data was first rendered
    # by @huggingface/jinja, whose strip, lstrip and rstrip ignored their argument and stripped all
    # whitespace; the C++ test covers spaces there by hand.)
    [{"role": "user", "content": "  padded with spaces \n"}, {"role": "assistant", "content": "\n\ntrimmed? \n"}],
    [{"role": "system", "content": "系统提示"}, {"role": "user", "content": "你好，世界 🌍 e\u0301"}],
    [{"role": "user", "content": "<tool_response>\nnot really a tool\n</tool_response>"},
     {"role": "assistant", "content": "<think>x</think>y"}],
]


def compile_chat_template(source):
    """The template compiled as transformers' _compile_jinja_template does: a sandbox with trim_blocks,
    lstrip_blocks and loop controls, raise_exception, and a tojson that keeps non-ASCII text. Left out:
    the {% generation %} tag (assistant masks) and strftime_now (a date would make the output change
    from day to day); a template using either fails here rather than render differently."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def chat_rows(templates):
    rows = []
    for name, spec in templates.items():
        compiled = compile_chat_template(spec["template"])
        # As apply_chat_template: the special tokens that are set, then the caller's keyword arguments.
        special_tokens = {key: spec[key] for key in ("bos_token", "eos_token") if spec[key] is not None}
        for messages in CONVERSATIONS:
            for add_generation_prompt in (False, True):
                for enable_thinking in ((None, False) if spec["thinking_switch"] else (None,)):
                    kwargs = dict(special_tokens)
                    row = {"template": name, "messages": messages, "add_generation_prompt": add_generation_prompt}
                    if enable_thinking is not None:
                        kwargs["enable_thinking"] = row["enable_thinking"] = enable_thinking
                    row["text"] = compiled.render(messages=messages, tools=None, documents=None,
                                                  add_generation_prompt=add_generation_prompt, **kwargs)
                    rows.append(row)
    return rows


def main():
    run_in_venv()
    from tokenizers import Tokenizer

    sys.dont_write_bytecode = True  # no __pycache__ in the repository
    sys.path.insert(0, str(HERE))
    from corpus import build_corpus

    for base, folder in BASE_DIRS.items():
        for file in ("tokenizer.json", "tokenizer_config.json"):
            if not (folder / file).is_file():
                raise SystemExit(f"generate.py: the {base} tokenizer has no {folder / file}")

    corpus = build_corpus()
    write_jsonl(HERE / "corpus.jsonl", [text for _, text in corpus])
    index = {}
    for i, (cls, _) in enumerate(corpus):
        index.setdefault(cls, [i, 0])[1] += 1
    write_json(HERE / "corpus_index.json", index)

    variants = read_json(HERE / "variants.json")
    (HERE / "expected").mkdir(exist_ok=True)
    counts = {}
    for variant in variants:
        base = read_json(BASE_DIRS[variant["base"]] / "tokenizer.json")
        tokenizer = Tokenizer.from_str(json.dumps(apply_variant(base, variant)))
        rows = expected_rows(tokenizer, corpus, selected_lines(corpus, variant))
        write_jsonl(HERE / "expected" / f"{variant['name']}.jsonl", rows)
        counts[variant["name"]] = len(rows)
        print(f"{variant['name']}: {len(rows)} strings")

    def template_of(base, thinking_switch):
        config = read_json(BASE_DIRS[base] / "tokenizer_config.json")
        return {"template": config["chat_template"], "bos_token": config.get("bos_token"),
                "eos_token": config.get("eos_token"), "thinking_switch": thinking_switch}

    chats = chat_rows({
        "qwen3": template_of("qwen3", True),
        "qwen2_5": {"template": (HERE / "qwen2_5_chat_template.jinja").read_text(encoding="utf-8"),
                    "bos_token": None, "eos_token": "<|im_end|>", "thinking_switch": False},
        "llama3": template_of("llama3", False),
    })
    write_jsonl(HERE / "expected" / "chat.jsonl", chats)
    print(f"chat: {len(chats)} renderings")

    write_json(HERE / "manifest.json", {
        "packages": PACKAGES,
        "tokenizer_json_sha256": {base: sha256(folder / "tokenizer.json") for base, folder in BASE_DIRS.items()},
        "corpus_strings": len(corpus),
        "expected_strings": counts,
    })


if __name__ == "__main__":
    main()
