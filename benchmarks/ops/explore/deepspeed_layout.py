#!/usr/bin/env python3
"""Exploration, not part of accel's benchmark set: how DeepSpeedCPUAdam's one-thread step depends on where
its four arrays (param, grad, exp_avg, exp_avg_sq) lie, beside accel's kernel on the same arrays. The figures
of RESULTS.md's "CPU Adam: DeepSpeed's kernel depends on where its arrays lie" come from here; the
benchmark itself measures over layouts with compare_cpu_adam.py --layouts N.

  python3 benchmarks/ops/explore/deepspeed_layout.py state|gaps [--log2 24] [--lib LIBACCEL_CAPI]

state: DeepSpeed with the state it allocates itself at its first step, with state tensors handed to it (as
       compare_cpu_adam.py does), and a second optimizer on a second parameter (its own state); 8 steps each.
gaps:  sets of the four arrays with touched gaps of 0, 1, 3, 17, 0, 5 MiB after each array; DeepSpeed and
       accel interleaved on each set, 7 rounds.
One thread, the calling thread's CPU time, ms per step.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import bench_support as bs  # noqa: E402
import compare_cpu_adam as cc  # noqa: E402

import torch  # noqa: E402


def optimizer(p, m=None, v=None):
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    ds = DeepSpeedCPUAdam([p], lr=cc.LR, betas=cc.BETAS, eps=cc.EPS, weight_decay=cc.WD, adamw_mode=True)
    if m is not None:
        ds.state[p].update({"step": 0, "exp_avg": m, "exp_avg_sq": v})
    return ds


def param(n):
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    return p


def steps(label, fn, count=8):
    ms = []
    for _ in range(count):
        t0 = time.thread_time()
        fn()
        ms.append(1e3 * (time.thread_time() - t0))
    print(f"{label:44s} " + " ".join(f"{t:.1f}" for t in ms), flush=True)


def main():
    args = sys.argv[1:]
    bs.exit_on_help(__doc__, args)
    if not args or args[0] not in ("state", "gaps"):
        sys.exit(__doc__)
    arg = lambda f, d: args[args.index(f) + 1] if f in args else d  # noqa: E731
    n = 1 << int(arg("--log2", "24"))
    torch.set_num_threads(1)
    print(f"{bs.cpu_name()}; load average {bs.load_average():.2f}; 2^{n.bit_length() - 1} params, one thread")
    if args[0] == "state":
        p = param(n)
        steps("DeepSpeed, its own state (1st step allocates)", optimizer(p).step)
        steps("DeepSpeed, state tensors handed to it", optimizer(p, torch.zeros(n), torch.zeros(n)).step)
        steps("DeepSpeed, second parameter, its own state", optimizer(param(n)).step)
        return
    lib = cc.load_lib(os.path.abspath(arg("--lib", os.path.join(HERE, "..", "..", "..", "build", "default",
                                                                   "benchmarks", "ops", "libaccel_capi.so"))))
    keep = []
    for gap in (0, 1, 3, 17, 0, 5):
        arrays = []
        for value in (0.5, 0.01, 0.0, 0.0):
            arrays.append(torch.full((n,), value))
            if gap:
                keep.append(torch.ones(gap << 18))
        p = torch.nn.Parameter(arrays[0])
        p.grad = arrays[1]
        m, v = arrays[2], arrays[3]
        times = bs.interleaved_rounds({"accel": cc.Accel(lib, p, m, v, 1).step, "DS": optimizer(p, m, v).step}, 7,
                                      time.thread_time)
        ms = {k: bs.summarize([x * 1e3 for x in t]) for k, t in times.items()}
        print(f"gaps {gap:2d} MiB: accel {bs.fmt(ms['accel'], 1)} ms, DeepSpeed {bs.fmt(ms['DS'], 1)} ms, "
              f"accel speedup {bs.fmt(bs.ratio_per_round(times['DS'], times['accel']))}", flush=True)
        keep.append((p, m, v))


if __name__ == "__main__":
    main()
