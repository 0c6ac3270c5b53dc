// engine.hpp — Engine<B>: nanoGPT's GPT trained on a text, written only against accel::Accelerator.
//
// One stream carries all the work: the nn_ops kernels and the engine's attention (through
// b.launch_kernel), the matrix products (accel::blas), fused AdamW and the L2 norm (the typed ops of
// b.get_op_builder), random dropout masks (b.fill_bits, keyed by sequence: dropout_masks.hpp). The host
// only draws batches, copies them in, and reads the losses back once per step (with --run-ahead, after
// it has enqueued the next step).
// With --graph the forward, backward, norm and clipping of a step are captured once and replayed
// (CUDA graphs; the CPU backend's recorded tasks); the optimizer launches follow each replay eagerly,
// because the learning rate changes every step and the fused Adam op takes it as a launch argument.
//
// Numbers: float32 by default; with --dtype bf16 or fp16 (any backend) weights, activations and
// gradients are bfloat16 / float16 (the kernels compute in fp32; GEMMs accumulate in fp32) and the
// optimizer keeps fp32 master weights and moments, writing the 16-bit weights in the
// same pass (the fused op's model copy). The layouts are in layout.hpp, checkpoints in checkpoint.hpp.
#pragma once

#include "blas.hpp"
#include "buckets.hpp"
#include "checkpoint.hpp"
#include "config.hpp"
#include "corpus.hpp"
#include "cpu_threads.hpp"
#include "data_parallel.hpp"
#include "dropout_masks.hpp"
#include "gpt_kernels.hpp"
#include "host_staging.hpp"
#include "loss_scaler.hpp"
#include "layout.hpp"
#include "report.hpp"
#include "typed_ops.hpp"

#include <accel/accel.hpp>
#include <accel/ops.hpp>
#include <accel/profile/trace.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace engine {

/// Set by SIGINT/SIGTERM: the engine finishes the step, writes a checkpoint and exits.
inline std::atomic<int>& stop_signal() {
  static std::atomic<int> s{0};
  return s;
}

