// CausalLm: the decoder-only language model (Llama, Qwen2, Qwen3; Qwen2-MoE and Qwen3-MoE, whose MoE layers run
// MoeBlock in place of the MLP: moe_config.h says which) with a hand-written
// backward (DESIGN §2). It reads weights from a ParamStore and adds gradients into a GradBuffer,
// both addressed by Hugging Face names; it owns only activations, sized once by `reserve`, so a
// training step does not allocate.
//
// forward:  x0 = embed(tokens); x_{l+1} = mlp(attn(x_l)) with residuals; then the config's head
//           (HeadKind): logp, entropy = lm_head(x_L), or values = value_head(x_L) (value_head.h)
// backward: the same in reverse; the caller's loss supplies dL/dlogp (and dL/dentropy), or dL/dvalues.
// Tensor parallel (weights sharded by the ParamLayout; tp_region.h for the layer boundaries), with or
// without sequence parallel: with SP the residual stream x_l holds this rank's N / tp consecutive
// tokens (N must divide), everything else all N; inputs and outputs (logp, entropy, values) are all N
// tokens on every rank.
// Pipeline parallel: a CausalLm runs one chunk of the model (ModelSpan: some consecutive layers, with or without
// the embedding and the head). A chunk without the embedding takes the previous chunk's output as
// ModelInputs::hidden_NC; one without the head returns its output as ModelOutputs::hidden_NC and takes dL/d
// of it as OutputGrads::dhidden_NC; input_grad() is then what goes back to the previous chunk. Several
// micro-batches can be between their forward and backward (the pipeline's in-flight micro-batches): each
// saves into its own Activations (make_activations), which forward and backward are given. Activations have two
// parts: the layers' (any chunk with as many layers can use them) and the head's, so a pipeline stage pools the
// layers' part over all its chunks and the head's apart, joining them per micro-batch on the head's chunk.
// Legend: N tokens (B*T), C hidden, V vocab, L layers.
#pragma once

#include <array>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include "core/offload.h"
#include "model/attention_block.h"
#include "model/lm_head.h"
#include "model/mlp_block.h"
#include "model/moe_block.h"
#include "model/moe_losses.h"
#include "model/model_inputs.h"
#include "model/paged_batch.h"
#include "model/param_store.h"
#include "model/recompute_policy.h"
#include "model/value_head.h"

namespace rf::model {

// The local shapes a chunk's activations are sized by (activation_plan.h).
struct ActivationShape {
  int64_t max_tokens = 0;  // N: a micro-batch's capacity (padded for sequence parallel)
  int64_t tp_size = 1;
  bool sequence_parallel = false;
  int64_t vocab_columns = 0;  // an LM head's columns of the padded vocabulary on this TP rank
  DType dtype = DType::f32;
  MoeParallel moe_parallel;  // an MoE layer's experts receive up to EP (x ETP with SP) x its routed rows
  CapacityConfig moe_capacity;  // padded to capacity, an MoE layer may route more rows than N k
};

// The part of the model a CausalLm runs. Noop layers (pipeline_split.h) are identities: they have no place here.
struct ModelSpan {
  std::vector<int64_t> hf_layers;  // consecutive HF layer indices (may be none)
  bool pre_process = true;         // runs the embedding
  bool post_process = true;        // runs the final norm and the head
  static ModelSpan whole(const ModelConfig& config);
  bool is_whole(const ModelConfig& config) const;
};

class CausalLm {
 public:
  // `grads` may be null for inference-only use. The weights' layout must be for the parallel
  // context's TP rank (ParamLayout::for_model with that rank and size).
  // The weights' layout must hold the span's parameters (ParamLayout::for_stage).
  CausalLm(const ModelConfig& config, const ParamStore& params, GradBuffer* grads,
           const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
           MemoryTracker* tracker = nullptr);
  CausalLm(const ModelConfig& config, ModelSpan span, const ParamStore& params, GradBuffer* grads,
           const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, MemoryTracker* tracker);

  const ModelConfig& config() const { return config_; }
  DType dtype() const { return params_.dtype(); }
  int64_t capacity() const { return capacity_; }

  const ModelSpan& span() const { return span_; }

