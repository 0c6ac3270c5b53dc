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
 *
 * The backward pass writes dqkv (overwritten, not accumulated) from dy, qkv and att. scratch is
 * used by the CUDA kernels ([B x NH x Tp x Tp] floats: dS); the CPU kernel uses none.
 */

/* The row stride (and row count) of an attention tile: T rounded up to 16. */
#define GPT_ATT_TP(T) ((((T) + 15) / 16) * 16)
#ifndef GPT_ATTENTION_H
#define GPT_ATTENTION_H

typedef struct gpt_attention_args {
  void* y;                  /* forward: out [B x T x C] */
  void* dqkv;               /* backward: out [B x T x 3C] */
  float* att;               /* [B x NH x Tp x Tp]: written forward, read backward */
  float* scratch;           /* CUDA backward: [B x NH x Tp x Tp] floats (dS) */
  const void* qkv;          /* [B x T x 3C] */
  const void* dy;           /* backward: [B x T x C] */
  const unsigned int* bits; /* attention dropout's random words [B x NH x T x T], or null */
  long long B, T, C, NH;
  unsigned int threshold;   /* dropout: p * 2^32 */
  float scale;              /* dropout: 1 / (1 - p) */
} gpt_attention_args;

#endif /* GPT_ATTENTION_H */
