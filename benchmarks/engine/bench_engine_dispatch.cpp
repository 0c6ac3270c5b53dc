// bench_engine_dispatch — what the facade costs a whole training step: the GPT engine's step as
// Engine<CpuBackend> (static: every call a direct call on the backend), as Engine<AnyBackend> (every
// call dispatched at run time through the variant), and as the same step in raw calls (the kernels'
// C entry points, dnnl_sgemm, the fused Adam and tensor-op kernels called by hand on this thread, on
// memory placed as accel places it: what a hand-written trainer such as llm.c does). Interleaved rounds
// (benchmarks/README.md); ms per step, and raw ÷ way round by round.
//
//   build/default/benchmarks/engine/bench_engine_dispatch --rounds=11 --json=benchmarks/results/engine_dispatch.json
//   options: --threads=N (1), --sample-s=S (1.0 s of steps per sample), --data=FILE, --smoke,
//            --clock=process|wall (process: the CPU time of all the process's threads — the stream's
//            worker included, waiting for a core not: the figure a shared machine leaves usable)
//
// The model is `tiny` (batch 12, block 64, one stream, fused attention, no dropout). Before timing, the
// three train 3 steps from the same weights and batches and must give the same loss bits (the raw
// step is the engine's step, not a lighter one); the program fails otherwise.
#include "../bench_support.hpp"

#include "run.hpp"

#include <accel/accel.hpp>
#include <accel/blas/detail/cpu_openblas.hpp>
#include <accel/ops.hpp>
#include <accel/ops/nn_abi.hpp>

#include <oneapi/dnnl/dnnl.h>

#include <dlfcn.h>
#include <sys/mman.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace abi = accel::ops::abi;
using HostFn = int(const void*, int);

/// Zeroed floats on 2 MiB-aligned transparent huge pages, as accel's CPU allocator places its blocks
/// (plain malloc'ed memory costs the step 1-2 % in TLB misses here: that is memory, not calls).
struct RawFloats {
  explicit RawFloats(std::int64_t n) {
    constexpr std::size_t huge = std::size_t{2} << 20;
    bytes_ = (static_cast<std::size_t>(n) * 4 + huge - 1) / huge * huge + huge;
    base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) throw std::bad_alloc();
    const auto aligned = (reinterpret_cast<std::uintptr_t>(base_) + huge - 1) / huge * huge;
    ::madvise(reinterpret_cast<void*>(aligned), bytes_ - huge, MADV_HUGEPAGE);
    p = reinterpret_cast<float*>(aligned);
  }
  ~RawFloats() { ::munmap(base_, bytes_); }
  RawFloats(const RawFloats&) = delete;
  RawFloats& operator=(const RawFloats&) = delete;
  float* p;

 private:
  void* base_;
  std::size_t bytes_;
};

/// The engine's training step (engine.hpp: train_step with one lane, one micro-batch, no dropout,
/// the fused attention kernel, clipping, AdamW in two groups) in raw calls on the calling thread.
class RawStep {
 public:
  RawStep(const engine::Config& cfg, const engine::Corpus& corpus, std::int64_t vocab, std::int64_t vocab_padded,
          const engine::CheckpointState& init)
      : cfg_(cfg),
        V_(vocab),
        Vp_(vocab_padded),
        P_(cfg.shape, vocab_padded),
        A_(cfg.shape, cfg.batch, vocab_padded, 1, false, engine::AttentionPath::fused),
        params_(P_.total),
        grads_(P_.total),
        m_(P_.total),
        v_(P_.total),
        act_(A_.act),
        f32_(A_.f32),
        sampler_(corpus.train(), cfg.batch, cfg.shape.block),
        gen_(cfg.seed),
        nn_(accel::CpuBackend::create_op_builder("nn_ops").load()),
        gpt_(accel::CpuBackend::create_op_builder(engine::gpt_kernels_spec(accel::DeviceType::cpu))
                 .set_kernel_dir(engine::engine_kernel_dir())
                 .load()),
        adam_(accel::CpuBackend::create_op_builder("fused_adam").load()),
        tensor_(accel::CpuBackend::create_op_builder("tensor_ops").load()) {
    const auto fn = [](const accel::ops::LoadedOp& op, const std::string& name) {
      return op.function<HostFn>(name);
    };
    emb_f_ = fn(nn_, "accel_nn_embedding_forward_f32");
    emb_b_ = fn(nn_, "accel_nn_embedding_backward_f32");
    ln_f_ = fn(nn_, "accel_nn_layernorm_forward_f32");
    ln_b_ = fn(nn_, "accel_nn_layernorm_backward_f32");
    gelu_f_ = fn(nn_, "accel_nn_gelu_forward_f32");
    gelu_b_ = fn(nn_, "accel_nn_gelu_backward_f32");
    ce_ = fn(nn_, "accel_nn_cross_entropy_f32");
    clip_ = fn(nn_, "accel_nn_clip_f32");
    att_f_ = fn(gpt_, "gpt_attention_forward_f32");
    att_b_ = fn(gpt_, "gpt_attention_backward_f32");
    adam_.set_num_threads(cfg.threads);
    tensor_.set_num_threads(cfg.threads);
    auto* set_threads = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (set_threads != nullptr) set_threads(cfg.threads);  // dnnl_sgemm's team on this thread
    const std::size_t n = static_cast<std::size_t>(P_.total) * 4;
    std::memcpy(params_.p, init.params.data(), n);
    std::memcpy(m_.p, init.exp_avg.data(), n);
    std::memcpy(v_.p, init.exp_avg_sq.data(), n);
    step_ = init.step;
    const std::size_t tokens = static_cast<std::size_t>(cfg.batch) * cfg.shape.block;
    inputs_.resize(tokens);
    targets_.resize(tokens);
  }