  // What one micro-batch's forward saves for its backward, for micro-batches of up to capacity() tokens.
  struct Activations {
    std::vector<Tensor> residual;  // x_0 .. x_L over the span's layers, and h_l (the mid-layer residual) below
    std::vector<Tensor> mid;
    std::vector<AttentionSaved> attention;
    std::vector<MlpSaved> mlp;
    std::vector<MoeSaved> moe;  // a layer's MoE block's (an MoE layer's mlp entry and a dense layer's moe entry empty)
    MoeLossState moe_losses;  // set_moe_losses: the MoE layers' counts, and the losses' values of the last backward
    LmHeadSaved head;  // with the head
    ValueHeadSaved value;
    ModelInputs inputs;  // of its forward
    Tensor replay_NLk;   // router replay with sequence parallel's padding: the padded experts its inputs point to
    int64_t moe_dropped = 0;  // (token, expert) pairs the MoE layers' capacity dropped in its forward (this rank's)
    bool forward_done = false;
    // make_forward_only_activations: one layer's tensors, which every layer of a forward-only pass writes in turn,
    // and two residual-stream buffers it alternates between; no backward can read them.
    bool forward_only = false;
    // Activation offload (set_activation_offload): layer l's saved tensors (its input, mid and blocks' saves), for
    // the first layers; each group on the host tier but around its layer's forward and backward, and its prefetch
    // in flight.
    std::vector<OffloadGroup> offloaded;
    std::vector<std::future<void>> moving;

    template <class F>
    void for_each_tensor(F&& f) {
      for (Tensor& t : residual) f(t);
      for (Tensor& t : mid) f(t);
      for (AttentionSaved& saved : attention) saved.for_each_tensor(f);
      for (MlpSaved& saved : mlp) saved.for_each_tensor(f);
      for (MoeSaved& saved : moe) saved.for_each_tensor(f);
      head.for_each_tensor(f);
      value.for_each_tensor(f);
    }
    int64_t bytes();  // what the tracker counts for them
  };

  // Activation recompute of this chunk's layers (recompute_policy.h); before reserve, which allocates the
  // recomputed group's scratch (one group's activations) and the selectively discarded tensors' (one layer's),
  // accounted to the tracker's activations. Then a micro-batch's Activations hold no tensors of a fully recomputed
  // layer but its group's input, and none a saving layer discards.
  void set_recompute(const RecomputePolicy& policy);
  const RecomputeGroups& recompute() const { return recompute_; }
  const RecomputePolicy& recompute_policy() const { return recompute_policy_; }
  // The local shapes this chunk's activations are sized by (activation_plan.h), after reserve.
  ActivationShape activation_shape() const;
  // Megatron's activation offload (cpu_offloading, megatron.md §7.3) of this chunk's first `num_layers` layers: a
  // micro-batch's saved tensors of such a layer are on the host tier (the tracker's host activations) but from just
  // before the layer below's forward (which writes its input) to the end of its own, and from a prefetch during
  // the layer above's backward (one layer ahead, on its own thread) to the end of its own backward: at most two
  // offloaded layers are on the device tier at any time. The copy out runs after the layer's forward, not beside
  // the next one (on a CPU both would compete for the same cores). Before make_activations; not with recompute
  // (Megatron refuses the two together). The contents come back bit for bit: no result changes.
  void set_activation_offload(int64_t num_layers);
  // The MoE layers' load-balancing losses (moe_losses.h) in training passes: counted by forwards that save for
  // backward, their gradients added by backwards given OutputGrads::moe_loss_scale. Before reserve.
  void set_moe_losses(const MoeLossConfig& config);
  // The MoE layers' expert capacity, GEMMs, dispatcher and shared-expert overlap (moe_block.h). Before reserve.
  void set_moe_experts(const MoeExpertOptions& options);
  int64_t offloaded_layers() const { return offloaded_layers_; }
  // Allocates the backward's workspace for micro-batches of up to max_tokens tokens (B*T); the first forward
  // given no Activations makes the model's own.
  void reserve(int64_t max_tokens);
  // Context parallel: where the ring attention's time went since the caller last reset it (context_attention.h).
  RingTimes& ring_times() { return context_scratch_.times; }
  // Activations for this model, accounted to the tracker's activations: both parts; the layers' part alone
  // (what any chunk with as many layers saves below its head); the head's alone (only a chunk with the head).
  Activations make_activations();
  Activations make_layer_activations();
  Activations make_head_activations();
  // For forward-only passes (SavedFor::nothing: the reference, a reward model, decoding): one layer's activations
  // and the head's, whatever the layer count. The forward without Activations uses these when the model has no
  // GradBuffer.
  Activations make_forward_only_activations();
  // The activations and the backward's workspace (what reserve allocated; not those of make_activations) given
  // back to the OS while the model is idle (false) and taken again (true): Tensor::set_resident, so no address
  // changes and the tracker's activations and workspace bytes drop meanwhile. Only between passes: a forward's saved
  // activations are gone once released. Taking them back can fail the device budget (the tracker's
  // error). forward_paged's scratch is not touched.
  void set_activations_resident(bool resident);
  bool activations_resident() const { return activations_resident_; }

