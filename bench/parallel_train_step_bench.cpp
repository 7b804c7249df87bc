// Training-step throughput of TrainEngine on several ranks at the same global batch: one rank, data
// parallel, tensor parallel, pipeline parallel, context parallel. Run it alone for one rank, under `mpirun -np W`
// for W ranks (TP = --tp, PP = --pp, CP = --cp, DP = W / (TP PP CP)); bench/run_parallel_train_step_bench.sh runs
// the cases and prints the ratios to one rank.
//   usage: parallel_train_step_bench [--config large|tiny] [--tp N] [--pp N] [--vpp N] [--micro-batches M]
//                                    [--steps N] [--threads N] [--distributed-optimizer 0|1] [--overlap 0|1]
//                                    [--recompute none|uniform|block|selective] [--recompute-layers N]
//                                    [--recompute-modules core_attn,layernorm,mlp,activation]
//                                    [--dtype float32|bfloat16] [--swap-optimizer 0|1] [--reuse-fp32-param 0|1]
//                                    [--bucket-size N] [--cp N] [--cp-comm p2p|all_gather|a2a] [--rows B]
//                                    [--seq T]
// The global batch is B rows of T random tokens (train_step_setup.h); DP rank r runs rows
// [r B/DP, (r+1) B/DP) as M micro-batches of equal rows (default 1), the TP and PP ranks of a DP rank the same rows. A step is
// forward_backward, reduce_gradients, optimizer_step and lr_step, f32 unless --dtype says bfloat16. reduce_gradients
// is timed on its own: it is the gradient communication left exposed after the last backward (waiting for the DP
// buckets, all of them without --overlap, and the TP sums). Every time is the slowest rank's; after
// kWarmupSteps steps, `--steps` steps are timed and the medians reported.
// Output (rank 0): one `step <i> ...` line per timed step, then
//   parallel_train_step config=<c> world=<w> tp=<t> dp=<d> threads=<n> distributed_optimizer=<0|1>
//     overlap=<0|1> global_tokens=<B*T> step_ms=<median> tok_s=<r> fb_ms=<m> exposed_comm_ms=<m>
//     exposed_pct=<100 exposed/step> optimizer_ms=<m> device_peak_fb_mib=<m> device_peak_step_mib=<m>
// the device peaks being the tracker's during the last step's forward_backward and its optimizer_step (rank 0): what
// --swap-optimizer and --reuse-fp32-param lower. --bucket-size is megatron.bucket_size (default 4M elements): the
// overlapped gradient buckets and the slices of those two's optimizer step.
// With --pp > 1 each step also replays the schedule in the pipeline simulator with the step's measured per-chunk
// forward and backward times (each stage's mean per micro-batch, free p2p) and reports, medians over the steps:
//   pipeline bubble_measured=<b> bubble_simulated=<b> schedule_ms=<m> simulated_ms=<m>
// bubble = (schedule time - the busiest stage's compute) / that compute, measured from the ranks' clocks.
// With --cp > 1 and p2p (PP 1) each step also reports the ring attention's time, summed over the layers' forward and backward
// (model/context_attention.h's RingTimes), on the critical rank (the most compute: the others wait for it too), and
// what the transfers cost alone (a ring exchange of one block timed before training, times the step's exchanges):
//   ring compute_ms=<its blocks' compute> wait_ms=<its waiting for keys after the compute: exposed transfer>
//        imbalance_ms=<its compute - the least busy rank's> transfer_ms=<the step's exchanges, none overlapped>
//        hidden_pct=<100 (1 - wait / transfer)>
// --rows and --seq replace the config's global batch (B rows of T tokens: one document each).
// Legend: B rows, T tokens per row.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/stopwatch.h"
#include "engine/pipeline/pipeline_simulator.h"
#include "core/thread_pool.h"
#include "dist/guarded_run.h"
#include "dist/parallel_context.h"
#include "model/context_attention.h"
#include "train_step_setup.h"
#include "trainer/sft_loss.h"

