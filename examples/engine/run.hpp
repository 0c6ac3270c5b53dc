// run.hpp — Engine<B>::run(): checks, then the training loop with its progress lines, evaluations,
// checkpoints, signals, the final summary and a sample.
//
// Every check that can fail on the user's input — the data file, the shape, the model's memory
// against the device's, the block against the corpus, a checkpoint that does not match — happens
// before the first allocation or file write; it throws UsageError (exit status 2).
#pragma once

#include "buckets.hpp"
#include "checkpoint.hpp"
#include "checkpoint_space.hpp"
#include "config.hpp"
#include "corpus.hpp"
#include "cpu_threads.hpp"
#include "data_parallel.hpp"
#include "deepspeed_config.hpp"
#include "engine.hpp"
#include "layout.hpp"
#include "loss_scaler.hpp"
#include "report.hpp"
#include "same_run.hpp"
#include "writable.hpp"

#include <accel/accel.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <unistd.h>

namespace engine {

/// The default corpus: $ENGINE_DATA, else data/shakespeare/shakespeare.txt in the source tree.
inline std::string default_data_path() {
  if (const char* d = std::getenv("ENGINE_DATA"); d != nullptr && *d != '\0') return d;
#ifdef ENGINE_DEFAULT_DATA
  return ENGINE_DEFAULT_DATA;
#else
  return "data/shakespeare/shakespeare.txt";
#endif
}

/// Data-sheet peak FLOP/s of a GPU by name (dense; bf16 tensor cores, or fp32), 0 when unknown.
inline double datasheet_peak(const std::string& device, bool bf16) {
  struct Row {
    const char* name;
    double bf16, fp32;
  };
  static const Row rows[] = {{"H100 PCIe", 756e12, 51.2e12}, {"H100", 989.4e12, 66.9e12}, {"H200", 989.4e12, 66.9e12},
                             {"A100", 312e12, 19.5e12},      {"L40S", 362e12, 91.6e12}, {"A10", 125e12, 31.2e12}};
  for (const auto& r : rows) {
    if (device.find(r.name) != std::string::npos) return bf16 ? r.bf16 : r.fp32;
  }
  return 0;
}

/// The device's product name where the backend can tell it ("NVIDIA H200"), else its device name:
/// the data-sheet peak is looked up by it.
template <class B>
std::string product_name(const B& b) {
  if constexpr (requires { B::product_name(0); }) {
    return B::product_name(b.current_device());
  } else {
    return b.device_name();
  }
}

/// Failures injected by the tests (ENGINE_FAULT): "kill:RANK:STEP" — that rank kills itself with
/// SIGKILL as step STEP begins (a rank dying mid-run); "hang:RANK:STEP" — that rank stops there, alive
/// (a stuck rank: the others' collectives time out naming it); "inf:STEP" — the last rank's gradients
/// of step STEP hold an inf (an fp16 overflow, for the loss scaler).
struct FaultInjection {
  enum class Kind { none, kill, hang, inf } kind = Kind::none;
  int rank = 0;
  std::int64_t step = -1;

  static FaultInjection from_env() {
    FaultInjection f;
    const char* e = std::getenv("ENGINE_FAULT");
    if (e == nullptr || *e == '\0') return f;
    const std::string s = e;
    int r = 0;
    long long st = 0;
    if (std::sscanf(s.c_str(), "kill:%d:%lld", &r, &st) == 2) {
      f.kind = Kind::kill;
    } else if (std::sscanf(s.c_str(), "hang:%d:%lld", &r, &st) == 2) {
      f.kind = Kind::hang;
    } else if (std::sscanf(s.c_str(), "inf:%lld", &st) == 1) {
      f.kind = Kind::inf;
      r = -1;
    } else {
      throw UsageError("ENGINE_FAULT: expected kill:RANK:STEP, hang:RANK:STEP or inf:STEP, got '" + s + "'");
    }
    f.rank = r;
    f.step = st;
    return f;
  }

  template <class Tr>
  void before_step(std::int64_t it, int my_rank, Tr& t) const {
    if (kind == Kind::kill && it == step && my_rank == rank) {
      std::fprintf(stderr, "engine: rank %d: ENGINE_FAULT kills this rank at step %lld\n", my_rank, static_cast<long long>(it));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    if (kind == Kind::hang && it == step && my_rank == rank) {
      std::fprintf(stderr, "engine: rank %d: ENGINE_FAULT stops this rank at step %lld\n", my_rank, static_cast<long long>(it));
      std::fflush(stderr);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until the job is ended
    }
    if (kind == Kind::inf) t.set_inject_inf(it == step && my_rank == t.ranks() - 1);
  }
};

/// --attention resolved for a device: auto is fused on the CPU where its kernels have the head size
/// (cpu_fused_attention_fits), and on CUDA flash where its kernels fit (16-bit activations, head size 32
/// or 64), else gemm, which takes any shape. fused or flash asked for where it does not fit is an error
/// naming why, before anything is allocated (not a kernel refusing its arguments mid-step).
inline AttentionPath attention_path(accel::DeviceType type, const Config& c) {
  const accel::Dtype dtype = c.dtype == "bf16"   ? accel::Dtype::bfloat16
                             : c.dtype == "fp16" ? accel::Dtype::float16
                                                 : accel::Dtype::float32;
  const bool fits = flash_attention_fits(type, dtype, c.shape.width, c.shape.heads);
  const bool cpu = type == accel::DeviceType::cpu;
  const bool fused_fits = cpu ? cpu_fused_attention_fits(c.shape.width, c.shape.heads)
                              : c.shape.block <= cuda_fused_attention_max_block;
  if (c.attention == "fused") {
    if (fused_fits) return AttentionPath::fused;
    if (cpu) {
      const std::int64_t hs = c.shape.heads > 0 ? c.shape.width / c.shape.heads : 0;
      throw UsageError("--attention fused on the CPU needs a head size (width / heads) of 16, 32, 48, 64, 80, 96 or "
                       "128; this run has head size " + std::to_string(hs) + " (width " + std::to_string(c.shape.width) +
                       ", heads " + std::to_string(c.shape.heads) + "): --attention gemm takes any head size");
    }
    throw UsageError("--attention fused on CUDA keeps a row's scores in shared memory: --block " +
                     std::to_string(c.shape.block) + " is over its " + std::to_string(cuda_fused_attention_max_block) +
                     "; --attention gemm or flash takes longer blocks");
  }
  if (c.attention == "gemm") return AttentionPath::gemm;
  if (c.attention == "flash") {
    if (fits) return AttentionPath::flash;
    const std::int64_t hs = c.shape.heads > 0 ? c.shape.width / c.shape.heads : 0;
    throw UsageError("--attention flash needs a CUDA device, --dtype bf16 or fp16, and a head size of 32 or 64 "
                     "(width / heads, width a multiple of 8); this run has " +
                     std::string(type == accel::DeviceType::cuda ? "CUDA" : "no CUDA device") + ", --dtype " + c.dtype +
                     ", head size " + std::to_string(hs) + " (width " + std::to_string(c.shape.width) + ")");
  }
  if (cpu) return fused_fits ? AttentionPath::fused : AttentionPath::gemm;
  return fits ? AttentionPath::flash : AttentionPath::gemm;
}

template <class B>
class Engine {
 public:
  Engine(B b, Config cfg) : b_(b), cfg_(std::move(cfg)) {}