  // The inputs' views must stay alive until backward has run. A value or score model returns only
  // values_N: it reads no targets (inputs.targets_N may be empty), temperature or `entropy`.
  // `saved` (default: the model's own) holds what backward of the same `saved` reads; a later forward into it
  // overwrites it.
  ModelOutputs forward(const ModelInputs& inputs, EntropyOutput entropy = EntropyOutput::compute);
  // A forward-only pass (SavedFor::nothing) offloads nothing: no backward reads what it saves.
  enum class SavedFor : uint8_t { backward, nothing };
  ModelOutputs forward(const ModelInputs& inputs, EntropyOutput entropy, Activations& saved,
                       SavedFor saved_for = SavedFor::backward);
  // Adds dL/dparams into the GradBuffer, from the gradients of the outputs this model has
  // (model_inputs.h's OutputGrads: dlogp_N and dentropy_N unless empty for an LM, dvalues_N for a value
  // model; a gradient of an output the model does not have is an error). With linear_weight_grads =
  // overwrite, the linear layers' weight (and bias) gradients are written instead of added: only for the
  // first backward after the GradBuffer was zeroed, where both give the same values (see LayerContext).
  void backward(const OutputGrads& grads, kernels::Accumulate linear_weight_grads = kernels::Accumulate::add);
  void backward(const OutputGrads& grads, kernels::Accumulate linear_weight_grads, Activations& saved);
  // The loss's gradient with respect to the chunk's input after the last backward (this rank's rows of the
  // residual stream: the embedding's output, or hidden_NC without the embedding), valid until the next
  // backward: every gradient that backward passed down through the layers arrives here, so a NaN or Inf born
  // inside a backward shows in it (TrainEngine's NaN check names the micro-batch by it), and a pipeline sends
  // it to the previous chunk.
  TensorView input_grad() const { return rows(dresid_NC_, last_backward_tokens_); }
  // Inference over a paged KV cache, the rollout engine's step (model/paged_batch.h): runs the
  // batch's new tokens through the model, writing their keys and values into `cache` (one per layer),
  // and returns the logits of the tokens at `logit_rows` (the last of each sequence that samples) over
  // the real vocabulary, gathered over TP so every rank holds the same rows: [R, V] in the model's
  // dtype, before the temperature; valid until the next call. No sequence parallel. reserve_paged first.
  // LM heads only.
  TensorView forward_paged(const PagedBatch& batch, std::span<const PagedLayerCache> cache,
                           std::span<const int64_t> logit_rows);
  // Scratch for forward_paged: one layer's activations for up to max_tokens new tokens, and the head
  // for up to max_logit_rows rows. Separate from reserve: the rollout needs no per-layer saves.
  void reserve_paged(int64_t max_tokens, int64_t max_logit_rows);
  // Called by backward, in this order, as parts of the GradBuffer are written for this backward:
  // with `layer` = num_hidden_layers once the final norm's (and an untied lm_head's or the score's) are,
  // with l once decoder layer l's are, and with -1 once the embedding's are (tied: the lm_head's
  // part of it too). Data parallelism starts reducing a gradient bucket from here.
  using GradsReadyHook = std::function<void(int64_t layer)>;
  void set_grads_ready_hook(GradsReadyHook hook) { grads_ready_hook_ = std::move(hook); }
  // Called by forward before it reads a part of the weights: with -1 before the embedding, l before
  // decoder layer l, num_hidden_layers before the final norm and the head. The distributed optimizer
  // finishes gathering those weights here when its all-gather overlaps the forward.
  using ParamsNeededHook = std::function<void(int64_t layer)>;
  void set_params_needed_hook(ParamsNeededHook hook) { params_needed_hook_ = std::move(hook); }
  // A micro-batch's token count must be a multiple of this: the TP size with sequence parallel (the
  // residual stream splits the tokens evenly over TP), else 1. engine/sequence_padding pads to it.
  int64_t token_multiple() const;
  // Token n's logits (of the last forward, before the temperature) over the real vocabulary:
  // gathered over the TP ranks when the vocabulary is split, so every rank gets the same row.
  // Valid until the next call or forward. LM heads only.
  TensorView vocab_logits(int64_t n);
  // Once after the last backward of a step (Megatron's finalize_model_grads, TP part): sums over
  // the TP ranks the gradients each rank computed from its part of the activations only. A no-op
  // at TP 1. (Summing after every micro-batch would add the earlier ones again.)
  void finish_grads();

