// layout.hpp — where the model's tensors live: flat buffers and tables of views.
//
// Parameters are one flat buffer (DeepSpeed's flat groups): the tensors with weight decay (the 2-D
// ones: embeddings and Linear weights) first, then those without (LayerNorm weights and biases), each
// view aligned to 16 elements. Gradients, Adam's two moments and the fp32 master weights use the same
// offsets in buffers of their own, so the optimizer runs two fused launches (one per group) over
// contiguous ranges, and a data-parallel shard is a range of the same table. Names and shapes are
// nanoGPT's (torch's state_dict keys): benchmarks/engine/torch_gpt.py loads them by name.
//
// Activations are the same idea: offsets into one buffer of the activation dtype and one of float32
// (LayerNorm statistics, attention probabilities, losses), sized for batch x block tokens.
#pragma once

#include "config.hpp"
#include "kernels/attention.h"

#include <cstdint>
#include <string>
#include <vector>

namespace engine {

struct TensorView {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t offset = 0;
  std::int64_t numel = 0;
  bool decay = false;  // weight decay applies (2-D tensors)
  enum class Init { normal, normal_scaled, ones, zeros } init = Init::normal;
};

inline std::int64_t align16(std::int64_t n) { return (n + 15) / 16 * 16; }

class ParamLayout {
 public:
  struct Layer {
    int ln1_w, ln1_b, qkv_w, proj_w, ln2_w, ln2_b, fc_w, fcproj_w;
  };

  ParamLayout(const ModelShape& s, std::int64_t vocab_padded) {
    const std::int64_t C = s.width;
    wte = add("transformer.wte.weight", {vocab_padded, C}, true, TensorView::Init::normal);
    wpe = add("transformer.wpe.weight", {s.block, C}, true, TensorView::Init::normal);
    layers.resize(static_cast<std::size_t>(s.layers));
    for (int l = 0; l < s.layers; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      Layer& L = layers[static_cast<std::size_t>(l)];
      L.qkv_w = add(p + "attn.c_attn.weight", {3 * C, C}, true, TensorView::Init::normal);
      L.proj_w = add(p + "attn.c_proj.weight", {C, C}, true, TensorView::Init::normal_scaled);
      L.fc_w = add(p + "mlp.c_fc.weight", {4 * C, C}, true, TensorView::Init::normal);
      L.fcproj_w = add(p + "mlp.c_proj.weight", {C, 4 * C}, true, TensorView::Init::normal_scaled);
    }
    decay_end = total;
    for (int l = 0; l < s.layers; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      Layer& L = layers[static_cast<std::size_t>(l)];
      L.ln1_w = add(p + "ln_1.weight", {C}, false, TensorView::Init::ones);
      L.ln1_b = add(p + "ln_1.bias", {C}, false, TensorView::Init::zeros);
      L.ln2_w = add(p + "ln_2.weight", {C}, false, TensorView::Init::ones);
      L.ln2_b = add(p + "ln_2.bias", {C}, false, TensorView::Init::zeros);
    }
    lnf_w = add("transformer.ln_f.weight", {C}, false, TensorView::Init::ones);
    lnf_b = add("transformer.ln_f.bias", {C}, false, TensorView::Init::zeros);
  }

  [[nodiscard]] std::int64_t offset(int i) const { return views[static_cast<std::size_t>(i)].offset; }
  /// Parameters that are trained (the padding between views excluded).
  [[nodiscard]] std::int64_t count() const {
    std::int64_t n = 0;
    for (const auto& v : views) n += v.numel;
    return n;
  }

  std::vector<TensorView> views;
  std::vector<Layer> layers;
  int wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0;
  std::int64_t decay_end = 0;  // [0, decay_end): weight decay; [decay_end, total): none
  std::int64_t total = 0;      // elements of the flat buffer (views aligned to 16)

