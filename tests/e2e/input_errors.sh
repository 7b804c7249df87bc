#!/usr/bin/env bash
# Issue #21, the input side, through the binary: bad numbers on the command line, config files that are
# not what they seem, and broken tokenizer folders. Each case exits non-zero with one `rlforge:` line
# naming the option, file or key and what was expected, in well under a second (no training runs).
source "$(dirname "$0")/common.sh"

m="$SCRATCH/model"
"$RLFORGE" init-model --arch qwen2 --out "$m" --seed 1 --vocab 300 --hidden 16 --layers 1 --heads 2 --kv-heads 1 \
  --ffn 24 > /dev/null || fail "init-model"

# --- numeric options: CLI11 wrapped unsigned values, read octal and hex, and took inf ---------------
expect_error "--max-shard-bytes: expected an integer in [1, 18446744073709551615], got '-10'" \
  convert --from "$m" --to "$SCRATCH/x" --max-shard-bytes -10
expect_error "--max-shard-bytes: expected an integer in [1, 18446744073709551615], got '0'" \
  convert --from "$m" --to "$SCRATCH/x" --max-shard-bytes 0
expect_error "--seed: expected an integer in [0, 18446744073709551615], got '-1'" \
  init-model --arch qwen2 --out "$SCRATCH/x" --seed -1
expect_error "--layers: expected an integer in [1, 4096], got '0x10'" init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --layers 0x10
expect_error "--hidden: expected an integer in [1, 2147483647], got '99999999999'" \
  init-model --arch qwen2 --out "$SCRATCH/x" --seed 1 --hidden 99999999999
expect_error "--temperature: expected a finite number, got 'inf'" generate --model "$m" --prompt hi --temperature inf
expect_error "--top-p: expected a finite number, got 'nan'" generate --model "$m" --prompt hi --top-p nan
expect_error "--seed: expected an integer in [0, 18446744073709551615], got '1.5'" generate --model "$m" --prompt hi --seed 1.5
expect_error "--temperature: expected a finite number, got '1e999'" \
  logprobs --model "$m" --input "$SCRATCH/in.json" --out "$SCRATCH/o.json" --temperature 1e999
expect_error "--threads: expected an integer in [0, 4096], got '-3'" info --threads -3
expect_error "--optimization-level: expected an integer in [0, 2], got '7'" info --optimization-level 7
[ ! -e "$SCRATCH/x" ] || fail "a refused command left $SCRATCH/x behind"
# Decimal is decimal: 010 is ten, not octal eight.
"$RLFORGE" init-model --arch qwen2 --out "$SCRATCH/ten" --seed 1 --vocab 300 --hidden 16 --layers 010 --heads 2 \
  --kv-heads 1 --ffn 24 > /dev/null || fail "init-model --layers 010"
grep -q '"num_hidden_layers": 10' "$SCRATCH/ten/config.json" || fail "--layers 010 did not make 10 layers"

# --- config files --------------------------------------------------------------------------------
start=$SECONDS
expect_error "/dev/zero: is a character device, not a file to read a YAML config from" train --config /dev/zero
[ $((SECONDS - start)) -lt 5 ] || fail "--config /dev/zero took $((SECONDS - start)) s"
cp examples/grpo_arith.yaml "$SCRATCH/dup.yaml"
printf 'algorithm:\n  gamma: 0.5\n' >> "$SCRATCH/dup.yaml"
line=$(grep -n '^algorithm:' examples/grpo_arith.yaml | cut -d: -f1)
expect_error "$SCRATCH/dup.yaml: algorithm: given twice in one map, on line $line and on line" train --config "$SCRATCH/dup.yaml"
expect_error "actor_rollout_ref.actor.optim.lr: expected a finite number, got '.inf'" \
  train --config examples/grpo_arith.yaml --check-config actor_rollout_ref.actor.optim.lr=.inf
expect_error "actor_rollout_ref.rollout.temperature: expected a finite number, got 'inf'" \
  train --config examples/grpo_arith.yaml --check-config actor_rollout_ref.rollout.temperature=inf
bomb="[&a0 [x, x, x, x, x, x, x, x, x, x]"
for i in 1 2 3 4 5 6 7 8 9; do bomb+=", &a$i [$(printf "*a$((i - 1)), %.0s" 1 2 3 4 5 6 7 8 9)*a$((i - 1))]"; done
expect_error "holds more than 100000 values" sft --config examples/sft_arith.yaml "+data.task_kwargs.bomb=$bomb]"

# --- tokenizer folders ---------------------------------------------------------------------------
edited() {  # edited <python statement on t, the parsed tokenizer.json>: a copy of the model's tokenizer
  rm -rf "$SCRATCH/tok"; mkdir "$SCRATCH/tok"
  python3 -c "import json, sys; t = json.load(open(sys.argv[1])); $1; json.dump(t, open(sys.argv[2], 'w'))" \
    "$m/tokenizer.json" "$SCRATCH/tok/tokenizer.json"
}
edited "t['model']['vocab'] = {}; t['model']['merges'] = []; t['added_tokens'] = []"
expect_error "$SCRATCH/tok/tokenizer.json: model.vocab: is empty" tokenize --tokenizer "$SCRATCH/tok" --text hi
edited "t['model']['vocab']['zz'] = 2000000000"
expect_error "the id 2000000000 of \"zz\" leaves" tokenize --tokenizer "$SCRATCH/tok" --text hi
edited "t['post_processor'] = {'type': 'TemplateProcessing', 'single': [{'SpecialToken': {'id': 'X'}}, {'Sequence': {'id': 'A'}}], 'pair': [], 'special_tokens': {'X': {'id': 'X', 'ids': [5000], 'tokens': ['X']}}}"
expect_error "post_processor.special_tokens[\"X\"].ids: id 5000 is not the id of any token" tokenize --tokenizer "$SCRATCH/tok" --text hi
edited "del t['model']['vocab']['q']"
expect_error "model.vocab has no token for the character 'q'" tokenize --tokenizer "$SCRATCH/tok" --text quit
edited "t['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'] = '(a+)+\$'"
expect_error "pre_tokenizer.pretokenizers[0].pattern: regex \"(a+)+\$\" failed on a text of" \
  tokenize --tokenizer "$SCRATCH/tok" --text "$(printf 'a%.0s' $(seq 5000))b"
expect_error "cannot decode token id 5000 at position 0: $m/tokenizer.json has ids 0 to 299" tokenize --tokenizer "$m" --text '[5000]' --decode
expect_error "--text: 18446744073709551615 is not a token id" tokenize --tokenizer "$m" --text '[18446744073709551615]' --decode
echo "PASS: bad numbers, config files and tokenizer folders were named one-line errors"
