#!/usr/bin/env bash
# `rlforge tokenize` end to end on the vendored Qwen3 tokenizer: --file over the whole parity corpus
# prints Hugging Face's ids line for line, --decode of those ids prints HF's decodes, --text prints one
# array, and bad input is a non-zero exit with one `rlforge:` line naming the problem.
# Usage: tokenize_command.sh <rlforge binary> <repo>
set -euo pipefail
RLFORGE="$1"
cd "$2"
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
DATA=tests/data/tokenizer_parity
fail() { echo "FAIL: $*" >&2; exit 1; }

"$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --file "$DATA/corpus.jsonl" > "$SCRATCH/ids.jsonl"
"$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --file "$DATA/corpus.jsonl" --add-special-tokens > "$SCRATCH/ids_special.jsonl"
python3 - "$DATA/expected/qwen3.jsonl" "$SCRATCH/ids.jsonl" "$SCRATCH/ids_special.jsonl" "$SCRATCH/expected_special.jsonl" <<'PY'
import json, sys
expected = [json.loads(line) for line in open(sys.argv[1])]
for field, path in (("ids", sys.argv[2]), ("ids_special", sys.argv[3])):
    got = [json.loads(line) for line in open(path)]
    assert len(got) == len(expected), f"{path}: {len(got)} lines, expected {len(expected)}"
    bad = [row["line"] for row, ids in zip(expected, got) if row[field] != ids]
    assert not bad, f"{field}: corpus lines {bad[:10]} differ from Hugging Face"
with open(sys.argv[4], "w") as out:
    for row in expected: out.write(json.dumps(row["ids_special"]) + "\n")
print(f"ok: --file ids match Hugging Face on {len(expected)} lines, with and without special tokens")
PY
"$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --file "$SCRATCH/expected_special.jsonl" --decode > "$SCRATCH/decoded.jsonl"
"$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --file "$SCRATCH/expected_special.jsonl" --decode --skip-special-tokens \
  > "$SCRATCH/decoded_skip.jsonl"
python3 - "$DATA/expected/qwen3.jsonl" "$SCRATCH/decoded.jsonl" "$SCRATCH/decoded_skip.jsonl" <<'PY'
import json, sys
expected = [json.loads(line) for line in open(sys.argv[1])]
for field, path in (("decode", sys.argv[2]), ("decode_skip", sys.argv[3])):
    got = [json.loads(line) for line in open(path)]
    bad = [row["line"] for row, text in zip(expected, got) if row[field] != text]
    assert len(got) == len(expected) and not bad, f"{field}: corpus lines {bad[:10]} differ from Hugging Face"
print(f"ok: --file --decode matches Hugging Face on {len(expected)} lines, keeping and skipping special tokens")
PY

[ "$("$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --text "Hello world<|im_end|>")" = "[9707,1879,151645]" ] \
  || fail "--text"
[ "$("$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --text "[9707,1879,151645]" --decode)" = "Hello world<|im_end|>" ] \
  || fail "--text --decode"
[ "$("$RLFORGE" tokenize --tokenizer "$DATA/qwen3" --text "[9707,1879,151645]" --decode --skip-special-tokens)" \
  = "Hello world" ] || fail "--text --decode --skip-special-tokens"
echo "ok: --text"

# expect_error <fragment> <args...>: a non-zero exit with <fragment> in the error.
expect_error() {
  local fragment="$1"; shift
  if "$RLFORGE" tokenize "$@" > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then fail "expected failure: $*"; fi
  grep -qF -- "$fragment" "$SCRATCH/stderr" || fail "error '$(cat "$SCRATCH/stderr")' does not mention '$fragment'"
  echo "ok: $(head -n 1 "$SCRATCH/stderr")"
}
printf '"fine"\n42\n' > "$SCRATCH/not_strings.jsonl"
printf '"fine"\n{"broken\n' > "$SCRATCH/broken.jsonl"
printf '[1, 2]\n[1, 999999]\n' > "$SCRATCH/bad_ids.jsonl"
expect_error "/nonexistent/tok/tokenizer.json: missing (expected a folder with a tokenizer.json)" --tokenizer /nonexistent/tok --text hi
expect_error "give the input with --text or --file" --tokenizer "$DATA/qwen3"
expect_error "excludes" --tokenizer "$DATA/qwen3" --text a --file b
expect_error "not valid UTF-8 (byte 0xff at offset 1" --tokenizer "$DATA/qwen3" --text "$(printf 'a\xffb')"
expect_error "not_strings.jsonl: line 2: expected a JSON string" --tokenizer "$DATA/qwen3" --file "$SCRATCH/not_strings.jsonl"
expect_error "broken.jsonl: line 2: [json.exception.parse_error" --tokenizer "$DATA/qwen3" --file "$SCRATCH/broken.jsonl"
expect_error "bad_ids.jsonl: line 2: " --tokenizer "$DATA/qwen3" --file "$SCRATCH/bad_ids.jsonl" --decode
expect_error "cannot decode token id 999999 at position 1: $DATA/qwen3/tokenizer.json has ids 0 to 151668" --tokenizer "$DATA/qwen3" \
  --file "$SCRATCH/bad_ids.jsonl" --decode
expect_error "--text: expected a JSON array of token ids" --tokenizer "$DATA/qwen3" --text '"x"' --decode
expect_error "/nonexistent.jsonl: cannot open" --tokenizer "$DATA/qwen3" --file /nonexistent.jsonl
echo "tokenize_command: all passed"
