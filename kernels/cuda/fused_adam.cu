// fused_adam.cu — multi-tensor fused Adam / AdamW on CUDA (DeepSpeed's FusedAdam, torch's
// Adam(fused=True)). Compiled by NVRTC (the "fused_adam" op builder, --fmad=false) or nvcc.
//
// One launch per ACCEL_MT_MAX_TENSORS tensors: the list travels in the kernel parameters
// (accel_adam_launch, __grid_constant__), blocks stride over 16384-element chunks of all tensors,
// threads move 4 elements per access with fp32 params (16-byte accesses) and 8 with bf16 params
// (16-byte accesses to the 16-bit arrays) when every pointer of the tensor is aligned for it, else 1.
// The host sizes the grid to the blocks that fit on the device at once (one wave). Per element, the
// same fp32 operations as the CPU kernel (kernels/cpu/fused_adam.cpp): with IEEE sqrt/div (NVRTC's
// defaults) and no FMA contraction, the two backends compute the same bits.
//
// Kernels: accel_fused_adam_p<param>_g<grad>_c<model copy>, param f32 (grad f32|f16|bf16, copy
// none|f16|bf16) or bf16 (grad f32|f16|bf16, no copy); AMSGrad and AdamW are run-time flags.
#include "cuda_common.cuh"

namespace accel_kernels {

template <class C> struct C_enabled { static const bool value = true; };
template <> struct C_enabled<none> { static const bool value = false; };
template <class C> struct C_storage { typedef C tag; };
template <> struct C_storage<none> { typedef f16 tag; };  // never stored through

struct AdamCoefs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, l2, decay, neg_step, inv_bc2_sqrt, sign;
};

__device__ __forceinline__ AdamCoefs adam_coefs(const accel_adam_hparams& h) {
  AdamCoefs c;
  c.beta1 = h.beta1;
  c.one_minus_beta1 = h.one_minus_beta1;
  c.beta2 = h.beta2;
  c.one_minus_beta2 = h.one_minus_beta2;
  c.eps = h.eps;
  c.l2 = h.adamw ? 0.0f : h.weight_decay;
  c.decay = h.adamw ? h.decay_factor : 1.0f;
  c.neg_step = -h.step_size;
  c.inv_bc2_sqrt = h.inv_bc2_sqrt;
  c.sign = h.maximize ? -1.0f : 1.0f;
  return c;
}

// One element; vmax is read and written only with amsgrad.
__device__ __forceinline__ void adam_element(const AdamCoefs& c, bool amsgrad, float& p, float g, float& m, float& v,
                                             float& vmax) {
  g = __fmul_rn(g, c.sign);
  g = fmaf(c.l2, p, g);
  m = fmaf(c.beta1, m, __fmul_rn(c.one_minus_beta1, g));
  v = fmaf(c.beta2, v, __fmul_rn(__fmul_rn(c.one_minus_beta2, g), g));
  float vu = v;
  if (amsgrad) {
    vu = v > vmax ? v : vmax;
    vmax = vu;
  }
  const float denom = fmaf(__fsqrt_rn(vu), c.inv_bc2_sqrt, c.eps);
  p = fmaf(c.neg_step, __fdiv_rn(m, denom), __fmul_rn(p, c.decay));
}

