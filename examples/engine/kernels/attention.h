/* attention.h — the argument struct of the engine's causal multi-head self-attention kernels (the
 * "gpt_attention" op: attention.cpp on the CPU, attention.cu on CUDA), a user's own op launched through
 * accel/ops/launch.hpp. Plain C: the host compiler, nvcc and NVRTC all read it.
 *
 * qkv is [B x T x 3C]: for each token the C query values, then the C keys, then the C values; head h
 * uses columns [h*hs, (h+1)*hs) of each (hs = C / NH). For each (b, h):
 *   S[i][j] = q_i . k_j / sqrt(hs) for j <= i;  P[i] = softmax(S[i][0..i]);  y_i = sum_j Pd[i][j] v_j
 * with Pd = P, or with attention dropout Pd[i][j] = P[i][j] * (bits >= threshold ? scale : 0), the
 * bits [B x NH x T x T] drawn per step. y is [B x T x C] (head h in columns [h*hs, (h+1)*hs)).
 * att [B x NH x Tp x Tp] (Tp = T rounded up to 16, GPT_ATT_TP) keeps P for the backward pass: row i
 * holds P[i][0..i] and zeros up to Tp, rows [T, Tp) are zero (whole 16-float blocks need no masks).
 * On a CPU with AMX the bf16 kernels of head size 32 and 64 keep P rounded to bf16 instead, rows of Tb
 * (Tp rounded up to 32) in the first half of each pair's tile (gpt_attention_cpu_amx tells).
 *
 * The backward pass writes dqkv (overwritten, not accumulated) from dy, qkv and att. scratch is
 * used by the CUDA kernels ([B x NH x Tp x Tp] floats: dS); the CPU kernel uses none.
 */
#ifndef GPT_ATTENTION_H
#define GPT_ATTENTION_H

/* The row stride (and row count) of an attention tile: T rounded up to 16. */
#define GPT_ATT_TP(T) ((((T) + 15) / 16) * 16)

/* The flash kernels' backward scratch (kernels/flash_attention.cuh), in floats: the rows' D = dy . y,
 * [B x NH x T] (rounded up to 4 floats); the one-kernel backward (gpt_flash_backward_prep_* then
 * gpt_flash_backward_fused_*) adds dq's partial sums, [B x NH x tiles][HS][64] floats, and
 * B x NH x tiles + 1 counters (tiles of 64 rows). */
#define GPT_FLASH_TILES(T) (((T) + 63) / 64)
#define GPT_FLASH_DSUM_FLOATS(B, NH, T) (((B) * (NH) * (T) + 3) / 4 * 4)
#define GPT_FLASH_FUSED_SCRATCH_FLOATS(B, NH, T, HS) \
  (GPT_FLASH_DSUM_FLOATS(B, NH, T) + (B) * (NH) * GPT_FLASH_TILES(T) * (64 * (HS) + 1) + 1)

typedef struct gpt_attention_args {
  void* y;                  /* forward: out [B x T x C] */
  void* dqkv;               /* backward: out [B x T x 3C] */
  float* att;               /* [B x NH x Tp x Tp]: written forward, read backward */
  float* scratch;           /* CUDA backward: [B x NH x Tp x Tp] floats (dS); flash: see above */
  const void* qkv;          /* [B x T x 3C] */
  const void* dy;           /* backward: [B x T x C] */
  const unsigned int* bits; /* attention dropout's random words [B x NH x T x T], or null */
  long long B, T, C, NH;
  unsigned int threshold;   /* dropout: p * 2^32 */
  float scale;              /* dropout: 1 / (1 - p) */
} gpt_attention_args;

/* gpt_attention_cpu_amx (CPU): *amx = 1 when the bf16 attention kernels of head size C / NH run their
 * products on AMX tiles (bf16 P, dS; attention.cpp), 0 when on the float32 vector code. */
typedef struct gpt_attention_amx_args {
  long long C, NH;
  int* amx; /* out */
} gpt_attention_amx_args;

/* The GEMM path (engine --attention gemm, the default on CUDA): the four products of each direction run
 * as strided-batched GEMMs over the B x NH heads (accel::blas), around these kernels. Tensors of the
 * activation dtype; att is [B x NH x T x T] (row stride T), P past the diagonal 0.
 *
 * gpt_head_permute: heads[p] is [B x NH x T x hs], tokens is [B x T x parts*C]:
 *   heads[p][((b NH + h) T + t) hs + d] = tokens[(b T + t) parts C + p C + h hs + d], p < parts
 *   (parts 3: qkv <-> q, k, v; parts 1: y <-> one tensor); to_tokens = 1 copies heads into tokens. */
typedef struct gpt_permute_args {
  void* heads[3];
  void* tokens;
  long long B, T, C, NH;
  int parts;
  int to_tokens;
} gpt_permute_args;

/* gpt_softmax_forward: att holds the scaled scores; each row i becomes P[i][0..i] (0 past it); with
 *   bits, pd gets P x mask (the dropout's factors).
 * gpt_softmax_backward: datt holds dPd = dy v^T; it becomes dS = P (dP - sum_j P dP) scale_qk with
 *   dP = dPd x mask (0 past the diagonal). */
typedef struct gpt_softmax_args {
  void* att;                /* [heads x T x T] */
  void* pd;                 /* forward with dropout: [heads x T x T] */
  void* datt;               /* backward: in dPd, out dS */
  const unsigned int* bits; /* [heads x T x T] or null */
  long long heads, T;       /* heads = B x NH */
  unsigned int threshold;
  float scale;              /* dropout: 1 / (1 - p) */
  float scale_qk;           /* backward: 1 / sqrt(hs) */
  int reserved;
} gpt_softmax_args;

#endif /* GPT_ATTENTION_H */
