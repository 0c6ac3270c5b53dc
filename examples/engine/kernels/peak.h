/* peak.h — the argument struct of gpt_fma_peak (peak.cpp): the CPU's float32 FMA rate, measured. */
#ifndef GPT_PEAK_H
#define GPT_PEAK_H

typedef struct gpt_peak_args {
  double* flops_per_second; /* out: FMA FLOP/s of all threads together (2 FLOPs per multiply-add) */
  double seconds;           /* roughly how long to measure */
} gpt_peak_args;

#endif
