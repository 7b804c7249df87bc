#include "model/causal_lm.h"

#include "core/element_access.h"
#include "dist/tp_comm.h"
#include "model/context_split.h"

namespace rf::model {

ModelSpan ModelSpan::whole(const ModelConfig& config) {
  return ModelSpan{StageParts::whole(config).hf_layers, true, true};
}

bool ModelSpan::is_whole(const ModelConfig& config) const {
  return pre_process && post_process && hf_layers == StageParts::whole(config).hf_layers;
}

namespace {

bool is_moe_index(int64_t index) { return index >= 0; }

// The vocabulary rows of the embedding or the untied lm_head, whichever the layout holds (a chunk with
// neither reads no vocabulary: 0 rows).
const ParamEntry* vocab_entry(const ParamLayout& layout) {
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"})
    if (layout.contains(name)) return &layout.entry(name);
  return nullptr;
}

}  // namespace

CausalLm::CausalLm(const ModelConfig& config, const ParamStore& params, GradBuffer* grads,
                   const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker* tracker)
    : CausalLm(config, ModelSpan::whole(config), params, grads, kernels, parallel, tracker) {}

CausalLm::CausalLm(const ModelConfig& config, ModelSpan span, const ParamStore& params, GradBuffer* grads,
                   const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker* tracker)
    : config_(config),
      span_(std::move(span)),
      params_(params),
      grads_(grads),
      kernels_(kernels),
      parallel_(parallel),
      activations_account_{tracker, MemoryTier::device, MemoryCategory::activations},
      workspace_account_{tracker, MemoryTier::device, MemoryCategory::workspace},
      attention_(config, parallel.tp().size(), parallel.cp().size(), parallel.cp_comm_type()),
      mlp_(config, parallel.tp().size()),
      moe_(config.moe.enabled()
               ? std::optional<MoeBlock>(MoeBlockConfig::from_model(
                     config, {.ep = parallel.layout().dims().expert_model_parallel_size,
                              .tp = parallel.tp().size(),
                              .etp = params.layout().tp().expert_size(),
                              .sequence_parallel = parallel.sequence_parallel()}))
               : std::nullopt),
      vocab_rows_(vocab_entry(params.layout()) ? vocab_entry(params.layout())->shape[0] : 0),
      vocab_start_(vocab_entry(params.layout()) ? vocab_entry(params.layout())->shard_start : 0),
      head_(config, vocab_rows_, vocab_start_),
      value_head_(config) {
  config_.validate();
  const TensorParallelShard& layout_tp = params.layout().tp();
  RF_CHECK(layout_tp.size == parallel.tp().size() && layout_tp.rank == parallel.tp().rank(),
           "the weights are laid out for TP rank {} of {}, the model runs as rank {} of {}", layout_tp.rank,
           layout_tp.size, parallel.tp().rank(), parallel.tp().size());
  RF_CHECK(params.dtype() == DType::f32 || params.dtype() == DType::bf16 || params.dtype() == DType::f64,
           "model weights in {}: expected f32, bf16 or f64", dtype_name(params.dtype()));
  for (size_t i = 1; i < span_.hf_layers.size(); ++i)
    RF_CHECK(span_.hf_layers[i] == span_.hf_layers[i - 1] + 1, "a model span's layers must be consecutive");
  if (grads_)
    RF_CHECK(grads_->dtype() == grad_dtype_for(params.dtype()), "gradients in {} for {} weights: expected {}",
             dtype_name(grads_->dtype()), dtype_name(params.dtype()), dtype_name(grad_dtype_for(params.dtype())));
  const bool lm = config_.head == HeadKind::lm;
  auto bind = [&](const auto& store, TensorView& embed, std::vector<LayerParams>& layers, LmHeadParams& head,
                  ValueHeadParams& value) {
    if (span_.pre_process) embed = store.get("model.embed_tokens.weight");
    if (span_.post_process) {
      if (lm)
        head = LmHeadParams::bind(store, config_);
      else
        value = ValueHeadParams::bind(store, config_);
    }
    for (int64_t l : span_.hf_layers) {
      const bool moe = config_.moe.is_moe_layer(l);
      layers.push_back({AttentionParams::bind(store, l, config_), moe ? MlpParams{} : MlpParams::bind(store, l),
                        moe ? MoeParams::bind(store, l, config_) : MoeParams{}});
    }
  };
  bind(params, embed_w_VC_, layer_weights_, head_weights_, value_weights_);
  for (size_t i = 0, moe_layers = 0; i < span_.hf_layers.size(); ++i)
    moe_index_.push_back(is_moe(i) ? int64_t(moe_layers++) : -1);
  if (grads_) bind(*grads_, embed_grad_VC_, layer_grads_, head_grads_, value_grads_);
}

LayerContext CausalLm::context() const {
  LayerContext ctx{kernels_, parallel_, kernels::Accumulate::add};
  if (parallel_.sequence_parallel()) {
    ctx.sp_full_NC = sp_full_NC_;
    ctx.sp_local_NC = sp_local_NC_;
  }
  if (parallel_.cp().size() > 1) ctx.cp_scratch = &context_scratch_;
  return ctx;
}

BatchShape CausalLm::batch_shape(const ModelInputs& in) const {
  const int64_t N = in.batch * in.seq_len;
  const int64_t n = parallel_.sequence_parallel() ? N / parallel_.tp().size() : N;
  return BatchShape{in.batch, in.seq_len, n, in.positions_N, in.cu_seqlens, in.context};
}

void CausalLm::set_recompute(const RecomputePolicy& policy) {
  RF_CHECK(capacity_ == 0, "set_recompute after reserve: the activations are already sized");
  RF_CHECK(!policy.distribute_saved_activations || (policy.full && !parallel_.sequence_parallel()),
           "distribute_saved_activations needs full recompute and no sequence parallel");
  const SelectiveRecompute& modules = policy.selective;
  RF_CHECK(!config_.moe.enabled() || !(modules.layernorm || modules.activation || modules.mlp),
           "recompute_modules: layernorm, activation and mlp are not built for MoE models (moe recomputes an MoE "
           "layer's block; full recompute whole layers)");
  recompute_policy_ = policy;
  recompute_ = recompute_groups(policy, int64_t(span_.hf_layers.size()));
}

void CausalLm::set_moe_losses(const MoeLossConfig& config) {
  RF_CHECK(capacity_ == 0, "set_moe_losses after reserve: the activations are already sized");
  moe_losses_.reset();
  if (!config.any() || !moe_) return;
  RF_CHECK(config.balancing != MoeBalancing::seq_aux_loss ||
               (parallel_.cp().size() == 1 && !parallel_.sequence_parallel()),
           "moe_router_load_balancing_type: seq_aux_loss with context or sequence parallelism is not built (a rank "
           "holds parts of documents)");
  RF_CHECK(config.balancing != MoeBalancing::hf_pooled || span_.is_whole(config_),
           "Hugging Face's pooled load-balancing loss spans every MoE layer: not with a pipeline-parallel model");
  const RouterConfig& router = moe_->config().router;
  moe_losses_.emplace(config, router.score, router.num_experts, router.top_k);
}

void CausalLm::set_moe_experts(const MoeExpertOptions& options) {
  RF_CHECK(capacity_ == 0, "set_moe_experts after reserve: the activations are already sized");
  if (!moe_) {
    RF_CHECK(options.capacity.dropless(), "moe_expert_capacity_factor: the model has no MoE layers");
    return;
  }
  RF_CHECK(!options.shared_expert_overlap || moe_->config().shared_ffn > 0,
           "moe_shared_expert_overlap: the model has no shared expert");
  MoeBlockConfig config = moe_->config();
  config.capacity = options.capacity;
  config.grouped_gemm = options.grouped_gemm;
  config.parallel.dispatcher = options.dispatcher;
  config.shared_expert_overlap = options.shared_expert_overlap;
  moe_.emplace(config);
}

void CausalLm::set_activation_offload(int64_t num_layers) {
  RF_CHECK(num_layers >= 0 && num_layers <= int64_t(span_.hf_layers.size()),
           "set_activation_offload: {} layers of a chunk of {}", num_layers, span_.hf_layers.size());
  RF_CHECK(num_layers == 0 || (!recompute_policy_.full && !recompute_policy_.selective.any()),
           "activation offload does not combine with recompute");
  offloaded_layers_ = num_layers;
}

ActivationShape CausalLm::activation_shape() const {
  return {.max_tokens = capacity_,
          .tp_size = parallel_.tp().size(),
          .sequence_parallel = parallel_.sequence_parallel(),
          .vocab_columns = vocab_rows_,
          .dtype = params_.dtype(),
          .moe_parallel = moe_ ? moe_->config().parallel : MoeParallel{},
          .moe_capacity = moe_ ? moe_->config().capacity : CapacityConfig{}};
}

int64_t CausalLm::local_capacity() const {
  // A micro-batch's token count is a multiple of the TP size with SP (validate), so its n = N / tp rows fit.
  return parallel_.sequence_parallel() ? capacity_ / parallel_.tp().size() : capacity_;
}

void CausalLm::reserve(int64_t N) {
  RF_CHECK(N > 0, "reserve: max_tokens must be positive, got {}", N);
  const DType dtype = params_.dtype();
  const int64_t C = config_.hidden_size;
  capacity_ = N;
  const int64_t n = local_capacity();
  last_forward_ = nullptr;
  own_ = Activations();  // made by the first forward that uses it
  const int64_t G = recompute_.largest();
  recompute_scratch_ = Activations();
  recompute_scratch_.residual.resize(size_t(G));
  recompute_scratch_.attention.resize(size_t(G));
  recompute_scratch_.mlp.resize(size_t(G));
  recompute_scratch_.moe.resize(size_t(G));
  for (int64_t k = 0; k < G; ++k) {
    if (k > 0) recompute_scratch_.residual[size_t(k)] = Tensor({n, C}, dtype, activations_account_);
    recompute_scratch_.mid.emplace_back(Shape{n, C}, dtype, activations_account_);
    attention_.reserve(recompute_scratch_.attention[size_t(k)], N, dtype, activations_account_);
    // Position k of every group: a dense layer in one group, an MoE layer in another.
    bool dense = false, moe = false;
    for (const auto& [first, end] : recompute_.groups)
      if (first + k < end) (is_moe(size_t(first + k)) ? moe : dense) = true;
    if (dense) mlp_.reserve(recompute_scratch_.mlp[size_t(k)], N, dtype, activations_account_);
    if (moe) moe_->reserve(recompute_scratch_.moe[size_t(k)], N, dtype, activations_account_);
  }
  group_inputs_ = {};
  if (recompute_policy_.distribute_saved_activations && parallel_.tp().size() > 1)
    for (Tensor& input : group_inputs_) input = Tensor({N, C}, dtype, activations_account_);
  discarded_ = Discarded();
  const SelectiveRecompute& discard = recompute_policy_.selective;
  if (discard.any()) {
    attention_.reserve(discarded_.attention, N, dtype, activations_account_, discard, SavedPart::discarded);
    mlp_.reserve(discarded_.mlp, N, dtype, activations_account_, discard, SavedPart::discarded);
    if (discard.moe && moe_) moe_->reserve(discarded_.moe, N, dtype, activations_account_);
  }
  if (moe_) moe_->reserve(moe_scratch_, N, dtype, workspace_account_);  // forward's too
  if (moe_losses_) {
    dlogits_extra_NE_ = Tensor({N, moe_->config().router.num_experts}, stat_dtype_for(dtype), workspace_account_);
    real_tokens_N_ = Tensor({N}, DType::u8, workspace_account_);
  }
  if (grads_) {
    attention_.reserve(attention_scratch_, N, dtype, workspace_account_);
    mlp_.reserve(mlp_scratch_, N, dtype, workspace_account_);
    dresid_NC_ = Tensor({n, C}, dtype, workspace_account_);
  }
  if (parallel_.sequence_parallel()) {
    sp_full_NC_ = Tensor({N, C}, dtype, workspace_account_);
    sp_local_NC_ = Tensor({N, C}, dtype, workspace_account_);
  }
  attention_.reserve(context_scratch_, N, dtype, workspace_account_);
}

CausalLm::Activations CausalLm::make_activations() {
  Activations a = make_layer_activations();
  if (span_.post_process) {
    Activations head = make_head_activations();
    a.head = std::move(head.head);
    a.value = std::move(head.value);
  }
  return a;
}

CausalLm::Activations CausalLm::make_layer_activations() {
  RF_CHECK(capacity_ > 0, "make_layer_activations before reserve");
  const DType dtype = params_.dtype();
  const int64_t N = capacity_, n = local_capacity(), C = config_.hidden_size, L = int64_t(span_.hf_layers.size());
  Activations a;
  a.attention.resize(size_t(L));
  a.mlp.resize(size_t(L));
  a.moe.resize(size_t(L));
  if (moe_losses_)
    moe_losses_->reserve(a.moe_losses, std::count_if(moe_index_.begin(), moe_index_.end(), is_moe_index), N);
  a.residual.resize(size_t(L + 1));
  a.mid.resize(size_t(L));
  a.offloaded.resize(size_t(offloaded_layers_));
  a.moving.resize(size_t(offloaded_layers_));
  // A recomputed layer keeps its input only as its group's first; the chunk's output is always kept.
  // A distributed group input keeps this rank's 1/TP of its elements.
  const int64_t tp = parallel_.tp().size();
  const SelectiveRecompute& discard = recompute_policy_.selective;
  for (int64_t l = 0; l <= L; ++l) {
    const ResidualKept kept = residual_kept(recompute_, !group_inputs_[0].empty(), l);
    if (kept == ResidualKept::tp_slice)
      a.residual[size_t(l)] = Tensor({(n * C + tp - 1) / tp}, dtype, activations_account_);
    else if (kept == ResidualKept::whole)
      a.residual[size_t(l)] = Tensor({n, C}, dtype, activations_account_);
    if (l == L || recompute_.recomputes(l)) continue;
    a.mid[size_t(l)] = Tensor({n, C}, dtype, activations_account_);
    attention_.reserve(a.attention[size_t(l)], N, dtype, activations_account_, discard);
    reserve_layer(a, size_t(l), is_moe(size_t(l)), discard);
    if (size_t(l) >= a.offloaded.size()) continue;
    // An offloaded layer's tensors rest on the host tier, empty (make_room brings them before its forward); each
    // layer's go there before the next is allocated, so only one layer's are ever on the device here.
    OffloadGroup& group = a.offloaded[size_t(l)];
    const auto add = [&group](Tensor& t) {
      if (!t.empty()) group.add(t);
    };
    add(a.residual[size_t(l)]);
    add(a.mid[size_t(l)]);
    a.attention[size_t(l)].for_each_tensor(add);
    a.mlp[size_t(l)].for_each_tensor(add);
    a.moe[size_t(l)].for_each_tensor(add);
    group.offload(OffloadContents::discard);
  }
  return a;
}

CausalLm::Activations CausalLm::make_forward_only_activations() {
  RF_CHECK(capacity_ > 0, "make_forward_only_activations before reserve");
  const DType dtype = params_.dtype();
  const int64_t N = capacity_, n = local_capacity(), C = config_.hidden_size;
  Activations a = span_.post_process ? make_head_activations() : Activations();
  a.forward_only = true;
  a.residual.resize(2);
  for (Tensor& r : a.residual) r = Tensor({n, C}, dtype, activations_account_);
  a.mid.resize(1);
  a.mid[0] = Tensor({n, C}, dtype, activations_account_);
  a.attention.resize(1);
  a.mlp.resize(1);
  a.moe.resize(1);
  attention_.reserve(a.attention[0], N, dtype, activations_account_, recompute_policy_.selective);
  mlp_.reserve(a.mlp[0], N, dtype, activations_account_, recompute_policy_.selective);
  if (moe_) moe_->reserve(a.moe[0], N, dtype, activations_account_);
  return a;
}

void CausalLm::reserve_layer(Activations& a, size_t slot, bool moe, const SelectiveRecompute& discard) {
  if (moe && !discard.moe)
    moe_->reserve(a.moe[slot], capacity_, params_.dtype(), activations_account_);
  else if (moe)
    return;  // its block's tensors are the chunk's shared discarded ones
  else
    mlp_.reserve(a.mlp[slot], capacity_, params_.dtype(), activations_account_, discard);
}

CausalLm::Activations CausalLm::make_head_activations() {
  RF_CHECK(capacity_ > 0, "make_head_activations before reserve");
  RF_CHECK(span_.post_process, "make_head_activations: this model chunk has no head");
  const DType dtype = params_.dtype();
  Activations a;
  if (config_.head == HeadKind::lm)
    head_.reserve(a.head, head_scratch_, capacity_, parallel_.tp().size(), dtype, activations_account_,
                  workspace_account_);
  else
    value_head_.reserve(a.value, value_scratch_, capacity_, dtype, activations_account_, workspace_account_);
  return a;
}

int64_t CausalLm::Activations::bytes() {
  int64_t total = 0;
  for_each_tensor([&total](Tensor& t) { total += int64_t(t.allocated_bytes()); });
  return total;
}

void CausalLm::set_activations_resident(bool resident) {
  if (resident == activations_resident_) return;
  const auto apply = [resident](Tensor& t) {
    if (!t.empty()) t.set_resident(resident);  // a buffer this model does not use is empty
  };
  own_.for_each_tensor(apply);
  own_.forward_done = false;
  recompute_scratch_.for_each_tensor(apply);
  discarded_.attention.for_each_tensor(apply);
  discarded_.mlp.for_each_tensor(apply);
  discarded_.moe.for_each_tensor(apply);
  head_scratch_.for_each_tensor(apply);
  value_scratch_.for_each_tensor(apply);
  attention_scratch_.for_each_tensor(apply);
  context_scratch_.for_each_tensor(apply);
  mlp_scratch_.for_each_tensor(apply);
  moe_scratch_.for_each_tensor(apply);
  for (Tensor* t : {&dresid_NC_, &gathered_logits_V_, &sp_full_NC_, &sp_local_NC_}) apply(*t);
  activations_resident_ = resident;
}

void CausalLm::validate(const ModelInputs& in) const {
  const int64_t N = in.batch * in.seq_len;
  RF_CHECK(in.batch > 0 && in.seq_len > 0, "inputs: batch {} x seq_len {} must both be positive", in.batch,
           in.seq_len);
  RF_CHECK(N <= capacity_, "inputs: {} tokens exceed the {} reserved (call reserve first)", N, capacity_);
  RF_CHECK(in.tokens_N.rank() == 1 && in.tokens_N.numel() == N, "tokens_N: expected {} tokens, got {}", N,
           in.tokens_N.shape().to_string());
  RF_CHECK(in.positions_N.rank() == 1 && in.positions_N.numel() == N, "positions_N: expected {} positions, got {}", N,
           in.positions_N.shape().to_string());
  // a value model reads none, nor a chunk without the head
  const bool targets = (config_.head == HeadKind::lm && span_.post_process) || !in.targets_N.empty();
  RF_CHECK(!targets || (in.targets_N.rank() == 1 && in.targets_N.numel() == N),
           "targets_N: expected {} targets, got {}", N, in.targets_N.shape().to_string());
  RF_CHECK(in.temperature > 0, "temperature must be positive, got {}", in.temperature);
  RF_CHECK(!parallel_.sequence_parallel() || N % parallel_.tp().size() == 0,
           "inputs: sequence parallel splits the {} tokens over {} TP ranks; pad the micro-batch to a multiple", N,
           parallel_.tp().size());
  if (parallel_.cp().size() > 1)
    RF_CHECK(in.context != nullptr && in.context->cp_size() == parallel_.cp().size() &&
                 in.context->cp_rank() == parallel_.cp().rank() && in.context->local_tokens() == N && in.batch == 1,
             "inputs: context parallel over {} ranks needs this rank's part of a ContextSplit micro-batch (one "
             "packed row) as inputs",
             parallel_.cp().size());
  const int64_t n = batch_shape(in).local_tokens;
  if (span_.pre_process)
    RF_CHECK(in.hidden_NC.empty(), "inputs: hidden_NC given to a model chunk that runs the embedding");
  else
    RF_CHECK(in.hidden_NC.rank() == 2 && in.hidden_NC.size(0) == n && in.hidden_NC.size(1) == config_.hidden_size &&
                 in.hidden_NC.dtype() == params_.dtype(),
             "inputs: a model chunk without the embedding takes hidden_NC [{}, {}] {}, got {} {}", n,
             config_.hidden_size, dtype_name(params_.dtype()), in.hidden_NC.shape().to_string(),
             dtype_name(in.hidden_NC.dtype()));
  check_token_ids(in.tokens_N, config_.vocab_size, 0, "tokens_N");
  if (targets) check_token_ids(in.targets_N, config_.vocab_size, -100, "targets_N");
  check_token_ids(in.positions_N, std::numeric_limits<int32_t>::max(), 0, "positions_N");
  for (const auto& [experts, what] : {std::pair{in.replay_experts_NLk, "replay_experts_NLk"},
                                      std::pair{in.record_experts_NLk, "record_experts_NLk"}}) {
    if (experts.empty()) continue;
    RF_CHECK(moe_.has_value(), "{}: a dense model has no router", what);
    RF_CHECK(parallel_.cp().size() == 1, "{}: router replay and recording run without context parallelism", what);
    check_experts(experts, in.batch * in.seq_len - in.padding_tokens, what);
  }
}

void CausalLm::check_experts(TensorView experts_NLk, int64_t N, const char* what) const {
  const int64_t L = int64_t(std::count_if(moe_index_.begin(), moe_index_.end(), is_moe_index));
  check_shape(experts_NLk, Shape{N, L, moe_->config().router.top_k}, what);
  check_dtype(experts_NLk, DType::i32, what);
}

// Layer i's [N, k] slice of an experts record (model_inputs.h), or an empty view; with SP this rank's rows of it.
TensorView CausalLm::layer_experts(TensorView experts_NLk, size_t i) const {
  if (experts_NLk.empty() || !is_moe(i)) return TensorView();
  const TensorView layer = experts_NLk.select(1, moe_index_[i]);
  if (!parallel_.sequence_parallel()) return layer;
  const int64_t n = layer.size(0) / parallel_.tp().size();
  return layer.slice(0, parallel_.tp().rank() * n, n);
}

TensorView CausalLm::experts_rows(Tensor& buffer, int64_t N) const {
  const int64_t L = int64_t(std::count_if(moe_index_.begin(), moe_index_.end(), is_moe_index));
  const int64_t k = moe_->config().router.top_k;
  RF_CHECK(N <= capacity_, "router replay: {} tokens, {} reserved", N, capacity_);
  // Sized once for the reserved micro-batch, so that micro-batches of any length reuse it (the step does not
  // allocate).
  if (buffer.empty()) buffer = Tensor({capacity_, L, k}, DType::i32, workspace_account_);
  return rows(buffer, N);
}

TensorView CausalLm::padded_experts(TensorView experts_NLk, int64_t N, Tensor& buffer) const {
  const TensorView padded = experts_rows(buffer, N);
  const int64_t real = experts_NLk.size(0), row = experts_NLk.size(1) * experts_NLk.size(2);
  copy_convert(experts_NLk, padded.slice(0, 0, real));
  int32_t* padding = padded.data<int32_t>() + real * row;
  for (int64_t i = 0; i < (N - real) * row; ++i) padding[i] = int32_t(i % experts_NLk.size(2));
  return padded;
}

void CausalLm::gather_record(TensorView work_NLk, TensorView record_NLk) {
  const int64_t N = work_NLk.size(0), n = N / parallel_.tp().size(), row = work_NLk.size(1) * work_NLk.size(2);
  const TensorView all = experts_rows(gathered_record_, N);
  parallel_.tp().all_gather(work_NLk.slice(0, parallel_.tp().rank() * n, n).reshape({n * row}), all.reshape({N * row}));
  copy_convert(all.slice(0, 0, record_NLk.size(0)), record_NLk);
}

ModelOutputs CausalLm::forward(const ModelInputs& in, EntropyOutput entropy) {
  if (own_.residual.empty()) own_ = grads_ ? make_activations() : make_forward_only_activations();
  return forward(in, entropy, own_, own_.forward_only ? SavedFor::nothing : SavedFor::backward);
}

void CausalLm::backward(const OutputGrads& grads, kernels::Accumulate linear_weight_grads) {
  backward(grads, linear_weight_grads, own_);
}

void CausalLm::settle(Activations& a, size_t l) {
  if (a.moving[l].valid()) a.moving[l].get();
}

void CausalLm::prefetch(Activations& a, size_t l) {
  settle(a, l);
  a.moving[l] = std::async(std::launch::async, [&group = a.offloaded[l]] { group.onload(); });
}

void CausalLm::make_room(Activations& a, size_t l) {
  settle(a, l);
  // Dropped after its backward, so empty; only a forward whose backward never ran left a copy, which this forward
  // overwrites.
  a.offloaded[l].onload();
}

ModelOutputs CausalLm::forward(const ModelInputs& in, EntropyOutput entropy, Activations& a, SavedFor saved_for) {
  validate(in);
  RF_CHECK(a.offloaded.size() == size_t(offloaded_layers_), "forward: activations made for another offload");
  const bool head_saved = config_.head == HeadKind::lm ? !a.head.xf_NC.empty() : !a.value.xf_NC.empty();
  RF_CHECK(a.residual.size() == (a.forward_only ? 2 : span_.hf_layers.size() + 1) && head_saved == span_.post_process,
           "forward: activations made for another shape of model chunk");
  RF_CHECK(!a.forward_only || saved_for == SavedFor::nothing,
           "forward: forward-only activations keep nothing a backward could read");
  a.inputs = in;
  // Sequence parallel's padding rows get experts too (any: they take no loss), so each rank's rows are whole.
  if (!in.replay_experts_NLk.empty() && in.padding_tokens > 0)
    a.inputs.replay_experts_NLk = padded_experts(in.replay_experts_NLk, in.batch * in.seq_len, a.replay_NLk);
  a.forward_done = false;
  a.moe_dropped = 0;
  const int64_t N = in.batch * in.seq_len;
  const LayerContext ctx = context();
  const BatchShape shape = batch_shape(in);
  const int64_t n = shape.local_tokens;

  auto params_needed = [&](int64_t layer) {
    if (params_needed_hook_) params_needed_hook_(layer);
  };
  if (!a.offloaded.empty()) make_room(a, 0);
  const TensorView input_NC = rows(residual_entry(a, 0), n);
  if (!span_.pre_process) {
    copy_convert(in.hidden_NC, input_NC);
  } else {
    params_needed(-1);
    // Vocab-parallel embedding: each rank fills the rows of the tokens it holds, the TP sum the rest
    // (reduce-scattered into this rank's rows with SP).
    if (parallel_.sequence_parallel()) {
      kernels_.embedding_forward({vocab_start_}, in.tokens_N, embed_w_VC_, rows(sp_full_NC_, N));
      dist::SpScatter::forward(parallel_.tp(), rows(sp_full_NC_, N), input_NC);
    } else {
      kernels_.embedding_forward({vocab_start_}, in.tokens_N, embed_w_VC_, input_NC);
      dist::TpReduce::forward(parallel_.tp(), input_NC);
    }
  }
  // Router recording: with SP each rank's rows into a whole micro-batch's record, gathered over TP after the layers.
  TensorView record_NLk = in.record_experts_NLk;
  if (!record_NLk.empty() && parallel_.sequence_parallel()) record_NLk = experts_rows(record_work_, N);
  for (size_t i = 0; i < layer_weights_.size(); ++i) {
    params_needed(span_.hf_layers[i]);
    if (distributes_input(i) && !a.forward_only) keep_input_slice(a, i, n);
    if (i + 1 < a.offloaded.size()) make_room(a, i + 1);  // layer i writes its output, layer i + 1's input
    layer_forward(ctx, shape, a, i);
    if (is_moe(i)) a.moe_dropped += layer_slots(a, i).moe.dropped;
    if (const TensorView record = layer_experts(record_NLk, i); !record.empty())
      routed_experts(rows(layer_slots(a, i).moe.routing_map_NE, n), moe_->config().router.top_k, record);
    if (moe_losses_ && is_moe(i) && saved_for == SavedFor::backward)
      moe_losses_->count(moe_index_[i], rows(layer_slots(a, i).moe.logits_NE, n), documents(in), real_tokens(in),
                         moe_loss_group(), a.moe_losses);
    // Copied out at once (the next layer's forward would compete for the same cores), or dropped when no backward
    // reads it.
    if (i < a.offloaded.size())
      a.offloaded[i].offload(saved_for == SavedFor::backward ? OffloadContents::keep : OffloadContents::discard);
  }
  if (moe_losses_ && saved_for == SavedFor::backward) moe_losses_->pool(a.moe_losses);
  if (!in.record_experts_NLk.empty() && parallel_.sequence_parallel()) gather_record(record_NLk, in.record_experts_NLk);
  a.forward_done = true;
  last_forward_ = &a;
  ModelOutputs out;
  const TensorView output_NC = rows(residual_entry(a, layer_weights_.size()), n);
  if (!span_.post_process) {
    out.hidden_NC = output_NC;
    return out;
  }
  params_needed(config_.num_hidden_layers);
  if (config_.head != HeadKind::lm) {
    value_head_.forward(ctx, shape, value_weights_, output_NC, a.value);
    out.values_N = rows(a.value.values_N, N);
    return out;
  }
  const bool with_entropy = entropy == EntropyOutput::compute;
  head_.forward(ctx, shape, head_weights_, output_NC, in.targets_N, in.temperature, with_entropy, a.head);
  return ModelOutputs{rows(a.head.logp_N, N), with_entropy ? rows(a.head.entropy_N, N) : TensorView(),
                      rows(a.head.logits_NV, N), vocab_start_};
}

void CausalLm::backward(const OutputGrads& grads, kernels::Accumulate linear_weight_grads, Activations& a) {
  RF_CHECK(grads_ != nullptr, "backward on a model built without a GradBuffer");
  RF_CHECK(a.forward_done, "backward without a forward");
  RF_CHECK(!a.forward_only, "backward after a forward-only pass: its activations were not kept");
  const ModelInputs& in = a.inputs;
  const int64_t N = in.batch * in.seq_len;
  const DType stat = stat_dtype_for(params_.dtype());
  auto check_grad = [&](TensorView grad, const char* what) {
    check_shape(grad, Shape{N}, what);
    check_dtype(grad, stat, what);
  };
  const bool lm = config_.head == HeadKind::lm;
  LayerContext ctx = context();
  ctx.linear_weight_grads = linear_weight_grads;
  const BatchShape shape = batch_shape(in);
  const int64_t n = shape.local_tokens;
  TensorView dresid_NC = rows(dresid_NC_, n);  // this rank's rows of the residual stream's gradient

  auto grads_ready = [&](int64_t layer) {
    if (grads_ready_hook_) grads_ready_hook_(layer);
  };
  if (!span_.post_process) {
    RF_CHECK(grads.dlogp_N.empty() && grads.dentropy_N.empty() && grads.dvalues_N.empty(),
             "backward: a model chunk without the head takes only dhidden_NC");
    check_shape(grads.dhidden_NC, Shape{n, config_.hidden_size}, "dhidden_NC");
    copy_convert(grads.dhidden_NC, dresid_NC);
  } else if (lm) {
    RF_CHECK(grads.dvalues_N.empty(), "backward: dvalues_N given to an LM, which has no value head");
    RF_CHECK(grads.dhidden_NC.empty(), "backward: dhidden_NC given to a model chunk with the head");
    check_grad(grads.dlogp_N, "dlogp_N");
    if (!grads.dentropy_N.empty()) check_grad(grads.dentropy_N, "dentropy_N");
    head_.backward(ctx, shape, head_weights_, head_grads_, rows(a.residual.back(), n), in.targets_N, in.temperature,
                   a.head, head_scratch_, grads.dlogp_N, grads.dentropy_N, dresid_NC);
    grads_ready(config_.num_hidden_layers);
  } else {
    RF_CHECK(grads.dlogp_N.empty() && grads.dentropy_N.empty(),
             "backward: dlogp_N / dentropy_N given to a {} model, which has no LM head", head_name(config_.head));
    RF_CHECK(grads.dhidden_NC.empty(), "backward: dhidden_NC given to a model chunk with the head");
    check_grad(grads.dvalues_N, "dvalues_N");
    value_head_.backward(ctx, shape, value_weights_, value_grads_, rows(a.residual.back(), n), a.value,
                         value_scratch_, grads.dvalues_N, dresid_NC);
    grads_ready(config_.num_hidden_layers);
  }
  for (size_t i = layer_weights_.size(); i-- > 0;) {
    // An offloaded layer's tensors are back before its backward, the layer below's on their way meanwhile.
    if (i < a.offloaded.size()) {
      if (i + 1 == a.offloaded.size()) prefetch(a, i);
      settle(a, i);
      if (i > 0) prefetch(a, i - 1);
    }
    // A recomputed group's last layer: its forward runs again from the group's saved input first.
    if (const auto* group = recompute_.group_of(int64_t(i)); group && group->second == int64_t(i) + 1) {
      if (distributes_input(size_t(group->first))) gather_input_slices(a, size_t(group->first), n);
      const LayerContext forward_ctx = context();
      for (int64_t l = group->first; l < group->second; ++l) layer_forward(forward_ctx, shape, a, size_t(l));
    }
    const LayerSlots s = layer_slots(a, i);
    if (is_moe(i)) {
      // recompute_modules' moe: the block's forward again from its kept input into the shared tensors (the same
      // bits, the same exchanges with the EP ranks; it rewrites the layer's output with the same values).
      if (recompute_policy_.selective.moe && !recompute_.recomputes(int64_t(i)))
        moe_->forward(ctx, shape, layer_weights_[i].moe, rows(s.mid, n), rows(s.output, n), s.moe, moe_scratch_,
                      layer_experts(in.replay_experts_NLk, i));
      TensorView dlogits_extra_NE;
      if (moe_losses_ && grads.moe_loss_scale != 0) {
        dlogits_extra_NE = rows(dlogits_extra_NE_, n);
        moe_losses_->backward(moe_index_[i], rows(s.moe.logits_NE, n), documents(in), real_tokens(in),
                              grads.moe_loss_scale, a.moe_losses, dlogits_extra_NE);
      }
      moe_->backward(ctx, shape, layer_weights_[i].moe, layer_grads_[i].moe, rows(s.mid, n), s.moe, moe_scratch_,
                     dresid_NC, dlogits_extra_NE);
    } else {
      mlp_.backward(ctx, shape, layer_weights_[i].mlp, layer_grads_[i].mlp, rows(s.mid, n), s.mlp, discarded_.mlp,
                    mlp_scratch_, dresid_NC);
    }
    attention_.backward(ctx, shape, layer_weights_[i].attention, layer_grads_[i].attention, rows(s.input, n),
                        s.attention, discarded_.attention, attention_scratch_, dresid_NC);
    if (i < a.offloaded.size()) a.offloaded[i].offload(OffloadContents::discard);  // read for the last time
    grads_ready(span_.hf_layers[i]);
  }
  last_backward_tokens_ = n;
  if (!span_.pre_process) return;
  if (parallel_.sequence_parallel()) {
    dist::SpScatter::backward(parallel_.tp(), dresid_NC, rows(sp_full_NC_, N));
    kernels_.embedding_backward({vocab_start_}, in.tokens_N, rows(sp_full_NC_, N), embed_grad_VC_);
  } else {
    dist::TpReduce::backward(parallel_.tp(), dresid_NC);
    kernels_.embedding_backward({vocab_start_}, in.tokens_N, dresid_NC, embed_grad_VC_);
  }
  grads_ready(-1);
}

bool CausalLm::distributes_input(size_t l) const {
  return residual_kept(recompute_, !group_inputs_[0].empty(), int64_t(l)) == ResidualKept::tp_slice;
}

TensorView CausalLm::residual_entry(Activations& a, size_t l) {
  if (a.forward_only) return a.residual[l % 2];
  const auto* group = recompute_.group_of(int64_t(l));
  if (distributes_input(l)) return group_inputs_[size_t(group - recompute_.groups.data()) % 2];
  if (!group || group->first == int64_t(l)) return a.residual[l];
  return recompute_scratch_.residual[l - size_t(group->first)];
}

CausalLm::LayerSlots CausalLm::layer_slots(Activations& a, size_t i) {
  if (a.forward_only)
    return {a.residual[i % 2], a.mid[0], a.attention[0], a.mlp[0], a.moe[0], a.residual[(i + 1) % 2]};
  const auto* group = recompute_.group_of(int64_t(i));
  if (!group) {
    MoeSaved& moe = recompute_policy_.selective.moe ? discarded_.moe : a.moe[i];
    return {residual_entry(a, i), a.mid[i], a.attention[i], a.mlp[i], moe, residual_entry(a, i + 1)};
  }
  Activations& s = recompute_scratch_;
  const size_t k = i - size_t(group->first);
  return {residual_entry(a, i), s.mid[k], s.attention[k], s.mlp[k], s.moe[k], residual_entry(a, i + 1)};
}

namespace {

// Rank r's part of a distributed group input of `numel` elements: [begin, end) of the flattened rows.
std::pair<int64_t, int64_t> input_slice(int64_t numel, int64_t rank, int64_t size) {
  const int64_t chunk = (numel + size - 1) / size;
  return {std::min(numel, rank * chunk), std::min(numel, (rank + 1) * chunk)};
}

}  // namespace

void CausalLm::keep_input_slice(Activations& a, size_t l, int64_t n) {
  const int64_t numel = n * config_.hidden_size;
  const auto [begin, end] = input_slice(numel, parallel_.tp().rank(), parallel_.tp().size());
  const TensorView whole = rows(residual_entry(a, l), n).reshape({numel});
  copy_convert(whole.slice(0, begin, end - begin), a.residual[l].view().slice(0, 0, end - begin));
}

void CausalLm::gather_input_slices(Activations& a, size_t l, int64_t n) {
  dist::ProcessGroup& tp = parallel_.tp();
  const int64_t numel = n * config_.hidden_size;
  std::vector<int64_t> counts;
  for (int r = 0; r < tp.size(); ++r) {
    const auto [begin, end] = input_slice(numel, r, tp.size());
    counts.push_back(end - begin);
  }
  tp.all_gather_v(a.residual[l].view().slice(0, 0, counts[size_t(tp.rank())]),
                  rows(residual_entry(a, l), n).reshape({numel}), counts);
}

void CausalLm::layer_forward(const LayerContext& ctx, const BatchShape& shape, Activations& a, size_t i) {
  const int64_t n = shape.local_tokens;
  const LayerSlots s = layer_slots(a, i);
  attention_.forward(ctx, shape, layer_weights_[i].attention, rows(s.input, n), rows(s.mid, n), s.attention,
                     discarded_.attention);
  if (is_moe(i))
    moe_->forward(ctx, shape, layer_weights_[i].moe, rows(s.mid, n), rows(s.output, n), s.moe, moe_scratch_,
                  layer_experts(a.inputs.replay_experts_NLk, i));
  else
    mlp_.forward(ctx, shape, layer_weights_[i].mlp, rows(s.mid, n), rows(s.output, n), s.mlp, discarded_.mlp);
}

TensorView CausalLm::real_tokens(const ModelInputs& in) {
  if (in.context == nullptr && in.padding_tokens == 0) return TensorView();
  const int64_t n = in.context ? in.context->local_tokens() : in.batch * in.seq_len;
  uint8_t* real = real_tokens_N_.data<uint8_t>();
  if (in.context) {
    const int rank = parallel_.cp().rank();
    for (int64_t t = 0; t < n; ++t) real[t] = in.context->source_token(rank, t) >= 0;
  } else {
    for (int64_t t = 0; t < n; ++t) real[t] = t < n - in.padding_tokens;
  }
  if (!parallel_.sequence_parallel()) return rows(real_tokens_N_, n);
  const int64_t local = n / parallel_.tp().size();  // sequence parallel: this TP rank's rows of them
  return TensorView(real_tokens_N_).slice(0, parallel_.tp().rank() * local, local);
}

dist::ProcessGroup& CausalLm::moe_loss_group() const {
  return parallel_.sequence_parallel() ? parallel_.group(dist::GroupKind::tp_cp) : parallel_.cp();
}

std::span<const int32_t> CausalLm::documents(const ModelInputs& in) {
  if (!in.cu_seqlens.empty()) return in.cu_seqlens;
  row_documents_.resize(size_t(in.batch + 1));
  for (int64_t b = 0; b <= in.batch; ++b) row_documents_[size_t(b)] = int32_t(b * in.seq_len);
  return row_documents_;
}

int64_t CausalLm::token_multiple() const { return parallel_.sequence_parallel() ? parallel_.tp().size() : 1; }

TensorView CausalLm::vocab_logits(int64_t n) {
  RF_CHECK(config_.head == HeadKind::lm && span_.post_process, "vocab_logits: a {} model{} has no LM head",
           head_name(config_.head), span_.post_process ? "" : " chunk without the head");
  RF_CHECK(last_forward_ != nullptr, "vocab_logits: no forward yet");
  const Activations& a = *last_forward_;
  RF_CHECK(a.forward_done && n >= 0 && n < a.inputs.batch * a.inputs.seq_len,
           "vocab_logits: token {} of the last forward", n);
  const TensorView row_V = a.head.logits_NV.view().select(0, n);
  dist::ProcessGroup& tp = parallel_.tp();
  if (tp.size() == 1) return row_V;
  if (gathered_logits_V_.numel() != tp.size() * vocab_rows_)
    gathered_logits_V_ = Tensor({tp.size() * vocab_rows_}, params_.dtype(), workspace_account_);
  tp.all_gather(row_V, gathered_logits_V_);
  return gathered_logits_V_.view().slice(0, 0, config_.vocab_size);
}

void CausalLm::finish_grads() {
  RF_CHECK(grads_ != nullptr, "finish_grads on a model built without a GradBuffer");
  dist::ProcessGroup& tp = parallel_.tp();
  if (tp.size() == 1) return;
  // q_norm / k_norm scale every head; each rank saw only its own heads (Megatron sums qk_layernorm
  // weights over TP). With sequence parallel the other norms saw only this rank's tokens: summed too;
  // without, they saw all tokens and are identical on every rank already.
  auto sum = [&](TensorView grad) {
    if (!grad.empty()) tp.all_reduce(grad, dist::ReduceOp::sum);
  };
  // An MoE layer's router (and shared-expert gate) saw only this rank's tokens with SP, as its norm; whole experts
  // (expert_tensor_parallel_size 1) too: each TP rank ran them on its own tokens' rows.
  const bool sp = parallel_.sequence_parallel();
  const bool whole_experts = moe_ && moe_->config().parallel.etp == 1;
  for (const LayerParams& g : layer_grads_) {
    sum(g.attention.q_norm_w_D);
    sum(g.attention.k_norm_w_D);
    if (!sp) continue;
    for (const TensorView& grad : {g.attention.norm_w_C, g.mlp.norm_w_C, g.moe.norm_w_C, g.moe.router_EC,
                                   g.moe.shared_gate_1C})
      sum(grad);
    if (whole_experts)
      for (const TensorView& grad : {g.moe.wg_EFC, g.moe.wu_EFC, g.moe.wd_ECF}) sum(grad);
  }
  if (!sp || !span_.post_process) return;
  if (config_.head == HeadKind::lm) {
    sum(head_grads_.norm_w_C);
  } else {  // the replicated score too saw only this rank's rows (value_head.h)
    sum(value_grads_.norm_w_C);
    sum(value_grads_.w_1C);
    sum(value_grads_.b_1);
  }
}

}  // namespace rf::model