namespace {

constexpr int kWarmupSteps = 2;

struct Options {
  std::string config = "large";
  int tp = 1;
  int pp = 1;
  int vpp = 1;
  int micro_batches = 1;
  int num_steps = 5;
  int num_threads = 0;  // 0: OMP_NUM_THREADS, else one per core
  bool distributed_optimizer = false;
  bool overlap = true;
  std::string recompute = "none";  // full recompute's method, selective, or none
  int recompute_layers = 1;
  std::string recompute_modules = "core_attn";  // with selective; `activation` is MindSpeed's activation function
  std::string dtype = "float32";
  bool swap_optimizer = false;
  bool reuse_fp32_param = false;
  int bucket_size = 4'000'000;  // elements; ~ a layer and a half (large)
  int cp = 1;
  std::string cp_comm = "p2p";
  int rows = 0, seq = 0;  // the global batch's rows and tokens per row; 0: the config's
};

int parse_count(const std::string& flag, const char* value) {
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || parsed < 0)
    throw rf::ConfigError(flag, "'" + std::string(value) + "': expected a non-negative integer");
  return int(parsed);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw rf::ConfigError(flag, "missing value");
    const char* value = argv[++i];
    if (flag == "--config") {
      o.config = value;
    } else if (flag == "--tp") {
      o.tp = std::max(1, parse_count(flag, value));
    } else if (flag == "--pp") {
      o.pp = std::max(1, parse_count(flag, value));
    } else if (flag == "--vpp") {
      o.vpp = std::max(1, parse_count(flag, value));
    } else if (flag == "--micro-batches") {
      o.micro_batches = std::max(1, parse_count(flag, value));
    } else if (flag == "--steps") {
      o.num_steps = std::max(1, parse_count(flag, value));
    } else if (flag == "--threads") {
      o.num_threads = parse_count(flag, value);
    } else if (flag == "--distributed-optimizer") {
      o.distributed_optimizer = parse_count(flag, value) != 0;
    } else if (flag == "--overlap") {
      o.overlap = parse_count(flag, value) != 0;
    } else if (flag == "--recompute") {
      o.recompute = value;
      if (o.recompute != "none" && o.recompute != "uniform" && o.recompute != "block" && o.recompute != "selective")
        throw rf::ConfigError(flag, "'" + o.recompute + "': expected none, uniform, block or selective");
    } else if (flag == "--recompute-modules") {
      o.recompute_modules = value;
    } else if (flag == "--recompute-layers") {
      o.recompute_layers = std::max(1, parse_count(flag, value));
    } else if (flag == "--dtype") {
      o.dtype = value;
    } else if (flag == "--swap-optimizer") {
      o.swap_optimizer = parse_count(flag, value) != 0;
    } else if (flag == "--reuse-fp32-param") {
      o.reuse_fp32_param = parse_count(flag, value) != 0;
    } else if (flag == "--bucket-size") {
      o.bucket_size = std::max(1, parse_count(flag, value));
    } else if (flag == "--cp") {
      o.cp = std::max(1, parse_count(flag, value));
    } else if (flag == "--cp-comm") {
      o.cp_comm = value;
      if (o.cp_comm != "p2p" && o.cp_comm != "all_gather" && o.cp_comm != "a2a")
        throw rf::ConfigError(flag, "'" + o.cp_comm + "': expected p2p, all_gather or a2a");
    } else if (flag == "--rows") {
      o.rows = parse_count(flag, value);
    } else if (flag == "--seq") {
      o.seq = parse_count(flag, value);
    } else {
      throw rf::ConfigError(flag, "unknown option (expected --config, --tp, --pp, --vpp, --micro-batches, --steps, "
                                  "--threads, --distributed-optimizer, --overlap, --recompute, --recompute-layers, "
                                  "--recompute-modules, --dtype, --swap-optimizer, --reuse-fp32-param, --bucket-size, "
                                  "--cp, --cp-comm, --rows, --seq)");
    }
  }
  return o;
}

struct PipelineStep {
  double bubble_measured = 0, bubble_simulated = 0, schedule_s = 0, simulated_s = 0;
};

