// What a reward model reads of each training response (verl's reward model workers, spec verl.md §2.3
// step 8 and §6.2): one token sequence per response, whose last token the model scores.
//   reward_model.model.input_tokenizer null   the rollout's ids as they are, prompt then response (eos
//                                             included): the reward model must share the policy's
//                                             tokenizer, which is checked (its folder's tokenizer.json
//                                             equals the policy's, and every id is a row of its vocab);
//   input_tokenizer set (the policy's         verl's chat-template switch: the response decoded with the
//   tokenizer, verl's default)                policy's tokenizer (its stop token dropped), appended to
//                                             the prompt's conversation as the assistant turn, the chat
//                                             rendered with the reward model's own template (no
//                                             generation prompt) and encoded with its tokenizer
//                                             (no special tokens added), cut to reward_model.max_length
//                                             (keeping the first tokens, verl's right truncation).
// verl interpolates input_tokenizer to the actor's model path, so its default is the switch; rlforge's
// default is null, and the check above makes a reward model with another tokenizer an error rather than
// a model reading foreign ids.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_prompt_source.h"
#include "trainer/run_tokenizer.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "model/hf_folder.h"

namespace rf::rl {

class RewardModelInput {
 public:
  // `policy` and `policy_folder` are the actor's tokenizer and model folder; `policy` must outlive this.
  // ConfigError naming the reward_model key for a folder that is no one-label sequence classifier, a
  // tokenizer that does not match, or a switch without the reward model's tokenizer or chat template.
  RewardModelInput(const RlConfig& config, const trainer::RunTokenizer& policy, const model::HfModelFolder& policy_folder);

  // The reward model's sequences, one per response of `batch` (rows[r.group] is its prompt's row), as a
  // batch the engines pack: each sequence's last token, the scored one, as its response, the rest as
  // its prompt.
  // The first re-rendered chat is logged (as verl prints it), to see what the reward model reads.
  RlBatch sequences(const RlBatch& batch, std::span<const PromptRow> rows);

 private:
  // The switch's pieces (input_tokenizer set).
  struct ChatSwitch {
    std::unique_ptr<data::Tokenizer> tokenizer;  // the reward model's
    data::ChatTemplate chat_template;
    int64_t max_length;
  };

  std::vector<int64_t> switched(const RlResponse& r, const PromptRow& row);

  const trainer::RunTokenizer& policy_;
  std::optional<ChatSwitch> switch_;
  bool logged_ = false;
};

}  // namespace rf::rl