  /// Trains; returns the exit status. UsageError for bad input (before anything is allocated).
  /// Collective over the ranks of the launch (mpirun -np N): each rank runs it.
  int run() {
    Ranks<B> ranks = Ranks<B>::world(b_, cfg_.force_collectives);
    cfg_.rank = ranks.rank();
    cfg_.ranks = ranks.size();
    if (cfg_.rank != 0) cfg_.quiet = true;  // rank 0 reports; every rank reports its errors
    if (!cfg_.trace.empty() && cfg_.ranks > 1) {  // a trace per rank: out.json -> out.rank1.json
      const std::filesystem::path p(cfg_.trace);
      cfg_.trace = (p.parent_path() / (p.stem().string() + ".rank" + std::to_string(cfg_.rank) + p.extension().string())).string();
    }
    resolve_batch(cfg_, ranks.size());
    check_parallel(ranks.size());
    if (cfg_.data.empty()) {
      cfg_.data = default_data_path();
      if (!std::filesystem::exists(cfg_.data)) {
        throw UsageError("the default corpus " + cfg_.data + " is missing: run scripts/fetch-data.sh, or give --data FILE");
      }
    }
    std::filesystem::path resume_dir;
    if (!cfg_.resume.empty()) resume_dir = resolve_resume(cfg_.resume, cfg_.save);
    check_outputs(resume_dir);
    const Corpus corpus = Corpus::load(cfg_.data);
    if (!cfg_.prompt.empty()) prompt_ = corpus.encode_text(cfg_.prompt, "--prompt");
    resolve_threads(ranks);
    if (cfg_.streams == 0) cfg_.streams = default_streams();
    if (cfg_.dtype == "fp16" && runtime_backend<B>()) {
      throw UsageError("--dtype fp16 runs on the concrete backends (--dispatch static): --dispatch any is float32 or bf16");
    }
    check_dtype_gemm();
    std::optional<CheckpointState> resume;
    if (!cfg_.resume.empty()) {
      resume = read_checkpoint_manifest(resume_dir);
      check_resume(*resume, corpus, resume_dir / "manifest.txt");
    }
    if (cfg_.streams > 1 && cfg_.batch % cfg_.streams != 0) {
      throw UsageError("--streams " + std::to_string(cfg_.streams) + " does not divide the micro-batch of " +
                       std::to_string(cfg_.batch) + " sequences each of the " + std::to_string(cfg_.ranks) + " ranks runs");
    }
    const Plan plan = make_plan(corpus);
    // Several ranks are one run: the same settings, data and checkpoint on each, and one --save
    // directory, or the same error on each.
    if (ranks.size() > 1) {
      check_same_run(b_, ranks, shared_settings(cfg_, corpus, resume ? &*resume : nullptr));
      check_shared_save(b_, ranks, cfg_.save);
    }
    check_save_space(plan, resume ? std::optional<std::int64_t>(resume->step) : std::nullopt, ranks);
    // The checkpoint's tensors (checksummed) are read before the device memory is allocated: a corrupt
    // or short file is bad input, found before anything is allocated or trained.
    if (resume) read_checkpoint_tensors(resume_dir, plan.total, *resume, cfg_.rank, shard_size(plan.total, cfg_.ranks));
    if (cfg_.dtype == "bf16") return run_typed<accel::bfloat16>(corpus, plan, resume, resume_dir, ranks);
    if constexpr (!runtime_backend<B>()) {
      if (cfg_.dtype == "fp16") return run_typed<accel::half>(corpus, plan, resume, resume_dir, ranks);
    }
    return run_typed<float>(corpus, plan, resume, resume_dir, ranks);
  }

