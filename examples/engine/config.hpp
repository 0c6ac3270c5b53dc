// config.hpp — the engine's command line: model sizes, training hyper-parameters, data, output.
//
// parse_args() turns argv into a Config and checks everything that can be checked without touching
// the data or the device; a bad argument throws UsageError, which main() prints and turns into exit
// status 2 before anything is allocated or written.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

/// A command-line or input error: printed as "engine: error: <what>", exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A UsageError the ranks found together (they compared their input: same_run.hpp), so every rank
/// holds the same message: rank 0 prints it and every rank exits with status 2, none aborting the job.
struct AgreedUsageError : UsageError {
  using UsageError::UsageError;
};

/// The model's shape. Vocabulary size comes from the corpus.
struct ModelShape {
  int layers = 4;
  int heads = 4;
  int width = 128;  // C
  int block = 64;   // T: the longest context
  int vocab_multiple = 1;  // the vocabulary is padded to a multiple of this (gpt2: 64)
};

struct Config {
  std::string size = "tiny";
  ModelShape shape;
  int batch = 12;
  int accum = 1;  // micro-batches per optimizer step (gradient accumulation)
  // Data parallelism (DeepSpeed's batch triple: global = micro x accum x ranks). The global batch is
  // what the command line fixes (default: batch x accum, the one-rank run's), so the same command line
  // trains the same model on any number of ranks; resolve_batch() derives micro and accum per rank.
  std::int64_t global_batch = 0;  // sequences per optimizer step over all ranks (0: batch x accum)
  bool batch_given = false, accum_given = false;
  int draw_chunk = 0;    // sequences per draw of the data generator (the one-rank micro-batch)
  int eval_rows = 0;     // sequences per validation batch (the one-rank micro-batch)
  int zero_stage = 1;    // 1: optimizer state sharded; 2: also the gradients (reduced in buckets during backward)
  std::int64_t reduce_bucket = 0;  // stage 2: the most elements a bucket gathers (0: a layer's tensors; buckets.hpp)
  bool deterministic = false;  // bit-identical on any rank count (fixed summation trees)
  std::string overlap = "auto";  // on | off | auto (on with CUDA): reduce gradients in buckets during backward
  bool force_collectives = false;  // one rank: the data-parallel path anyway, collectives on a world of 1
  std::string deepspeed_config;  // --deepspeed-config FILE
  std::string zero_to_fp32;      // --zero-to-fp32 CHECKPOINT: write the consolidated weights and exit
  std::string zero_to_fp32_out;
  // Dynamic loss scaling (DeepSpeed's fp16 scaler; --loss-scale dynamic, or a fixed scale).
  double loss_scale = 1.0;       // 0: dynamic
  double initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  double min_loss_scale = 1;
  int rank = 0, ranks = 1;       // set by the engine from the communicator
  std::int64_t steps = 2000;
  std::int64_t stop_at = 0;  // > 0: end this run at that step (the schedule still spans `steps`)
  double max_seconds = 0;  // > 0: stop after this much training time (the schedule still spans `steps`)
  double lr = 1e-3;
  double min_lr = 1e-4;
  std::int64_t warmup = 100;
  std::string schedule = "cosine";  // cosine | constant
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double clip = 1.0;  // 0: no clipping
  double dropout = 0.0;
  std::uint64_t seed = 1337;
  std::string data;  // empty: the default corpus (scripts/fetch-data.sh)
  std::string dtype = "fp32";  // fp32 | bf16 | fp16 (16-bit weights and activations, fp32 master weights)
  int threads = 0;             // CPU threads for kernels and BLAS (0: resolved at start-up, cpu_threads.hpp)
  int streams = 0;             // lanes: streams that each run a slice of the batch's rows (0: auto)
  bool graph = false;
  bool activation_checkpointing = false;  // keep each layer's output (the next one's input); recompute the rest
  std::string attention = "auto";  // fused | gemm | flash | auto (fused on the CPU; flash on CUDA where it fits, else gemm)
  std::string gelu_fusion = "auto";  // on | off | auto (on with CUDA): the MLP's GELU and its gradient inside its GEMMs
  std::string flash_backward = "split";  // split | fused: the flash attention backward in two kernels or one
  std::string run_ahead = "on";  // on | off: step k + 1 enqueued before step k's losses are read
  std::string dispatch = "static";  // static: Engine<CpuBackend|CudaBackend> via accel::visit; any: Engine<AnyBackend>
  std::string save;            // checkpoint directory ("" : none, except on a signal)
  std::int64_t save_every = 0;
  std::int64_t keep_last = 0;  // > 0: after each save, only the newest N step directories of --save stay
  std::string resume;          // a checkpoint directory, or "latest"
  int sample = 0;              // characters to generate at the end
  std::string prompt;           // --prompt TEXT: the sample continues it (empty: from a newline)
  double temperature = 0.8;
  int top_k = 200;
  std::int64_t print_every = 50;
  std::int64_t eval_every = 250;
  int eval_batches = 20;
  std::string metrics;         // CSV path
  std::string dump;            // directory for benchmarks/engine/torch_gpt.py
  std::string trace;           // Chrome trace (accel::profile::TraceRecorder) of the first trace_steps steps
  std::int64_t trace_steps = 20;
  bool quiet = false;          // only the summary (and errors)
};