  /// One optimizer step; returns the mean loss.
  double step(double lr) {
    sampler_.next(gen_, inputs_.data(), targets_.data());
    tensor_.fill(grads_.p, accel::Dtype::float32, P_.total, 0.0f);
    forward();
    backward();
    float* norm = f32_.p + A_.norm;
    const abi::TensorRef all{grads_.p, P_.total, abi::code(accel::Dtype::float32), 0};
    tensor_.run_l2norm(std::vector<abi::TensorRef>{all}, norm, nullptr);
    call(clip_, abi::NnClip{grads_.p, norm, P_.total, static_cast<float>(cfg_.clip), 0});
    accel::ops::AdamOptions o;
    o.lr = lr;
    o.beta1 = cfg_.beta1;
    o.beta2 = cfg_.beta2;
    o.eps = cfg_.eps;
    o.adamw = true;
    const accel::ops::AdamDtypes d;
    ++step_;
    for (const auto& [begin, end, wd] : {std::tuple{std::int64_t{0}, P_.decay_end, cfg_.weight_decay},
                                         std::tuple{P_.decay_end, P_.total, 0.0}}) {
      accel::ops::AdamTensor t;
      t.param = params_.p + begin;
      t.grad = grads_.p + begin;
      t.exp_avg = m_.p + begin;
      t.exp_avg_sq = v_.p + begin;
      t.numel = end - begin;
      o.weight_decay = wd;
      adam_.run(accel::ops::adam_hparams(o, step_, d),
                accel::ops::adam_tensors(std::span<const accel::ops::AdamTensor>(&t, 1), o, d));
    }
    double sum = 0;
    const std::int64_t N = static_cast<std::int64_t>(cfg_.batch) * cfg_.shape.block;
    for (std::int64_t i = 0; i < N; ++i) sum += f32_.p[A_.losses + i];
    return sum / static_cast<double>(N);
  }