 private:
  int add(std::string name, std::vector<std::int64_t> shape, bool decay, TensorView::Init init) {
    TensorView v;
    v.name = std::move(name);
    v.numel = 1;
    for (const auto d : shape) v.numel *= d;
    v.shape = std::move(shape);
    v.offset = total;
    v.decay = decay;
    v.init = init;
    total += align16(v.numel);
    views.push_back(std::move(v));
    return static_cast<int>(views.size()) - 1;
  }
};

/// The floating-point operations one token's training step does in the model's products, forward and
/// backward: what MFU divides by the peak. 2 m n k a product; a weight's product three times (forward,
/// the input's gradient, the weight's gradient): the four Linear weights of a block (12 C^2) and the LM
/// head (the token embedding, tied: vocab_padded x C); causal attention's two products a direction over
/// the t + 1 keys token t sees (T (T + 1) / 2 pairs a sequence; backward has four). Not counted:
/// LayerNorm, softmax, GELU, the optimizer, and whatever a kernel computes and discards (a flash
/// kernel's masked half-tiles). nanoGPT's estimate, 6 N + 12 L C T, counts attention's masked half too
/// (+10 % at the gpt2 shape); llm.c's, 6 N + 6 L C T with N every parameter, is within 1.2 % of this at
/// the engine's sizes.
inline std::int64_t train_flops_per_token(const ModelShape& s, std::int64_t vocab_padded) {
  const std::int64_t L = s.layers, C = s.width, T = s.block;
  const std::int64_t product_weights = L * 12 * C * C + vocab_padded * C;
  return 6 * product_weights + 6 * L * C * (T + 1);
}

/// How attention runs (--attention): the fused kernels (one per direction; P kept as float32 tiles),
/// strided-batched GEMMs around softmax kernels (P in the activation dtype), or the flash kernels
/// (CUDA, 16-bit: only each row's log-sum-exp is kept).
enum class AttentionPath { fused, gemm, flash };

/// How the flash kernels' backward runs (--flash-backward): two kernels (dq per query tile; dk, dv per
/// key tile) or one per key tile that computes dq too, its sums added across key tiles in a fixed order.
enum class FlashBackward { split, fused };

/// The floats of scratch flash_backward takes (kernels/attention.h): the rows' D, and with the one-kernel
/// backward dq's partial sums and the counters that order them.
inline std::int64_t flash_backward_scratch_floats(FlashBackward how, std::int64_t batch, std::int64_t T, std::int64_t NH,
                                                  std::int64_t head_size) {
  return how == FlashBackward::fused ? GPT_FLASH_FUSED_SCRATCH_FLOATS(batch, NH, T, head_size) : batch * NH * T;
}

/// Offsets (in elements) of the activations of one micro-batch of N = batch x block tokens.
///
/// With `recompute` (--activation-checkpointing): each layer keeps only its output (the residual
/// stream: the next layer's input) and its dropout bits; everything else a layer computes lies in one
/// working set that every layer's Layer names, rewritten by each layer's forward and, before its
/// backward, by the layer's forward again from its input (Trainer::recompute_layer).
struct ActLayout {
  struct Layer {
    std::int64_t res_in, ln1, qkv, atty, attproj, res2, ln2, fch, gelu, fcproj, res_out;  // activation dtype
    std::int64_t ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, att;                             // float32
    std::int64_t bits_att, bits_proj, bits_fc;                                            // uint32 (dropout)
  };