 private:
  // What one micro-batch's forward saves for its backward.
  void validate(const ModelInputs& inputs) const;
  LayerContext context() const;
  BatchShape batch_shape(const ModelInputs& inputs) const;
  // Where layer i's forward reads its input and writes what it saves and its output: the micro-batch's
  // Activations, or for a recomputed layer the group's scratch (its group's input and output stay in `a`).
  struct LayerSlots {
    TensorView input, mid;
    AttentionSaved& attention;
    MlpSaved& mlp;
    MoeSaved& moe;
    TensorView output;
  };
  LayerSlots layer_slots(Activations& a, size_t i);
  // Where residual-stream entry l (a layer's input, or the chunk's output at l = L) lives while layers run: the
  // micro-batch's own tensor, the recomputed group's scratch inside a group, or, for a group input distributed over
  // TP, one of group_inputs_ (groups alternate between the two, so a group's recompute writing its output never
  // overwrites its own input).
  TensorView residual_entry(Activations& a, size_t l);
  // distribute_saved_activations: the group input of layer l (its group's first) is distributed over TP.
  bool distributes_input(size_t l) const;
  // This rank's 1/TP of a distributed group input's first n rows, kept in (or restored from) the micro-batch's slice.
  void keep_input_slice(Activations& a, size_t l, int64_t n);
  void gather_input_slices(Activations& a, size_t l, int64_t n);
  // Activation offload: waits for group l's prefetch in flight (rethrowing its error); starts one; brings group l
  // to the device tier without its contents, for a layer about to write them.
  static void settle(Activations& a, size_t l);
  static void prefetch(Activations& a, size_t l);
  static void make_room(Activations& a, size_t l);
  // Rows of the residual stream a buffer holds: the capacity's, or with sequence parallel this rank's share.
  int64_t local_capacity() const;
  void layer_forward(const LayerContext& ctx, const BatchShape& shape, Activations& a, size_t i);
  // Router replay and recording (model_inputs.h): an experts record's shape, and layer i's [N, k] slice of one.
  void check_experts(TensorView experts_NLk, int64_t N, const char* what) const;
  TensorView layer_experts(TensorView experts_NLk, size_t i) const;
  // Router replay under SP: the real tokens' experts, with sequence parallel's padding rows filled, in `buffer`
  // (N rows); and recording: this TP rank's rows of work_NLk gathered, the real rows into record_NLk.
  TensorView padded_experts(TensorView experts_NLk, int64_t N, Tensor& buffer) const;
  // The first N rows of an [capacity, L_moe, k] i32 buffer, allocated on first use.
  TensorView experts_rows(Tensor& buffer, int64_t N) const;
  void gather_record(TensorView work_NLk, TensorView record_NLk);

  ModelConfig config_;
  ModelSpan span_;
  const ParamStore& params_;
  GradBuffer* grads_;
  const kernels::KernelRegistry& kernels_;
  dist::ParallelContext& parallel_;
  TensorAccount activations_account_, workspace_account_;