// The step's pipeline as measured on every rank, and as the simulator replays it with the measured chunk times.
// Collective over `world`; the result is meaningful on rank 0.
PipelineStep pipeline_step(const rf::engine::TrainEngine& engine, const rf::dist::ParallelContext& parallel,
                           rf::dist::ProcessGroup& world, int pp, int vpp) {
  const rf::engine::PipelineTimes& t = engine.pipeline_times();
  const int64_t row = 1 + 2 * vpp + 2;  // pp rank, forward and backward per chunk, busy, schedule
  rf::Tensor mine({row}, rf::DType::f64), all({row * world.size()}, rf::DType::f64);
  double* m = mine.data<double>();
  m[0] = parallel.pp().rank();
  for (int v = 0; v < vpp; ++v) {
    m[1 + v] = t.forward_s[size_t(v)] / double(t.num_microbatches);
    m[1 + vpp + v] = t.backward_s[size_t(v)] / double(t.num_microbatches);
  }
  m[1 + 2 * vpp] = t.busy_s();
  m[2 + 2 * vpp] = t.schedule_s;
  world.all_gather(mine, all);
  rf::engine::pipeline::PipelineCosts costs = rf::engine::pipeline::uniform_costs(pp, vpp, 0, 0);
  double busiest = 0, schedule = 0;
  for (int r = 0; r < world.size(); ++r) {
    const double* a = all.data<double>() + r * row;
    const auto stage = size_t(a[0]);
    for (int v = 0; v < vpp; ++v) {
      costs.forward_seconds[stage][size_t(v)] = a[1 + v];
      costs.backward_seconds[stage][size_t(v)] = a[1 + vpp + v];
    }
    busiest = std::max(busiest, a[1 + 2 * vpp]);
    schedule = std::max(schedule, a[2 + 2 * vpp]);
  }
  const rf::engine::pipeline::SimulationReport simulated = rf::engine::pipeline::simulate_pipeline(
      rf::engine::pipeline::make_pipeline_schedule(
          {.num_stages = pp, .num_chunks = vpp, .num_microbatches = t.num_microbatches}),
      costs);
  return {(schedule - busiest) / busiest, simulated.bubble_fraction, schedule, simulated.step_seconds};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// What one ring step's transfer costs when nothing overlaps it: `count` elements of `dtype` sent to the next CP rank
// while the previous one's arrive, the slowest rank's median over 20 exchanges. Collective over `cp` and `world`.
double ring_exchange_seconds(rf::dist::ProcessGroup& cp, rf::dist::ProcessGroup& world, int64_t count,
                             rf::DType dtype) {
  const rf::Tensor out({count}, dtype), in({count}, dtype);
  rf::fill_zero(out);
  const int P = cp.size(), r = cp.rank();
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    world.all_reduce_scalar(0.0, rf::dist::ReduceOp::sum);
    const rf::Stopwatch clock;
    rf::dist::CommHandle receiving = cp.irecv(in, (r - 1 + P) % P, 9);
    rf::dist::CommHandle sending = cp.isend(out, (r + 1) % P, 9);
    receiving.wait();
    sending.wait();
    times.push_back(world.all_reduce_scalar(clock.seconds(), rf::dist::ReduceOp::max));
  }
  return median(times);
}

