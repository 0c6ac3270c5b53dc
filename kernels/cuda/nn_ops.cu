// nn_ops.cu — accel's neural-network kernels on CUDA (the "nn_ops" op): embedding, LayerNorm with the
// residual add fused in, GELU (tanh), softmax cross-entropy with its gradient, dropout and clipping;
// float32, bfloat16 and float16 storage (fp32 arithmetic). Compiled by NVRTC (or nvcc ahead of time).
// Arguments: kernels/common/accel_nn_abi.h, passed by value (accel/ops/launch.hpp); the launch shapes
// are computed by accel/ops/nn_ops.hpp: rows kernels use one warp per row and 8 rows per block,
// elementwise kernels a grid-stride loop. Sums across rows run in a fixed order (no atomics), so
// results do not depend on the grid.
#include "cuda_common.cuh"

#include "accel_nn_abi.h"

using namespace accel_kernels;

namespace {

constexpr float gelu_k = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float gelu_c = 0.044715f;

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
  return x;
}

template <class T>
__device__ void embedding_forward(const accel_nn_embedding_forward_args& a) {
  const long long total = a.N * a.C, stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
    const long long n = i / a.C, c = i - n * a.C;
    const int tok = a.tokens[n];
    const float v = __fadd_rn(load1<T>(a.wte, tok * a.C + c), load1<T>(a.wpe, (n % a.T) * a.C + c));
    store1<T>(a.out, i, v);
  }
}

// Block row y < V: vocabulary row y of dwte (every row n with tokens[n] == y, in order); y >= V:
// position y - V of dwpe (rows y - V, y - V + T, ...). Column c = blockIdx.x * blockDim.x + threadIdx.x.
template <class T>
__device__ void embedding_backward(const accel_nn_embedding_backward_args& a) {
  const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (c >= a.C) return;
  const long long row = blockIdx.y;
  float acc = 0;
  if (row < a.V) {
    for (long long n = 0; n < a.N; ++n) {
      if (a.tokens[n] == row) acc = __fadd_rn(acc, load1<T>(a.dout, n * a.C + c));
    }
    const long long i = row * a.C + c;
    store1<T>(a.dwte, i, __fadd_rn(load1<T>(a.dwte, i), acc));
  } else {
    const long long t = row - a.V;
    for (long long n = t; n < a.N; n += a.T) acc = __fadd_rn(acc, load1<T>(a.dout, n * a.C + c));
    const long long i = t * a.C + c;
    store1<T>(a.dwpe, i, __fadd_rn(load1<T>(a.dwpe, i), acc));
  }
}

template <class T>
__device__ void layernorm_forward(const accel_nn_layernorm_forward_args& a) {
  const long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= a.N) return;
  const long long base = n * a.C;
  const void* x = a.inp;
  if (a.residual != nullptr) {
    for (long long c = lane; c < a.C; c += 32) {
      store1<T>(a.residual_out, base + c, __fadd_rn(load1<T>(a.inp, base + c), load1<T>(a.residual, base + c)));
    }
    __syncwarp();
    x = a.residual_out;
  } else if (a.residual_out != nullptr && a.residual_out != a.inp) {
    for (long long c = lane; c < a.C; c += 32) store1<T>(a.residual_out, base + c, load1<T>(a.inp, base + c));
  }
  float sum = 0;
  for (long long c = lane; c < a.C; c += 32) sum = __fadd_rn(sum, load1<T>(x, base + c));
  const float m = __fmul_rn(warp_sum(sum), 1.0f / (float)a.C);
  float var = 0;
  for (long long c = lane; c < a.C; c += 32) {
    const float d = __fsub_rn(load1<T>(x, base + c), m);
    var = __fmaf_rn(d, d, var);
  }
  const float s = 1.0f / sqrtf(__fmaf_rn(warp_sum(var), 1.0f / (float)a.C, a.eps));
  for (long long c = lane; c < a.C; c += 32) {
    const float xhat = __fmul_rn(__fsub_rn(load1<T>(x, base + c), m), s);
    store1<T>(a.out, base + c, __fmaf_rn(xhat, load1<T>(a.weight, c), load1<T>(a.bias, c)));
  }
  if (lane == 0) {
    a.mean[n] = m;
    a.rstd[n] = s;
  }
}