template <class P, class G, class C>
__device__ __forceinline__ void fused_adam_body(const accel_adam_launch& a) {
  // Elements per thread and access: 8 with 16-bit params (16-byte accesses to every 16-bit state), else 4.
  constexpr int W = sizeof(typename storage<P>::type) == 2 ? 8 : 4;
  typedef typename C_storage<C>::tag CT;
  const AdamCoefs c = adam_coefs(a.h);
  const bool amsgrad = a.h.amsgrad != 0;
  const long long total = a.chunk_start[a.num_tensors];
  for (long long chunk = blockIdx.x; chunk < total; chunk += gridDim.x) {
    const int ti = find_tensor(a.chunk_start, a.num_tensors, chunk);
    const accel_adam_tensor& t = a.t[ti];
    const long long begin = (chunk - a.chunk_start[ti]) * a.chunk_size;
    const long long end = begin + a.chunk_size < t.numel ? begin + a.chunk_size : t.numel;
    const bool copy = C_enabled<C>::value && t.model_copy != 0;
    const bool vec = aligned_n<P, W>(t.param) && aligned_n<P, W>(t.exp_avg) && aligned_n<P, W>(t.exp_avg_sq) &&
                     (!amsgrad || aligned_n<P, W>(t.max_exp_avg_sq)) && aligned_n<G, W>(t.grad) &&
                     (!copy || aligned_n<CT, W>(t.model_copy));
    if (vec) {
      for (long long i = begin + W * (long long)threadIdx.x; i < end; i += W * (long long)blockDim.x) {
        if (i + W <= end) {
          float p[W], g[W], m[W], v[W], x[W];
#pragma unroll
          for (int j = 0; j < W; ++j) x[j] = 0.f;
          load_n<P, W>(t.param, i, p);
          load_n<G, W>(t.grad, i, g);
          load_n<P, W>(t.exp_avg, i, m);
          load_n<P, W>(t.exp_avg_sq, i, v);
          if (amsgrad) load_n<P, W>(t.max_exp_avg_sq, i, x);
#pragma unroll
          for (int j = 0; j < W; ++j) adam_element(c, amsgrad, p[j], g[j], m[j], v[j], x[j]);
          store_n<P, W>(t.param, i, p);
          store_n<P, W>(t.exp_avg, i, m);
          store_n<P, W>(t.exp_avg_sq, i, v);
          if (amsgrad) store_n<P, W>(t.max_exp_avg_sq, i, x);
          if (copy) store_n<CT, W>(t.model_copy, i, p);
        } else {
          for (long long k = i; k < end; ++k) {
            float p = load1<P>(t.param, k), g = load1<G>(t.grad, k), m = load1<P>(t.exp_avg, k),
                  v = load1<P>(t.exp_avg_sq, k), x = amsgrad ? load1<P>(t.max_exp_avg_sq, k) : 0.f;
            adam_element(c, amsgrad, p, g, m, v, x);
            store1<P>(t.param, k, p);
            store1<P>(t.exp_avg, k, m);
            store1<P>(t.exp_avg_sq, k, v);
            if (amsgrad) store1<P>(t.max_exp_avg_sq, k, x);
            if (copy) store1<CT>(t.model_copy, k, p);
          }
        }
      }
    } else {
      for (long long k = begin + threadIdx.x; k < end; k += blockDim.x) {
        float p = load1<P>(t.param, k), g = load1<G>(t.grad, k), m = load1<P>(t.exp_avg, k),
              v = load1<P>(t.exp_avg_sq, k), x = amsgrad ? load1<P>(t.max_exp_avg_sq, k) : 0.f;
        adam_element(c, amsgrad, p, g, m, v, x);
        store1<P>(t.param, k, p);
        store1<P>(t.exp_avg, k, m);
        store1<P>(t.exp_avg_sq, k, v);
        if (amsgrad) store1<P>(t.max_exp_avg_sq, k, x);
        if (copy) store1<typename C_storage<C>::tag>(t.model_copy, k, p);
      }
    }
  }
}

}  // namespace accel_kernels

#define ACCEL_FUSED_ADAM_KERNEL(PN, GN, CN)                                                              \
  extern "C" __global__ void __launch_bounds__(512)                                                      \
      accel_fused_adam_p##PN##_g##GN##_c##CN(const __grid_constant__ accel_adam_launch a) {              \
    accel_kernels::fused_adam_body<accel_kernels::PN, accel_kernels::GN, accel_kernels::CN>(a);          \
  }

ACCEL_FUSED_ADAM_KERNEL(f32, f32, none)
ACCEL_FUSED_ADAM_KERNEL(f32, f32, f16)
ACCEL_FUSED_ADAM_KERNEL(f32, f32, bf16)
ACCEL_FUSED_ADAM_KERNEL(f32, f16, none)
ACCEL_FUSED_ADAM_KERNEL(f32, f16, f16)
ACCEL_FUSED_ADAM_KERNEL(f32, f16, bf16)
ACCEL_FUSED_ADAM_KERNEL(f32, bf16, none)
ACCEL_FUSED_ADAM_KERNEL(f32, bf16, f16)
ACCEL_FUSED_ADAM_KERNEL(f32, bf16, bf16)
ACCEL_FUSED_ADAM_KERNEL(bf16, f32, none)
ACCEL_FUSED_ADAM_KERNEL(bf16, f16, none)
ACCEL_FUSED_ADAM_KERNEL(bf16, bf16, none)
