// fused_adam.cpp — multi-tensor fused Adam / AdamW for the CPU (DeepSpeed's CPUAdam, torch's
// Adam(fused=True) on CPU), built by accel's "fused_adam"/"cpu_adam" op builders.
//
// One pass over each tensor: read param, grad, exp_avg, exp_avg_sq (and max_exp_avg_sq), write param,
// exp_avg, exp_avg_sq (and max_exp_avg_sq, and a float16/bfloat16 model copy of the param). fp32
// tensors are updated in place through one vectorised loop; bf16 params/states and fp16/bf16 grads go
// through 1024-element blocks converted to fp32 in L1, so every element is computed by the same fp32
// code. The elements of all tensors together are split statically among the OpenMP threads (see
// cpu_common.h), so the result is bit-identical for any thread count.
//
// Per element (torch's formula; step_size, inv_bc2_sqrt and 1-beta come from the host, computed in double):
//   g  = maximize ? -grad : grad;          if (!adamw) g = fmaf(wd, p, g)
//   p  = p * decay_factor                  (AdamW: 1 - lr*wd; else 1)
//   m  = fmaf(beta1, m, (1-beta1) * g)
//   v  = fmaf(beta2, v, ((1-beta2) * g) * g)
//   vm = amsgrad ? max(vm, v) : v
//   p  = fmaf(-step_size, m / fmaf(sqrt(vm), inv_bc2_sqrt, eps), p)
#include "cpu_common.h"

namespace {

using namespace accel_kernels;

constexpr long long block = 1024;

struct Coefs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, l2, decay, neg_step, inv_bc2_sqrt, sign;
};

template <bool Amsgrad>
void adam_f32(const Coefs c, float* __restrict p, const float* __restrict g, float* __restrict m,
              float* __restrict v, float* __restrict vmax, long long n) {
#pragma omp simd
  for (long long i = 0; i < n; ++i) {
    float gi = g[i] * c.sign;
    const float pi = p[i];
    gi = fmaf(c.l2, pi, gi);
    const float mi = fmaf(c.beta1, m[i], c.one_minus_beta1 * gi);
    const float vi = fmaf(c.beta2, v[i], (c.one_minus_beta2 * gi) * gi);
    float vu = vi;
    if constexpr (Amsgrad) {
      const float old = vmax[i];
      vu = vi > old ? vi : old;
      vmax[i] = vu;
    }
    const float denom = fmaf(sqrtf(vu), c.inv_bc2_sqrt, c.eps);
    p[i] = fmaf(c.neg_step, mi / denom, pi * c.decay);
    m[i] = mi;
    v[i] = vi;
  }
}