// One block per chunk of ACCEL_NN_LN_CHUNK rows: the warps find each row's two means, then every
// thread walks its columns down the chunk's rows (in order) for dinp and the chunk's partial sums.
template <class T>
__device__ void layernorm_backward(const accel_nn_layernorm_backward_args& a) {
  __shared__ float row_g[ACCEL_NN_LN_CHUNK], row_gx[ACCEL_NN_LN_CHUNK];
  const long long n0 = blockIdx.x * (long long)ACCEL_NN_LN_CHUNK;
  const long long n1 = n0 + ACCEL_NN_LN_CHUNK < a.N ? n0 + ACCEL_NN_LN_CHUNK : a.N;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float inv_c = 1.0f / (float)a.C;
  for (long long n = n0 + warp; n < n1; n += warps) {
    const long long base = n * a.C;
    const float m = a.mean[n], s = a.rstd[n];
    float sg = 0, sgx = 0;
    for (long long c = lane; c < a.C; c += 32) {
      const float xhat = __fmul_rn(__fsub_rn(load1<T>(a.inp, base + c), m), s);
      const float g = __fmul_rn(load1<T>(a.dout, base + c), load1<T>(a.weight, c));
      sg = __fadd_rn(sg, g);
      sgx = __fmaf_rn(g, xhat, sgx);
    }
    sg = warp_sum(sg);
    sgx = warp_sum(sgx);
    if (lane == 0) {
      row_g[n - n0] = __fmul_rn(sg, inv_c);
      row_gx[n - n0] = __fmul_rn(sgx, inv_c);
    }
  }
  __syncthreads();
  float* pw = a.scratch + blockIdx.x * 2 * a.C;
  float* pb = pw + a.C;
  for (long long c = threadIdx.x; c < a.C; c += blockDim.x) {
    const float w = load1<T>(a.weight, c);
    float dw = 0, db = 0;
    for (long long n = n0; n < n1; ++n) {
      const long long i = n * a.C + c;
      const float m = a.mean[n], s = a.rstd[n];
      const float xhat = __fmul_rn(__fsub_rn(load1<T>(a.inp, i), m), s);
      const float dy = load1<T>(a.dout, i);
      const float g = __fmul_rn(dy, w);
      const float dx = __fmul_rn(__fsub_rn(__fsub_rn(g, row_g[n - n0]), __fmul_rn(xhat, row_gx[n - n0])), s);
      store1<T>(a.dinp, i, __fadd_rn(load1<T>(a.dinp, i), dx));
      dw = __fmaf_rn(dy, xhat, dw);
      db = __fadd_rn(db, dy);
    }
    pw[c] = dw;
    pb[c] = db;
  }
}

// dweight[c] += sum of the chunks' partials, in chunk order.
template <class T>
__device__ void layernorm_backward_reduce(const accel_nn_layernorm_backward_args& a) {
  const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (c >= a.C) return;
  const long long chunks = (a.N + ACCEL_NN_LN_CHUNK - 1) / ACCEL_NN_LN_CHUNK;
  float dw = 0, db = 0;
  for (long long k = 0; k < chunks; ++k) {
    dw = __fadd_rn(dw, a.scratch[k * 2 * a.C + c]);
    db = __fadd_rn(db, a.scratch[k * 2 * a.C + a.C + c]);
  }
  store1<T>(a.dweight, c, __fadd_rn(load1<T>(a.dweight, c), dw));
  store1<T>(a.dbias, c, __fadd_rn(load1<T>(a.dbias, c), db));
}

__device__ __forceinline__ float gelu_tanh(float x, float* th) {
  const float u = __fmul_rn(gelu_k, __fmaf_rn(__fmul_rn(gelu_c, x), __fmul_rn(x, x), x));
  *th = tanhf(u);
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, *th));
}

template <class T>
__device__ void gelu_forward(const accel_nn_gelu_forward_args& a) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {
    float th;
    store1<T>(a.out, i, gelu_tanh(load1<T>(a.inp, i), &th));
  }
}

