/* accel_nn_abi.h — the argument structs of accel's neural-network kernels (the "nn_ops" op): token and
 * position embedding, LayerNorm (with the residual add fused in), GELU, softmax cross-entropy, dropout
 * and clipping by a norm held in device memory. Forward and backward.
 *
 * Each kernel takes one of these structs, the same bytes on every backend (accel/ops/launch.hpp): the
 * host kernels as int entry(const void* args, int num_threads), the CUDA kernels as
 * __global__ void entry(const args). Entry names end in the dtype of activations and weights:
 * accel_nn_<kernel>_f32, _bf16 and _f16 on every backend (16-bit storage, fp32 arithmetic; a value
 * accumulated into a 16-bit tensor is summed in fp32 and rounded once). Statistics (LayerNorm mean and
 * rstd, losses, norms) are always float32; token ids int32.
 * Plain C, no includes beyond accel_ops_abi.h, so host compilers, nvcc and NVRTC all read it.
 * The host-side mirror is include/accel/ops/nn_abi.hpp (tests/ops checks the layouts match).
 *
 * Rows: a [N x C] tensor is N rows of C contiguous elements (N = batch x sequence). "+=" marks an
 * output that is accumulated into (gradients: the caller zeroes it once per optimizer step).
 * Host kernels return 0, or non-zero for arguments they refuse (1: a size is out of range, 2: a token
 * id is out of range, 3: the dtype is not built for this backend).
 */
#ifndef ACCEL_NN_ABI_H
#define ACCEL_NN_ABI_H

#include "accel_ops_abi.h"

/* out[n, :] = wte[tokens[n], :] + wpe[n % T, :] */
typedef struct accel_nn_embedding_forward_args {
  void* out;          /* [N x C] */
  const int* tokens;  /* [N], each in [0, V) */
  const void* wte;    /* [V x C] */
  const void* wpe;    /* [T x C] */
  long long N, T, C, V;
} accel_nn_embedding_forward_args;

/* dwte[tokens[n], :] += dout[n, :];  dwpe[t, :] += sum over n with n % T == t of dout[n, :].
 * Sums run in row order: the result does not depend on the thread count. (The CUDA kernel adds runs of
 * the rows in row order and then the runs in order, a fixed order of its own.) */
typedef struct accel_nn_embedding_backward_args {
  void* dwte;         /* [V x C] += */
  void* dwpe;         /* [T x C] += */
  const void* dout;   /* [N x C] */
  const int* tokens;  /* [N] */
  long long N, T, C, V;
} accel_nn_embedding_backward_args;

/* x = inp (+ residual when residual is not null); residual_out = x when not null;
 * out = (x - mean) * rstd * weight + bias, mean and rstd of each row (biased variance, eps inside
 * the square root, as torch.nn.LayerNorm). */
typedef struct accel_nn_layernorm_forward_args {
  void* out;             /* [N x C] */
  float* mean;           /* [N] */
  float* rstd;           /* [N] */
  void* residual_out;    /* [N x C] or null */
  const void* inp;       /* [N x C] */
  const void* residual;  /* [N x C] or null */
  const void* weight;    /* [C] */
  const void* bias;      /* [C] */
  long long N, C;
  float eps;
  int reserved;
} accel_nn_layernorm_forward_args;

/* dinp += d(loss)/d(x); dweight += sum over rows of dout * xhat; dbias += sum over rows of dout.
 * The weight and bias sums are taken over fixed chunks of ACCEL_NN_LN_CHUNK rows, then the chunks in
 * order: bit-identical for any thread count. (The CUDA kernel adds a chunk's rows in runs of a few rows
 * and the chunks in runs too, a fixed order of its own: the same bits on every run, within float32
 * rounding of the host's.) scratch holds accel_nn_layernorm_scratch_floats(N, C) floats: a chunk's
 * partial dweight, then its partial dbias. dinp must not overlap dout or inp (the CUDA kernel reads
 * them again after writing dinp). */
typedef struct accel_nn_layernorm_backward_args {
  void* dinp;          /* [N x C] += */
  void* dweight;       /* [C] += */
  void* dbias;         /* [C] += */
  float* scratch;
  const void* dout;    /* [N x C] */
  const void* inp;     /* [N x C]: x, the LayerNorm's input */
  const void* weight;  /* [C] */
  const float* mean;   /* [N] */
  const float* rstd;   /* [N] */
  long long N, C;
} accel_nn_layernorm_backward_args;

#define ACCEL_NN_LN_CHUNK 64
#define accel_nn_layernorm_scratch_floats(N, C) ((((N) + ACCEL_NN_LN_CHUNK - 1) / ACCEL_NN_LN_CHUNK) * 2 * (C))

/* GELU, tanh approximation (GPT-2's, torch's approximate='tanh'):
 * out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
typedef struct accel_nn_gelu_forward_args {
  void* out;
  const void* inp;
  long long n;
} accel_nn_gelu_forward_args;

/* dinp = dout * gelu'(inp); dinp may be dout (in place). */
typedef struct accel_nn_gelu_backward_args {
  void* dinp;
  const void* inp;
  const void* dout;
  long long n;
} accel_nn_gelu_backward_args;

/* Row n of logits holds V logits (columns [V, Vp) are padding and ignored):
 * losses[n] = logsumexp(logits[n, :V]) - logits[n, targets[n]]  (float32).
 * With write_grad, logits is overwritten with d(loss)/d(logits) for loss = dloss * sum of losses:
 * (softmax - onehot(target)) * dloss in [0, V), 0 in [V, Vp). */
typedef struct accel_nn_cross_entropy_args {
  void* logits;        /* [N x Vp] (in; out: the gradient with write_grad) */
  float* losses;       /* [N] */
  const int* targets;  /* [N], each in [0, V) */
  long long N, V, Vp;
  float dloss;         /* the gradient's scale, e.g. 1 / (N * accumulation steps) */
  int write_grad;
} accel_nn_cross_entropy_args;

/* The residual add: out[i] = a[i] + b[i]; out may be a or b. (Inside a transformer block the add is
 * fused into the next LayerNorm; this is the add on its own, e.g. gradients of two micro-batches.) */
typedef struct accel_nn_add_args {
  void* out;
  const void* a;
  const void* b;
  long long n;
} accel_nn_add_args;

/* Inverted dropout with a mask from 32-bit random words: out[i] = bits[i] >= threshold ?
 * inp[i] * scale : 0, threshold = p * 2^32 (rounded), scale = 1 / (1 - p). The backward is the same
 * kernel on the gradient with the same bits. out may be inp. */
typedef struct accel_nn_dropout_args {
  void* out;
  const void* inp;
  const unsigned int* bits;
  long long n;
  unsigned int threshold;
  float scale;
} accel_nn_dropout_args;

/* Gradient clipping by a norm in device memory (written by the L2 norm op, read when this runs, so a
 * captured graph clips with each replay's norm): data *= max_norm / (*norm + 1e-6) when that is < 1. */
typedef struct accel_nn_clip_args {
  void* data;
  const float* norm;
  long long n;
  float max_norm;
  int reserved;
} accel_nn_clip_args;

#endif /* ACCEL_NN_ABI_H */