  AttentionBlock attention_;
  MlpBlock mlp_;
  std::optional<MoeBlock> moe_;  // models with MoE layers
  int64_t vocab_rows_, vocab_start_;  // this TP rank's rows of the (padded) vocabulary
  LmHead head_;           // config_.head == lm
  ValueHead value_head_;  // value and score heads

  // Parameter and gradient views, bound by name once (a step does no name lookups).
  struct LayerParams {
    AttentionParams attention;
    MlpParams mlp;  // dense layers
    MoeParams moe;  // MoE layers
  };
  // The ranks a micro-batch's tokens are split over (CP, and TP with SP): the load-balancing counts' sum.
  dist::ProcessGroup& moe_loss_group() const;
  bool is_moe(size_t i) const { return config_.moe.is_moe_layer(span_.hf_layers[i]); }
  // The micro-batch's documents as row offsets (cu_seqlens, or one per row when it has none).
  std::span<const int32_t> documents(const ModelInputs& inputs);
  // u8 over this rank's rows, 0 at the context-parallel split's or sequence parallel's padding rows (empty when
  // every row is real).
  TensorView real_tokens(const ModelInputs& inputs);
  // A layer's saved tensors in a micro-batch's Activations (or a recompute group's scratch): its MLP's or MoE's.
  void reserve_layer(Activations& a, size_t slot, bool moe, const SelectiveRecompute& discard);
  TensorView embed_w_VC_, embed_grad_VC_;
  std::vector<LayerParams> layer_weights_, layer_grads_;
  LmHeadParams head_weights_, head_grads_;
  ValueHeadParams value_weights_, value_grads_;

  int64_t capacity_ = 0;
  int64_t offloaded_layers_ = 0;
  bool activations_resident_ = true;
  Activations own_;  // forward's and backward's when not given any
  RecomputePolicy recompute_policy_;
  RecomputeGroups recompute_;
  Activations recompute_scratch_;  // one group's layers (residual[0] unused: the group's input is saved)
  std::array<Tensor, 2> group_inputs_;  // distribute_saved_activations: whole group inputs, [capacity, C] each
  // Selective recompute: the tensors saving layers discard, for the layer running forward or backward.
  struct Discarded {
    AttentionSaved attention;
    MlpSaved mlp;
    MoeSaved moe;  // recompute_modules' moe: an MoE layer's whole block
  };
  Discarded discarded_;
  AttentionScratch attention_scratch_;
  // Context parallel only; mutable as context() hands it out (its tensors are workspace, like the views above).
  mutable ContextAttentionScratch context_scratch_;
  MlpScratch mlp_scratch_;
  MoeScratch moe_scratch_;
  std::optional<MoeLosses> moe_losses_;
  std::vector<int64_t> moe_index_;  // a layer's index among the chunk's MoE layers (-1: dense)
  Tensor dlogits_extra_NE_;         // the losses' gradient of one MoE layer's router logits
  std::vector<int32_t> row_documents_;
  Tensor real_tokens_N_;
  Tensor record_work_, gathered_record_;  // router recording with SP (gather_record)
  LmHeadScratch head_scratch_;
  ValueHeadScratch value_scratch_;
  Tensor dresid_NC_;
  Tensor gathered_logits_V_;  // TP > 1: one row of every rank's logits, rank-major
  Tensor sp_full_NC_, sp_local_NC_;  // sequence parallel workspace (LayerContext)

  // forward_paged's scratch (reserve_paged): the residual stream in two buffers (x -> h -> x), one
  // layer's activations, and the head's rows.
  struct PagedScratch {
    int64_t max_tokens = 0, max_logit_rows = 0;
    Tensor x_NC, h_NC, x_RC, xf_RC, rstd_R, logits_RV, local_logits_RV, gathered_logits;
    AttentionSaved attention;
    MlpSaved mlp;
    MoeSaved moe;
    MoeScratch moe_scratch;
  };
  PagedScratch paged_;

  Activations* last_forward_ = nullptr;  // vocab_logits reads its logits
  int64_t last_backward_tokens_ = 0;  // input_grad()'s rows
  GradsReadyHook grads_ready_hook_;
  ParamsNeededHook params_needed_hook_;
};

}  // namespace rf::model