template <class T>
__device__ void gelu_backward(const accel_nn_gelu_backward_args& a) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {
    const float x = load1<T>(a.inp, i);
    float th;
    (void)gelu_tanh(x, &th);
    const float sech2 = __fmaf_rn(-th, th, 1.0f);
    const float du = __fmul_rn(gelu_k, __fmaf_rn(3.0f * gelu_c, __fmul_rn(x, x), 1.0f));
    const float grad = __fmaf_rn(__fmul_rn(__fmul_rn(0.5f, x), sech2), du, __fmul_rn(0.5f, __fadd_rn(1.0f, th)));
    store1<T>(a.dinp, i, __fmul_rn(grad, load1<T>(a.dout, i)));
  }
}

template <class T>
__device__ void cross_entropy(const accel_nn_cross_entropy_args& a) {
  const long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= a.N) return;
  const long long base = n * a.Vp;
  float mx = -3.402823466e38f;
  for (long long v = lane; v < a.V; v += 32) mx = fmaxf(mx, load1<T>(a.logits, base + v));
  mx = warp_max(mx);
  float sum = 0;
  for (long long v = lane; v < a.V; v += 32) sum = __fadd_rn(sum, expf(__fsub_rn(load1<T>(a.logits, base + v), mx)));
  sum = warp_sum(sum);
  const int target = a.targets[n];
  const float zt = load1<T>(a.logits, base + target);
  __syncwarp();
  if (lane == 0) a.losses[n] = __fsub_rn(__fadd_rn(logf(sum), mx), zt);
  if (a.write_grad != 0) {
    const float scale = __fdiv_rn(a.dloss, sum);
    for (long long v = lane; v < a.Vp; v += 32) {
      float g = 0;
      if (v < a.V) {
        g = __fmul_rn(expf(__fsub_rn(load1<T>(a.logits, base + v), mx)), scale);
        if (v == target) g = __fsub_rn(g, a.dloss);
      }
      store1<T>(a.logits, base + v, g);
    }
  }
}

template <class T>
__device__ void add(const accel_nn_add_args& a) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {
    store1<T>(a.out, i, __fadd_rn(load1<T>(a.a, i), load1<T>(a.b, i)));
  }
}

template <class T>
__device__ void dropout(const accel_nn_dropout_args& a) {
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {
    store1<T>(a.out, i, a.bits[i] >= a.threshold ? __fmul_rn(load1<T>(a.inp, i), a.scale) : 0.0f);
  }
}

template <class T>
__device__ void clip(const accel_nn_clip_args& a) {
  const float coef = __fdiv_rn(a.max_norm, __fadd_rn(*a.norm, 1e-6f));
  if (!(coef < 1.0f)) return;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += stride) {
    store1<T>(a.data, i, __fmul_rn(load1<T>(a.data, i), coef));
  }
}

}  // namespace

#define ACCEL_NN_KERNEL(name, args_type)                                                              \
  extern "C" __global__ void accel_nn_##name##_f32(const args_type a) { name<f32>(a); }              \
  extern "C" __global__ void accel_nn_##name##_bf16(const args_type a) { name<bf16>(a); }            \
  extern "C" __global__ void accel_nn_##name##_f16(const args_type a) { name<f16>(a); }

ACCEL_NN_KERNEL(embedding_forward, accel_nn_embedding_forward_args)
ACCEL_NN_KERNEL(embedding_backward, accel_nn_embedding_backward_args)
ACCEL_NN_KERNEL(layernorm_forward, accel_nn_layernorm_forward_args)
ACCEL_NN_KERNEL(layernorm_backward, accel_nn_layernorm_backward_args)
ACCEL_NN_KERNEL(layernorm_backward_reduce, accel_nn_layernorm_backward_args)
ACCEL_NN_KERNEL(gelu_forward, accel_nn_gelu_forward_args)
ACCEL_NN_KERNEL(gelu_backward, accel_nn_gelu_backward_args)
ACCEL_NN_KERNEL(cross_entropy, accel_nn_cross_entropy_args)
ACCEL_NN_KERNEL(add, accel_nn_add_args)
ACCEL_NN_KERNEL(dropout, accel_nn_dropout_args)
ACCEL_NN_KERNEL(clip, accel_nn_clip_args)