 private:
  /// --save, --metrics and --trace, before anything is allocated: each must be creatable (a file's
  /// directory exists and is writable, an existing file is a regular file; --save is a directory or
  /// can be created), none may be the data file or inside the checkpoint --resume reads, and no two may
  /// be the same path (compared as weakly_canonical paths). On --resume an existing --metrics file is
  /// appended to, so it must be this engine's CSV. UsageError naming the flag.
  /// Writability is tried (writable.hpp), not asked of access(), which root passes everywhere.
  void check_outputs(const std::filesystem::path& resume_dir) const {
    namespace fs = std::filesystem;
    const auto check_file = [](const std::string& flag, const std::string& path) {
      if (const std::string why = output_file_error(fs::absolute(path)); !why.empty()) {
        throw UsageError(flag + " " + path + ": " + why);
      }
    };
    std::vector<std::pair<std::string, std::string>> outs;  // (flag, path) of what this rank writes
    if (!cfg_.metrics.empty() && cfg_.rank == 0) outs.emplace_back("--metrics", cfg_.metrics);
    if (!cfg_.trace.empty()) outs.emplace_back("--trace", cfg_.trace);
    for (const auto& [flag, path] : outs) check_file(flag, path);
    if (!cfg_.save.empty()) {
      const fs::path p = fs::absolute(cfg_.save);
      std::error_code ec;
      const auto st = fs::status(p, ec);
      if (fs::exists(st)) {
        if (!fs::is_directory(st)) throw UsageError("--save " + cfg_.save + ": it is " + file_kind(st.type()) + ", not a directory");
        if (const std::string why = creation_error(p, true); !why.empty()) {
          throw UsageError("--save " + cfg_.save + ": cannot write in it: " + why);
        }
      } else {
        fs::path up = p.parent_path();  // the nearest existing ancestor: create_directories makes the rest
        while (!fs::exists(fs::status(up, ec)) && up != up.parent_path()) up = up.parent_path();
        const auto us = fs::status(up, ec);
        if (!fs::is_directory(us)) {
          throw UsageError("--save " + cfg_.save + ": cannot create it: " + up.string() + " is " + file_kind(us.type()) +
                           ", not a directory");
        }
        if (const std::string why = creation_error(up, true); !why.empty()) {
          throw UsageError("--save " + cfg_.save + ": cannot create it in " + up.string() + ": " + why);
        }
      }
      outs.emplace_back("--save", cfg_.save);
    }
    const fs::path data = canonical_path(cfg_.data);
    const fs::path resumed = resume_dir.empty() ? fs::path() : canonical_path(resume_dir.string());
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const auto& [flag, path] = outs[i];
      const fs::path c = canonical_path(path);
      if (c == data) throw UsageError(flag + " " + path + " is the data file (--data " + cfg_.data + "): it would be overwritten");
      if (!resumed.empty() && path_within(c, resumed)) {
        throw UsageError(flag + " " + path + " is inside the checkpoint --resume reads (" + resume_dir.string() + ")");
      }
      for (std::size_t j = 0; j < i; ++j) {
        if (c == canonical_path(outs[j].second)) {
          throw UsageError(flag + " " + path + " and " + outs[j].first + " " + outs[j].second + " are the same path");
        }
      }
    }
    if (!cfg_.metrics.empty() && cfg_.rank == 0 && !resume_dir.empty()) {  // appended to: it must be ours
      std::ifstream in(cfg_.metrics);
      std::string first;
      if (in && std::getline(in, first) && first != metrics_header) {
        throw UsageError("--metrics " + cfg_.metrics + ": a resumed run appends to it, and it is not the engine's metrics CSV "
                         "(its first line is not the header); give another file");
      }
    }
  }

  /// A 16-bit dtype the backend's GEMM cannot multiply here (a backend whose GEMM refuses bf16) is bad
  /// input, found with one 1 x 1 x 1 product before anything else is allocated.
  void check_dtype_gemm() const {
    if (cfg_.dtype != "bf16") return;
    auto s = new_stream(b_);
    accel::Buffer<accel::bfloat16, B> x(3, s);
    try {
      accel::blas::gemm(b_, typename B::StreamRef(s), accel::blas::Trans::no, accel::blas::Trans::no, 1, 1, 1, 1.0f,
                        x.data(), 1, x.data() + 1, 1, 0.0f, x.data() + 2, 1);
      s.synchronize();
    } catch (const accel::NotSupportedError& e) {
      throw UsageError(std::string("--dtype bf16 on ") + std::string(b_.name()) + ": " + e.what());
    }
  }

  /// What several ranks cannot do, and --deterministic's condition on the rank count.
  void check_parallel(int n) const {
    if (n > 1 && !cfg_.dump.empty()) throw UsageError("--dump writes one rank's gradients: run it without mpirun");
    if (cfg_.deterministic) {
      const std::int64_t leaves = cfg_.global_batch / cfg_.batch;
      std::int64_t odd = leaves;
      while (odd % 2 == 0) odd /= 2;
      if ((leaves / odd) % n != 0) {
        throw UsageError("--deterministic sums the " + std::to_string(leaves) + " micro-batches of " +
                         std::to_string(cfg_.batch) + " sequences in a fixed tree whose power-of-two part is " +
                         std::to_string(leaves / odd) + " wide: the rank count must divide it, and " +
                         std::to_string(n) + " does not");
      }
    }
  }

  static std::int64_t odd_part(std::int64_t n) {
    while (n > 0 && n % 2 == 0) n /= 2;
    return n;
  }

  /// The gradient memory of a rank, in MiB and in bytes (what the tests compare).
  template <class Tr>
  std::string gradient_text(const Tr& t) const {
    std::string s = mib(t.gradient_bytes()) + " MiB" + (t.distributed() ? " per rank" : "") + " (" +
                    std::to_string(t.gradient_bytes()) + " B: ";
    if (t.stage2()) {
      const std::size_t tree = t.tree_gradient_bytes();
      const std::size_t buckets = t.gradient_bytes() - t.shard_gradient_bytes() - tree;
      const auto lanes = static_cast<std::size_t>(cfg_.streams);
      s += "shard " + std::to_string(t.shard_gradient_bytes()) + " B + buckets " + std::to_string(buckets) + " B" +
           (lanes > 1 ? " (" + std::to_string(lanes) + " lanes x " + std::to_string(buckets / lanes) + " B)" : std::string()) +
           (tree > 0 ? " + the summation tree's " + std::to_string(tree) + " B" : std::string()) + ", ZeRO stage 2)";
    } else {
      s += "the whole model's" + std::string(cfg_.deterministic ? " and the summation tree's" : "") + ")";
    }
    return s;
  }

  /// --threads by default on the CPU (cpu_threads.hpp): OMP_NUM_THREADS, else the CPUs this process
  /// may run on, shared by the ranks on its machine that may run on them too. Collective on several
  /// ranks: each exchanges its machine and CPUs, whatever its own --threads (which may differ per rank).
  void resolve_threads(Ranks<B>& ranks) {
    if (b_.device_type() != accel::DeviceType::cpu) return;
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (cfg_.threads > 0) {
      threads_why_ = "--threads";
    } else if (omp != nullptr && *omp != '\0') {
      cfg_.threads = detail::parse_omp_num_threads(omp);
      threads_why_ = std::string("OMP_NUM_THREADS=") + omp;
    }
    std::vector<std::uint64_t> placements = detail::placement_words();
    if (ranks.size() > 1) {
      auto s = new_stream(b_);
      const auto bytes = detail::gather_bytes(b_, ranks, s, detail::words_bytes(placements));
      placements.assign(bytes.size() / 8, 0);
      std::memcpy(placements.data(), bytes.data(), bytes.size());
    }
    const CpuThreads share = detail::threads_from_placements(placements, ranks.size(), ranks.rank(), detail::usable_cpus());
    if (cfg_.threads == 0) {
      cfg_.threads = share.count;
      threads_why_ = share.why;
    } else if (cfg_.rank == 0) {
      const std::string given = threads_why_ == "--threads" ? "--threads " + std::to_string(cfg_.threads) : threads_why_;
      if (const std::string w = detail::oversubscription_warning(given, cfg_.threads, share); !w.empty()) {
        std::fprintf(stderr, "engine: warning: %s\n", w.c_str());
      }
    }
  }