int run(const rf::dist::MpiRuntime& mpi, const Options& options) {
  const std::unique_ptr<rf::dist::ProcessGroup> world = mpi.world();
  const bool leader = world->rank() == 0;
  const rf::ThreadPool pool(options.num_threads, "--threads");
  const rf::kernels::KernelRegistry kernels;
  if (leader) std::printf("# %s\n# %s\n", pool.describe().c_str(), kernels.describe().c_str());

  rf::dist::ParallelDims dims;
  dims.world_size = world->size();
  dims.tensor_model_parallel_size = options.tp;
  dims.pipeline_model_parallel_size = options.pp;
  dims.context_parallel_size = options.cp;
  const rf::dist::CpCommType cp_comm = options.cp_comm == "a2a"          ? rf::dist::CpCommType::a2a
                                       : options.cp_comm == "all_gather" ? rf::dist::CpCommType::all_gather
                                                                         : rf::dist::CpCommType::p2p;
  if (options.cp > 1 && options.pp > 1) throw rf::ConfigError("--cp", "the ring's times are read with --pp 1");
  rf::dist::ParallelContext parallel =
      rf::dist::ParallelContext::create(rf::dist::RankLayout(dims), *world, false, cp_comm);
  const int dp = parallel.dp().size();
  rf::bench::BenchShape shape = rf::bench::bench_shape(options.config);
  if (options.rows > 0) shape.B = options.rows;
  if (options.seq > 0) shape.T = options.seq;
  if (shape.B % dp != 0)
    throw rf::ConfigError("--tp", "a data-parallel size of " + std::to_string(dp) + " does not divide the " +
                                      std::to_string(shape.B) + " rows of the global batch");
  const int64_t rows = shape.B / dp;
  if (rows % options.micro_batches != 0)
    throw rf::ConfigError("--micro-batches", std::to_string(options.micro_batches) + " does not divide a DP rank's " +
                                                 std::to_string(rows) + " rows");
  const int64_t rows_per_micro_batch = rows / options.micro_batches;

  rf::engine::EngineConfig engine_config;
  engine_config.dtype = options.dtype;
  engine_config.tensor_model_parallel_size = options.tp;
  engine_config.pipeline_model_parallel_size = options.pp;
  engine_config.context_parallel_size = options.cp;
  engine_config.cp_comm_type = cp_comm;
  if (options.vpp > 1) engine_config.pipeline_split.virtual_pipeline_model_parallel_size = options.vpp;
  engine_config.use_distributed_optimizer = options.distributed_optimizer && dp > 1;
  engine_config.overlap_grad_reduce = options.overlap && dp > 1;
  engine_config.swap_optimizer = options.swap_optimizer;
  engine_config.reuse_fp32_param = options.reuse_fp32_param;
  if (engine_config.overlap_grad_reduce || options.swap_optimizer || options.reuse_fp32_param)
    engine_config.bucket_size = options.bucket_size;
  if (options.recompute == "selective") {
    engine_config.recompute_granularity = rf::engine::RecomputeGranularity::selective;
    std::vector<rf::engine::RecomputeModule> modules;
    size_t begin = 0;
    while (begin <= options.recompute_modules.size()) {
      const size_t end = std::min(options.recompute_modules.find(',', begin), options.recompute_modules.size());
      const std::string name = options.recompute_modules.substr(begin, end - begin);
      if (name == "activation") engine_config.recompute_activation_function = true;
      else if (name == "core_attn") modules.push_back(rf::engine::RecomputeModule::core_attn);
      else if (name == "layernorm") modules.push_back(rf::engine::RecomputeModule::layernorm);
      else if (name == "mlp") modules.push_back(rf::engine::RecomputeModule::mlp);
      else throw rf::ConfigError("--recompute-modules", "'" + name + "': expected core_attn, layernorm, mlp, activation");
      begin = end + 1;
    }
    engine_config.recompute_modules = modules;
  } else if (options.recompute != "none") {
    engine_config.recompute_granularity = rf::engine::RecomputeGranularity::full;
    engine_config.recompute_method =
        options.recompute == "uniform" ? rf::model::RecomputeMethod::uniform : rf::model::RecomputeMethod::block;
    engine_config.recompute_num_layers = options.recompute_layers;
  }
  rf::optim::OptimConfig optim_config;
  optim_config.lr = 1e-4;
  optim_config.total_training_steps = kWarmupSteps + options.num_steps;
  rf::MemoryTracker tracker;
  rf::engine::TrainEngine engine(engine_config, optim_config, rf::bench::bench_model_config(shape), kernels, parallel,
                                 tracker, rows_per_micro_batch * shape.T);
  engine.init_random_weights(engine_config.seed);
  if (leader)
    std::printf("# %ld parameters on rank 0, global batch %ld x %ld tokens, TP %d x PP %d (VPP %d) x DP %d, %d "
                "micro-batches per DP rank, %zu gradient buckets\n",
                long(engine.num_parameters()), long(shape.B), long(shape.T), options.tp, options.pp, options.vpp, dp,
                options.micro_batches, engine.bucket_plan().buckets().size());

  // The ring's transfers per step if none were hidden: per layer, CP - 1 key-and-value blocks forward, and backward
  // CP - 1 of them plus CP - 1 blocks of their f32 gradients (model/context_attention.h).
  const bool ring = options.cp > 1 && cp_comm == rf::dist::CpCommType::p2p;
  double ring_transfer_s = 0;
  if (ring) {
    const rf::model::ModelConfig model_config = rf::bench::bench_model_config(shape);
    const int64_t block = rows_per_micro_batch * shape.T / options.cp * model_config.num_key_value_heads / options.tp *
                          model_config.head_dim * 2;
    const double kv = ring_exchange_seconds(parallel.cp(), *world, block, engine.compute_dtype());
    const double dkv = ring_exchange_seconds(parallel.cp(), *world, block, rf::DType::f32);
    ring_transfer_s = double(model_config.num_hidden_layers * options.micro_batches * (options.cp - 1)) *
                      (2 * kv + dkv);
    if (leader)
      std::printf("# ring: one step's key+value block (%ld elements) moves in %.3f ms, its f32 gradients in %.3f ms: "
                  "%.1f ms per training step if nothing overlapped\n",
                  long(block), kv * 1e3, dkv * 1e3, ring_transfer_s * 1e3);
  }

  std::vector<rf::engine::TensorMap> micro_batches;
  for (int64_t m = 0; m < options.micro_batches; ++m)
    micro_batches.push_back(
        rf::bench::random_rows(shape, parallel.dp().rank() * rows + m * rows_per_micro_batch, rows_per_micro_batch));
  std::vector<double> step_s, fb_s, exposed_s, optimizer_s, bubble_measured, bubble_simulated, schedule_s,
      simulated_s, ring_compute_s, ring_wait_s, ring_imbalance_s;
  int64_t device_peak_fb = 0, device_peak_step = 0, activation_peak = 0;
  for (int step = 0; step < kWarmupSteps + options.num_steps; ++step) {
    world->all_reduce_scalar(0.0, rf::dist::ReduceOp::sum);  // start together
    const rf::Stopwatch clock;
    tracker.reset_peaks();
    if (ring) engine.model().ring_times() = {};
    const double loss =
        engine.forward_backward(micro_batches, rf::trainer::token_mean_nll, rf::engine::ForwardOnly::no).loss;
    const double fb_done = clock.seconds();
    device_peak_fb = tracker.peak(rf::MemoryTier::device);
    activation_peak = std::max(activation_peak, tracker.peak(rf::MemoryTier::device, rf::MemoryCategory::activations));
    engine.reduce_gradients();
    const double reduce_done = clock.seconds();
    tracker.reset_peaks();
    engine.optimizer_step();
    device_peak_step = tracker.peak(rf::MemoryTier::device);
    engine.lr_step();
    const double step_done = clock.seconds();
    auto slowest = [&](double seconds) { return world->all_reduce_scalar(seconds, rf::dist::ReduceOp::max); };
    const double total = slowest(step_done), fb = slowest(fb_done), exposed = slowest(reduce_done - fb_done),
                 optimizer = slowest(step_done - reduce_done);
    const PipelineStep pipe = options.pp > 1 ? pipeline_step(engine, parallel, *world, options.pp, options.vpp)
                                             : PipelineStep{};
    if (step < kWarmupSteps) continue;
    if (options.pp > 1) {
      bubble_measured.push_back(pipe.bubble_measured);
      bubble_simulated.push_back(pipe.bubble_simulated);
      schedule_s.push_back(pipe.schedule_s);
      simulated_s.push_back(pipe.simulated_s);
      if (leader)
        std::printf("step %d pipeline bubble_measured=%.4f bubble_simulated=%.4f schedule_ms=%.1f simulated_ms=%.1f\n",
                    step - kWarmupSteps, pipe.bubble_measured, pipe.bubble_simulated, pipe.schedule_s * 1e3,
                    pipe.simulated_s * 1e3);
    }
    if (ring) {
      // The critical rank is the one with the most compute: what it waits for is transfer left exposed; the others
      // also wait for it (imbalance), which no overlap can hide.
      const rf::model::RingTimes times_here = engine.model().ring_times();
      const rf::Tensor mine({2}, rf::DType::f64), all({2 * world->size()}, rf::DType::f64);
      mine.data<double>()[0] = times_here.compute_s;
      mine.data<double>()[1] = times_here.wait_s;
      world->all_gather(mine, all);
      const double* times = all.data<double>();
      int critical = 0;
      double least = times[0];
      for (int r = 0; r < world->size(); ++r) {
        if (times[2 * r] > times[2 * critical]) critical = r;
        least = std::min(least, times[2 * r]);
      }
      const double compute = times[2 * critical], wait = times[2 * critical + 1];
      ring_compute_s.push_back(compute);
      ring_wait_s.push_back(wait);
      ring_imbalance_s.push_back(compute - least);
      if (leader)
        std::printf("step %d ring compute_ms=%.1f wait_ms=%.2f imbalance_ms=%.1f steps=%ld\n", step - kWarmupSteps,
                    compute * 1e3, wait * 1e3, (compute - least) * 1e3, long(times_here.steps));
    }
    step_s.push_back(total);
    fb_s.push_back(fb);
    exposed_s.push_back(exposed);
    optimizer_s.push_back(optimizer);
    if (leader)
      std::printf("step %d ms=%.1f fb_ms=%.1f exposed_comm_ms=%.1f optimizer_ms=%.1f loss=%.4f\n", step - kWarmupSteps,
                  total * 1e3, fb * 1e3, exposed * 1e3, optimizer * 1e3, loss);
  }
  const double step = median(step_s), exposed = median(exposed_s);
  if (leader) {
    std::printf("parallel_train_step config=%s world=%d tp=%d pp=%d vpp=%d cp=%d cp_comm=%s dp=%d micro_batches=%d "
                "threads=%d "
                "distributed_optimizer=%d overlap=%d recompute=%s:%d:%s activation_peak_mib=%.2f planned_mib=%.2f "
                "global_tokens=%ld step_ms=%.1f tok_s=%.1f fb_ms=%.1f exposed_comm_ms=%.1f exposed_pct=%.2f "
                "optimizer_ms=%.1f dtype=%s swap_optimizer=%d reuse_fp32_param=%d device_peak_fb_mib=%.2f "
                "device_peak_step_mib=%.2f\n",
                options.config.c_str(), world->size(), options.tp, options.pp, options.vpp, options.cp,
                options.cp_comm.c_str(), dp, options.micro_batches,
                pool.num_threads(),
                int(engine_config.use_distributed_optimizer), int(engine_config.overlap_grad_reduce),
                options.recompute.c_str(), options.recompute_layers,
                options.recompute == "selective" ? options.recompute_modules.c_str() : "-",
                double(activation_peak) / (1 << 20),
                double(engine.planned_activation_peak(options.micro_batches)) / (1 << 20),
                long(shape.B * shape.T), step * 1e3, double(shape.B * shape.T) / step, median(fb_s) * 1e3,
                exposed * 1e3, 100.0 * exposed / step, median(optimizer_s) * 1e3, options.dtype.c_str(),
                int(options.swap_optimizer), int(options.reuse_fp32_param), double(device_peak_fb) / (1 << 20),
                double(device_peak_step) / (1 << 20));
    if (options.pp > 1)
      std::printf("pipeline bubble_measured=%.4f bubble_simulated=%.4f schedule_ms=%.1f simulated_ms=%.1f\n",
                  median(bubble_measured), median(bubble_simulated), median(schedule_s) * 1e3,
                  median(simulated_s) * 1e3);
    if (ring) {
      const double compute = median(ring_compute_s), wait = median(ring_wait_s);
      std::printf("ring compute_ms=%.1f wait_ms=%.2f imbalance_ms=%.1f transfer_ms=%.2f hidden_pct=%.1f\n",
                  compute * 1e3, wait * 1e3, median(ring_imbalance_s) * 1e3, ring_transfer_s * 1e3,
                  100.0 * (1.0 - wait / ring_transfer_s));
    }
    std::printf("# memory (rank 0) %s\n", tracker.summary().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const rf::dist::MpiRuntime mpi;
  return rf::dist::run_guarded(mpi, "parallel_train_step_bench", [&] { return run(mpi, parse_options(argc, argv)); });
}