inline const char* usage_text() {
  return R"(usage: engine [options]            (the backend: ACCEL_BACKEND=cpu|cuda, default: CUDA if present)

Trains a character-level GPT (nanoGPT's model) on a text file and prints its progress.

model
  --size tiny|shakespeare|gpt2   tiny: 4 layers, 4 heads, 128 wide, block 64 (default)
                                 shakespeare: 6/6/384, block 256; gpt2: 12/12/768, block 1024
  --layers N --heads N --width N --block N    override the size's shape
data
  --data FILE          train on FILE, a regular text file of at most 4 GiB (default: $ENGINE_DATA, else
                       the source tree's data/shakespeare/shakespeare.txt, which scripts/fetch-data.sh writes)
training
  --batch N            sequences per micro-batch (tiny 12, shakespeare 64, gpt2 8)
  --accum N            micro-batches per step (gradient accumulation, default 1)
  --global-batch N     sequences per optimizer step over all ranks (default: batch x accum); on R
                       ranks each rank runs N / R of them as micro-batches of at most --batch
  --zero-stage 1|2     data parallel (mpirun -np R): 1 (default) each rank keeps Adam's state (and
                       the fp32 master weights) of its 1/R shard, and every gradient; 2 also keeps only
                       its shard's gradients: backward writes a layer's gradients into a bucket, each
                       full bucket is reduced to the ranks that own its elements and reused, so a rank
                       holds 1/R of the gradients plus the buckets (a layer's, and the embeddings'),
                       every micro-batch reduced as it completes; with --streams N each stream has
                       its own buckets, summed over the streams before each reduction
  --reduce-bucket-size N   stage 2: a bucket gathers the tensors backward completes one after the
                       other up to N elements (DeepSpeed's reduce_bucket_size; default 0: one layer's
                       tensors a bucket; a tensor over N is a bucket of its own)
  --overlap on|off|auto    reduce the gradients in buckets (a layer's) on a communication stream while
                       backward goes on (auto: on with CUDA, off on the CPU, where the polling thread
                       takes a core from the computation); one stream per rank (so not with --streams N
                       or --deterministic, whose fixed order reduces after backward); stage 2 then keeps
                       two layer buckets (one filling, one reducing)
  --deterministic      bit-identical losses and weights on 1, 2, 4... ranks (fixed summation trees
                       over the micro-batches; the micro-batch stays --batch; one stream per rank).
                       With stage 2 the ranks take the tree's runs of micro-batches in turn (rank r:
                       r, r + R, ...), a run's backwards adding into one bucket set in lockstep, and
                       each bucket's R run sums are summed at their owners; when the micro-batches per
                       step are not a power of two, a run of k holds k activation sets at once
  --force-collectives  run the data-parallel path on one rank too: the world communicator (MPI for
                       the CPU, NCCL for CUDA) with one rank, every collective of N ranks launched
                       (reduce-scatter or bucketed reduces, all-gathers, the norm's and the losses',
                       the per-step agreement) and the buffers and overlap they need; the same losses
                       as without it. Measures what the communication path costs a step
                       (benchmarks/engine/force_collectives.py)
  --deepspeed-config F a DeepSpeed JSON config (batch triple, clipping, optimizer, scheduler, fp16/bf16,
                       zero_optimization.stage); a key the engine does not support is an error
  --loss-scale dynamic|X   scale the loss (dynamic: DeepSpeed's fp16 scaler: 2^16, window 1000,
                       hysteresis 2, min 1; a step with inf/NaN gradients is skipped); change them with
                       --initial-scale-power N --loss-scale-window N --hysteresis N --min-loss-scale X
  --zero-to-fp32 CKPT OUT  write CKPT's weights, consolidated from the ranks' shards, to OUT (fp32)
  --steps N            optimizer steps (tiny 2000, shakespeare 5000, gpt2 1000)
  --time SECONDS       stop after this much training time (0, the default: no limit)
  --stop-at N          stop at step N (with --save: a checkpoint there); the schedule still spans --steps
  --lr X --min-lr X --warmup N --schedule cosine|constant
  --beta1 X --beta2 X --weight-decay X --clip X (0: off) --dropout X
  --seed N             fixes the run: weights, batches, dropout masks (each sequence's keyed by the
                       step and its place in the global batch, whatever the ranks, streams or
                       threads) (default 1337)
  --dtype fp32|bf16|fp16  bf16 / fp16: 16-bit weights, activations and gradients, fp32 master weights
                       and Adam state (any backend; kernels compute in fp32); fp16 turns on the dynamic
                       loss scaler unless --loss-scale is given (DeepSpeed's fp16 default)
  --threads N          CPU threads for the kernels and the BLAS (default: OMP_NUM_THREADS, else the CPUs
                       this process may run on (taskset, cpusets, mpirun's binding), shared among the
                       ranks on this machine that may run on them too, and at most its cgroup's CPU
                       quota (a container's CPU limit), shared among the ranks in that cgroup)
  --streams N          split each batch's rows over N streams, each with its own activations and
                       gradients (summed before the optimizer; stage 2: its own buckets, summed before
                       each reduction) and threads / N threads; default on the CPU: one per thread (no
                       thread waits for another inside a kernel; 1 with --graph, --deterministic or
                       --zero-stage 2, whose lanes meet at every bucket), else 1
  --graph              capture the step once and replay it (CUDA graphs; recorded tasks on the CPU)
  --activation-checkpointing   keep each layer's output only (the residual stream, and the dropout's
                       bits) and compute the rest again from it before the layer's backward (DeepSpeed's
                       activation checkpointing, a checkpoint a block): one layer's activations instead
                       of every layer's, for a forward's products more (the MLP's output projection
                       excepted); the same losses, bit for bit; MFU still counts the model's FLOPs only
  --attention auto|fused|gemm|flash   fused: one kernel per direction (CPU: head size 16, 32, 48,
                       64, 80, 96 or 128; CUDA: --block up to 12288); gemm: the products as
                       strided-batched GEMMs around softmax kernels (any shape); flash: tensor-core
                       kernels keeping the scores on chip (CUDA, bf16/fp16, head size 32 or 64); auto
                       (default): fused on the CPU and flash on CUDA where they apply, else gemm
  --flash-backward split|fused   the flash kernels' backward: split (default): two kernels, dq
                       per query tile and dk, dv per key tile, each recomputing the scores; fused: one
                       kernel per key tile computing dq too (5 products of a tile pair instead of 7),
                       its dq sums added across key tiles in a fixed order (the same bits run to run)
  --gelu-fusion on|off|auto  on: the MLP's GELU applied inside its first GEMM and the GELU's gradient
                       inside the backward's (accel::blas::gemm_gelu / gemm_dgelu: cuBLASLt's epilogues
                       on CUDA, a pass in the GEMM's task on the CPU) instead of separate kernels; auto
                       (default): on with CUDA (gpt2 bf16 on an H200: 1.4-2.3 % a step), off on the CPU
  --run-ahead on|off   on (default): the next step is enqueued before this step's losses are read, so
                       the device does not wait for the host between steps (not before an evaluation,
                       a checkpoint or the end, nor on several ranks or with fp16's loss scaler); off:
                       every step waited for
  --dispatch static|any  static (default): Engine<B> on the concrete backend (accel::visit once);
                       any: Engine<AnyBackend>, every call dispatched at run time (for comparison)
checkpoints
  --save DIR           write checkpoints to DIR (at the end, every --save-every N steps, on SIGINT/SIGTERM)
  --resume DIR|latest  continue from a checkpoint (latest: the newest in --save's DIR, default checkpoints)
  --keep-last N        after each save keep only the N newest checkpoints in --save's DIR (by step;
                       default: all); the one just written and the one `latest` names always stay
output
  --print-every N --eval-every N --eval-batches N    progress lines, validation loss (mean of N batches);
                       MFU is the FLOPs of the step's matrix products (causal attention: the keys each
                       token sees) over the peak: the CPU's FMA loop measured at start-up, a GPU's data sheet
  --metrics FILE.csv   one row per progress line (with --resume: appended to the file)
  --sample N           generate N characters at the end (--temperature X, default 0.8; --top-k N, default 200)
  --prompt TEXT        the sample continues TEXT (characters of the corpus's vocabulary; default: a newline)
  --dump DIR           write initial weights, batches, losses and step-0 gradients for torch_gpt.py
  --trace FILE.json    a Chrome trace (open it in Perfetto) of the first --trace-steps N steps (default
                       20): host ranges, and each stream's phases (layers, optimizer) at the stream's times
  --quiet              print only the summary
)";
}

namespace detail {

inline long long parse_int(std::string_view flag, const std::string& text, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    throw UsageError(std::string(flag) + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'");
  }
  return v;
}

/// A bound as a user would write it (1e-30, 0.999999, 10): std::to_string's fixed six decimals would
/// print 1e-30 as 0.000000.
inline std::string format_bound(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

inline double parse_double(std::string_view flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
    throw UsageError(std::string(flag) + " expects a number in [" + format_bound(lo) + ", " + format_bound(hi) +
                     "], got '" + text + "'");
  }
  return v;
}

}  // namespace detail

/// The preset of a size; UsageError for an unknown one.
inline void apply_size(Config& c, const std::string& size) {
  if (size == "tiny") {  // nanoGPT's CPU recipe, with twice its learning rate (val 1.79 instead of 1.89 here)
    c.shape = {4, 4, 128, 64, 1};
    c.batch = 12;
    c.steps = 2000;
    c.lr = 2e-3;
    c.min_lr = 2e-4;
    c.dropout = 0.0;
  } else if (size == "shakespeare") {  // nanoGPT's train_shakespeare_char (GPU)
    c.shape = {6, 6, 384, 256, 1};
    c.batch = 64;
    c.steps = 5000;
    c.dropout = 0.2;
  } else if (size == "gpt2") {  // GPT-2 small's shape with the corpus's characters
    c.shape = {12, 12, 768, 1024, 64};
    c.batch = 8;
    c.steps = 1000;
    c.lr = 6e-4;
    c.min_lr = 6e-5;
    c.beta2 = 0.95;
    c.dropout = 0.0;
  } else {
    throw UsageError("unknown --size '" + size + "' (sizes: tiny, shakespeare, gpt2)");
  }
  c.size = size;
}

/// DeepSpeed's batch triple on `ranks` ranks: global = micro x accum x ranks, the global batch fixed
/// (--global-batch, else the one-rank run's batch x accum). Sets c.batch (the micro-batch of a rank),
/// c.accum, c.global_batch, c.draw_chunk and c.eval_rows; UsageError when they cannot agree.
inline void resolve_batch(Config& c, int ranks) {
  const std::int64_t given_batch = c.batch;
  const std::int64_t G = c.global_batch > 0 ? c.global_batch : given_batch * c.accum;
  const std::string R = std::to_string(ranks), Gs = std::to_string(G);
  if (c.global_batch > 0 && c.batch_given && c.accum_given && given_batch * c.accum * ranks != G) {
    throw UsageError("the batch triple does not hold: global batch " + Gs + " != micro-batch " + std::to_string(given_batch) +
                     " x gradient accumulation " + std::to_string(c.accum) + " x " + R + " ranks");
  }
  if (G % ranks != 0) {
    throw UsageError("the global batch of " + Gs + " sequences does not split over " + R +
                     " ranks (give --global-batch a multiple of the rank count)");
  }
  const std::int64_t per_rank = G / ranks;
  std::int64_t micro = 0;
  if (c.deterministic) {
    micro = given_batch;  // every rank count computes the same micro-batches
    if (per_rank % micro != 0) {
      throw UsageError("--deterministic keeps the micro-batch at --batch " + std::to_string(micro) + ", and " + R +
                       " ranks get " + std::to_string(per_rank) + " sequences each of the global batch " + Gs +
                       ", not a multiple of it");
    }
  } else if (c.global_batch > 0 && c.accum_given && !c.batch_given) {
    if (per_rank % c.accum != 0) {
      throw UsageError("--accum " + std::to_string(c.accum) + " does not divide the " + std::to_string(per_rank) +
                       " sequences each of " + R + " ranks gets of the global batch " + Gs);
    }
    micro = per_rank / c.accum;
  } else {
    micro = std::min<std::int64_t>(given_batch, per_rank);  // the largest divisor of a rank's share up to --batch
    while (per_rank % micro != 0) --micro;
  }
  // The data generator's draws: with --global-batch the whole batch at once (so neither the rank
  // count nor the micro-batch changes the data); else per --batch, as one rank always drew them.
  c.draw_chunk = static_cast<int>(c.global_batch > 0 ? G : given_batch);
  c.eval_rows = static_cast<int>(given_batch);
  c.global_batch = G;
  c.batch = static_cast<int>(micro);
  c.accum = static_cast<int>(per_rank / micro);
  c.ranks = ranks;
}

}  // namespace engine

#include "deepspeed_config.hpp"  // needs Config above; parse_args below applies it

namespace engine {

/// Parses argv. Throws UsageError; returns nullopt for --help (after printing the usage).
inline std::optional<Config> parse_args(int argc, char** argv) {
  Config c;
  std::vector<std::string> args(argv + 1, argv + argc);
  // The size first: its preset is the base the other flags change, whatever their order. One preset,
  // the last --size's (tiny without one), applied to the defaults: presets set only what differs from
  // them, so two applied in turn would leave the first's changes in the second.
  std::string size = "tiny";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--size") {
      if (i + 1 >= args.size()) throw UsageError("--size needs a value (tiny, shakespeare, gpt2)");
      size = args[i + 1];
    }
  }
  apply_size(c, size);
  // Then a DeepSpeed config: a base that every other flag overrides, wherever it stands.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--deepspeed-config") {
      if (i + 1 >= args.size()) throw UsageError("--deepspeed-config needs a file");
      apply_deepspeed_config(c, args[i + 1]);
    }
  }
  bool explicit_min_lr = false;
  bool explicit_loss_scale = false;
  const std::string ds_dtype = c.dtype;  // what a DeepSpeed config chose (its fp16 block sets the scale)
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text(), stdout);
      return std::nullopt;
    }
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    using detail::parse_double;
    using detail::parse_int;
    if (a == "--size") {
      (void)value();
    } else if (a == "--layers") {
      c.shape.layers = static_cast<int>(parse_int(a, value(), 1, 256));
    } else if (a == "--heads") {
      c.shape.heads = static_cast<int>(parse_int(a, value(), 1, 256));
    } else if (a == "--width") {
      c.shape.width = static_cast<int>(parse_int(a, value(), 1, 65536));
    } else if (a == "--block") {
      c.shape.block = static_cast<int>(parse_int(a, value(), 1, 65536));
    } else if (a == "--batch") {
      c.batch = static_cast<int>(parse_int(a, value(), 1, 1 << 20));
      c.batch_given = true;
    } else if (a == "--accum") {
      c.accum = static_cast<int>(parse_int(a, value(), 1, 1 << 16));
      c.accum_given = true;
    } else if (a == "--global-batch") {
      c.global_batch = parse_int(a, value(), 1, 1 << 24);
    } else if (a == "--zero-stage") {
      c.zero_stage = static_cast<int>(parse_int(a, value(), 1, 2));
    } else if (a == "--reduce-bucket-size") {
      c.reduce_bucket = parse_int(a, value(), 0, 1LL << 40);
    } else if (a == "--overlap") {
      c.overlap = value();
      if (c.overlap != "on" && c.overlap != "off" && c.overlap != "auto") {
        throw UsageError("--overlap expects on, off or auto, got '" + c.overlap + "'");
      }
    } else if (a == "--deterministic") {
      c.deterministic = true;
    } else if (a == "--force-collectives") {
      c.force_collectives = true;
    } else if (a == "--deepspeed-config") {
      c.deepspeed_config = value();  // applied above
    } else if (a == "--zero-to-fp32") {
      c.zero_to_fp32 = value();
      c.zero_to_fp32_out = value();
    } else if (a == "--initial-scale-power") {
      c.initial_scale_power = parse_double(a, value(), 0, 64);
    } else if (a == "--loss-scale-window") {
      c.loss_scale_window = static_cast<int>(parse_int(a, value(), 1, 1 << 30));
    } else if (a == "--hysteresis") {
      c.hysteresis = static_cast<int>(parse_int(a, value(), 1, 1 << 20));
    } else if (a == "--min-loss-scale") {
      c.min_loss_scale = parse_double(a, value(), 1e-30, 1e30);
    } else if (a == "--loss-scale") {
      const std::string v = value();
      c.loss_scale = v == "dynamic" ? 0.0 : parse_double(a, v, 1e-30, 1e30);
      explicit_loss_scale = true;
    } else if (a == "--steps") {
      c.steps = parse_int(a, value(), 0, 1LL << 40);
    } else if (a == "--stop-at") {
      c.stop_at = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--time") {
      c.max_seconds = parse_double(a, value(), 0, 1e9);
    } else if (a == "--lr") {
      c.lr = parse_double(a, value(), 0, 10);
    } else if (a == "--min-lr") {
      c.min_lr = parse_double(a, value(), 0, 10);
      explicit_min_lr = true;
    } else if (a == "--warmup") {
      c.warmup = parse_int(a, value(), 0, 1LL << 40);
    } else if (a == "--schedule") {
      c.schedule = value();
      if (c.schedule != "cosine" && c.schedule != "constant") {
        throw UsageError("--schedule expects cosine or constant, got '" + c.schedule + "'");
      }
    } else if (a == "--beta1") {
      c.beta1 = parse_double(a, value(), 0, 0.999999);
    } else if (a == "--beta2") {
      c.beta2 = parse_double(a, value(), 0, 0.999999);
    } else if (a == "--weight-decay") {
      c.weight_decay = parse_double(a, value(), 0, 10);
    } else if (a == "--clip") {
      c.clip = parse_double(a, value(), 0, 1e9);
    } else if (a == "--dropout") {
      c.dropout = parse_double(a, value(), 0, 0.95);
    } else if (a == "--seed") {
      c.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, (1LL << 62)));
    } else if (a == "--data") {
      c.data = value();
    } else if (a == "--dtype") {
      c.dtype = value();
      if (c.dtype != "fp32" && c.dtype != "bf16" && c.dtype != "fp16") {
        throw UsageError("--dtype expects fp32, bf16 or fp16, got '" + c.dtype + "'");
      }
    } else if (a == "--threads") {
      c.threads = static_cast<int>(parse_int(a, value(), 1, 4096));
    } else if (a == "--dispatch") {
      c.dispatch = value();
      if (c.dispatch != "static" && c.dispatch != "any") {
        throw UsageError("--dispatch expects static or any, got '" + c.dispatch + "'");
      }
    } else if (a == "--attention") {
      c.attention = value();
      if (c.attention != "fused" && c.attention != "gemm" && c.attention != "flash" && c.attention != "auto") {
        throw UsageError("--attention expects fused, gemm, flash or auto, got '" + c.attention + "'");
      }
    } else if (a == "--flash-backward") {
      const std::string v = value();
      if (v != "split" && v != "fused") throw UsageError("--flash-backward expects split or fused, got '" + v + "'");
      c.flash_backward = v;
    } else if (a == "--gelu-fusion") {
      const std::string v = value();
      if (v != "on" && v != "off" && v != "auto") {
        throw UsageError("--gelu-fusion expects on, off or auto, got '" + v + "'");
      }
      c.gelu_fusion = v;
    } else if (a == "--run-ahead") {
      const std::string v = value();
      if (v != "on" && v != "off") throw UsageError("--run-ahead expects on or off, got '" + v + "'");
      c.run_ahead = v;
    } else if (a == "--streams") {
      c.streams = static_cast<int>(parse_int(a, value(), 1, 256));
    } else if (a == "--activation-checkpointing") {
      c.activation_checkpointing = true;
    } else if (a == "--graph") {
      c.graph = true;
    } else if (a == "--save") {
      c.save = value();
    } else if (a == "--save-every") {
      c.save_every = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--keep-last") {
      c.keep_last = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--resume") {
      c.resume = value();
    } else if (a == "--sample") {
      c.sample = static_cast<int>(parse_int(a, value(), 0, 1 << 24));
    } else if (a == "--prompt") {
      c.prompt = value();
      if (c.prompt.empty()) throw UsageError("--prompt expects a text (without it the sample starts from a newline)");
    } else if (a == "--temperature") {
      c.temperature = parse_double(a, value(), 1e-3, 100);
    } else if (a == "--top-k") {
      c.top_k = static_cast<int>(parse_int(a, value(), 0, 1 << 20));
    } else if (a == "--print-every") {
      c.print_every = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--eval-every") {
      c.eval_every = parse_int(a, value(), 0, 1LL << 40);
    } else if (a == "--eval-batches") {
      c.eval_batches = static_cast<int>(parse_int(a, value(), 1, 1 << 16));
    } else if (a == "--metrics") {
      c.metrics = value();
    } else if (a == "--dump") {
      c.dump = value();
    } else if (a == "--trace") {
      c.trace = value();
    } else if (a == "--trace-steps") {
      c.trace_steps = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--quiet") {
      c.quiet = true;
    } else {
      throw UsageError("unknown option '" + a + "' (see --help)");
    }
  }
  if (!explicit_min_lr && c.min_lr > c.lr) c.min_lr = c.lr / 10;
  // fp16 without a scale of its own: DeepSpeed's default, the dynamic scaler (a DeepSpeed config with
  // fp16.enabled already set its scale).
  if (c.dtype == "fp16" && !explicit_loss_scale && ds_dtype != "fp16") c.loss_scale = 0.0;
  if (c.graph && c.loss_scale == 0.0) {
    throw UsageError("--graph captures the step with its loss scale, which the dynamic scaler changes: give a fixed "
                     "--loss-scale X, or drop --graph");
  }
  if (c.deterministic && c.streams > 1) {
    throw UsageError("--deterministic runs one stream per rank (the rows of a micro-batch are not split): drop --streams " +
                     std::to_string(c.streams));
  }
  if (c.streams > 0 && c.batch % c.streams != 0) {
    throw UsageError("--streams " + std::to_string(c.streams) + " does not divide --batch " + std::to_string(c.batch) +
                     " (each stream runs batch / streams sequences)");
  }
  if (c.graph && c.overlap == "on") {
    throw UsageError("--graph captures one stream: it cannot be combined with --overlap on (a second stream)");
  }
  if (c.overlap == "on" && c.deterministic) {
    throw UsageError("--deterministic reduces the gradients in a fixed order after backward: it cannot be combined "
                     "with --overlap on (buckets reduced as backward completes them)");
  }
  if (c.overlap == "on" && c.streams > 1) {
    throw UsageError("--overlap on reduces one stream's buckets as backward completes them: it cannot be combined "
                     "with --streams " + std::to_string(c.streams));
  }
  if (c.graph && c.streams > 1) {
    throw UsageError("--graph captures one stream: it cannot be combined with --streams " + std::to_string(c.streams));
  }
  if (c.shape.width % c.shape.heads != 0) {
    throw UsageError("--heads " + std::to_string(c.shape.heads) + " does not divide --width " +
                     std::to_string(c.shape.width) + " (each head gets width / heads channels)");
  }
  if (c.gelu_fusion == "on" && (4 * c.shape.width) % 8 != 0) {
    throw UsageError("--gelu-fusion on needs an even --width (the MLP's pre-activation rows, 4 x width = " +
                     std::to_string(4 * c.shape.width) + ", must be a multiple of 8 elements), got --width " +
                     std::to_string(c.shape.width));
  }
  return c;
}

}  // namespace engine