  /// --streams by default: on the CPU one lane per thread (the largest count up to the threads that
  /// divides the batch; 1 with --graph, --deterministic, and stage 2, whose lanes wait for each other
  /// at every bucket: on a loaded or oversubscribed CPU that costs more than the lanes gain), elsewhere 1.
  [[nodiscard]] int default_streams() const {
    if (cfg_.graph || cfg_.deterministic || cfg_.zero_stage == 2 || cfg_.overlap == "on" ||
        b_.device_type() != accel::DeviceType::cpu) {
      return 1;  // one stream: what these need (--overlap on: the communication stream follows one)
    }
    int n = std::max(1, std::min(cfg_.threads, cfg_.batch));  // cfg_.threads: resolved by resolve_threads, which runs first
    while (n > 1 && cfg_.batch % n != 0) --n;
    return n;
  }

  /// What resuming needs of the manifest (read_checkpoint_manifest checked its form): the same model,
  /// dtype and vocabulary, both generators' states and a well-formed loss scale, before anything is
  /// allocated.
  void check_resume(const CheckpointState& st, const Corpus& corpus, const std::filesystem::path& manifest) const {
    const auto get = [&](const char* k) {
      const auto it = st.values.find(k);
      if (it == st.values.end()) throw UsageError("checkpoint " + manifest.string() + ": no '" + k + "'");
      return it->second;
    };
    const std::string shape = std::to_string(cfg_.shape.layers) + "/" + std::to_string(cfg_.shape.heads) + "/" +
                              std::to_string(cfg_.shape.width) + "/" + std::to_string(cfg_.shape.block);
    if (get("shape") != shape) {
      throw UsageError("--resume: the checkpoint's model is layers/heads/width/block " + get("shape") +
                       ", this run's is " + shape);
    }
    if (get("dtype") != cfg_.dtype) throw UsageError("--resume: the checkpoint was trained with --dtype " + get("dtype"));
    (void)get("vocabulary");
    if (st.decoded.at("vocabulary") != corpus.vocabulary()) {
      throw UsageError("--resume: the checkpoint's character vocabulary differs from " + cfg_.data + "'s");
    }
    (void)get("data_rng");
    (void)get("device_rng");
    if (const auto it = st.values.find("loss_scale"); it != st.values.end()) {
      if (const std::string why = DynamicLossScaler::state_error(it->second); !why.empty()) {
        throw UsageError("checkpoint " + manifest.string() + ": bad 'loss_scale' value '" + it->second + "': " + why);
      }
    }
  }

  /// --save's file system holds a checkpoint of this model (else UsageError, before anything is
  /// allocated: unchecked, the run trained up to its first save and failed there); a warning where the
  /// run's checkpoints, all kept, would not fit, and where a run not resumed (`resumed_at` empty) starts
  /// beside checkpoints already there. Several ranks go by rank 0's figure (one directory:
  /// check_shared_save), so they agree.
  void check_save_space(const Plan& plan, std::optional<std::int64_t> resumed_at, Ranks<B>& ranks) {
    if (cfg_.save.empty()) return;
    const std::uint64_t need = checkpoint_bytes(ParamLayout(cfg_.shape, plan.vocab_padded), cfg_.ranks,
                                                shard_size(plan.total, cfg_.ranks));
    std::optional<std::uint64_t> free = cfg_.rank == 0 ? free_bytes(cfg_.save) : std::nullopt;
    if (ranks.size() > 1) {
      std::vector<unsigned char> mine(9, 0);
      if (free) {
        mine[0] = 1;
        std::memcpy(mine.data() + 1, &*free, 8);
      }
      auto s = new_stream(b_);
      const auto all = detail::gather_bytes(b_, ranks, s, mine);  // rank 0's first
      free.reset();
      if (all[0] == 1) {
        std::uint64_t f = 0;
        std::memcpy(&f, all.data() + 1, 8);
        free = f;
      }
    }
    if (const std::string why = save_space_error(cfg_.save, need, free); !why.empty()) {
      if (ranks.size() > 1) throw AgreedUsageError(why);
      throw UsageError(why);
    }
    if (cfg_.rank != 0) return;
    const std::int64_t last = cfg_.stop_at > 0 ? std::min(cfg_.stop_at, cfg_.steps) : cfg_.steps;
    const std::string space = save_space_warning(cfg_.save, need, checkpoints_written(resumed_at.value_or(0), last, cfg_.save_every),
                                                 cfg_.keep_last, free, cfg_.keep_last > 0 ? checkpoints_bytes_in(cfg_.save) : 0);
    std::optional<std::int64_t> newest;
    if (!resumed_at) {
      if (const auto dir = newest_complete_checkpoint(cfg_.save); !dir.empty()) newest = detail::step_of_dir_name(dir.filename().string());
    }
    for (const std::string& warning : {space, fresh_run_warning(cfg_.save, newest)}) {
      if (!warning.empty()) std::fprintf(stderr, "engine: warning: %s\n", warning.c_str());
    }
  }

