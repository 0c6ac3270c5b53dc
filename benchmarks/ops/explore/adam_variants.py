#!/usr/bin/env python3
"""Exploration, not part of accel's benchmark set: CPU Adam kernel variants (adam_variants.cpp) beside
DeepSpeedCPUAdam and accel (libaccel_capi.so), all stepping the same tensors, interleaved rounds,
1 thread, timed with the thread's CPU clock; prints each candidate's time and DeepSpeed's time over
its own, round by round (> 1: faster than DeepSpeed). The figures of RESULTS.md's "Kernel variants
tried" come from here.

  python3 benchmarks/ops/explore/adam_variants.py [--log2 24] [--rounds 15] [--lib LIBACCEL_CAPI]
          [--variants elem,burst8,...] [--fresh]

--fresh adds "elem@fresh": the element-loop kernel on a second, separately allocated set of tensors (the
same values), to show what memory placement alone does.
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402
import compare_cpu_adam as cc  # noqa: E402

import torch  # noqa: E402

VARIANTS = {  # name: run_kernel id in adam_variants.cpp
    "elem": 0,            # the element loop (#pragma omp simd): the kernel before issue 24
    "interleaved8": 1,    # 8 vectors per iteration, one line of each array in turn
    "ceiling_elem": 2,    # STREAM-like read p,g,m,v / write p,m,v, element order
    "burst4": 3, "burst8": 4, "burst16": 5, "burst6": 11,  # runs of B lines per array
    "ceiling_burst8": 6, "ceiling_burst4": 8,
    "burst8_pf2": 9, "burst8_pf8": 10, "burst4_pf4": 12, "burst8_pf1": 18,  # + prefetch into L1, blocks ahead
    "burst8_nt": 13,      # + non-temporal stores
    "burst8_adamw_only": 14,  # without the AdamW path's fma(0, p, g) and g * 1
    "burst8_aligned": 15,     # blocks aligned to 512 B
    "burst8_p_first": 16,     # p loaded first
    "pf8_l2": 19, "pf16_l2": 20, "pf16_l3_half": 21, "pf32_l2_half": 22, "pf4_l1": 23,
    "page1_l1": 24, "page2_l1": 25, "page1_l3": 26, "page4_l3": 27, "half_page_l1": 28,  # one prefetch per array per 4 KiB
}


def main():
    args = sys.argv[1:]
    bs.exit_on_help(__doc__, args)
    arg = lambda f, d: args[args.index(f) + 1] if f in args else d  # noqa: E731
    n = 1 << int(arg("--log2", "24"))
    rounds = int(arg("--rounds", "15"))
    names = arg("--variants", "elem,burst8,burst4,ceiling_burst8,ceiling_elem").split(",")
    so = os.path.join(tempfile.mkdtemp(prefix="adam-variants-"), "adam_variants.so")
    subprocess.run([os.environ.get("CXX", "c++"), "-O3", "-march=native", "-fopenmp", "-ffp-contract=off",
                    "-fno-math-errno", "-mprefer-vector-width=512", "-shared", "-fPIC",
                    os.path.join(HERE, "adam_variants.cpp"), "-o", so], check=True)
    var = ctypes.CDLL(so)
    var.run_kernel.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_longlong, ctypes.c_int]
    lib = cc.load_lib(os.path.abspath(arg("--lib", os.path.join(HERE, "..", "..", "..", "build", "default",
                                                                   "benchmarks", "ops", "libaccel_capi.so"))))
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    torch.set_num_threads(1)
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    m, v = torch.zeros(n), torch.zeros(n)
    ds = DeepSpeedCPUAdam([p], lr=cc.LR, betas=cc.BETAS, eps=cc.EPS, weight_decay=cc.WD, adamw_mode=True)
    ds.state[p].update({"step": 0, "exp_avg": m, "exp_avg_sq": v})
    cands = {"DeepSpeedCPUAdam": ds.step, "accel": cc.Accel(lib, p, m, v, 1).step}
    ptrs = [t.data_ptr() for t in (p.data, p.grad, m, v)]
    for name in names:
        cands[name] = (lambda k: lambda: var.run_kernel(k, *ptrs, n, 1))(VARIANTS[name])
    if "--fresh" in args:
        fresh = [torch.full((n,), 0.5), torch.full((n,), 0.01), torch.zeros(n), torch.zeros(n)]
        cands["elem@fresh"] = lambda: var.run_kernel(0, *[t.data_ptr() for t in fresh], n, 1)
    print(f"2^{n.bit_length() - 1} params, 1 thread, thread CPU clock, {rounds} rounds, load {bs.load_average():.2f}; "
          f"{bs.cpu_name()}")
    times = bs.interleaved_rounds(cands, rounds, time.thread_time)
    for k, t in times.items():
        print(f"  {k:20s} {bs.fmt(bs.summarize([x * 1e3 for x in t])):>22s} ms   DeepSpeed / it "
              f"{bs.fmt(bs.ratio_per_round(times['DeepSpeedCPUAdam'], t), 3)}")


if __name__ == "__main__":
    main()