 private:
  template <class Args>
  void call(HostFn* f, const Args& a) const {
    if (const int rc = f(&a, cfg_.threads); rc != 0) {
      throw std::runtime_error("raw step: a kernel refused its arguments (code " + std::to_string(rc) + ")");
    }
  }
  // The library accel::blas runs each product on (its CPU BLAS policy): OpenBLAS's blocks for 'T','N' on a
  // CPU without AVX-512 where it is installed (accel/blas/detail/cpu_openblas.hpp), else oneDNN's sgemm.
  static void gemm(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                   const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    namespace d = accel::blas::detail;
    d::GemmArgs<float> g;
    g.ta = ta == 'T' ? accel::blas::Trans::yes : accel::blas::Trans::no, g.tb = tb == 'T' ? accel::blas::Trans::yes : accel::blas::Trans::no;
    g.m = m, g.n = n, g.k = k, g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.beta = beta, g.c = c, g.ldc = ldc;
    if (const d::OpenBlasApi* tn = d::openblas_for(d::Call{"gemm", "cpu", 0}, g); tn != nullptr) {
      d::openblas_sgemm_blocks(*tn, g);
      return;
    }
    if (dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) != dnnl_success) {
      throw std::runtime_error("raw step: dnnl_sgemm failed");
    }
  }
  float* act(std::int64_t off) const { return act_.p + off; }
  float* f32(std::int64_t off) const { return f32_.p + off; }
  float* w(int view) const { return params_.p + P_.offset(view); }
  float* g(int view) const { return grads_.p + P_.offset(view); }

  gpt_attention_args attention(void* y, void* dqkv, float* att, float* scratch, const void* qkv, const void* dy) const {
    gpt_attention_args a{};
    a.y = y;
    a.dqkv = dqkv;
    a.att = att;
    a.scratch = scratch;
    a.qkv = qkv;
    a.dy = dy;
    a.B = cfg_.batch;
    a.T = cfg_.shape.block;
    a.C = cfg_.shape.width;
    a.NH = cfg_.shape.heads;
    a.threshold = 0;
    a.scale = 1.0f;
    return a;
  }

  void forward() {
    const std::int64_t C = cfg_.shape.width, T = cfg_.shape.block, N = cfg_.batch * T;
    call(emb_f_, abi::NnEmbeddingForward{act(A_.encoded), inputs_.data(), w(P_.wte), w(P_.wpe), N, T, C, Vp_});
    for (std::size_t l = 0; l < A_.layers.size(); ++l) {
      const auto& L = A_.layers[l];
      const auto& W = P_.layers[l];
      if (l == 0) {
        call(ln_f_, abi::NnLayerNormForward{act(L.ln1), f32(L.ln1_mean), f32(L.ln1_rstd), nullptr, act(L.res_in),
                                            nullptr, w(W.ln1_w), w(W.ln1_b), N, C, 1e-5f, 0});
      } else {
        const auto& prev = A_.layers[l - 1];
        call(ln_f_, abi::NnLayerNormForward{act(L.ln1), f32(L.ln1_mean), f32(L.ln1_rstd), act(prev.res_out),
                                            act(prev.res2), act(prev.fcproj), w(W.ln1_w), w(W.ln1_b), N, C, 1e-5f, 0});
      }
      gemm('N', 'T', N, 3 * C, C, act(L.ln1), C, w(W.qkv_w), C, 0.0f, act(L.qkv), 3 * C);
      call(att_f_, attention(act(L.atty), nullptr, f32(L.att), nullptr, act(L.qkv), nullptr));
      gemm('N', 'T', N, C, C, act(L.atty), C, w(W.proj_w), C, 0.0f, act(L.attproj), C);
      call(ln_f_, abi::NnLayerNormForward{act(L.ln2), f32(L.ln2_mean), f32(L.ln2_rstd), act(L.res2), act(L.res_in),
                                          act(L.attproj), w(W.ln2_w), w(W.ln2_b), N, C, 1e-5f, 0});
      gemm('N', 'T', N, 4 * C, C, act(L.ln2), C, w(W.fc_w), C, 0.0f, act(L.fch), 4 * C);
      call(gelu_f_, abi::NnGeluForward{act(L.gelu), act(L.fch), N * 4 * C});
      gemm('N', 'T', N, C, 4 * C, act(L.gelu), 4 * C, w(W.fcproj_w), 4 * C, 0.0f, act(L.fcproj), C);
    }
    const auto& last = A_.layers.back();
    call(ln_f_, abi::NnLayerNormForward{act(A_.lnf), f32(A_.lnf_mean), f32(A_.lnf_rstd), act(last.res_out),
                                        act(last.res2), act(last.fcproj), w(P_.lnf_w), w(P_.lnf_b), N, C, 1e-5f, 0});
    gemm('N', 'T', N, Vp_, C, act(A_.lnf), C, w(P_.wte), C, 0.0f, act(A_.logits), Vp_);
    call(ce_, abi::NnCrossEntropy{act(A_.logits), f32(A_.losses), targets_.data(), N, V_, Vp_,
                                  1.0f / static_cast<float>(N), 1});
  }

  void backward() {
    const std::int64_t C = cfg_.shape.width, T = cfg_.shape.block, N = cfg_.batch * T;
    gemm('N', 'N', N, C, Vp_, act(A_.logits), Vp_, w(P_.wte), C, 0.0f, act(A_.dln), C);
    gemm('T', 'N', Vp_, C, N, act(A_.logits), Vp_, act(A_.lnf), C, 1.0f, g(P_.wte), C);
    tensor_.fill(act(A_.dres), accel::Dtype::float32, N * C, 0.0f);
    const auto& last = A_.layers.back();
    call(ln_b_, abi::NnLayerNormBackward{act(A_.dres), g(P_.lnf_w), g(P_.lnf_b), f32(A_.ln_scratch), act(A_.dln),
                                         act(last.res_out), w(P_.lnf_w), f32(A_.lnf_mean), f32(A_.lnf_rstd), N, C});
    for (std::size_t li = A_.layers.size(); li-- > 0;) {
      const auto& L = A_.layers[li];
      const auto& W = P_.layers[li];
      gemm('N', 'N', N, 4 * C, C, act(A_.dres), C, w(W.fcproj_w), 4 * C, 0.0f, act(A_.dbig), 4 * C);
      gemm('T', 'N', C, 4 * C, N, act(A_.dres), C, act(L.gelu), 4 * C, 1.0f, g(W.fcproj_w), 4 * C);
      call(gelu_b_, abi::NnGeluBackward{act(A_.dbig), act(L.fch), act(A_.dbig), N * 4 * C});
      gemm('N', 'N', N, C, 4 * C, act(A_.dbig), 4 * C, w(W.fc_w), C, 0.0f, act(A_.dln), C);
      gemm('T', 'N', 4 * C, C, N, act(A_.dbig), 4 * C, act(L.ln2), C, 1.0f, g(W.fc_w), C);
      call(ln_b_, abi::NnLayerNormBackward{act(A_.dres), g(W.ln2_w), g(W.ln2_b), f32(A_.ln_scratch), act(A_.dln),
                                           act(L.res2), w(W.ln2_w), f32(L.ln2_mean), f32(L.ln2_rstd), N, C});
      gemm('N', 'N', N, C, C, act(A_.dres), C, w(W.proj_w), C, 0.0f, act(A_.datty), C);
      gemm('T', 'N', C, C, N, act(A_.dres), C, act(L.atty), C, 1.0f, g(W.proj_w), C);
      call(att_b_, attention(nullptr, act(A_.dbig), f32(L.att), f32(A_.att_scratch), act(L.qkv), act(A_.datty)));
      gemm('N', 'N', N, C, 3 * C, act(A_.dbig), 3 * C, w(W.qkv_w), C, 0.0f, act(A_.dln), C);
      gemm('T', 'N', 3 * C, C, N, act(A_.dbig), 3 * C, act(L.ln1), C, 1.0f, g(W.qkv_w), C);
      call(ln_b_, abi::NnLayerNormBackward{act(A_.dres), g(W.ln1_w), g(W.ln1_b), f32(A_.ln_scratch), act(A_.dln),
                                           act(L.res_in), w(W.ln1_w), f32(L.ln1_mean), f32(L.ln1_rstd), N, C});
    }
    call(emb_b_, abi::NnEmbeddingBackward{g(P_.wte), g(P_.wpe), act(A_.dres), inputs_.data(), N, T, C, Vp_});
  }

  const engine::Config& cfg_;
  std::int64_t V_, Vp_;
  engine::ParamLayout P_;
  engine::ActLayout A_;
  RawFloats params_, grads_, m_, v_, act_, f32_;
  engine::BatchSampler sampler_;
  accel::Generator gen_;
  accel::ops::LoadedOp nn_, gpt_;
  accel::ops::HostFusedAdam adam_;
  accel::ops::HostTensorOps tensor_;
  HostFn *emb_f_ = nullptr, *emb_b_ = nullptr, *ln_f_ = nullptr, *ln_b_ = nullptr, *gelu_f_ = nullptr,
         *gelu_b_ = nullptr, *ce_ = nullptr, *clip_ = nullptr, *att_f_ = nullptr, *att_b_ = nullptr;
  std::vector<std::int32_t> inputs_, targets_;
  std::int64_t step_ = 0;
};

}  // namespace