  Plan make_plan(const Corpus& corpus) const {
    Plan p;
    const ModelShape& s = cfg_.shape;
    p.vocab = corpus.vocab_size();
    p.vocab_padded = (p.vocab + s.vocab_multiple - 1) / s.vocab_multiple * s.vocab_multiple;
    const auto min_split = static_cast<std::size_t>(s.block) + 1;
    if (corpus.train().size() < min_split || corpus.val().size() < min_split) {
      throw UsageError("--block " + std::to_string(s.block) + " is longer than the corpus allows: each split needs at least " +
                       std::to_string(min_split) + " characters, and " + cfg_.data + " gives " +
                       std::to_string(corpus.train().size()) + " (train) and " + std::to_string(corpus.val().size()) +
                       " (validation)");
    }
    p.attention = attention_path(b_.device_type(), cfg_);
    if (cfg_.flash_backward == "fused") {
      if (p.attention != AttentionPath::flash) {
        throw UsageError("--flash-backward fused is a backward of the flash kernels, and this run's attention is " +
                         std::string(p.attention == AttentionPath::gemm ? "gemm" : "fused") +
                         " (--attention flash: CUDA, --dtype bf16 or fp16, head size 32 or 64)");
      }
      p.flash_backward = FlashBackward::fused;
    }
    const ParamLayout P(s, p.vocab_padded);
    const ActLayout A(s, cfg_.batch / cfg_.streams, p.vocab_padded, cfg_.accum, cfg_.dropout > 0, p.attention,
                      cfg_.activation_checkpointing, p.flash_backward);
    p.params = P.count();
    p.total = P.total;
    p.flops_per_step = train_flops_per_token(s, p.vocab_padded) * s.block * cfg_.batch * cfg_.accum;
    const bool lowp = cfg_.dtype != "fp32";
    const std::size_t act_bytes = lowp ? 2 : 4;
    const std::size_t np = static_cast<std::size_t>(P.total);
    const auto lanes = static_cast<std::size_t>(cfg_.streams);
    const std::size_t ns = static_cast<std::size_t>(shard_size(P.total, cfg_.ranks));
    // Gradients: stage 1 the whole model's per lane; stage 2 the shard's and each lane's buckets (at
    // most three with one lane, with --overlap's two layer buckets; two with several: no --overlap).
    std::size_t grads = np * act_bytes * lanes;
    if (cfg_.zero_stage == 2) {
      const auto per_lane = static_cast<std::size_t>(BucketPlan(P, cfg_.reduce_bucket).elements(lanes > 1 ? 1 : 2));
      grads = (ns + lanes * per_lane) * act_bytes;
    }
    // Adam's moments; 16-bit models: fp32 master weights and, with the loss scaler, the shard's
    // unscaled fp32 gradients.
    const bool scaled = cfg_.loss_scale != 1.0;
    const std::size_t weights = np * act_bytes + grads + ns * 8 + (lowp ? ns * 4 : 0) + (lowp && scaled ? ns * 4 : 0);
    // Activations per lane; --deterministic stage 2 also holds a run's odd micro-batches at once.
    const std::size_t sets = lanes + (cfg_.zero_stage == 2 && cfg_.deterministic
                                          ? static_cast<std::size_t>(odd_part(cfg_.global_batch / cfg_.batch)) - 1
                                          : 0);
    const std::size_t acts = sets * (static_cast<std::size_t>(A.act) * act_bytes + static_cast<std::size_t>(A.f32 + A.bits) * 4);
    const std::size_t tokens = static_cast<std::size_t>(cfg_.batch) * s.block * cfg_.accum * 8;
    p.bytes = weights + acts + tokens;
    p.bytes_breakdown = mib(weights) + " MiB weights, gradients and optimizer state + " + mib(acts) + " MiB activations";
    const std::size_t available = b_.available_memory();
    if (p.bytes + p.bytes / 20 > available) {  // 5 % for the BLAS's and the allocator's own
      throw UsageError("the model does not fit: it needs " + mib(p.bytes) + " MiB (" + p.bytes_breakdown + ") and " +
                       std::string(b_.name()) + ":" + std::to_string(b_.current_device()) + " has " + mib(available) +
                       " MiB available; try " + (cfg_.activation_checkpointing ? "" : "--activation-checkpointing, ") +
                       "a smaller --batch, --block or --size");
    }
    return p;
  }