template <bool Amsgrad>
void adam_range(const Coefs& c, const accel_adam_hparams& h, const accel_adam_tensor& t, long long begin,
                long long end) {
  const bool all_f32 = h.param_dtype == ACCEL_DTYPE_F32 && h.grad_dtype == ACCEL_DTYPE_F32;
  const bool copy = t.model_copy != nullptr && h.model_copy_dtype != ACCEL_DTYPE_NONE;
  if (all_f32 && !copy) {
    adam_f32<Amsgrad>(c, static_cast<float*>(t.param) + begin, static_cast<const float*>(t.grad) + begin,
                      static_cast<float*>(t.exp_avg) + begin, static_cast<float*>(t.exp_avg_sq) + begin,
                      Amsgrad ? static_cast<float*>(t.max_exp_avg_sq) + begin : nullptr, end - begin);
    return;
  }
  alignas(64) float pb[block], gb[block], mb[block], vb[block], xb[block];
  const long long ps = dtype_size(h.param_dtype);
  const long long gs = dtype_size(h.grad_dtype);
  const long long cs = copy ? dtype_size(h.model_copy_dtype) : 0;
  const bool p32 = h.param_dtype == ACCEL_DTYPE_F32;
  for (long long off = begin; off < end; off += block) {
    const long long n = end - off < block ? end - off : block;
    char* pp = static_cast<char*>(t.param) + off * ps;
    char* mp = static_cast<char*>(t.exp_avg) + off * ps;
    char* vp = static_cast<char*>(t.exp_avg_sq) + off * ps;
    char* xp = Amsgrad ? static_cast<char*>(t.max_exp_avg_sq) + off * ps : nullptr;
    const char* gp = static_cast<const char*>(t.grad) + off * gs;
    const float* g = reinterpret_cast<const float*>(gp);
    if (h.grad_dtype != ACCEL_DTYPE_F32) {
      to_float(gb, gp, h.grad_dtype, n);
      g = gb;
    }
    float *p, *m, *v, *x = nullptr;
    if (p32) {
      p = reinterpret_cast<float*>(pp);
      m = reinterpret_cast<float*>(mp);
      v = reinterpret_cast<float*>(vp);
      if (Amsgrad) x = reinterpret_cast<float*>(xp);
    } else {
      to_float(pb, pp, h.param_dtype, n);
      to_float(mb, mp, h.param_dtype, n);
      to_float(vb, vp, h.param_dtype, n);
      if (Amsgrad) to_float(xb, xp, h.param_dtype, n);
      p = pb;
      m = mb;
      v = vb;
      x = Amsgrad ? xb : nullptr;
    }
    adam_f32<Amsgrad>(c, p, g, m, v, x, n);
    if (!p32) {
      from_float(pp, h.param_dtype, pb, n);
      from_float(mp, h.param_dtype, mb, n);
      from_float(vp, h.param_dtype, vb, n);
      if (Amsgrad) from_float(xp, h.param_dtype, xb, n);
    }
    if (copy) from_float(static_cast<char*>(t.model_copy) + off * cs, h.model_copy_dtype, p, n);
  }
}

bool dtype_ok(int d, bool allow_f16) {
  return d == ACCEL_DTYPE_F32 || d == ACCEL_DTYPE_BF16 || (allow_f16 && d == ACCEL_DTYPE_F16);
}

}  // namespace

// Returns 0, or -1 for an unsupported dtype combination, -2 for a missing pointer.
ACCEL_EXPORT int accel_fused_adam(const accel_adam_hparams* h, const accel_adam_tensor* tensors, long long count,
                                  int num_threads) {
  if (!dtype_ok(h->param_dtype, false) || !dtype_ok(h->grad_dtype, true)) return -1;
  if (h->model_copy_dtype != ACCEL_DTYPE_NONE && h->model_copy_dtype != ACCEL_DTYPE_F16 &&
      h->model_copy_dtype != ACCEL_DTYPE_BF16) {
    return -1;
  }
  long long total = 0;
  for (long long i = 0; i < count; ++i) {
    const accel_adam_tensor& t = tensors[i];
    if (t.numel > 0 && (t.param == nullptr || t.grad == nullptr || t.exp_avg == nullptr || t.exp_avg_sq == nullptr ||
                        (h->amsgrad && t.max_exp_avg_sq == nullptr))) {
      return -2;
    }
    total += t.numel > 0 ? t.numel : 0;
  }
  Coefs c;
  c.beta1 = h->beta1;
  c.one_minus_beta1 = h->one_minus_beta1;
  c.beta2 = h->beta2;
  c.one_minus_beta2 = h->one_minus_beta2;
  c.eps = h->eps;
  c.l2 = h->adamw ? 0.0f : h->weight_decay;
  c.decay = h->adamw ? h->decay_factor : 1.0f;
  c.neg_step = -h->step_size;
  c.inv_bc2_sqrt = h->inv_bc2_sqrt;
  c.sign = h->maximize ? -1.0f : 1.0f;
  const int T = thread_count(num_threads);
#pragma omp parallel num_threads(T)
  {
    long long begin, end;
    static_range(total, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    long long base = 0;  // first global element of tensor i
    for (long long i = 0; i < count && base < end; ++i) {
      const long long n = tensors[i].numel > 0 ? tensors[i].numel : 0;
      const long long lo = begin > base ? begin - base : 0;
      const long long hi = end < base + n ? end - base : n;
      if (lo < hi) {
        if (h->amsgrad) {
          adam_range<true>(c, *h, tensors[i], lo, hi);
        } else {
          adam_range<false>(c, *h, tensors[i], lo, hi);
        }
      }
      base += n;
    }
  }
  return 0;
}