  /// path gemm: P in the activation dtype, [B x NH x T x T], and the heads' scratch; flash: the rows'
  /// log-sum-exp and dy . y ([B x NH x T] floats), and the flash backward's scratch
  /// (flash_backward_scratch_floats); fused: float32 tiles ([B x NH x Tp x Tp]).
  ActLayout(const ModelShape& s, std::int64_t batch, std::int64_t vocab_padded, int accum, bool dropout,
            AttentionPath path = AttentionPath::fused, bool recompute = false,
            FlashBackward flash_backward = FlashBackward::split)
      : gemm(path == AttentionPath::gemm), flash(path == AttentionPath::flash), recompute(recompute) {
    const std::int64_t T = s.block, C = s.width, NH = s.heads, N = batch * T, Tp = (T + 15) / 16 * 16;
    const auto a = [&](std::int64_t n) { return take(act, n); };
    const auto f = [&](std::int64_t n) { return take(f32, n); };
    const auto u = [&](std::int64_t n) { return dropout ? take(bits, n) : std::int64_t{-1}; };
    encoded = a(N * C);
    bits_emb = u(N * C);
    // What a layer computes from its input; and its output, in the same order as ever without
    // recompute (the same addresses, so the same bits from a BLAS that looks at them).
    const auto inner = [&](Layer& L, bool with_output) {
      L.ln1 = a(N * C);
      L.qkv = a(N * 3 * C);
      L.atty = a(N * C);
      L.attproj = a(N * C);
      L.res2 = a(N * C);
      L.ln2 = a(N * C);
      L.fch = a(N * 4 * C);
      L.gelu = a(N * 4 * C);
      L.fcproj = a(N * C);
      if (with_output) L.res_out = a(N * C);
      L.ln1_mean = f(N);
      L.ln1_rstd = f(N);
      L.ln2_mean = f(N);
      L.ln2_rstd = f(N);
      // P (kernels/attention.h), or the flash kernels' log-sum-exp (kernels/flash_attention.cuh)
      L.att = gemm ? a(batch * NH * T * T) : flash ? f(batch * NH * T) : f(batch * NH * Tp * Tp);
    };
    Layer working{};
    if (recompute) inner(working, false);
    std::int64_t prev = encoded;
    layers.resize(static_cast<std::size_t>(s.layers));
    for (auto& L : layers) {
      if (recompute) {
        L = working;
        L.res_out = a(N * C);
      } else {
        inner(L, true);
      }
      L.res_in = prev;
      L.bits_att = u(batch * NH * T * T);
      L.bits_proj = u(N * C);
      L.bits_fc = u(N * C);
      prev = L.res_out;
    }
    lnf = a(N * C);
    logits = a(N * vocab_padded);
    lnf_mean = f(N);
    lnf_rstd = f(N);
    losses = f(N * accum);
    norm = f(16);
    // Gradients of activations (one set, reused by every layer) and scratch.
    dres = a(N * C);
    dln = a(N * C);
    datty = a(N * C);
    dtmp = a(N * C);
    dbig = a(N * 4 * C);  // dfch / dgelu, and dqkv (3C)
    ln_scratch = f(((N + 63) / 64) * 2 * C);
    if (gemm) {
      heads = a(3 * N * C);   // q, k, v as [B x NH x T x hs]
      dheads = a(3 * N * C);  // dq, dk, dv
      vacc = a(N * C);        // P v (forward), dy permuted (backward)
      datt = a(batch * NH * T * T);
      if (dropout) pd = a(batch * NH * T * T);
    } else if (flash) {
      att_scratch = f(flash_backward_scratch_floats(flash_backward, batch, T, NH, C / NH));
    } else {
      att_scratch = f(batch * NH * Tp * Tp);  // the CUDA fused kernels' backward (dS)
    }
  }

  bool gemm = false, flash = false;
  bool recompute = false;  // --activation-checkpointing: the layers share one working set
  std::int64_t heads = 0, dheads = 0, vacc = 0, datt = 0, pd = -1;

  std::vector<Layer> layers;
  std::int64_t encoded = 0, bits_emb = -1, lnf = 0, logits = 0, lnf_mean = 0, lnf_rstd = 0, losses = 0, norm = 0;
  std::int64_t dres = 0, dln = 0, datty = 0, dtmp = 0, dbig = 0, ln_scratch = 0, att_scratch = 0;
  std::int64_t act = 0, f32 = 0, bits = 0;  // sizes of the three buffers (elements)

 private:
  static std::int64_t take(std::int64_t& total, std::int64_t n) {
    const std::int64_t at = total;
    total += align16(n);
    return at;
  }
};

}  // namespace engine