  template <class T>
  int run_typed(const Corpus& corpus, const Plan& plan, const std::optional<CheckpointState>& resume,
                const std::filesystem::path& resume_dir, Ranks<B>& ranks) {
    Trainer<B, T> t(b_, cfg_, corpus, plan, ranks);
    const Barrier barrier = [&](bool ok) { return t.agree_max({ok ? 0 : 1, 0})[0] == 0; };
    const ShareFromRank0 share = [&](std::array<int, 2> v) {
      return t.agree_max(ranks.rank() == 0 ? v : std::array<int, 2>{0, 0});  // the max of rank 0's and zeros
    };
    if (resume) {
      if (resume->params.size() != static_cast<std::size_t>(t.shard())) {
        throw std::logic_error("engine: the checkpoint's shard was read for another partition");
      }
      t.load_state(*resume);
    } else {
      t.init_weights();
    }
    const FaultInjection fault = FaultInjection::from_env();
    const bool cpu = b_.device_type() == accel::DeviceType::cpu;
    const double peak = cpu ? t.measure_peak(0.15) : datasheet_peak(product_name(b_), cfg_.dtype != "fp32");
    const bool attention_amx = cpu && plan.attention == AttentionPath::fused && t.attention_on_amx();
    MetricsCsv metrics;
    if (cfg_.rank == 0) metrics.open(cfg_.metrics, resume.has_value());  // rank 0 reports
    std::unique_ptr<Dump> dump;
    if (!cfg_.dump.empty()) dump = std::make_unique<Dump>(cfg_, t, plan);
    const std::int64_t tokens_per_step = cfg_.global_batch * cfg_.shape.block;
    if (!cfg_.quiet) {
      std::printf("engine: %s on %s (%s), %s\n", cfg_.size.c_str(), std::string(b_.name()).c_str(),
                  b_.device_name().c_str(), cfg_.dtype.c_str());
      std::printf("model: %d layers, %d heads, width %d, block %d, vocabulary %lld (%lld padded): %s parameters\n",
                  cfg_.shape.layers, cfg_.shape.heads, cfg_.shape.width, cfg_.shape.block,
                  static_cast<long long>(plan.vocab), static_cast<long long>(plan.vocab_padded), grouped(plan.params).c_str());
      using Units = Corpus::Units;
      const Units u = corpus.units();
      const std::string how = u == Units::utf8             ? " (UTF-8, " + grouped(corpus.bytes()) + " bytes)"
                              : u == Units::bytes_not_utf8 ? " (not UTF-8: a token a byte)"
                              : u == Units::bytes_too_many ? " (more than 65,536 distinct characters: a token a byte)"
                                                           : "";
      std::printf("data: %s, %s %s%s (%s train, %s validation)\n", cfg_.data.c_str(), grouped(corpus.size()).c_str(),
                  u == Units::bytes_not_utf8 || u == Units::bytes_too_many ? "bytes" : "characters", how.c_str(),
                  grouped(corpus.train().size()).c_str(), grouped(corpus.val().size()).c_str());
      if (ranks.distributed()) {
        const double whole = static_cast<double>(t.optimizer_bytes()) * ranks.size();
        std::printf("data parallel: %d rank%s (%s%s), ZeRO stage %d%s%s: global batch %lld = micro-batch %d x accumulation %d x %d ranks; optimizer state %s MiB per rank (1/%d of %s MiB); gradients %s\n",
                    ranks.size(), ranks.size() > 1 ? "s" : "", ranks.engine_name().c_str(),
                    ranks.size() == 1 ? ", collectives forced on one rank" : "", cfg_.zero_stage, cfg_.deterministic ? ", deterministic" : "",
                    t.overlap() ? ", overlapped (buckets on a communication stream)" : "",
                    static_cast<long long>(cfg_.global_batch), cfg_.batch, cfg_.accum, ranks.size(),
                    mib(t.optimizer_bytes()).c_str(), ranks.size(), mib(static_cast<std::size_t>(whole)).c_str(),
                    gradient_text(t).c_str());
      }
      std::printf("training: %lld steps of %d x %d x %d tokens on %d stream%s, lr %.2e (%s, warmup %lld), AdamW (%.2f, %.3f, wd %.2f), clip %.2f, dropout %.2f, seed %llu%s\n",
                  static_cast<long long>(cfg_.steps), cfg_.accum * ranks.size(), cfg_.batch, cfg_.shape.block, cfg_.streams,
                  cfg_.streams > 1 ? "s" : "", cfg_.lr, cfg_.schedule.c_str(),
                  static_cast<long long>(cfg_.warmup), cfg_.beta1, cfg_.beta2, cfg_.weight_decay, cfg_.clip, cfg_.dropout,
                  static_cast<unsigned long long>(cfg_.seed),
                  (std::string(cfg_.graph ? ", graph" : "") + (cfg_.activation_checkpointing ? ", activation checkpointing" : "")).c_str());
      const std::string peak_how = !cpu ? "data sheet"
                                   : std::string(cfg_.dtype == "fp32" ? "measured FMA loop" : "measured float32 FMA loop") +
                                         " on " + std::to_string(cfg_.threads) + " thread" + (cfg_.threads > 1 ? "s" : "") +
                                         ": " + threads_why_;
      std::printf("peak: %s GFLOP/s (%s)%s\n", peak > 0 ? fmt("%.1f", peak / 1e9).c_str() : "unknown", peak_how.c_str(), resume ? (", resumed at step " + std::to_string(t.step()) + " from " + resume_dir.string()).c_str() : "");
      std::fflush(stdout);
    }
    install_signal_handlers();
    // --trace: the first trace_steps steps (evaluations included), written when they are done.
    std::unique_ptr<accel::profile::TraceRecorder> trace;
    std::int64_t traced_steps = 0;
    const auto finish_trace = [&] {
      if (!trace) return;
      t.set_trace(nullptr);
      // Beside the target and renamed over it: a failed write leaves no half-written trace.
      const std::string tmp = cfg_.trace + ".tmp." + std::to_string(::getpid());
      try {
        trace->write(tmp);
        std::filesystem::rename(tmp, cfg_.trace);
      } catch (...) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw;
      }
      trace.reset();
      if (!cfg_.quiet) {
        std::printf("trace: %s (%lld steps; open it in https://ui.perfetto.dev)\n", cfg_.trace.c_str(),
                    static_cast<long long>(traced_steps));
      }
    };
    if (!cfg_.trace.empty()) {
      trace = std::make_unique<accel::profile::TraceRecorder>();
      t.set_trace(trace.get());
    }
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    double train_seconds = 0, interval_seconds = 0, best_val = NAN, last_val = NAN, last_loss = NAN;
    double first_loss = NAN;
    std::int64_t interval_steps = 0, steps_done = 0;
    std::vector<double> step_ms;
    std::size_t peak_allocated = 0, peak_reserved = 0;
    std::string stopped_by;
    const auto save = [&](const std::string& dir) {
      std::vector<float> full;
      const CheckpointState st = t.save_state(&full);
      std::filesystem::path path;
      try {
        path = write_checkpoint(dir, t.layout(), st, full, barrier, share);
      } catch (const std::runtime_error& e) {  // out of space: say how much it takes and what would make room
        const std::string what = e.what();
        if (what.find(std::strerror(ENOSPC)) == std::string::npos && what.find(std::strerror(EDQUOT)) == std::string::npos) throw;
        const std::uint64_t need = checkpoint_bytes(t.layout(), cfg_.ranks, st.shard);
        throw std::runtime_error(what + out_of_space_hint(need, free_bytes(dir), checkpoints_bytes_in(dir), cfg_.keep_last));
      }
      if (!cfg_.quiet) std::printf("checkpoint: %s\n", path.string().c_str());
      if (cfg_.rank == 0 && cfg_.keep_last > 0) {  // published: every rank's shard is in it
        const PruneReport pruned = prune_checkpoints(dir, cfg_.keep_last, path);
        for (const auto& w : pruned.warnings) std::fprintf(stderr, "checkpoint: warning: %s\n", w.c_str());
        if (!pruned.removed.empty() && !cfg_.quiet) {
          std::string line;
          for (const auto& r : pruned.removed) line += (line.empty() ? "" : ", ") + r;
          std::printf("checkpoint: --keep-last %lld removed %s\n", static_cast<long long>(cfg_.keep_last), line.c_str());
        }
      }
      return path;
    };
    // --run-ahead: step k + 1 is enqueued before step k's losses are read, so the device goes from one
    // step to the next without waiting for the host (the read of the losses, this loop's bookkeeping,
    // the next step's first launches). Not where something after step k needs the device idle or every
    // rank's word — an evaluation, a checkpoint, the end, --stop-at, the step --dump takes gradients
    // of, a trace being recorded, several ranks (they agree on stopping after every step) — which
    // host_work_after knows before step k runs, the same on every rank. A --time limit or a signal seen
    // while step k + 1 is in flight lets it finish too, then stops (SIGINT: the steps begun are finished).
    // fp16's loss scaler reads each step's norm before its optimizer (the overflow check), so the host
    // waits within every step anyway; it runs one step at a time (its messages then follow the steps).
    const bool run_ahead = cfg_.run_ahead == "on" && !ranks.distributed() && !t.scaler().enabled();
    const auto host_work_after = [&](std::int64_t it) {
      const std::int64_t done = it + 1;
      return done >= cfg_.steps || (cfg_.stop_at > 0 && done >= cfg_.stop_at) ||
             (cfg_.eval_every > 0 && done % cfg_.eval_every == 0) ||
             (cfg_.save_every > 0 && !cfg_.save.empty() && done % cfg_.save_every == 0) ||
             (dump && done == dump->first_step) || trace != nullptr;
    };
    std::vector<float> grads0;          // --dump: step first_step's gradients
    std::deque<clock::time_point> began;  // when each step in flight was begun
    clock::time_point last_finish{};
    const auto begin_step = [&](std::int64_t it) {
      fault.before_step(it, ranks.rank(), t);
      began.push_back(clock::now());
      t.begin_step(dump && it == dump->first_step ? &grads0 : nullptr);
    };
    bool timed_out = false;
    int caught = 0;  // SIGINT or SIGTERM
    while (t.steps_in_flight() > 0 || t.step() < cfg_.steps) {
      if (t.steps_in_flight() == 0) begin_step(t.step());
      const std::int64_t it = t.step() - static_cast<std::int64_t>(t.steps_in_flight());  // the step finished now
      if (run_ahead && !timed_out && caught == 0 && stop_signal().load() == 0 && !host_work_after(it)) begin_step(it + 1);
      const auto r = t.finish_step();
      // A step's time: from its begin, or, run ahead, from the previous step's end (the device's step).
      const auto now = clock::now();
      const double sec = std::chrono::duration<double>(now - std::max(began.front(), last_finish)).count();
      began.pop_front();
      last_finish = now;
      if (dump) {
        dump->record(it, r, grads0);
        grads0 = {};
      }
      train_seconds += sec;
      interval_seconds += sec;
      ++interval_steps;
      ++steps_done;
      step_ms.push_back(sec * 1e3);
      if (std::isnan(first_loss)) first_loss = r.loss;
      last_loss = r.loss;
      const std::int64_t done = it + 1;
      const bool last = done == cfg_.steps;
      bool out_of_time = (cfg_.max_seconds > 0 && train_seconds >= cfg_.max_seconds) ||
                         (cfg_.stop_at > 0 && done >= cfg_.stop_at);
      int sig = stop_signal().load();
      if (ranks.distributed()) {
        // Every rank must stop at the same step (else the others wait in a collective): agree on it.
        const auto agreed = t.agree_max({out_of_time ? 1 : 0, sig});
        out_of_time = agreed[0] != 0;
        sig = agreed[1];
      }
      timed_out = timed_out || out_of_time;
      if (caught == 0) caught = sig;
      const bool stop = timed_out || caught != 0;
      const bool drain = stop && t.steps_in_flight() > 0;  // the step run ahead first
      const bool eval = cfg_.eval_every > 0 && !drain && (done % cfg_.eval_every == 0 || last || timed_out) && ranks.rank() == 0;
      if (eval) {
        last_val = t.eval_loss();
        best_val = std::isnan(best_val) ? last_val : std::min(best_val, last_val);
      }
      peak_allocated = std::max(peak_allocated, b_.memory_allocated());
      peak_reserved = std::max(peak_reserved, b_.memory_reserved());
      if (done % cfg_.print_every == 0 || eval || last || timed_out || it == 0) {
        Progress p;
        p.step = done;
        p.steps = cfg_.steps;
        p.train_loss = r.loss;
        p.val_loss = eval ? last_val : NAN;
        p.lr = r.lr;
        p.grad_norm = r.grad_norm;
        p.tokens_per_s = static_cast<double>(tokens_per_step * interval_steps) / interval_seconds;
        p.ms_per_step = interval_seconds * 1e3 / static_cast<double>(interval_steps);
        p.mfu = peak > 0 ? static_cast<double>(plan.flops_per_step) / (p.ms_per_step / 1e3) / peak : NAN;
        p.elapsed_s = train_seconds;
        p.tokens = tokens_per_step * done;
        p.allocated = b_.memory_allocated();
        p.reserved = b_.memory_reserved();
        p.optimizer_bytes = t.optimizer_bytes();
        p.gradient_bytes = t.gradient_bytes();
        p.ranks = ranks.size();
        p.distributed = ranks.distributed();
        if (t.scaler().enabled()) {
          p.loss_scale = r.loss_scale;
          p.skipped = r.skipped_so_far;  // not the scaler's: a step run ahead may have updated it
        }
        if (!cfg_.quiet) {
          std::printf("%s\n", progress_line(p).c_str());
          std::fflush(stdout);
        }
        metrics.row(p);
        interval_seconds = 0;
        interval_steps = 0;
      }
      if (trace && ++traced_steps >= cfg_.trace_steps) finish_trace();
      if (cfg_.save_every > 0 && !cfg_.save.empty() && done % cfg_.save_every == 0 && !last && !drain) save(cfg_.save);
      if (stop && !drain) {
        if (caught != 0) {
          stopped_by = caught == SIGINT ? "SIGINT" : "SIGTERM";
        } else {
          stopped_by = cfg_.stop_at > 0 && done >= cfg_.stop_at ? "--stop-at " + std::to_string(cfg_.stop_at)
                                                                : "--time " + fmt("%g", cfg_.max_seconds) + " s";
        }
        break;
      }
    }
    finish_trace();
    const double wall = std::chrono::duration<double>(clock::now() - start).count();
    std::string saved;
    if (!cfg_.save.empty() || stopped_by == "SIGINT" || stopped_by == "SIGTERM") {
      const std::string dir = cfg_.save.empty() ? std::string("checkpoints") : cfg_.save;
      // No step since the checkpoint was read from this directory (sampling a saved model: --resume
      // --save DIR --steps N --sample K): writing it again would only cost the disk's time and, for an
      // older step than `latest`'s, move `latest` back to it. Into another directory it is a copy. The
      // ranks agree (a save is collective): any rank that would write makes every rank write.
      const bool same = steps_done == 0 && resume && canonical_path(resume_dir.parent_path().string()) == canonical_path(dir);
      if (t.agree_max({same ? 0 : 1, 0})[0] == 0) {
        saved = resume_dir.string() + " (unchanged: no step trained since it was read)";
        if (!cfg_.quiet) std::printf("checkpoint: %s\n", saved.c_str());
      } else {
        saved = save(dir).string();
      }
    }
    // The summary.
    const double median_ms = median(step_ms);
    const double tok_s = train_seconds > 0 ? static_cast<double>(tokens_per_step * steps_done) / train_seconds : 0;
    const double mfu = peak > 0 && train_seconds > 0 ? static_cast<double>(plan.flops_per_step * steps_done) / train_seconds / peak : NAN;
    // At the median step (llm.c's and nanoGPT's figure, the steady state) and over the run (the first,
    // slower steps included), so that MFU reads beside "ms/step ... median".
    const double mfu_median = peak > 0 && median_ms > 0 ? static_cast<double>(plan.flops_per_step) / (median_ms / 1e3) / peak : NAN;
    std::vector<std::pair<std::string, std::string>> rows = {
        {"backend", std::string(b_.name()) + " (" + product_name(b_) + ")"},
        {"model", cfg_.size + ": " + grouped(plan.params) + " parameters, " + cfg_.dtype + ", attention " +
                      (plan.attention == AttentionPath::flash
                           ? (plan.flash_backward == FlashBackward::fused ? "flash, one-kernel backward" : "flash")
                       : plan.attention == AttentionPath::gemm ? "gemm"
                                                               : attention_amx ? "fused, AMX tiles"
                                                                               : "fused") +
                      (t.gelu_fusion() ? ", GELU in the GEMMs" : "")},
        {"steps", std::to_string(t.step()) + " (" + std::to_string(steps_done) + " this run" +
                      (stopped_by.empty() ? "" : ", stopped by " + stopped_by) + ")"},
        {"tokens", grouped(static_cast<double>(tokens_per_step * steps_done))},
        {"train loss", fmt("%.4f", first_loss) + " -> " + fmt("%.4f", last_loss)},
        {"val loss", std::isnan(last_val) ? "-" : fmt("%.4f", last_val) + " (best " + fmt("%.4f", best_val) + ")"},
        {"training time", fmt("%.1f", train_seconds) + " s (wall " + fmt("%.1f", wall) + " s)"},
        {"tokens/s", grouped(tok_s)},
        {"ms/step", fmt("%.1f", median_ms) + " median"},
        {"MFU", std::isnan(mfu) || std::isnan(mfu_median)
                    ? "n/a"
                    : fmt("%.1f", 100 * mfu_median) + "% at the median step, " + fmt("%.1f", 100 * mfu) + "% over the run, of " +
                          fmt("%.1f", peak / 1e9) + " GFLOP/s" +
                          (cpu && cfg_.dtype != "fp32" ? " (the float32 FMA peak: bf16 products on AMX or AVX512-BF16 can exceed it)" : "")},
        {"memory", mib(peak_allocated) + " MiB allocated, " + mib(peak_reserved) + " MiB reserved (peak)" +
                       (ranks.distributed() ? " per rank" : "")},
        {"optimizer state", mib(t.optimizer_bytes()) + " MiB" +
                                (ranks.distributed() ? " per rank (ZeRO stage " + std::to_string(cfg_.zero_stage) + ", " +
                                                           std::to_string(ranks.size()) + (ranks.size() > 1 ? " ranks)" : " rank)")
                                                  : std::string())},
        {"gradients", gradient_text(t)},
    };
    if (t.scaler().enabled()) {
      rows.emplace_back("loss scale", fmt("%.17g", t.scaler().scale()) + " (" + std::to_string(t.scaler().skipped()) +
                                          " steps skipped)");
    }
    if (cfg_.rank != 0) return 0;  // rank 0 reports
    if (!saved.empty()) rows.emplace_back("checkpoint", saved);
    if (!cfg_.metrics.empty()) rows.emplace_back("metrics", cfg_.metrics);
    if (!cfg_.trace.empty()) rows.emplace_back("trace", cfg_.trace);
    std::printf("\nsummary\n%s", summary_table(rows).c_str());
    if (!stopped_by.empty() && stopped_by[0] == 'S') {
      std::printf("interrupted by %s after step %lld; continue with --resume latest%s\n", stopped_by.c_str(),
                  static_cast<long long>(t.step()), cfg_.save.empty() ? "" : (" --save " + cfg_.save).c_str());
    }
    if (cfg_.sample > 0 && stopped_by.empty() && cfg_.rank == 0) {
      std::printf("\nsample (temperature %.2f, top-k %d):\n%s%s\n", cfg_.temperature, cfg_.top_k, cfg_.prompt.c_str(),
                  t.sample(cfg_.sample, cfg_.temperature, cfg_.top_k, prompt_).c_str());
    }
    std::fflush(stdout);
    return 0;
  }