int main(int argc, char** argv) try {
  accel_bench::Report report("engine_dispatch", argc, argv);
  int rounds = accel_bench::take_rounds(argc, argv, 11);
  const bool smoke = accel_bench::take_flag(argc, argv, "--smoke");
  const int threads = std::atoi(accel_bench::take_option(argc, argv, "--threads", "1").c_str());
  double sample_s = std::atof(accel_bench::take_option(argc, argv, "--sample-s", "1.0").c_str());
  std::string data = accel_bench::take_option(argc, argv, "--data", "");
  const std::string clock_name = accel_bench::take_option(argc, argv, "--clock", "process");
  if (clock_name != "process" && clock_name != "wall") {
    std::fprintf(stderr, "bench_engine_dispatch: --clock is process or wall, not %s\n", clock_name.c_str());
    return 2;
  }
  if (argc > 1) {
    std::fprintf(stderr, "bench_engine_dispatch: unknown argument %s\n", argv[1]);
    return 2;
  }
  if (data.empty()) data = engine::default_data_path();
  if (smoke) {
    rounds = 1;
    sample_s = 0.01;
  }

  engine::Config cfg;
  engine::apply_size(cfg, "tiny");
  cfg.threads = std::max(1, threads);
  cfg.streams = 1;
  cfg.steps = 1000000;  // the learning rate stays near its peak for the whole run
  cfg.data = data;
  cfg.quiet = true;
  engine::resolve_batch(cfg, 1);  // one rank: the micro-batch and accumulation as given
  const engine::Corpus corpus = engine::Corpus::load(cfg.data);
  engine::Plan plan;
  plan.vocab = corpus.vocab_size();
  plan.vocab_padded = (plan.vocab + cfg.shape.vocab_multiple - 1) / cfg.shape.vocab_multiple * cfg.shape.vocab_multiple;

  report.set_rounds(rounds);
  report.print_header();
  std::printf("tiny: batch %d, block %d, %d thread%s, one stream; data %s\n", cfg.batch, cfg.shape.block, cfg.threads,
              cfg.threads > 1 ? "s" : "", cfg.data.c_str());

  // One rank (the data-parallel engine's Trainer takes its ranks): the same step as before.
  engine::Ranks<accel::CpuBackend> st_rank(accel::CpuBackend{});
  engine::Trainer<accel::CpuBackend, float> st(accel::CpuBackend{}, cfg, corpus, plan, st_rank);
  st.init_weights();
  const engine::CheckpointState init = st.save_state();
  engine::Ranks<accel::AnyBackend> any_rank(accel::AnyBackend{accel::CpuBackend{}});
  engine::Trainer<accel::AnyBackend, float> any(accel::AnyBackend{accel::CpuBackend{}}, cfg, corpus, plan, any_rank);
  any.init_weights();
  RawStep raw(cfg, corpus, plan.vocab, plan.vocab_padded, init);

  // The same step: three steps from the same weights and batches give the same loss bits.
  for (int i = 0; i < 3; ++i) {
    const double lr = st.lr_at(st.step());
    const double a = st.train_step().loss, b = any.train_step().loss, c = raw.step(lr);
    std::printf("step %d: loss static %.9f, AnyBackend %.9f, raw %.9f\n", i + 1, a, b, c);
    if (std::bit_cast<std::uint64_t>(a) != std::bit_cast<std::uint64_t>(b) ||
        std::bit_cast<std::uint64_t>(a) != std::bit_cast<std::uint64_t>(c)) {
      std::fprintf(stderr, "bench_engine_dispatch: the three steps differ: not the same computation\n");
      return 1;
    }
  }

  std::int64_t raw_steps = 3;
  accel_bench::Rounds r(clock_name == "wall" ? accel_bench::Clock::wall : accel_bench::Clock::process_cpu);
  r.add("raw", [&] { (void)raw.step(st.lr_at(raw_steps++)); });
  r.add("static", [&] { (void)st.train_step(); });
  r.add("AnyBackend", [&] { (void)any.train_step(); });
  r.run(rounds, sample_s);

  const std::string group = std::to_string(cfg.threads) + (cfg.threads > 1 ? " threads" : " thread") + ", " +
                            clock_name + (clock_name == "wall" ? " clock" : " CPU time");
  std::printf("\n%-11s %-28s %-28s   (%s)\n", "way", "ms per step", "raw / way (round by round)", group.c_str());
  for (const char* way : {"raw", "static", "AnyBackend"}) {
    const accel_bench::Summary s = r.summary(way, 1e3);
    report.point(way, group, cfg.threads, "ms per step", s);
    std::printf("%-11s %7.2f (%.2f-%.2f)", way, s.median, s.min, s.max);
    if (std::string(way) != "raw") {
      const accel_bench::Summary q = r.speedup(way, "raw");
      report.ratio(way, "raw", group, cfg.threads, q);
      std::printf("         %.4f (%.4f-%.4f)", q.median, q.min, q.max);
    }
    std::printf("\n");
  }
  const accel_bench::Summary sa = r.speedup("AnyBackend", "static");
  report.ratio("AnyBackend", "static", group, cfg.threads, sa);
  std::printf("static / AnyBackend: %.4f (%.4f-%.4f)\n", sa.median, sa.min, sa.max);
  report.note("model", "tiny, batch 12, block 64, one stream, fused attention, fp32");
  report.note("clock", clock_name == "wall" ? "wall (steady_clock)" : "CPU time of the process (CLOCK_PROCESS_CPUTIME_ID)");
  report.note("same bits", "3 steps from the same weights and batches: identical losses on all three");
  report.write();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_engine_dispatch: %s\n", e.what());
  return 1;
}
