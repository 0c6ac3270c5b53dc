/* accel_ops_abi.h — the structs accel passes to its kernels (host-compiled and CUDA alike).
 *
 * Plain C with no includes, so the same text compiles under a host C/C++ compiler, nvcc and NVRTC.
 * The host-side mirror is include/accel/ops/abi.hpp; the two must keep the same layout (tests/ops
 * checks it) and ACCEL_OPS_ABI_VERSION must change with any change here.
 * Dtype codes are accel::Dtype's: 0 float32, 1 float16, 2 bfloat16; -1 means "none".
 */
#ifndef ACCEL_OPS_ABI_H
#define ACCEL_OPS_ABI_H

#define ACCEL_OPS_ABI_VERSION 1

#define ACCEL_DTYPE_NONE (-1)
#define ACCEL_DTYPE_F32 0
#define ACCEL_DTYPE_F16 1
#define ACCEL_DTYPE_BF16 2

typedef struct accel_adam_hparams {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  float step_size;      /* lr / (1 - beta1^step), or lr without bias correction */
  float inv_bc2_sqrt;   /* 1 / sqrt(1 - beta2^step), or 1 without bias correction */
  float decay_factor;   /* AdamW: 1 - lr * weight_decay; Adam: 1 */
  int adamw;            /* 1: decoupled weight decay; 0: L2 (grad += weight_decay * param) */
  int amsgrad;          /* 1: max_exp_avg_sq is kept and used in the denominator */
  int param_dtype;      /* F32 or BF16; the optimizer states have the same dtype */
  int grad_dtype;       /* F32, F16 or BF16 */
  int model_copy_dtype; /* F16, BF16 or NONE */
  int maximize;         /* 1: gradient ascent */
  float one_minus_beta1; /* 1 - beta1 and 1 - beta2, rounded from double: 1.0f - 0.999f is off by 1.3e-5 */
  float one_minus_beta2;
} accel_adam_hparams;

typedef struct accel_adam_tensor {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq; /* AMSGrad only */
  void* model_copy;     /* the updated param rounded to model_copy_dtype, or null */
  long long numel;
  long long reserved;
} accel_adam_tensor;

typedef struct accel_tensor_ref {
  const void* data;
  long long numel;
  int dtype;
  int reserved;
} accel_tensor_ref;

/* CUDA multi-tensor launches pass their tensor list by value as a kernel parameter (up to 32 KB of
 * parameters: CUDA 12.1+, sm_70+), so a step is one launch per ACCEL_MT_MAX_TENSORS tensors with no
 * host-to-device copy of metadata, and it can be captured in a graph. Tensor i owns the chunks
 * [chunk_start[i], chunk_start[i+1]) of chunk_size elements each; blocks stride over all chunks. */
#define ACCEL_MT_MAX_TENSORS 256

typedef struct accel_adam_launch {
  accel_adam_hparams h;
  int num_tensors;
  int reserved;
  long long chunk_size; /* a multiple of 4 */
  long long chunk_start[ACCEL_MT_MAX_TENSORS + 1];
  accel_adam_tensor t[ACCEL_MT_MAX_TENSORS];
} accel_adam_launch;

typedef struct accel_tensor_list {
  int num_tensors;
  int reserved;
  long long chunk_size;
  long long chunk_start[ACCEL_MT_MAX_TENSORS + 1];
  accel_tensor_ref t[ACCEL_MT_MAX_TENSORS];
} accel_tensor_list;

#endif /* ACCEL_OPS_ABI_H */