  /// --dump: what benchmarks/engine/torch_gpt.py needs to run the same training in PyTorch.
  struct Dump {
    template <class Tr>
    Dump(const Config& c, Tr& t, const Plan& plan) : dir(c.dump), first_step(t.step()) {
      std::filesystem::create_directories(dir);
      std::vector<float> full;
      const CheckpointState st = t.save_state(&full);
      (void)write_checkpoint(dir, t.layout(), st, full);
      std::ofstream cfg(dir / "config.txt");
      cfg << "layers " << c.shape.layers << "\nheads " << c.shape.heads << "\nwidth " << c.shape.width << "\nblock "
          << c.shape.block << "\nvocab " << plan.vocab << "\nvocab_padded " << plan.vocab_padded << "\nbatch " << c.batch
          << "\naccum " << c.accum << "\nbeta1 " << c.beta1 << "\nbeta2 " << c.beta2 << "\neps " << c.eps
          << "\nweight_decay " << c.weight_decay << "\nclip " << c.clip << "\ndropout " << c.dropout << "\n";
      batches.open(dir / "batches.i32", std::ios::binary | std::ios::trunc);
      losses.open(dir / "losses.txt", std::ios::trunc);
      t.set_batch_hook([this](const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y) {
        batches.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
        batches.write(reinterpret_cast<const char*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
        batches.flush();
      });
    }
    template <class R>
    void record(std::int64_t step, const R& r, const std::vector<float>& grads) {
      char line[128];
      std::snprintf(line, sizeof line, "%lld %.17g %.17g %.17g\n", static_cast<long long>(step), r.loss, r.lr, r.grad_norm);
      losses << line;
      losses.flush();
      if (!grads.empty()) {
        std::ofstream g(dir / "grads0.f32", std::ios::binary | std::ios::trunc);
        g.write(reinterpret_cast<const char*>(grads.data()), static_cast<std::streamsize>(grads.size() * 4));
      }
    }
    std::filesystem::path dir;
    std::int64_t first_step;
    std::ofstream batches, losses;
  };

  B b_;
  Config cfg_;
  std::string threads_why_;          // where the CPU's thread count came from (printed with the peak)
  std::vector<std::int32_t> prompt_;  // --prompt as tokens (checked against the vocabulary before training)
};

}  // namespace engine
