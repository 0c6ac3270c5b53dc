// config.hpp — the engine's command line: model sizes, training hyper-parameters, data, output.
//
// parse_args() turns argv into a Config and checks everything that can be checked without touching
// the data or the device; a bad argument throws UsageError, which main() prints and turns into exit
// status 2 before anything is allocated or written.
#pragma once

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
  std::string dtype = "fp32";  // fp32 | bf16 (CUDA)
  int threads = 0;             // CPU threads for kernels and BLAS (0: all cores)
  int streams = 0;             // lanes: streams that each run a slice of the batch's rows (0: auto)
  bool graph = false;
  std::string attention = "auto";  // fused | gemm | auto (fused on the CPU, gemm elsewhere)
  std::string dispatch = "static";  // static: Engine<CpuBackend|CudaBackend> via accel::visit; any: Engine<AnyBackend>
  std::string save;            // checkpoint directory ("" : none, except on a signal)
  std::int64_t save_every = 0;
  std::string resume;          // a checkpoint directory, or "latest"
  int sample = 0;              // characters to generate at the end
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
  --data FILE          train on FILE (default: data/shakespeare/shakespeare.txt, scripts/fetch-data.sh)
training
  --batch N            sequences per micro-batch (tiny 12, shakespeare 64, gpt2 8)
  --accum N            micro-batches per step (gradient accumulation, default 1)
  --steps N            optimizer steps (tiny 2000, shakespeare 5000, gpt2 1000)
  --time SECONDS       stop after this much training time
  --stop-at N          stop at step N (with --save: a checkpoint there); the schedule still spans --steps
  --lr X --min-lr X --warmup N --schedule cosine|constant
  --beta1 X --beta2 X --weight-decay X --clip X (0: off) --dropout X
  --seed N             fixes the run: weights, batches, dropout (default 1337)
  --dtype fp32|bf16    bf16: CUDA only (bf16 weights and activations, fp32 master weights and Adam)
  --threads N          CPU threads for the kernels and the BLAS (default: all cores)
  --streams N          split each batch's rows over N streams, each with its own activations and
                       gradients (summed before the optimizer) and threads / N threads; default on the
                       CPU: one per thread (no thread waits for another inside a kernel), else 1
  --graph              capture the step once and replay it (CUDA graphs; recorded tasks on the CPU)
  --attention fused|gemm   fused: one kernel per direction (the CPU's default); gemm: the products as
                       strided-batched GEMMs around softmax kernels (the default elsewhere)
  --dispatch static|any  static (default): Engine<B> on the concrete backend (accel::visit once);
                       any: Engine<AnyBackend>, every call dispatched at run time (for comparison)
checkpoints
  --save DIR           write checkpoints to DIR (at the end, every --save-every N steps, on SIGINT/SIGTERM)
  --resume DIR|latest  continue from a checkpoint (latest: the newest in --save's DIR, default checkpoints)
output
  --print-every N --eval-every N --eval-batches N    progress lines, validation loss (mean of N batches)
  --metrics FILE.csv   one row per progress line
  --sample N           generate N characters at the end (--temperature X, default 0.8; --top-k N, default 200)
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

inline double parse_double(std::string_view flag, const std::string& text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
    throw UsageError(std::string(flag) + " expects a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
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

/// Parses argv. Throws UsageError; returns nullopt for --help (after printing the usage).
inline std::optional<Config> parse_args(int argc, char** argv) {
  Config c;
  std::vector<std::string> args(argv + 1, argv + argc);
  // The size first: its preset is the base the other flags change, whatever their order.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--size") {
      if (i + 1 >= args.size()) throw UsageError("--size needs a value (tiny, shakespeare, gpt2)");
      apply_size(c, args[i + 1]);
    }
  }
  bool explicit_min_lr = false;
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
    } else if (a == "--accum") {
      c.accum = static_cast<int>(parse_int(a, value(), 1, 1 << 16));
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
      if (c.dtype != "fp32" && c.dtype != "bf16") throw UsageError("--dtype expects fp32 or bf16, got '" + c.dtype + "'");
    } else if (a == "--threads") {
      c.threads = static_cast<int>(parse_int(a, value(), 1, 4096));
    } else if (a == "--dispatch") {
      c.dispatch = value();
      if (c.dispatch != "static" && c.dispatch != "any") {
        throw UsageError("--dispatch expects static or any, got '" + c.dispatch + "'");
      }
    } else if (a == "--attention") {
      c.attention = value();
      if (c.attention != "fused" && c.attention != "gemm" && c.attention != "auto") {
        throw UsageError("--attention expects fused, gemm or auto, got '" + c.attention + "'");
      }
    } else if (a == "--streams") {
      c.streams = static_cast<int>(parse_int(a, value(), 1, 256));
    } else if (a == "--graph") {
      c.graph = true;
    } else if (a == "--save") {
      c.save = value();
    } else if (a == "--save-every") {
      c.save_every = parse_int(a, value(), 1, 1LL << 40);
    } else if (a == "--resume") {
      c.resume = value();
    } else if (a == "--sample") {
      c.sample = static_cast<int>(parse_int(a, value(), 0, 1 << 24));
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
  if (c.streams > 0 && c.batch % c.streams != 0) {
    throw UsageError("--streams " + std::to_string(c.streams) + " does not divide --batch " + std::to_string(c.batch) +
                     " (each stream runs batch / streams sequences)");
  }
  if (c.graph && c.streams > 1) {
    throw UsageError("--graph captures one stream: it cannot be combined with --streams " + std::to_string(c.streams));
  }
  if (c.shape.width % c.shape.heads != 0) {
    throw UsageError("--heads " + std::to_string(c.shape.heads) + " does not divide --width " +
                     std::to_string(c.shape.width) + " (each head gets width / heads channels)");
  }
  return c;
}

}  // namespace engine
