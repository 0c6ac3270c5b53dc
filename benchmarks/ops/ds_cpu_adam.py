#!/usr/bin/env python3
"""DeepSpeed's CPU Adam for comparison with accel's: its JIT build time and its step time.

  python3 ds_cpu_adam.py [--log2 24 26] [--threads 1 2]

The build runs in a fresh TORCH_EXTENSIONS_DIR (a cold JIT build: torch.utils.cpp_extension + ninja),
then the same build is loaded again (warm). Steps: DeepSpeedCPUAdam (adamw_mode=True, lr=1e-3,
weight_decay=0.01) on one fp32 tensor, median of a few steps, at each thread count (torch.set_num_threads
sets OpenMP's thread count for the op).
"""
import os
import sys
import tempfile
import time

os.environ.setdefault("DS_BUILD_OPS", "0")
ext_dir = tempfile.mkdtemp(prefix="ds-ext-")
os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir

import torch  # noqa: E402


def main():
    args = sys.argv[1:]
    log2 = [24, 26]
    threads = [1, 2]
    if "--log2" in args:
        i = args.index("--log2")
        log2 = [int(a) for a in args[i + 1:] if a.isdigit()]
    if "--threads" in args:
        i = args.index("--threads")
        threads = [int(a) for a in args[i + 1:] if a.isdigit()][:2]
    import deepspeed
    from deepspeed.ops.op_builder import CPUAdamBuilder

    print(f"deepspeed {deepspeed.__version__}, torch {torch.__version__}")
    t0 = time.perf_counter()
    CPUAdamBuilder().load(verbose=False)
    cold = time.perf_counter() - t0
    print(f"CPUAdamBuilder().load() cold JIT build: {cold:.2f} s (TORCH_EXTENSIONS_DIR={ext_dir})")
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    for lg in log2:
        n = 1 << lg
        for t in threads:
            torch.set_num_threads(t)
            p = torch.nn.Parameter(torch.full((n,), 0.5))
            p.grad = torch.full((n,), 0.01)
            opt = DeepSpeedCPUAdam([p], lr=1e-3, weight_decay=0.01, adamw_mode=True)
            opt.step()
            times = []
            for _ in range(5 if lg <= 24 else 3):
                s = time.perf_counter()
                opt.step()
                times.append(time.perf_counter() - s)
            m = sorted(times)[len(times) // 2]
            print(f"  2^{lg} threads={t} DeepSpeedCPUAdam: {m * 1e3:8.1f} ms/step  {n / m / 1e9:.3f} Gparam/s"
                  f"  {28 * n / m / 1e9:.1f} GB/s at 28 B/param")
            del opt, p


if __name__ == "__main__":
    main()