inline void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { stop_signal().store(sig); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

/// What a run needs, computed before anything is allocated.
struct Plan {
  std::int64_t vocab = 0, vocab_padded = 0;
  std::int64_t params = 0;         // trained parameters
  std::int64_t total = 0;          // elements of the flat parameter buffer (ParamLayout::total)
  std::int64_t flops_per_step = 0;  // the products' FLOPs (train_flops_per_token, layout.hpp)
  std::size_t bytes = 0;            // device memory the run allocates
  AttentionPath attention = AttentionPath::fused;  // --attention (auto resolved)
  FlashBackward flash_backward = FlashBackward::split;  // --flash-backward (with the flash path)
  std::string bytes_breakdown;
};

/// True for AnyBackend (a backend whose device type is not a compile-time constant): the run-time
/// dispatch path, kept to float32 and bf16 (--dispatch any measures dispatch; each dtype is another
/// instantiation of the whole Trainer to compile).
template <class B>
constexpr bool runtime_backend() {
  return !requires { std::integral_constant<accel::DeviceType, B::device_type()>{}; };
}

/// A new stream of the engine's backend. Engine<AnyBackend>'s streams belong to the backend it holds:
/// AnyStream{} would take the process's selected backend (CUDA on a machine with a GPU) whatever the
/// engine was given.
template <class B>
typename B::Stream new_stream(const B& b) {
  if constexpr (runtime_backend<B>()) {
    return typename B::Stream(b.index());
  } else {
    (void)b;
    return typename B::Stream{};
  }
}

template <class B, class T>
class Trainer {
  // 16-bit weights and activations (bf16 or fp16) with fp32 master weights.
  static constexpr bool lowp = !std::is_same_v<T, float>;
  static constexpr accel::Dtype act_dtype = std::is_same_v<T, accel::bfloat16> ? accel::Dtype::bfloat16
                                            : std::is_same_v<T, accel::half>   ? accel::Dtype::float16
                                                                               : accel::Dtype::float32;
  using Trans = accel::blas::Trans;

 public:
  Trainer(B b, const Config& cfg, const Corpus& corpus, const Plan& plan, Ranks<B>& ranks)
      : b_(b),
        cfg_(cfg),
        dp_(ranks),
        corpus_(corpus),
        plan_(plan),
        stream_(new_stream(b)),
        lane_batch_(cfg.batch / cfg.streams),
        P_(cfg.shape, plan.vocab_padded),
        A_(cfg.shape, cfg.batch / cfg.streams, plan.vocab_padded, cfg.accum, cfg.dropout > 0, plan.attention,
           cfg.activation_checkpointing, plan.flash_backward),
        nn_(b, act_dtype),
        attn_(b, act_dtype, cfg.shape.width / cfg.shape.heads, plan.flash_backward),
        ops_(b),
        train_sampler_(corpus.train(), cfg.draw_chunk, cfg.shape.block),
        val_sampler_(corpus.val(), cfg.eval_rows, cfg.shape.block),
        data_gen_(cfg.seed),
        scaler_(cfg) {
    // Threads: the lanes share the cores (each lane's kernels and GEMMs get threads / lanes); the
    // optimizer's ops run alone on lane 0 and get them all.
    const int all = cfg.threads > 0 ? cfg.threads : detail::usable_cpus();
    const int per_lane = std::max(1, all / cfg.streams);
    if (cfg.threads > 0 || cfg.streams > 1) {
      nn_.set_num_threads(per_lane);
      attn_.set_num_threads(per_lane);
      ops_.set_num_threads(all);
      accel::blas::set_num_threads(per_lane);
    }
    threads_per_lane_ = cfg.threads > 0 || cfg.streams > 1 ? per_lane : 0;
    // ZeRO: the flat buffers padded to ranks x shard; this rank's optimizer state covers its shard.
    shard_ = shard_size(P_.total, dp_.size());
    padded_ = shard_ * dp_.size();
    shard_lo_ = shard_ * dp_.rank();
    const std::size_t np = static_cast<std::size_t>(padded_), ns = static_cast<std::size_t>(shard_);
    params_ = accel::Buffer<T, B>(np, stream_);
    exp_avg_ = accel::Buffer<float, B>(ns, stream_);
    exp_avg_sq_ = accel::Buffer<float, B>(ns, stream_);
    if constexpr (lowp) master_ = accel::Buffer<float, B>(ns, stream_);
    // --deterministic: the micro-batches are the leaves of a summation tree (runs of `odd` leaves, then
    // a perfect binary tree); a rank's partial sums are a stack, at most log2(runs) + 1 deep.
    std::int64_t runs = 1;
    if (cfg.deterministic) {
      det_leaves_ = cfg.accum;  // leaves of this rank: one micro-batch each
      det_odd_ = det_leaves_ * dp_.size();
      while (det_odd_ % 2 == 0) det_odd_ /= 2;
      runs = det_leaves_ / det_odd_;
    }
    int depth = 1;
    while ((std::int64_t{1} << (depth - 1)) < runs) ++depth;
    // ZeRO stage 2 (buckets.hpp): backward writes into buckets, each reduced to its owners as it
    // completes; this rank keeps its shard's sum only. --deterministic with runs of several
    // micro-batches (odd > 1) runs a run's backwards in lockstep over `odd` activation sets, each
    // adding into the same bucket (enqueue_gradients_det2).
    stage2_ = cfg.zero_stage == 2;
    // --overlap: buckets (stage 1: each layer's gradients after the last micro-batch's backward; stage
    // 2: every bucket) reduced to their owners on a communication stream while backward goes on
    // (compute stream -> comm stream).
    const bool want = cfg.overlap == "on" || (cfg.overlap == "auto" && b.device_type() != accel::DeviceType::cpu);
    overlap_ = want && dp_.distributed() && cfg.streams == 1 && !cfg.deterministic && !cfg.graph;
    // --gelu-fusion auto: cuBLASLt's epilogues where CUDA runs (they save the GELU's passes over the
    // MLP's widest activation); on the CPU the separate kernels are as fast. cuBLASLt wants the rows'
    // stride, 4 x width, a multiple of 8.
    gelu_fusion_ = cfg.gelu_fusion == "on" || (cfg.gelu_fusion == "auto" && b.device_type() != accel::DeviceType::cpu &&
                                               (4 * cfg.shape.width) % 8 == 0);
    if (overlap_) comm_stream_.emplace(new_stream(b_));
    if (stage2_) {
      buckets_.emplace(P_, cfg.reduce_bucket);
      grad_acc_ = accel::Buffer<T, B>(ns, stream_);  // this shard's reduced gradients
      grad_shard_ = grad_acc_.data();  // the lanes' buckets: with the lanes, below
      if (cfg.deterministic) {
        // Each bucket's leaves gathered at their owners, in rounds of `chunk` elements per owner.
        const std::int64_t most = std::max(buckets_->cap, buckets_->embed.size);
        det_chunk_ = align16((most + dp_.size() - 1) / dp_.size());
        det_recv_ = accel::Buffer<T, B>(static_cast<std::size_t>(det_chunk_ * dp_.size()), stream_);
        for (int i = 1; i < depth; ++i) det_pool_.emplace_back(ns, stream_);  // the stack; grad_acc_ is its bottom
      }
    } else {
      grads_ = accel::Buffer<T, B>(np, stream_);
      grad_shard_ = grads_.data() + shard_lo_;
      if (cfg.deterministic) {
        if (dp_.distributed()) recv_ = accel::Buffer<T, B>(np, stream_);
        for (int i = 0; i < depth; ++i) det_pool_.emplace_back(np, stream_);
      }
    }
    if constexpr (lowp) {
      // With the loss scaler, the reduced 16-bit gradients are unscaled into fp32 (DeepSpeed's fp32
      // gradients of its fp16 optimizer): small gradients that the scale kept above fp16's underflow
      // stay representable; the norm, clipping and Adam read these.
      if (scaler_.enabled()) {
        grad32_ = accel::Buffer<float, B>(ns, stream_);
        nn32_.emplace(b, accel::Dtype::float32);
        if (threads_per_lane_ > 0) nn32_->set_num_threads(threads_per_lane_);
      }
    }
    // The global norm: each rank's per-block norms (one block: the shard; --deterministic: norm_block
    // elements), gathered in block order, and their norm.
    norm_blocks_ = cfg.deterministic ? shard_ / norm_block : 1;
    block_norms_ = accel::Buffer<float, B>(static_cast<std::size_t>(norm_blocks_ * dp_.size()), stream_);
    const std::int64_t seqs = static_cast<std::int64_t>(cfg.batch) * cfg.accum;  // this rank's share
    loss_all_ = accel::Buffer<float, B>(static_cast<std::size_t>(seqs * dp_.size() * cfg.shape.block), stream_);
    optimizer_bytes_ = (exp_avg_.size() + exp_avg_sq_.size() + master_.size()) * sizeof(float);
    const std::size_t lane_tokens = static_cast<std::size_t>(lane_batch_) * cfg.shape.block * cfg.accum;
    for (int l = 0; l < cfg.streams; ++l) {
      Lane& lane = l == 0 ? lanes_.emplace_back(typename B::StreamRef(stream_)) : lanes_.emplace_back(new_stream(b_));
      lane.act = accel::Buffer<T, B>(static_cast<std::size_t>(A_.act), lane.s);
      lane.f32 = accel::Buffer<float, B>(static_cast<std::size_t>(A_.f32), lane.s);
      if (A_.bits > 0) lane.bits = accel::Buffer<std::uint32_t, B>(static_cast<std::size_t>(A_.bits), lane.s);
      lane.inputs = accel::Buffer<std::int32_t, B>(lane_tokens, lane.s);
      lane.targets = accel::Buffer<std::int32_t, B>(lane_tokens, lane.s);
      if (stage2_) {  // a bucket set per lane: the embeddings' and a layer bucket (two with --overlap)
        lane.embed_bucket = accel::Buffer<T, B>(static_cast<std::size_t>(buckets_->embed.size), lane.s);
        for (int i = 0; i < (overlap_ ? 2 : 1); ++i) {
          lane.layer_buckets.emplace_back(static_cast<std::size_t>(buckets_->cap), lane.s);
          lane.bucket_done.emplace_back();
          lane.bucket_ready.emplace_back();
        }
        lane.bucket_done.emplace_back();  // the embedding bucket's
        lane.bucket_ready.emplace_back();
      } else if (l == 0) {
        lane.grads = grads_.data();
      } else {
        lane.own_grads = accel::Buffer<T, B>(np, lane.s);
        lane.grads = lane.own_grads.data();
      }
    }
    // --deterministic stage 2, runs of odd > 1 micro-batches: the run's other micro-batches' activations
    // (on lane 0's stream), writing lane 0's buckets.
    if (stage2_ && cfg.deterministic) {
      for (std::int64_t i = 1; i < det_odd_; ++i) {
        Lane& lane = chain_.emplace_back(typename B::StreamRef(stream_));
        lane.act = accel::Buffer<T, B>(static_cast<std::size_t>(A_.act), lane.s);
        lane.f32 = accel::Buffer<float, B>(static_cast<std::size_t>(A_.f32), lane.s);
        if (A_.bits > 0) lane.bits = accel::Buffer<std::uint32_t, B>(static_cast<std::size_t>(A_.bits), lane.s);
        lane.inputs = accel::Buffer<std::int32_t, B>(lane_tokens, lane.s);
        lane.targets = accel::Buffer<std::int32_t, B>(lane_tokens, lane.s);
        lane.buckets_of = &lanes_[0];
      }
    }
    // Dropout masks keyed by sequence (dropout_masks.hpp): a slot per lane, lanes_ then chain_.
    int slot = 0;
    for (auto& lane : lanes_) lane.slot = slot++;
    for (auto& lane : chain_) lane.slot = slot++;
    if (cfg.dropout > 0) {
      const std::int64_t Tk = cfg.shape.block, C = cfg.shape.width;
      std::vector<std::int64_t> words{Tk * C};  // the embedding's; then each layer's attention, its
      for (int l = 0; l < cfg.shape.layers; ++l) {  // projection's and the MLP projection's
        words.insert(words.end(), {cfg.shape.heads * Tk * Tk, Tk * C, Tk * C});
      }
      masks_.emplace(cfg.seed, std::move(words), slot, cfg.accum);
    }
    cur_ = &lanes_[0];
    // Gradient memory on this rank (what stage 2 divides): the flat buffers, the lanes' own, the
    // buckets, --deterministic's partial sums and receive buffers.
    const auto bytes = [](const auto& buf) { return buf.size() * sizeof(T); };
    gradient_bytes_ = bytes(grads_) + bytes(recv_) + bytes(det_recv_);
    for (const auto& lane : lanes_) {
      gradient_bytes_ += bytes(lane.own_grads) + bytes(lane.embed_bucket);
      for (const auto& buf : lane.layer_buckets) gradient_bytes_ += bytes(buf);
    }
    for (const auto& buf : det_pool_) gradient_bytes_ += bytes(buf);
    shard_gradient_bytes_ = bytes(grad_acc_);
    gradient_bytes_ += shard_gradient_bytes_ + grad32_.size() * sizeof(float);
    if (stage2_) {
      for (const auto& buf : det_pool_) tree_gradient_bytes_ += bytes(buf);
    }
    for (int l = 0; l < cfg.shape.layers; ++l) {
      fwd_names_.push_back("layer " + std::to_string(l));
      bwd_names_.push_back("layer " + std::to_string(l) + " backward");
    }
    const std::size_t tokens = static_cast<std::size_t>(cfg.batch) * cfg.shape.block * cfg.accum;
    host_inputs_.resize(tokens);
    host_targets_.resize(tokens);
    loss_count_ = tokens * static_cast<std::size_t>(dp_.size());
    staging_.emplace(b_, tokens, loss_count_);
    global_inputs_.resize(static_cast<std::size_t>(cfg.global_batch * cfg.shape.block));
    global_targets_.resize(global_inputs_.size());
    // Validation batches: fixed for the run (their own generator), drawn once.
    accel::Generator val_gen(cfg.seed ^ 0x9E3779B97F4A7C15ULL);
    const std::size_t bt = static_cast<std::size_t>(cfg.eval_rows) * cfg.shape.block;
    val_inputs_.resize(bt * static_cast<std::size_t>(cfg.eval_batches));
    val_targets_.resize(val_inputs_.size());
    for (int i = 0; i < cfg.eval_batches; ++i) {
      val_sampler_.next(val_gen, val_inputs_.data() + bt * i, val_targets_.data() + bt * i);
    }
  }

  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// A step still in flight — an exception left the caller between begin_step and finish_step — reads
  /// and writes the buffers and host slots about to be freed: waited for first (its error, if any, is
  /// the one already on its way).
  ~Trainer() {
    if (pending_.empty()) return;
    try {
      stream_.synchronize();
    } catch (...) {
    }
  }

  /// Weights from the seed (nanoGPT's init: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)),
  /// LayerNorm 1 and 0), Adam's moments zero. Every rank draws the whole model (same seed, same bits)
  /// and keeps its shard of the fp32 master weights.
  void init_weights() {
    b_.manual_seed(cfg_.seed);
    accel::Buffer<float, B> full;
    float* w = nullptr;
    if constexpr (lowp) {
      full = accel::Buffer<float, B>(static_cast<std::size_t>(padded_), stream_);
      w = full.data();
    } else {
      w = params_.data();
    }
    const double scaled = 0.02 / std::sqrt(2.0 * cfg_.shape.layers);
    ops_.fill(stream_, w, accel::Dtype::float32, padded_, 0.0f);  // the padding between views too
    for (const auto& v : P_.views) {
      float* p = w + v.offset;
      switch (v.init) {
        case TensorView::Init::normal: b_.fill_normal(stream_, p, static_cast<std::size_t>(v.numel), 0.0f, 0.02f); break;
        case TensorView::Init::normal_scaled:
          b_.fill_normal(stream_, p, static_cast<std::size_t>(v.numel), 0.0f, static_cast<float>(scaled));
          break;
        case TensorView::Init::ones: ops_.fill(stream_, p, accel::Dtype::float32, v.numel, 1.0f); break;
        case TensorView::Init::zeros: break;
      }
    }
    ops_.fill(stream_, exp_avg_.data(), accel::Dtype::float32, shard_, 0.0f);
    ops_.fill(stream_, exp_avg_sq_.data(), accel::Dtype::float32, shard_, 0.0f);
    if constexpr (lowp) {
      b_.copy_async(stream_, master_.data(), w + shard_lo_, static_cast<std::size_t>(shard_) * 4);
      ops_.cast(stream_, params_.data(), act_dtype, w, accel::Dtype::float32, padded_);
      stream_.synchronize();  // `full` goes
    }
    step_ = 0;
  }

  /// Restores a checkpoint: `st` holds this rank's shard (read, re-partitioned where the checkpoint was
  /// written by another rank count, and checked by the caller); the weights are all-gathered.
  void load_state(const CheckpointState& st) {
    require_no_step_in_flight("load_state");
    const std::size_t ns = static_cast<std::size_t>(shard_);
    if (st.params.size() != ns || st.exp_avg.size() != ns || st.exp_avg_sq.size() != ns) {
      throw std::logic_error("load_state: a shard of the wrong size");
    }
    b_.copy_async(stream_, master_or_params(), st.params.data(), ns * 4);
    b_.copy_async(stream_, exp_avg_.data(), st.exp_avg.data(), ns * 4);
    b_.copy_async(stream_, exp_avg_sq_.data(), st.exp_avg_sq.data(), ns * 4);
    if constexpr (lowp) ops_.cast(stream_, params_.data() + shard_lo_, act_dtype, master_.data(), accel::Dtype::float32, shard_);
    dp_.all_gather(stream_, params_.data() + shard_lo_, params_.data(), ns, act_dtype);
    stream_.synchronize();
    step_ = st.step;
    data_gen_.set_state(state_bytes(st.decoded.at("data_rng")));
    prefetched_ = false;
    b_.set_rng_state(state_bytes(st.decoded.at("device_rng")));
    if (const auto it = st.values.find("loss_scale"); it != st.values.end()) scaler_.restore(it->second);
  }

  /// The state a checkpoint holds (synchronises the stream; collective over the ranks): this rank's
  /// shard of the master weights and moments, and the whole model's fp32 weights (`full_params`).
  CheckpointState save_state(std::vector<float>* full_params = nullptr) {
    require_no_step_in_flight("save_state");
    CheckpointState st;
    st.step = step_;
    const std::size_t ns = static_cast<std::size_t>(shard_);
    st.params.resize(ns);
    st.exp_avg.resize(ns);
    st.exp_avg_sq.resize(ns);
    b_.copy_async(stream_, st.params.data(), master_or_params(), ns * 4);
    b_.copy_async(stream_, st.exp_avg.data(), exp_avg_.data(), ns * 4);
    b_.copy_async(stream_, st.exp_avg_sq.data(), exp_avg_sq_.data(), ns * 4);
    if (full_params != nullptr) {
      full_params->resize(static_cast<std::size_t>(P_.total));
      if constexpr (lowp) {
        accel::Buffer<float, B> full(static_cast<std::size_t>(padded_), stream_);
        dp_.all_gather(stream_, master_.data(), full.data(), ns, accel::Dtype::float32);
        b_.copy_async(stream_, full_params->data(), full.data(), full_params->size() * 4);
        stream_.synchronize();
      } else {
        b_.copy_async(stream_, full_params->data(), params_.data(), full_params->size() * 4);
      }
    }
    stream_.synchronize();
    const auto gs = prefetched_ ? state_before_prefetch_ : data_gen_.get_state();
    const auto ds = b_.get_rng_state();
    st.values["data_rng"] = detail::hex(std::string(reinterpret_cast<const char*>(gs.data()), gs.size()));
    st.values["device_rng"] = detail::hex(std::string(reinterpret_cast<const char*>(ds.data()), ds.size()));
    st.values["vocabulary"] = detail::hex(corpus_.vocabulary());
    st.values["shape"] = shape_string(cfg_);
    st.values["dtype"] = cfg_.dtype;
    st.values["seed"] = std::to_string(cfg_.seed);
    if (scaler_.enabled()) st.values["loss_scale"] = scaler_.state();
    st.ranks = dp_.size();
    st.shard = shard_;
    st.rank = dp_.rank();
    return st;
  }

  [[nodiscard]] int rank() const noexcept { return dp_.rank(); }
  [[nodiscard]] bool overlap() const noexcept { return overlap_; }
  /// Whether the MLP's GELU runs inside its GEMMs (--gelu-fusion, auto resolved for the backend).
  [[nodiscard]] bool gelu_fusion() const noexcept { return gelu_fusion_; }
  [[nodiscard]] int ranks() const noexcept { return dp_.size(); }
  /// The data-parallel path (several ranks, or --force-collectives on one): its collectives, buffers
  /// and overlap.
  [[nodiscard]] bool distributed() const noexcept { return dp_.distributed(); }
  [[nodiscard]] std::int64_t shard() const noexcept { return shard_; }
  /// Bytes of optimizer state on this rank (Adam's two moments, the fp32 master weights where the
  /// model is bf16 or fp16): 1/ranks of the model's.
  [[nodiscard]] std::size_t optimizer_bytes() const noexcept { return optimizer_bytes_; }
  /// Bytes of gradient memory on this rank: stage 1 the whole model's (per lane), stage 2 the shard's
  /// (shard_gradient_bytes(), 1/ranks of the model's) plus the buckets; --deterministic's partial sums.
  [[nodiscard]] std::size_t gradient_bytes() const noexcept { return gradient_bytes_; }
  [[nodiscard]] std::size_t shard_gradient_bytes() const noexcept { return shard_gradient_bytes_; }
  /// Stage 2 --deterministic: the summation tree's shard-sized partial sums (beside grad_acc_).
  [[nodiscard]] std::size_t tree_gradient_bytes() const noexcept { return tree_gradient_bytes_; }
  /// ZeRO stage 2: gradients through buckets into this rank's shard.
  [[nodiscard]] bool stage2() const noexcept { return stage2_; }
  [[nodiscard]] const DynamicLossScaler& scaler() const noexcept { return scaler_; }
  void set_inject_inf(bool on) noexcept { inject_inf_ = on; }

  /// The element-wise maximum of `flags` over the ranks (collective; synchronises): stop decisions
  /// every rank must share.
  std::array<int, 2> agree_max(std::array<int, 2> flags) {
    if (!dp_.distributed()) return flags;
    if (agree_.size() == 0) agree_ = accel::Buffer<std::int32_t, B>(2, stream_);
    std::int32_t v[2] = {flags[0], flags[1]};
    b_.copy_async(stream_, agree_.data(), v, sizeof v);
    dp_.all_reduce_max(stream_, agree_.data(), 2, accel::Dtype::int32);
    b_.copy_async(stream_, v, agree_.data(), sizeof v);
    stream_.synchronize();
    return {v[0], v[1]};
  }

  /// The CPU's float32 FMA peak (FLOP/s) on the run's threads; 0 on other backends.
  double measure_peak(double seconds) { return attn_.measure_peak(stream_, seconds, cfg_.threads); }
  /// Whether the CPU's bf16 attention runs its products on AMX tiles (false elsewhere, and for fp32/fp16).
  bool attention_on_amx() {
    return cfg_.dtype == "bf16" && attn_.cpu_attention_amx(stream_, cfg_.shape.width, cfg_.shape.heads);
  }

  [[nodiscard]] std::int64_t step() const noexcept { return step_; }
  [[nodiscard]] const ParamLayout& layout() const noexcept { return P_; }
  [[nodiscard]] typename B::StreamRef stream() const { return stream_; }

  /// The learning rate of optimizer step `it` (0-based): nanoGPT's linear warmup, then cosine to
  /// min_lr at the last step (or constant).
  [[nodiscard]] double lr_at(std::int64_t it) const {
    if (it < cfg_.warmup) return cfg_.lr * static_cast<double>(it + 1) / static_cast<double>(cfg_.warmup + 1);
    if (cfg_.schedule == "constant") return cfg_.lr;
    if (it >= cfg_.steps) return cfg_.min_lr;
    const double ratio = static_cast<double>(it - cfg_.warmup) / static_cast<double>(std::max<std::int64_t>(1, cfg_.steps - cfg_.warmup));
    const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
    return cfg_.min_lr + coeff * (cfg_.lr - cfg_.min_lr);
  }

  struct StepResult {
    std::int64_t step = 0;  // the optimizer step this is (0-based)
    double loss = 0;       // mean over the step's tokens
    double grad_norm = 0;  // before clipping (of the unscaled gradients)
    double lr = 0;
    double loss_scale = 1;  // the scale this step ran with (--loss-scale)
    bool skipped = false;   // inf/NaN gradients: the optimizer did not step (dynamic loss scaling)
    std::int64_t skipped_so_far = 0;  // steps skipped up to and including this one
  };

  /// One optimizer step, enqueued and waited for: begin_step then finish_step.
  /// grads_out (optional): the step's gradients before clipping, as float32 (for --dump, one rank).
  StepResult train_step(std::vector<float>* grads_out = nullptr) {
    if (!pending_.empty()) throw std::logic_error("train_step: a step begun with begin_step is not finished");
    begin_step(grads_out);
    return finish_step();
  }

  /// Enqueues optimizer step step(): accum micro-batches forward and backward, the gradients reduced
  /// over the ranks into this rank's shard, the global norm, clipping, AdamW on the shard, the weights
  /// gathered, the losses copied out. Returns once it is enqueued (the host draws the next batch
  /// meanwhile); finish_step reads its results. A second step may be begun before the first is
  /// finished (the run loop's --run-ahead): the device runs them in order, and the host enqueues the
  /// next step while the device still runs this one, instead of leaving it idle between steps.
  /// grads_out: as train_step's (waits for the gradients).
  void begin_step(std::vector<float>* grads_out = nullptr) {
    if (pending_.size() >= 2) throw std::logic_error("begin_step: two steps are in flight already");
    // A host range (the enqueueing: with --run-ahead no more) and a span on lane 0's stream, from where
    // the stream reaches this step (the step before done) to the last of its work: the step's time on
    // the device, which trace_summary.py divides.
    const Phase phase(*this, "step", stream_);
    const auto& slot = staging_->slot(step_);
    draw_batch();
    if (batch_hook_) batch_hook_(host_inputs_, host_targets_);
    if (masks_) masks_->position(step_, [this](int slot, int m) { return first_sequence(slot, m); });
    // The batch through this step's slot: the other slot may still be read by the step in flight.
    std::copy(host_inputs_.begin(), host_inputs_.end(), slot.inputs);
    std::copy(host_targets_.begin(), host_targets_.end(), slot.targets);
    // Into each lane's inputs on its own stream: after that lane's reads of them in the step before
    // (--graph, whose replay would not be in a second lane's order, captures one stream).
    copy_in(slot.inputs, slot.targets, cfg_.accum);
    if (grads_out != nullptr) {  // --dump: the gradients before clipping, so eagerly
      enqueue_gradients();
      grads_out->resize(static_cast<std::size_t>(P_.total));
      if constexpr (lowp) {
        std::vector<T> g(static_cast<std::size_t>(P_.total));
        b_.copy_async(stream_, g.data(), grad_shard_, g.size() * sizeof(T));
        stream_.synchronize();
        for (std::size_t i = 0; i < g.size(); ++i) (*grads_out)[i] = static_cast<float>(g[i]);
      } else {
        b_.copy_async(stream_, grads_out->data(), grad_shard_, grads_out->size() * 4);  // one rank: the whole model
        stream_.synchronize();
      }
      enqueue_clip();
    } else if (cfg_.graph) {
      if (!graph_) {
        graph_.emplace(b_.create_graph());
        capturing_ = true;  // no trace spans (timed events) inside a capture
        // Thread-local capture: collectives' own threads (NCCL's proxy) may call CUDA while the step is
        // captured, which a global capture would refuse (nccl-tests and PyTorch capture so too).
        auto capture = b_.capture_to_graph(*graph_, stream_, {}, accel::CaptureMode::per_thread);
        enqueue_gradients();
        enqueue_clip();
        capture.end();
        capturing_ = false;
      }
      const Phase replay(*this, "graph replay", stream_);
      b_.replay_graph(*graph_, stream_);
    } else {
      enqueue_gradients();
      enqueue_clip();
    }
    prefetch_batch();  // the host's share of the next step, while the device runs this one
    StepResult p;  // what is known now; finish_step adds the loss (and the norm, without the scaler)
    p.step = step_;
    p.lr = lr_at(step_ - scaler_.skipped());  // a skipped step does not advance the schedule
    bool skip = false;
    if (scaler_.enabled()) {
      // The overflow check: the global norm (gathered from every rank's blocks) is inf or NaN when any
      // rank's gradients hold one, so every rank reaches the same decision.
      b_.copy_async(stream_, slot.norm, lanes_[0].f32.data() + A_.norm, 4);
      stream_.synchronize();
      p.grad_norm = *slot.norm;
      skip = !std::isfinite(p.grad_norm);
      p.loss_scale = scaler_.scale();
      scaler_.update(skip);
    }
    if (!skip) {
      enqueue_adam(p.lr, step_ + 1 - scaler_.skipped());
      if (dp_.distributed()) {
        const Phase phase(*this, "all-gather", stream_);
        dp_.all_gather(stream_, params_.data() + shard_lo_, params_.data(), static_cast<std::size_t>(shard_), act_dtype);
      }
    }
    p.skipped = skip;
    p.skipped_so_far = scaler_.skipped();
    enqueue_losses();
    b_.copy_async(stream_, slot.losses, loss_all_.data(), loss_count_ * 4);
    if (!scaler_.enabled()) b_.copy_async(stream_, slot.norm, lanes_[0].f32.data() + A_.norm, 4);
    step_done_[static_cast<std::size_t>(step_ & 1)].record(stream_);
    pending_.push_back(p);
    ++step_;  // a skipped step counts (DeepSpeed's global_steps), its batch is consumed
  }

  /// Waits for the oldest step in flight and returns its loss and gradient norm.
  StepResult finish_step() {
    if (pending_.empty()) throw std::logic_error("finish_step: no step is in flight");
    StepResult r = pending_.front();
    pending_.pop_front();
    if (pending_.empty()) {
      stream_.synchronize();  // everything enqueued: rethrows a failed task's error here
    } else {
      step_done_[static_cast<std::size_t>(r.step & 1)].synchronize();  // not the step behind it
    }
    const auto& slot = staging_->slot(r.step);
    const float* losses = slot.losses;
    double sum = 0;
    if (stage2_ && cfg_.deterministic) {  // global micro-batch gm: run gm / odd, rank run % R's (draw_batch)
      const std::size_t micro = static_cast<std::size_t>(cfg_.batch) * static_cast<std::size_t>(cfg_.shape.block);
      const std::size_t R = static_cast<std::size_t>(dp_.size()), A = static_cast<std::size_t>(cfg_.accum);
      const auto odd = static_cast<std::size_t>(det_odd_);
      for (std::size_t gm = 0; gm < R * A; ++gm) {
        const std::size_t run = gm / odd, m = run / R * odd + gm % odd;
        const float* l = losses + ((run % R) * A + m) * micro;
        for (std::size_t i = 0; i < micro; ++i) sum += l[i];
      }
    } else {
      for (std::size_t i = 0; i < loss_count_; ++i) sum += losses[i];  // in sequence order: the same on every rank count
    }
    r.loss = sum / static_cast<double>(loss_count_);
    if (!scaler_.enabled()) r.grad_norm = *slot.norm;  // with the scaler: read by begin_step already
    return r;
  }

  /// Steps begun and not yet finished (0, 1 or 2).
  [[nodiscard]] std::size_t steps_in_flight() const noexcept { return pending_.size(); }

  /// Mean loss over the fixed validation batches (no dropout), in chunks of a micro-batch split over
  /// the lanes as training is (run by one rank).
  double eval_loss() {
    require_no_step_in_flight("eval_loss");
    const Phase phase(*this, "eval");
    const std::int64_t Tk = cfg_.shape.block;
    const std::int64_t total = static_cast<std::int64_t>(val_inputs_.size()) / Tk;  // sequences
    const std::int64_t lanes = static_cast<std::int64_t>(lanes_.size());
    double sum = 0;
    std::vector<float> losses(static_cast<std::size_t>(cfg_.batch * Tk));
    for (std::int64_t at = 0; at < total; at += cfg_.batch) {
      const std::int64_t rows = std::min<std::int64_t>(cfg_.batch, total - at);
      const std::int64_t per = rows % lanes == 0 ? rows / lanes : rows;  // a short tail: lane 0 alone
      const std::int64_t used = rows % lanes == 0 ? lanes : 1;
      for (std::int64_t l = 0; l < used; ++l) {
        Lane& lane = lanes_[static_cast<std::size_t>(l)];
        const std::size_t off = static_cast<std::size_t>((at + l * per) * Tk), n = static_cast<std::size_t>(per * Tk);
        b_.copy_async(lane.s, lane.inputs.data(), val_inputs_.data() + off, n * 4);
        b_.copy_async(lane.s, lane.targets.data(), val_targets_.data() + off, n * 4);
        cur_ = &lane;
        forward(0, false, per, Tk);
        b_.copy_async(lane.s, losses.data() + l * per * Tk, lane.f32.data() + A_.losses, n * 4);
      }
      for (auto& lane : lanes_) lane.s.synchronize();
      for (std::int64_t i = 0; i < rows * Tk; ++i) sum += losses[static_cast<std::size_t>(i)];
    }
    cur_ = &lanes_[0];
    return sum / static_cast<double>(total * Tk);
  }

  /// `count` characters generated after `prompt` (tokens; empty: a newline): the model's distribution
  /// at `temperature`, restricted to the top_k most likely (0: all), drawn with Philox (seeded by the
  /// run's seed). The prompt's last `block` tokens are the first context.
  std::string sample(int count, double temperature, int top_k, const std::vector<std::int32_t>& prompt = {}) {
    require_no_step_in_flight("sample");
    const int block = cfg_.shape.block;
    std::vector<std::int32_t> ctx = prompt;
    if (ctx.empty()) {
      const int nl = corpus_.encode('\n');
      ctx.push_back(nl >= 0 ? nl : 0);
    }
    std::string out;
    accel::Generator g(cfg_.seed + 7);
    const std::int64_t Vp = plan_.vocab_padded, V = plan_.vocab;
    std::vector<T> row(static_cast<std::size_t>(Vp));
    std::vector<std::int32_t> no_targets(static_cast<std::size_t>(block), 0);
    for (int i = 0; i < count; ++i) {
      const int t = static_cast<int>(std::min<std::size_t>(ctx.size(), static_cast<std::size_t>(block)));
      const std::int32_t* window = ctx.data() + (ctx.size() - static_cast<std::size_t>(t));
      cur_ = &lanes_[0];
      b_.copy_async(stream_, cur_->inputs.data(), window, static_cast<std::size_t>(t) * 4);
      b_.copy_async(stream_, cur_->targets.data(), no_targets.data(), static_cast<std::size_t>(t) * 4);
      forward(0, false, 1, t, /*loss=*/false);
      b_.copy_async(stream_, row.data(), cur_->act.data() + A_.logits + static_cast<std::int64_t>(t - 1) * Vp,
                    static_cast<std::size_t>(Vp) * sizeof(T));
      stream_.synchronize();
      std::vector<std::pair<double, int>> logits;
      for (std::int64_t v = 0; v < V; ++v) logits.emplace_back(static_cast<double>(static_cast<float>(row[v])) / temperature, static_cast<int>(v));
      std::sort(logits.begin(), logits.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      if (top_k > 0 && static_cast<std::size_t>(top_k) < logits.size()) logits.resize(static_cast<std::size_t>(top_k));
      double total = 0;
      for (auto& [l, v] : logits) total += std::exp(l - logits.front().first);
      std::uint32_t word = 0;
      const auto [seed, offset] = g.reserve_position(1);
      accel::rng::fill_bits(std::span<std::uint32_t>(&word, 1), seed, offset);
      double u = (static_cast<double>(word) + 0.5) / 4294967296.0 * total;
      int next = logits.back().second;
      for (auto& [l, v] : logits) {
        u -= std::exp(l - logits.front().first);
        if (u <= 0) {
          next = v;
          break;
        }
      }
      ctx.push_back(next);
      out += corpus_.decode(next);
    }
    return out;
  }

  /// --trace: the recorder the step's phases go to (null: none).
  void set_trace(accel::profile::TraceRecorder* trace) noexcept { trace_ = trace; }

  /// Called with each step's batches before they are copied in (--dump).
  void set_batch_hook(std::function<void(const std::vector<std::int32_t>&, const std::vector<std::int32_t>&)> f) {
    batch_hook_ = std::move(f);
  }

 private:
  struct Lane;

  /// What reads or replaces the weights, the generators or the lanes between steps: the steps begun
  /// must be finished first (a step in flight would still change them).
  void require_no_step_in_flight(const char* what) const {
    if (!pending_.empty()) throw std::logic_error(std::string(what) + ": a step is in flight (finish_step first)");
  }

  /// --trace: a host range, and with a stream a span of that stream, around one phase of the step.
  class Phase {
   public:
    Phase(Trainer& t, std::string_view name, std::optional<typename B::StreamRef> s = std::nullopt)
        : t_(t.trace_ != nullptr && !t.capturing_ ? &t : nullptr), s_(s) {
      if (t_ == nullptr) return;
      t_->b_.range_push(name);
      if (s_) t_->trace_->span_begin(t_->b_, *s_, name);
    }
    Phase(const Phase&) = delete;
    Phase& operator=(const Phase&) = delete;
    ~Phase() {
      if (t_ == nullptr) return;
      try {
        if (s_) t_->trace_->span_end(t_->b_, *s_);
        t_->b_.range_pop();
      } catch (...) {  // a trace that cannot record loses a span; training goes on
      }
    }

   private:
    Trainer* t_;
    std::optional<typename B::StreamRef> s_;
  };

  /// A generator's state from the manifest's bytes (read_checkpoint_manifest checked their count).
  static accel::Generator::State state_bytes(const std::string& s) {
    accel::Generator::State st{};
    static_assert(sizeof st == generator_state_bytes);
    if (s.size() != st.size()) throw std::logic_error("load_state: a generator state of " + std::to_string(s.size()) + " bytes");
    std::memcpy(st.data(), s.data(), st.size());
    return st;
  }

  /// Each lane's rows of `micro` micro-batches of [batch x block] tokens, into its inputs and targets.
  void copy_in(const std::int32_t* inputs, const std::int32_t* targets, int micro) {
    const std::int64_t bt = static_cast<std::int64_t>(cfg_.batch) * cfg_.shape.block;
    const std::int64_t lt = static_cast<std::int64_t>(lane_batch_) * cfg_.shape.block;
    for (std::size_t l = 0; l < lanes_.size(); ++l) {
      for (int m = 0; m < micro; ++m) {
        const std::int64_t from = bt * m + lt * static_cast<std::int64_t>(l);
        b_.copy_async(lanes_[l].s, lanes_[l].inputs.data() + lt * m, inputs + from, static_cast<std::size_t>(lt) * 4);
        b_.copy_async(lanes_[l].s, lanes_[l].targets.data() + lt * m, targets + from, static_cast<std::size_t>(lt) * 4);
      }
    }
  }

  /// This rank's shard of the fp32 weights the optimizer steps (the model's own when it is fp32).
  float* master_or_params() {
    if constexpr (lowp) {
      return master_.data();
    } else {
      return params_.data() + shard_lo_;
    }
  }

  // The current lane's activations, gradients and stream (forward, backward and what they call).
  T* act(std::int64_t off) { return cur_->act.data() + off; }
  float* f32(std::int64_t off) { return cur_->f32.data() + off; }
  std::uint32_t* bits(std::int64_t off) { return off < 0 ? nullptr : cur_->bits.data() + off; }
  T* w(int view) { return params_.data() + P_.offset(view); }
  T* g(int view) {
    if (!stage2_) return cur_->grads + P_.offset(view);
    const auto v = static_cast<std::size_t>(view);
    Lane& lane = cur_->buckets_of != nullptr ? *cur_->buckets_of : *cur_;
    T* mem = buckets_->view_bucket[v] < 0 ? lane.embed_bucket.data()
                                          : lane.layer_buckets[static_cast<std::size_t>(lane.layer_bucket)].data();
    return mem + buckets_->view_pos[v];
  }
  [[nodiscard]] typename B::StreamRef cs() const { return cur_->s; }

  void gemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
            const T* bm, std::int64_t ldb, float beta, T* c, std::int64_t ldc) {
    const Phase op(*this, "gemm", cs());
    accel::blas::gemm(b_, typename B::StreamRef(cs()), ta, tb, m, n, k, 1.0f, a, lda, bm, ldb, beta, c, ldc);
  }

  /// c = GELU(a b^T) (row-major, as gemm(no, yes)); pre receives a b^T (--gelu-fusion on).
  void gemm_gelu(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* bm, T* c, T* pre) {
    const Phase op(*this, "gemm", cs());
    accel::blas::gemm_gelu(b_, typename B::StreamRef(cs()), Trans::no, Trans::yes, m, n, k, 1.0f, a, k, bm, k, 0.0f, c,
                           n, pre, n);
  }

  /// c = (a b) * GELU'(pre) (row-major, as gemm(no, no)): the GELU's backward inside the GEMM.
  void gemm_dgelu(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* bm, T* c, const T* pre) {
    const Phase op(*this, "gemm", cs());
    accel::blas::gemm_dgelu(b_, typename B::StreamRef(cs()), Trans::no, Trans::no, m, n, k, 1.0f, a, k, bm, n, 0.0f, c,
                            n, pre, n);
  }

  /// Dropout at `site` (DropoutMasks: 0 the embedding's, 1 + 3 l .. 3 + 3 l layer l's) over n elements
  /// of the current lane; fresh: its bits drawn first (else those drawn the first time: backward).
  void dropout(T* out, const T* in, std::int64_t bits_off, std::int64_t n, bool fresh, int site = -1) {
    const Phase op(*this, "dropout", cs());
    std::uint32_t* mask = bits(bits_off);
    if (fresh) draw_mask(site, mask);
    nn_.dropout(cs(), out, in, mask, n, static_cast<float>(cfg_.dropout));
  }

  /// The current lane's masks of micro-batch micro_ at `site` (its lane_batch_ sequences, in training).
  void draw_mask(int site, std::uint32_t* mask) {
    masks_->draw(b_, typename B::StreamRef(cs()), cur_->slot, micro_, site, mask, lane_batch_);
  }

  /// y = attention(qkv) of a layer: the fused kernel (one launch), or four permutes, a softmax and two
  /// strided-batched GEMMs over the B x NH heads (the GEMM path).
  void attention_forward(const ActLayout::Layer& L, bool drop, std::int64_t Bn, std::int64_t Tn) {
    const Phase op(*this, "attention", cs());
    const std::int64_t C = cfg_.shape.width, NH = cfg_.shape.heads, hs = C / NH, heads = Bn * NH;
    const float p = static_cast<float>(cfg_.dropout);
    const std::uint32_t* mask = drop ? bits(L.bits_att) : nullptr;
    if (A_.flash) {
      attn_.flash_forward(cs(), act(L.atty), f32(L.att), act(L.qkv), mask, p, Bn, Tn, C, NH);
      return;
    }
    if (!A_.gemm) {
      attn_.forward(cs(), act(L.atty), f32(L.att), act(L.qkv), mask, p, Bn, Tn, C, NH);
      return;
    }
    T* h[3] = {act(A_.heads), act(A_.heads) + Bn * Tn * C, act(A_.heads) + 2 * Bn * Tn * C};
    void* hv[3] = {h[0], h[1], h[2]};
    attn_.permute(cs(), hv, 3, act(L.qkv), false, Bn, Tn, C, NH);
    T* att = act(L.att);
    accel::blas::gemm_strided_batched(b_, typename B::StreamRef(cs()), Trans::no, Trans::yes, Tn, Tn, hs,
                                      1.0f / std::sqrt(static_cast<float>(hs)), h[0], hs, Tn * hs, h[1], hs, Tn * hs,
                                      0.0f, att, Tn, Tn * Tn, heads);
    T* pd = mask != nullptr ? act(A_.pd) : nullptr;
    attn_.softmax_forward(cs(), att, pd, mask, p, heads, Tn);
    accel::blas::gemm_strided_batched(b_, typename B::StreamRef(cs()), Trans::no, Trans::no, Tn, hs, Tn, 1.0f,
                                      pd != nullptr ? pd : att, Tn, Tn * Tn, h[2], hs, Tn * hs, 0.0f, act(A_.vacc), hs,
                                      Tn * hs, heads);
    void* y[1] = {act(A_.vacc)};
    attn_.permute(cs(), y, 1, act(L.atty), true, Bn, Tn, C, NH);
  }

  /// dqkv (overwritten) from the layer's saved attention and datty.
  void attention_backward(const ActLayout::Layer& L, T* dqkv, bool drop, std::int64_t Bn, std::int64_t Tn) {
    const Phase op(*this, "attention backward", cs());
    const std::int64_t C = cfg_.shape.width, NH = cfg_.shape.heads, hs = C / NH, heads = Bn * NH;
    const float p = static_cast<float>(cfg_.dropout);
    const std::uint32_t* mask = drop ? bits(L.bits_att) : nullptr;
    if (A_.flash) {
      attn_.flash_backward(cs(), dqkv, f32(A_.att_scratch), act(A_.datty), act(L.atty), f32(L.att), act(L.qkv), mask,
                           p, Bn, Tn, C, NH);
      return;
    }
    if (!A_.gemm) {
      attn_.backward(cs(), dqkv, f32(A_.att_scratch), act(A_.datty), f32(L.att), act(L.qkv), mask, p, Bn, Tn, C, NH);
      return;
    }
    const std::int64_t NC = Bn * Tn * C;
    T* h[3] = {act(A_.heads), act(A_.heads) + NC, act(A_.heads) + 2 * NC};
    T* dh[3] = {act(A_.dheads), act(A_.dheads) + NC, act(A_.dheads) + 2 * NC};
    void* hv[3] = {h[0], h[1], h[2]};
    attn_.permute(cs(), hv, 3, act(L.qkv), false, Bn, Tn, C, NH);  // q, k, v again (not kept per layer)
    void* dy[1] = {act(A_.vacc)};
    attn_.permute(cs(), dy, 1, act(A_.datty), false, Bn, Tn, C, NH);
    const T* att = act(L.att);
    T* datt = act(A_.datt);
    const auto s = typename B::StreamRef(cs());
    // dPd = dy v^T; dv = Pd^T dy (Pd: P with the dropout's factors, recomputed from the bits).
    accel::blas::gemm_strided_batched(b_, s, Trans::no, Trans::yes, Tn, Tn, hs, 1.0f, act(A_.vacc), hs, Tn * hs, h[2], hs,
                                      Tn * hs, 0.0f, datt, Tn, Tn * Tn, heads);
    const T* pd = att;
    if (mask != nullptr) {
      // pd = P x mask again: softmax_forward on a copy would renormalise, so scale P directly.
      nn_.dropout(cs(), act(A_.pd), att, mask, heads * Tn * Tn, p);
      pd = act(A_.pd);
    }
    accel::blas::gemm_strided_batched(b_, s, Trans::yes, Trans::no, Tn, hs, Tn, 1.0f, pd, Tn, Tn * Tn, act(A_.vacc), hs,
                                      Tn * hs, 0.0f, dh[2], hs, Tn * hs, heads);
    attn_.softmax_backward(cs(), datt, att, mask, p, heads, Tn, 1.0f / std::sqrt(static_cast<float>(hs)));
    accel::blas::gemm_strided_batched(b_, s, Trans::no, Trans::no, Tn, hs, Tn, 1.0f, datt, Tn, Tn * Tn, h[1], hs, Tn * hs,
                                      0.0f, dh[0], hs, Tn * hs, heads);
    accel::blas::gemm_strided_batched(b_, s, Trans::yes, Trans::no, Tn, hs, Tn, 1.0f, datt, Tn, Tn * Tn, h[0], hs,
                                      Tn * hs, 0.0f, dh[1], hs, Tn * hs, heads);
    void* dv[3] = {dh[0], dh[1], dh[2]};
    attn_.permute(cs(), dv, 3, dqkv, true, Bn, Tn, C, NH);
  }

  /// Layer l's forward over Bn x Tn tokens of the current lane. `again` (--activation-checkpointing,
  /// before the layer's backward): its forward once more from its input, kept in L.res_in, into the
  /// working set: the LayerNorm reads that input (the sum the fused add stored, so the same statistics),
  /// the dropout reuses the bits drawn the first time, and the MLP's output projection, which backward
  /// does not read, is skipped.
  void layer_forward(std::size_t l, bool drop, bool again, std::int64_t Bn, std::int64_t Tn) {
    const std::int64_t C = cfg_.shape.width, N = Bn * Tn;
    const auto& L = A_.layers[l];
    const auto& W = P_.layers[l];
    std::optional<Phase> op(std::in_place, *this, "layernorm", cs());
    if (l == 0 || again) {
      nn_.layernorm_forward(cs(), act(L.ln1), f32(L.ln1_mean), f32(L.ln1_rstd), act(L.res_in), w(W.ln1_w),
                            w(W.ln1_b), N, C);
    } else {  // the previous block's MLP residual add, fused
      const auto& prev = A_.layers[l - 1];
      nn_.layernorm_forward(cs(), act(L.ln1), f32(L.ln1_mean), f32(L.ln1_rstd), act(prev.res2), w(W.ln1_w),
                            w(W.ln1_b), N, C, 1e-5f, act(prev.fcproj), act(prev.res_out));
    }
    op.reset();
    gemm(Trans::no, Trans::yes, N, 3 * C, C, act(L.ln1), C, w(W.qkv_w), C, 0.0f, act(L.qkv), 3 * C);
    if (drop && !again) {
      const Phase bits_op(*this, "dropout", cs());
      draw_mask(1 + 3 * static_cast<int>(l), bits(L.bits_att));
    }
    attention_forward(L, drop, Bn, Tn);
    gemm(Trans::no, Trans::yes, N, C, C, act(L.atty), C, w(W.proj_w), C, 0.0f, act(L.attproj), C);
    if (drop) dropout(act(L.attproj), act(L.attproj), L.bits_proj, N * C, !again, 2 + 3 * static_cast<int>(l));
    op.emplace(*this, "layernorm", cs());
    nn_.layernorm_forward(cs(), act(L.ln2), f32(L.ln2_mean), f32(L.ln2_rstd), act(L.res_in), w(W.ln2_w),
                          w(W.ln2_b), N, C, 1e-5f, act(L.attproj), act(L.res2));
    op.reset();
    if (gelu_fusion_) {
      gemm_gelu(N, 4 * C, C, act(L.ln2), w(W.fc_w), act(L.gelu), act(L.fch));
    } else {
      gemm(Trans::no, Trans::yes, N, 4 * C, C, act(L.ln2), C, w(W.fc_w), C, 0.0f, act(L.fch), 4 * C);
      op.emplace(*this, "gelu", cs());
      nn_.gelu_forward(cs(), act(L.gelu), act(L.fch), N * 4 * C);
      op.reset();
    }
    if (again) return;
    gemm(Trans::no, Trans::yes, N, C, 4 * C, act(L.gelu), 4 * C, w(W.fcproj_w), 4 * C, 0.0f, act(L.fcproj), C);
    if (drop) dropout(act(L.fcproj), act(L.fcproj), L.bits_fc, N * C, true, 3 + 3 * static_cast<int>(l));
  }

  /// Forward pass of micro-batch m (inputs/targets slice m) over Bn sequences of Tn tokens.
  void forward(int m, bool train, std::int64_t Bn, std::int64_t Tn, bool loss = true) {
    const std::int64_t C = cfg_.shape.width, N = Bn * Tn, Vp = plan_.vocab_padded;
    const bool drop = train && cfg_.dropout > 0;
    if (drop && (Bn != lane_batch_ || Tn != cfg_.shape.block)) {
      throw std::logic_error("forward: dropout outside a training micro-batch");  // masks are per training sequence
    }
    micro_ = m;
    const std::int32_t* in = cur_->inputs.data() + static_cast<std::int64_t>(m) * N;
    const std::int32_t* tg = cur_->targets.data() + static_cast<std::int64_t>(m) * N;
    {
      const Phase phase(*this, "embedding", cs());
      nn_.embedding_forward(cs(), act(A_.encoded), in, w(P_.wte), w(P_.wpe), N, Tn, C, Vp);
      if (drop) dropout(act(A_.encoded), act(A_.encoded), A_.bits_emb, N * C, true, 0);
    }
    for (std::size_t l = 0; l < A_.layers.size(); ++l) {
      const Phase phase(*this, fwd_names_[l], cs());
      layer_forward(l, drop, false, Bn, Tn);
    }
    const auto& last = A_.layers.back();
    const Phase phase(*this, "head + loss", cs());
    nn_.layernorm_forward(cs(), act(A_.lnf), f32(A_.lnf_mean), f32(A_.lnf_rstd), act(last.res2), w(P_.lnf_w),
                          w(P_.lnf_b), N, C, 1e-5f, act(last.fcproj), act(last.res_out));
    gemm(Trans::no, Trans::yes, N, Vp, C, act(A_.lnf), C, w(P_.wte), C, 0.0f, act(A_.logits), Vp);
    if (loss) {
      // The mean over the global batch's tokens (every rank's share), times the loss scale.
      const float dloss = static_cast<float>(scaler_.scale() / static_cast<double>(cfg_.global_batch * Tn));
      nn_.cross_entropy(cs(), act(A_.logits), f32(A_.losses) + static_cast<std::int64_t>(m) * N, tg, N, plan_.vocab,
                        Vp, dloss, train);
    }
  }

  /// A lane and the micro-batch whose backward it runs (after forward(micro, true) on that lane).
  struct Work {
    Lane* lane = nullptr;
    int micro = 0;
  };

  /// Backward passes, accumulating into the gradients. One lane: its backward in order. Several, in
  /// lockstep: a tensor's gradients on each lane in turn. Stage 2's lanes (each with its own buckets):
  /// each bucket, once complete on every lane, summed over the lanes and reduced by lane 0
  /// (bucket_complete); the host enqueues every lane's part of a bucket before lane 0's wait for it (a
  /// wait sees only the records enqueued before it, so whole lanes cannot go one after the other).
  /// --deterministic stage 2's runs (lanes writing lane 0's buckets, the run's micro-batches in
  /// order): each tensor's gradient takes the micro-batches' contributions in their order, as stage 1's
  /// backward-after-backward gives them; wte is written by the head and by the embedding, so a lane's
  /// head product into wte waits until the lane before it did its embedding's.
  void backward(std::span<const Work> work) {
    const std::size_t count = work.size();
    const int m = work.front().micro;
    const bool chained = count > 1 && work[1].lane->buckets_of != nullptr;
    const auto each = [&](auto&& f) {
      for (std::size_t i = 0; i < count; ++i) {
        cur_ = work[i].lane;
        f(i);
      }
    };
    std::vector<std::optional<Phase>> spans(count);  // --trace: each lane's current span
    const auto close = [&] {
      for (std::size_t i = count; i-- > 0;) spans[i].reset();
    };
    each([&](std::size_t i) {
      bucket_begin(-1);
      spans[i].emplace(*this, "head backward", cs());
      backward_head(!chained);
    });
    close();
    for (std::size_t li = A_.layers.size(); li-- > 0;) {
      each([&](std::size_t i) { spans[i].emplace(*this, bwd_names_[li], cs()); });
      // --activation-checkpointing: the layer's activations again (the last layer's are still there).
      if (A_.recompute && li + 1 < A_.layers.size()) each([&](std::size_t) { recompute_layer(li); });
      for (int k = 0; k < BucketPlan::units_per_layer; ++k) {
        each([&](std::size_t) { backward_unit(li, k); });
        bucket_complete(BucketPlan::unit_index(cfg_.shape.layers, static_cast<int>(li), k));
      }
      const auto& W = P_.layers[li];
      if (!stage2_ && overlap_ && m == cfg_.accum - 1) {  // this layer's gradients are final: reduce them meanwhile
        enqueue_bucket(P_.offset(W.qkv_w), P_.offset(W.fcproj_w) + align16(P_.views[static_cast<std::size_t>(W.fcproj_w)].numel));
        enqueue_bucket(P_.offset(W.ln1_w), P_.offset(W.ln2_b) + align16(P_.views[static_cast<std::size_t>(W.ln2_b)].numel));
      }
      close();
    }
    each([&](std::size_t i) {
      spans[i].emplace(*this, "embedding backward", cs());
      if (chained) backward_head_wte();
      backward_embedding(work[i].micro);
    });
    bucket_complete(-1);
    if (!stage2_ && overlap_ && m == cfg_.accum - 1) {
      enqueue_bucket(0, P_.offset(P_.layers[0].qkv_w));  // the embeddings (wte also took the LM head's)
      enqueue_bucket(P_.offset(P_.lnf_w), P_.total);
    }
    close();
    cur_ = work.front().lane;
  }

  /// --activation-checkpointing: the current lane's layer li forward again, from its input, before its
  /// backward (layer_forward's `again`).
  void recompute_layer(std::size_t li) {
    const Phase phase(*this, "recompute", cs());
    layer_forward(li, cfg_.dropout > 0, true, lane_batch_, cfg_.shape.block);
  }

  /// The current lane's backward through the LM head and ln_f (after bucket_begin(-1)); the head's
  /// product into wte's gradient now or (`wte` false) later, by backward_head_wte().
  void backward_head(bool wte) {
    const std::int64_t N = static_cast<std::int64_t>(lane_batch_) * cfg_.shape.block, C = cfg_.shape.width,
                       Vp = plan_.vocab_padded;
    gemm(Trans::no, Trans::no, N, C, Vp, act(A_.logits), Vp, w(P_.wte), C, 0.0f, act(A_.dln), C);
    if (wte) backward_head_wte();
    ops_.fill(cs(), act(A_.dres), act_dtype, N * C, 0.0f);
    const auto& last = A_.layers.back();
    nn_.layernorm_backward(cs(), act(A_.dres), g(P_.lnf_w), g(P_.lnf_b), f32(A_.ln_scratch), act(A_.dln),
                           act(last.res_out), w(P_.lnf_w), f32(A_.lnf_mean), f32(A_.lnf_rstd), N, C);
  }

  /// The current lane's LM head gradient into wte's (dlogits and ln_f's output stay in its activations).
  void backward_head_wte() {
    const std::int64_t N = static_cast<std::int64_t>(lane_batch_) * cfg_.shape.block, C = cfg_.shape.width,
                       Vp = plan_.vocab_padded;
    gemm(Trans::yes, Trans::no, Vp, C, N, act(A_.logits), Vp, act(A_.lnf), C, 1.0f, g(P_.wte), C);
  }

  /// The current lane's backward of unit k (BucketPlan::Unit) of layer li: the tensor's input gradient
  /// and its weight gradient, written into its bucket in stage 2 (bucket_begin / bucket_end around it).
  void backward_unit(std::size_t li, int k) {
    const std::int64_t Bn = lane_batch_, Tn = cfg_.shape.block, C = cfg_.shape.width, N = Bn * Tn;
    const bool drop = cfg_.dropout > 0;
    const auto& L = A_.layers[li];
    const auto& W = P_.layers[li];
    const int unit = BucketPlan::unit_index(cfg_.shape.layers, static_cast<int>(li), k);
    switch (k) {
      case BucketPlan::fc_proj: {  // res_out = res2 + dropout(fcproj)
        T* dfc = act(A_.dres);
        if (drop) {
          dropout(act(A_.dtmp), act(A_.dres), L.bits_fc, N * C, false);
          dfc = act(A_.dtmp);
        }
        if (gelu_fusion_) {  // dbig = dgelu, the GELU's backward fused in (the fc unit skips its kernel)
          gemm_dgelu(N, 4 * C, C, dfc, w(W.fcproj_w), act(A_.dbig), act(L.fch));
        } else {
          gemm(Trans::no, Trans::no, N, 4 * C, C, dfc, C, w(W.fcproj_w), 4 * C, 0.0f, act(A_.dbig), 4 * C);
        }
        bucket_begin(unit);
        gemm(Trans::yes, Trans::no, C, 4 * C, N, dfc, C, act(L.gelu), 4 * C, 1.0f, g(W.fcproj_w), 4 * C);
        break;
      }
      case BucketPlan::fc: {
        if (!gelu_fusion_) {
          const Phase op(*this, "gelu backward", cs());
          nn_.gelu_backward(cs(), act(A_.dbig), act(L.fch), act(A_.dbig), N * 4 * C);
        }
        gemm(Trans::no, Trans::no, N, C, 4 * C, act(A_.dbig), 4 * C, w(W.fc_w), C, 0.0f, act(A_.dln), C);
        bucket_begin(unit);
        gemm(Trans::yes, Trans::no, 4 * C, C, N, act(A_.dbig), 4 * C, act(L.ln2), C, 1.0f, g(W.fc_w), C);
        break;
      }
      case BucketPlan::ln2: {
        bucket_begin(unit);
        const Phase op(*this, "layernorm backward", cs());
        nn_.layernorm_backward(cs(), act(A_.dres), g(W.ln2_w), g(W.ln2_b), f32(A_.ln_scratch), act(A_.dln),
                               act(L.res2), w(W.ln2_w), f32(L.ln2_mean), f32(L.ln2_rstd), N, C);
        break;
      }
      case BucketPlan::attn_proj: {  // res2 = res_in + dropout(attproj)
        T* dap = act(A_.dres);
        if (drop) {
          dropout(act(A_.dtmp), act(A_.dres), L.bits_proj, N * C, false);
          dap = act(A_.dtmp);
        }
        gemm(Trans::no, Trans::no, N, C, C, dap, C, w(W.proj_w), C, 0.0f, act(A_.datty), C);
        bucket_begin(unit);
        gemm(Trans::yes, Trans::no, C, C, N, dap, C, act(L.atty), C, 1.0f, g(W.proj_w), C);
        break;
      }
      case BucketPlan::qkv: {
        T* dqkv = act(A_.dbig);
        attention_backward(L, dqkv, drop, Bn, Tn);
        gemm(Trans::no, Trans::no, N, C, 3 * C, dqkv, 3 * C, w(W.qkv_w), C, 0.0f, act(A_.dln), C);
        bucket_begin(unit);
        gemm(Trans::yes, Trans::no, 3 * C, C, N, dqkv, 3 * C, act(L.ln1), C, 1.0f, g(W.qkv_w), C);
        break;
      }
      case BucketPlan::ln1: {
        bucket_begin(unit);
        const Phase op(*this, "layernorm backward", cs());
        nn_.layernorm_backward(cs(), act(A_.dres), g(W.ln1_w), g(W.ln1_b), f32(A_.ln_scratch), act(A_.dln),
                               act(L.res_in), w(W.ln1_w), f32(L.ln1_mean), f32(L.ln1_rstd), N, C);
        break;
      }
      default: throw std::logic_error("backward_unit: no unit " + std::to_string(k));
    }
    bucket_end(unit);
  }

  /// The current lane's backward through the embeddings (wte also took the LM head's gradient).
  void backward_embedding(int m) {
    const std::int64_t N = static_cast<std::int64_t>(lane_batch_) * cfg_.shape.block, C = cfg_.shape.width;
    const std::int32_t* in = cur_->inputs.data() + static_cast<std::int64_t>(m) * N;
    T* demb = act(A_.dres);
    if (cfg_.dropout > 0) {
      dropout(act(A_.dtmp), act(A_.dres), A_.bits_emb, N * C, false);
      demb = act(A_.dtmp);
    }
    nn_.embedding_backward(cs(), g(P_.wte), g(P_.wpe), demb, in, N, cfg_.shape.block, C, plan_.vocab_padded);
    bucket_end(-1);
  }

  /// --overlap: gradients [begin, end) reduced to their owners on the communication stream, after the
  /// compute stream's work so far (the backward that wrote them).
  void enqueue_bucket(std::int64_t begin, std::int64_t end) {
    comm_stream_->wait_stream(stream_);
    dp_.reduce_to_owners(*comm_stream_, {{grads_.data() + begin, begin, end}}, shard_, act_dtype);
  }

  /// Stage 2: a lane's bucket: its plan, the lane's buffer and that buffer's events (`unit` -1: the
  /// embedding bucket; else the layer bucket holding that unit, in the buffer the lane writes now).
  struct BucketRef {
    const Bucket* b;
    T* mem;
    typename B::Event* done;   // recorded once the buffer was last read (its reduction, or lane 0's sum)
    typename B::Event* ready;  // lanes but 0: recorded on the lane's stream once backward wrote the bucket
  };
  BucketRef bucket_ref(Lane& lane, int unit) {
    if (unit < 0) return {&buckets_->embed, lane.embed_bucket.data(), &lane.bucket_done.back(), &lane.bucket_ready.back()};
    const auto i = static_cast<std::size_t>(lane.layer_bucket);
    return {&buckets_->layers[static_cast<std::size_t>(buckets_->unit_bucket[static_cast<std::size_t>(unit)])],
            lane.layer_buckets[i].data(), &lane.bucket_done[i], &lane.bucket_ready[i]};
  }
  [[nodiscard]] bool last_of_bucket(int unit) const {
    return unit < 0 || buckets_->layers[static_cast<std::size_t>(buckets_->unit_bucket[static_cast<std::size_t>(unit)])].last_unit == unit;
  }

  /// Stage 2, before the current lane's backward writes the gradients of `unit` (-1: the embedding
  /// bucket, at the start of backward): when it is its bucket's first, the lane's buffer for it (the
  /// other one with --overlap), once what last read that buffer is done, zeroed.
  void bucket_begin(int unit) {
    if (!stage2_ || cur_->buckets_of != nullptr) return;  // a run's later micro-batch adds to lane 0's
    if (unit >= 0) {
      if (buckets_->layers[static_cast<std::size_t>(buckets_->unit_bucket[static_cast<std::size_t>(unit)])].first_unit != unit) return;
      if (overlap_) cur_->layer_bucket = (cur_->layer_bucket + 1) % static_cast<int>(cur_->layer_buckets.size());
    }
    const BucketRef r = bucket_ref(*cur_, unit);
    if (overlap_ || cur_ != &lanes_[0]) cur_->s.wait(*r.done);  // else lane 0 read it in its own stream's order
    ops_.fill(cs(), r.mem, act_dtype, r.b->size, 0.0f);
  }

  /// Stage 2, after the current lane's backward wrote the gradients of `unit`: when that completes the
  /// bucket, a lane other than 0 marks its buffer written (lane 0 sums it in bucket_complete).
  void bucket_end(int unit) {
    if (!stage2_ || cur_ == &lanes_[0] || cur_->buckets_of != nullptr || !last_of_bucket(unit)) return;
    bucket_ref(*cur_, unit).ready->record(cur_->s);
  }

  /// Stage 2, once every lane's backward wrote the gradients of `unit` (-1: the embeddings'): when that
  /// completes the bucket, the lanes' buckets summed into lane 0's in lane order (lane 0's stream waits
  /// for each; the same sum every run), and the sum reduced into this rank's shard (on the
  /// communication stream with --overlap; --deterministic: gathered and summed at the owners). The
  /// lanes are a micro-batch split by rows: summed before the reduction, as stage 1 sums the lanes'
  /// gradients before its reduce-scatter, so the ranks exchange a bucket once per micro-batch however
  /// many lanes there are.
  void bucket_complete(int unit) {
    if (!stage2_ || !last_of_bucket(unit)) return;
    const BucketRef r = bucket_ref(lanes_[0], unit);
    if (lanes_.size() > 1) {
      const Phase phase(*this, "lane sum", stream_);
      for (std::size_t l = 1; l < lanes_.size(); ++l) {
        const BucketRef x = bucket_ref(lanes_[l], unit);
        stream_.wait(*x.ready);
        nn_.add(stream_, r.mem, r.mem, x.mem, r.b->size);
        x.done->record(stream_);
      }
    }
    if (cfg_.deterministic) {
      gather_bucket(*r.b, r.mem);
    } else if (overlap_) {
      comm_stream_->wait_stream(stream_);
      reduce_bucket(*comm_stream_, *r.b, r.mem);
      r.done->record(*comm_stream_);
    } else {
      reduce_bucket(stream_, *r.b, r.mem);
    }
  }

  /// A bucket's gradients summed over the ranks into their owners, and this rank's part added to its
  /// shard's gradients (the micro-batches accumulate there).
  void reduce_bucket(typename B::StreamRef s, const Bucket& b, T* mem) {
    const Phase phase(*this, "bucket reduce", s);
    std::vector<typename Ranks<B>::FlatRange> ranges;
    for (const auto& r : b.ranges) ranges.push_back({mem + r.pos, r.begin, r.end});
    dp_.reduce_to_owners(s, ranges, shard_, act_dtype);  // one grouped launch for the bucket
    for (const auto& r : b.ranges) {
      const std::int64_t lo = std::max(r.begin, shard_lo_), hi = std::min(r.end, shard_lo_ + shard_);
      if (hi <= lo) continue;
      T* acc = grad_acc_.data() + (lo - shard_lo_);
      nn_.add(s, acc, acc, mem + r.pos + (lo - r.begin), hi - lo);
    }
  }

  /// --deterministic stage 2: a bucket's leaves (one per rank: micro-batch m x ranks + rank) gathered at
  /// the owners of its elements, in rounds of det_chunk_ elements per owner, and summed pairwise in
  /// rank order (the summation tree's levels above the leaves) into det_sum_.
  void gather_bucket(const Bucket& b, T* mem) {
    const Phase phase(*this, "bucket gather", stream_);
    const int R = dp_.size(), me = dp_.rank();
    std::vector<typename Ranks<B>::GatherPart> parts;
    for (const auto& r : b.ranges) {
      for (std::int64_t k = 0;; ++k) {
        parts.clear();
        std::int64_t mine_at = 0, mine = 0;
        for (int q = static_cast<int>(r.begin / shard_); q < R && q * shard_ < r.end; ++q) {
          const std::int64_t lo = std::max(r.begin, q * shard_) + k * det_chunk_, hi = std::min(r.end, (q + 1) * shard_);
          if (lo >= hi) continue;
          const std::int64_t n = std::min(det_chunk_, hi - lo);
          parts.push_back({mem + r.pos + (lo - r.begin), static_cast<std::size_t>(n), q});
          if (q == me) {
            mine_at = lo;
            mine = n;
          }
        }
        if (parts.empty()) break;
        dp_.gather_group(stream_, parts, det_recv_.data(), act_dtype);
        if (mine == 0) continue;
        T* leaves = det_recv_.data();  // rank j's leaf at j x mine
        for (int step = 1; step < R; step *= 2) {
          for (int j = 0; j + step < R; j += 2 * step) {
            nn_.add(stream_, leaves + j * mine, leaves + j * mine, leaves + (j + step) * mine, mine);
          }
        }
        b_.copy_async(stream_, det_sum_ + (mine_at - shard_lo_), leaves, static_cast<std::size_t>(mine) * sizeof(T));
      }
    }
  }

  /// This rank's share of the step's global batch: every rank draws the whole batch (the generator
  /// advances the same on any rank count) and keeps sequences [rank x share, (rank + 1) x share).
  void draw_batch() {
    const std::int64_t Tk = cfg_.shape.block;
    if (!prefetched_) sample_global();
    prefetched_ = false;
    const std::size_t share = host_inputs_.size(), from = share * static_cast<std::size_t>(dp_.rank());
    if (stage2_ && cfg_.deterministic) {  // micro-batch i of this rank's j-th run: global run j x ranks + rank
      const std::size_t micro = static_cast<std::size_t>(cfg_.batch) * static_cast<std::size_t>(Tk);
      const auto odd = static_cast<std::size_t>(det_odd_);
      for (std::size_t m = 0; m < static_cast<std::size_t>(cfg_.accum); ++m) {
        const std::size_t run = m / odd * static_cast<std::size_t>(dp_.size()) + static_cast<std::size_t>(dp_.rank());
        const std::size_t at = (run * odd + m % odd) * micro;
        std::copy_n(global_inputs_.data() + at, micro, host_inputs_.data() + m * micro);
        std::copy_n(global_targets_.data() + at, micro, host_targets_.data() + m * micro);
      }
      return;
    }
    std::copy_n(global_inputs_.data() + from, share, host_inputs_.data());
    std::copy_n(global_targets_.data() + from, share, host_targets_.data());
  }

  /// The whole step's global batch from the data generator.
  void sample_global() {
    const std::int64_t chunk = static_cast<std::int64_t>(cfg_.draw_chunk) * cfg_.shape.block;
    for (std::int64_t at = 0; at < static_cast<std::int64_t>(global_inputs_.size()); at += chunk) {
      train_sampler_.next(data_gen_, global_inputs_.data() + at, global_targets_.data() + at);
    }
  }

  /// The next step's global batch, drawn while the device runs this step: between steps the draw kept
  /// the host ~0.1 ms from launching the next step, the GPU idle (gpt2 on an H200). A checkpoint keeps
  /// the generator's state from before it, so a resumed run draws the same batches.
  void prefetch_batch() {
    state_before_prefetch_ = data_gen_.get_state();
    sample_global();
    prefetched_ = true;
  }

  /// The index in the step's global batch of the first sequence of slot's micro-batch m (dropout
  /// masks are keyed by it): this rank's share as draw_batch takes it, lanes' rows in order.
  std::int64_t first_sequence(int slot, int m) const {
    // lanes_[l] holds rows l x lane_batch_ of each micro-batch (copy_in); chain_'s lanes whole ones
    const std::int64_t row0 = slot < static_cast<int>(lanes_.size()) ? std::int64_t{slot} * lane_batch_ : 0;
    const std::int64_t batch = cfg_.batch, R = dp_.size(), rank = dp_.rank();
    if (stage2_ && cfg_.deterministic) {  // micro-batch m: run m / odd x ranks + rank, as draw_batch
      const std::int64_t run = m / det_odd_ * R + rank;
      return (run * det_odd_ + m % det_odd_) * batch + row0;
    }
    return rank * batch * cfg_.accum + m * batch + row0;
  }

  /// The current lane's forward and backward of micro-batch m, accumulating into its gradients
  /// (zeroed first when `zero`).
  void enqueue_micro(int m, bool zero) {
    if (zero && !stage2_) ops_.fill(cs(), cur_->grads, act_dtype, padded_, 0.0f);
    forward(m, true, lane_batch_, cfg_.shape.block);
    const Work work{cur_, m};
    backward(std::span<const Work>(&work, 1));
    if (inject_inf_ && !stage2_ && m == 0 && cur_ == &lanes_[0]) {  // the loss scaler's test: one gradient overflows
      ops_.fill(cs(), cur_->grads, act_dtype, 1, INFINITY);
    }
  }

  /// The current lane's part of a step: zero its gradients, forward and backward of each micro-batch.
  void enqueue_lane_gradients() {
    for (int m = 0; m < cfg_.accum; ++m) enqueue_micro(m, m == 0);
  }

  /// Every other lane waits for what lane 0's stream holds so far (the previous update, the batch's
  /// copies). Enqueued before lane 0 adds its own forward and backward: a wait enqueued after them
  /// would run the lanes one after the other instead of side by side.
  void lanes_wait_for_lane0() {
    for (std::size_t l = 1; l < lanes_.size(); ++l) lanes_[l].s.wait_stream(stream_);
  }

  /// On lane 0, after every lane's gradients: their sum (lane 0's buffer).
  void enqueue_lane_sum() {
    const Phase phase(*this, "gradient sum", stream_);
    for (std::size_t l = 1; l < lanes_.size(); ++l) {
      stream_.wait_stream(lanes_[l].s);
      nn_.add(stream_, grads_.data(), grads_.data(), lanes_[l].grads, padded_);
    }
  }

  /// Everything of a step but the optimizer (what --graph captures): every lane's gradients, their sum
  /// over the lanes and the ranks (this rank's shard, at grad_shard_), the loss scale undone, the
  /// global norm.
  void enqueue_gradients() {
    const std::size_t ns = static_cast<std::size_t>(shard_);
    if (stage2_) {
      cur_ = &lanes_[0];
      if (cfg_.deterministic) {
        enqueue_gradients_det2();
      } else {  // every micro-batch's buckets reduced into the shard as backward completes them
        ops_.fill(stream_, grad_acc_.data(), act_dtype, shard_, 0.0f);
        lanes_wait_for_lane0();  // the weights of the previous step's update
        for (int m = 0; m < cfg_.accum; ++m) {
          for (auto& lane : lanes_) {
            cur_ = &lane;
            forward(m, true, lane_batch_, cfg_.shape.block);
          }
          std::vector<Work> work;
          for (auto& lane : lanes_) work.push_back({&lane, m});
          backward(work);  // the lanes in lockstep, each bucket summed over them
        }
        if (overlap_) stream_.wait_stream(*comm_stream_);  // every bucket reduced
        for (std::size_t l = 1; l < lanes_.size(); ++l) stream_.wait_stream(lanes_[l].s);  // their losses
      }
      if (inject_inf_) ops_.fill(stream_, grad_acc_.data(), act_dtype, 1, INFINITY);  // the loss scaler's test
    } else if (cfg_.deterministic) {
      enqueue_gradients_deterministic();
    } else {
      lanes_wait_for_lane0();  // the weights of the previous step's update
      for (auto& lane : lanes_) {
        cur_ = &lane;
        enqueue_lane_gradients();
      }
      cur_ = &lanes_[0];
      enqueue_lane_sum();
      if (overlap_) {
        stream_.wait_stream(*comm_stream_);  // every bucket reduced (backward issued them)
      } else if (dp_.distributed()) {
        const Phase phase(*this, "reduce-scatter", stream_);
        dp_.reduce_scatter(stream_, grads_.data(), grad_shard_, ns, act_dtype);
      }
    }
    if (scaler_.enabled()) {
      const auto inv = static_cast<float>(1.0 / scaler_.scale());
      if (grad32_.size() > 0) {
        ops_.scale(stream_, grad32_.data(), accel::Dtype::float32, grad_shard_, act_dtype, shard_, inv);
      } else {
        ops_.scale(stream_, grad_shard_, act_dtype, grad_shard_, act_dtype, shard_, inv);
      }
    }
    enqueue_norm();
  }

  /// --deterministic: every sum independent of how the global batch is split over the ranks. The
  /// micro-batches are the leaves of one summation tree over the global batch, by sequence index: runs
  /// of `odd` leaves (the odd factor of the leaf count) summed left to right, those sums pairwise (a
  /// perfect binary tree). A rank holds whole subtrees (the rank count is a power of two dividing the
  /// tree's width), sums them with a stack of partial sums, and the ranks' sums meet in the same tree's
  /// top levels: all_to_all (rank j gets every rank's partial sum of shard j), pairwise in rank order.
  void enqueue_gradients_deterministic() {
    const std::int64_t odd = det_odd_;
    std::vector<std::pair<int, T*>> stack;  // (level, partial sum)
    std::vector<T*> free;                    // the pool's buffers not on the stack (pool[0] taken first)
    for (auto it = det_pool_.rbegin(); it != det_pool_.rend(); ++it) free.push_back(it->data());
    const auto take = [&]() -> T* {
      if (free.empty()) throw std::logic_error("the summation tree is deeper than its pool");
      T* p = free.back();
      free.pop_back();
      return p;
    };
    cur_ = &lanes_[0];
    T* block = nullptr;
    for (int m = 0; m < cfg_.accum; ++m) {
      if (m % odd == 0) block = take();
      cur_->grads = block;
      enqueue_micro(m, m % odd == 0);
      if ((m + 1) % odd == 0) {
        stack.emplace_back(0, block);
        while (stack.size() >= 2 && stack[stack.size() - 1].first == stack[stack.size() - 2].first) {
          const auto [level, right] = stack.back();
          stack.pop_back();
          nn_.add(stream_, stack.back().second, stack.back().second, right, padded_);
          stack.back().first = level + 1;
          free.push_back(right);
        }
      }
    }
    cur_->grads = grads_.data();
    b_.copy_async(stream_, grads_.data(), stack.front().second, static_cast<std::size_t>(padded_) * sizeof(T));
    if (dp_.distributed()) {
      const std::size_t ns = static_cast<std::size_t>(shard_);
      dp_.all_to_all(stream_, grads_.data(), recv_.data(), ns, act_dtype);
      for (int step = 1; step < dp_.size(); step *= 2) {
        for (int j = 0; j + step < dp_.size(); j += 2 * step) {
          T* a = recv_.data() + static_cast<std::int64_t>(j) * shard_;
          nn_.add(stream_, a, a, recv_.data() + static_cast<std::int64_t>(j + step) * shard_, shard_);
        }
      }
      b_.copy_async(stream_, grad_shard_, recv_.data(), ns * sizeof(T));
    }
  }

  /// --deterministic stage 2. Stage 1's tree has runs of `odd` leaves (micro-batches) summed in order,
  /// then a perfect binary tree over the runs; the ranks take the runs in turn (rank r's j-th is the
  /// global run j x ranks + r; draw_batch), so at run-step j the ranks hold the leaves of one R-leaf
  /// subtree of the runs. A rank sums its run in its buckets: the run's micro-batches forward on their
  /// own activation sets (lane 0 and chain_), then backward in lockstep, each adding into lane 0's
  /// buckets in the run's order (backward()) — the order stage 1's backward-after-backward gives each
  /// element, in a bucket instead of the whole model's buffer. The buckets are gathered at their owners
  /// and summed there pairwise in rank order (gather_bucket) into det_sum_, this shard's subtree sum,
  /// and those sums are the leaves of the tree's upper levels: a stack of shard-sized partial sums, as
  /// stage 1 keeps of whole-model ones. The stack's bottom is grad_acc_, where the step's sum ends.
  void enqueue_gradients_det2() {
    std::vector<std::pair<int, T*>> stack;  // (level, partial sum of this shard)
    std::vector<T*> free;
    for (auto it = det_pool_.rbegin(); it != det_pool_.rend(); ++it) free.push_back(it->data());
    free.push_back(grad_acc_.data());
    const int odd = static_cast<int>(det_odd_);
    const std::int64_t N = static_cast<std::int64_t>(lane_batch_) * cfg_.shape.block;
    const auto n4 = static_cast<std::size_t>(N) * 4;
    std::vector<Work> work(static_cast<std::size_t>(odd));
    for (int j = 0; j < cfg_.accum / odd; ++j) {
      if (free.empty()) throw std::logic_error("the summation tree is deeper than its pool");
      det_sum_ = free.back();
      free.pop_back();
      ops_.fill(stream_, det_sum_, act_dtype, shard_, 0.0f);  // the padding beyond the model stays zero
      for (int i = 0; i < odd; ++i) {
        const int m = j * odd + i;
        Lane& lane = i == 0 ? lanes_[0] : chain_[static_cast<std::size_t>(i - 1)];
        if (i > 0) {  // lane 0 holds the batch's tokens
          b_.copy_async(stream_, lane.inputs.data() + m * N, lanes_[0].inputs.data() + m * N, n4);
          b_.copy_async(stream_, lane.targets.data() + m * N, lanes_[0].targets.data() + m * N, n4);
        }
        cur_ = &lane;
        forward(m, true, lane_batch_, cfg_.shape.block);
        if (i > 0) {  // the losses where enqueue_losses reads them
          const std::int64_t at = A_.losses + m * N;
          b_.copy_async(stream_, lanes_[0].f32.data() + at, lane.f32.data() + at, n4);
        }
        work[static_cast<std::size_t>(i)] = {&lane, m};
      }
      backward(work);
      stack.emplace_back(0, det_sum_);
      while (stack.size() >= 2 && stack[stack.size() - 1].first == stack[stack.size() - 2].first) {
        const auto [level, right] = stack.back();
        stack.pop_back();
        nn_.add(stream_, stack.back().second, stack.back().second, right, shard_);
        stack.back().first = level + 1;
        free.push_back(right);
      }
    }
    cur_ = &lanes_[0];
  }

  /// The global L2 norm into lane 0's norm slot: each rank's block norms, gathered in block order on
  /// every rank, and their norm (the same bits on every rank).
  void enqueue_norm() {
    const Phase phase(*this, "norm", stream_);
    std::vector<accel::ops::TensorRef> blocks(static_cast<std::size_t>(norm_blocks_));
    const std::int64_t len = shard_ / norm_blocks_;
    for (std::int64_t i = 0; i < norm_blocks_; ++i) {
      blocks[static_cast<std::size_t>(i)] = grad32_.size() > 0
                                                ? accel::ops::TensorRef{grad32_.data() + i * len, len, accel::Dtype::float32}
                                                : accel::ops::TensorRef{grad_shard_ + i * len, len, act_dtype};
    }
    float* mine = block_norms_.data() + norm_blocks_ * dp_.rank();
    float* total = lanes_[0].f32.data() + A_.norm;
    ops_.l2norm(stream_, blocks, total + 1, mine);
    if (dp_.distributed()) {
      dp_.all_gather(stream_, mine, block_norms_.data(), static_cast<std::size_t>(norm_blocks_), accel::Dtype::float32);
    }
    const accel::ops::TensorRef all{block_norms_.data(), static_cast<std::int64_t>(block_norms_.size()), accel::Dtype::float32};
    ops_.l2norm(stream_, std::span<const accel::ops::TensorRef>(&all, 1), total);
  }

  /// Gradient clipping of this rank's shard by the global norm enqueue_gradients() left in device memory.
  void enqueue_clip() {
    if (cfg_.clip > 0) {
      const Phase phase(*this, "clip", stream_);
      if (grad32_.size() > 0) {
        nn32_->clip(stream_, grad32_.data(), shard_, lanes_[0].f32.data() + A_.norm, static_cast<float>(cfg_.clip));
      } else {
        nn_.clip(stream_, grad_shard_, shard_, lanes_[0].f32.data() + A_.norm, static_cast<float>(cfg_.clip));
      }
    }
  }

  /// This rank's per-token losses, in sequence order, into its block of loss_all_, gathered from every
  /// rank (loss_all_ then holds the global batch's, in sequence order).
  void enqueue_losses() {
    const std::int64_t Tk = cfg_.shape.block, lt = static_cast<std::int64_t>(lane_batch_) * Tk;
    const std::int64_t mine = static_cast<std::int64_t>(cfg_.batch) * cfg_.accum * Tk;
    float* dst = loss_all_.data() + mine * dp_.rank();
    for (int m = 0; m < cfg_.accum; ++m) {
      for (std::size_t l = 0; l < lanes_.size(); ++l) {  // lane 0 waited for every lane's work
        const std::int64_t at = (static_cast<std::int64_t>(m) * cfg_.batch + static_cast<std::int64_t>(l) * lane_batch_) * Tk;
        b_.copy_async(stream_, dst + at, lanes_[l].f32.data() + A_.losses + lt * m, static_cast<std::size_t>(lt) * 4);
      }
    }
    if (dp_.distributed()) dp_.all_gather(stream_, dst, loss_all_.data(), static_cast<std::size_t>(mine), accel::Dtype::float32);
  }

  /// AdamW over this rank's shard of the two groups: the 2-D tensors with weight decay, the rest without.
  void enqueue_adam(double lr, std::int64_t t) {
    const Phase phase(*this, "adamw", stream_);
    accel::ops::AdamOptions o;
    o.lr = lr;
    o.beta1 = cfg_.beta1;
    o.beta2 = cfg_.beta2;
    o.eps = cfg_.eps;
    o.adamw = true;
    accel::ops::AdamDtypes d;
    const bool f32_grads = grad32_.size() > 0;
    d.grad = f32_grads ? accel::Dtype::float32 : act_dtype;
    if constexpr (lowp) d.model_copy = act_dtype;
    const std::int64_t lo = shard_lo_, hi = std::min(shard_lo_ + shard_, P_.total);
    const auto group = [&](std::int64_t begin, std::int64_t end, double wd) {
      begin = std::max(begin, lo);
      end = std::min(end, hi);
      if (end <= begin) return;
      const std::int64_t at = begin - lo;  // in the shard
      accel::ops::AdamTensor a;
      a.param = master_or_params() + at;
      a.grad = f32_grads ? static_cast<const void*>(grad32_.data() + at) : static_cast<const void*>(grad_shard_ + at);
      a.exp_avg = exp_avg_.data() + at;
      a.exp_avg_sq = exp_avg_sq_.data() + at;
      if constexpr (lowp) a.model_copy = params_.data() + begin;
      a.numel = end - begin;
      o.weight_decay = wd;
      ops_.adam(stream_, std::span<const accel::ops::AdamTensor>(&a, 1), o, t, d);
    };
    group(0, P_.decay_end, cfg_.weight_decay);
    group(P_.decay_end, P_.total, 0.0);
  }

  static std::string shape_string(const Config& c) {
    return std::to_string(c.shape.layers) + "/" + std::to_string(c.shape.heads) + "/" + std::to_string(c.shape.width) +
           "/" + std::to_string(c.shape.block);
  }

  B b_;
  const Config& cfg_;
  Ranks<B>& dp_;
  const Corpus& corpus_;
  Plan plan_;
  typename B::Stream stream_;  // lane 0's stream: the optimizer, the norm and every host copy run here
  int lane_batch_;              // sequences per lane (--streams splits the batch's rows)
  ParamLayout P_;
  ActLayout A_;
  accel::ops::NnKernels<B> nn_;
  GptKernels<B> attn_;
  TypedOps<B> ops_;
  BatchSampler train_sampler_, val_sampler_;
  accel::Generator data_gen_;
  bool prefetched_ = false;                          // global_inputs_/targets_ hold the next step's batch
  accel::Generator::State state_before_prefetch_{};  // data_gen_'s state before that draw (checkpoints)
  // ZeRO: params_ and grads_ hold the whole (padded) model; the optimizer state this rank's shard.
  std::int64_t shard_ = 0, padded_ = 0, shard_lo_ = 0;
  accel::Buffer<T, B> params_, grads_;
  accel::Buffer<float, B> exp_avg_, exp_avg_sq_, master_;
  T* grad_shard_ = nullptr;          // this rank's reduced gradients (in grads_, or grad_acc_)
  accel::Buffer<T, B> grad_acc_;     // stage 2: the shard's reduced gradients (grads_ is not allocated)
  accel::Buffer<float, B> grad32_;   // 16-bit model with the loss scaler: the shard's unscaled fp32 gradients
  std::optional<accel::ops::NnKernels<B>> nn32_;  // clipping of grad32_
  int threads_per_lane_ = 0;
  accel::Buffer<T, B> recv_;         // --deterministic: every rank's partial sums of this shard
  std::deque<accel::Buffer<T, B>> det_pool_;  // --deterministic: the summation tree's partial sums
  std::int64_t det_leaves_ = 0, det_odd_ = 0;
  // ZeRO stage 2: the buckets backward writes into (buckets.hpp; each lane has its own set), reduced to
  // their owners as each completes. With --overlap two layer buckets alternate, and each bucket's
  // reduction (on the communication stream) records the buffer's done event, which backward waits for
  // before it writes that buffer again.
  bool stage2_ = false;
  std::optional<BucketPlan> buckets_;
  accel::Buffer<T, B> det_recv_;      // --deterministic stage 2: the leaves of a chunk, gathered
  std::int64_t det_chunk_ = 0;
  T* det_sum_ = nullptr;              // --deterministic stage 2: the current micro-step's sum (shard)
  std::size_t shard_gradient_bytes_ = 0, tree_gradient_bytes_ = 0;
  std::int64_t norm_blocks_ = 1;
  accel::Buffer<float, B> block_norms_, loss_all_;
  std::size_t optimizer_bytes_ = 0, gradient_bytes_ = 0;
  DynamicLossScaler scaler_;
  bool overlap_ = false;
  bool gelu_fusion_ = false;  // --gelu-fusion resolved (auto: on where the device is not the CPU)
  std::optional<typename B::Stream> comm_stream_;  // --overlap: the buckets' reductions
  bool inject_inf_ = false;  // ENGINE_FAULT=inf:STEP: the loss scaler's test
  accel::Buffer<std::int32_t, B> agree_;
  // A lane: a stream with its own activations and gradients running a slice of the batch's rows; the
  // lanes' gradients are summed on lane 0 (--streams). One lane: the whole batch on stream_.
  struct Lane {
    explicit Lane(typename B::Stream&& stream) : own(std::move(stream)), s(*own) {}
    explicit Lane(typename B::StreamRef ref) : s(ref) {}
    std::optional<typename B::Stream> own;
    typename B::StreamRef s;
    accel::Buffer<T, B> act, own_grads;
    accel::Buffer<float, B> f32;
    accel::Buffer<std::uint32_t, B> bits;
    accel::Buffer<std::int32_t, B> inputs, targets;
    T* grads = nullptr;
    // ZeRO stage 2: the lane's buckets (bucket_begin .. bucket_complete). bucket_done[i]: buffer i's
    // contents were read (reduced; lanes but 0: added into lane 0's), so backward may write it again;
    // bucket_ready[i]: written (lanes but 0). The last of each: the embedding bucket's.
    accel::Buffer<T, B> embed_bucket;
    std::deque<accel::Buffer<T, B>> layer_buckets;
    std::deque<typename B::Event> bucket_done, bucket_ready;
    int layer_bucket = 0;  // the layer bucket buffer backward writes now
    Lane* buckets_of = nullptr;  // --deterministic stage 2's runs: the lane whose buckets it adds to
    int slot = 0;                // its DropoutMasks slot: lanes_ 0 .., then chain_
  };
  std::deque<Lane> lanes_;  // a deque: a Lane's address (and its stream's) never moves
  std::deque<Lane> chain_;  // --deterministic stage 2: a run's micro-batches 1 .. odd - 1 (lane 0: its first)
  Lane* cur_ = nullptr;
  int micro_ = 0;                       // the micro-batch forward() runs now (its dropout masks)
  std::optional<DropoutMasks> masks_;   // with dropout
  std::vector<std::int32_t> host_inputs_, host_targets_, val_inputs_, val_targets_, global_inputs_, global_targets_;
  std::optional<HostStaging<B>> staging_;  // the batches in, the losses out: a slot per step in flight
  std::size_t loss_count_ = 0;             // per-token losses a step copies out (every rank's)
  std::array<typename B::Event, 2> step_done_{};  // step s's results are in slot s % 2
  std::deque<StepResult> pending_;  // the steps begun and not finished, as far as begin_step knows them
  std::optional<typename B::Graph> graph_;
  std::function<void(const std::vector<std::int32_t>&, const std::vector<std::int32_t>&)> batch_hook_;
  std::int64_t step_ = 0;
  accel::profile::TraceRecorder* trace_ = nullptr;
  bool capturing_ = false;
  std::vector<std::string> fwd_names_, bwd_names_;  // the layers' phase names (--trace)
};

}  // namespace engine
