#!/usr/bin/env python3
"""accel's CPU fused Adam next to torch's (for-loop, foreach, fused) and DeepSpeed's CPU Adam, on the
same tensors in one process, steps interleaved round-robin so that a busy machine slows all alike.

  python3 compare_cpu_adam.py [--log2 24 26] [--threads 1 2] [--reps 5]

accel's kernel is compiled here with the op builder's flags and called through ctypes on the torch
tensors' memory (AdamW, fp32, lr=1e-3, weight_decay=0.01; one tensor of 2^log2 params).
"""
import ctypes
import math
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "..", "kernels")


class HParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_float) for n in ("lr", "beta1", "beta2", "eps", "weight_decay", "step_size",
                                              "inv_bc2_sqrt", "decay_factor")] + \
               [(n, ctypes.c_int) for n in ("adamw", "amsgrad", "param_dtype", "grad_dtype", "model_copy_dtype",
                                            "maximize")] + \
               [("one_minus_beta1", ctypes.c_float), ("one_minus_beta2", ctypes.c_float)]


class Tensor(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in ("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                                               "model_copy")] + [("numel", ctypes.c_longlong),
                                                                 ("reserved", ctypes.c_longlong)]


def build_accel():
    out = os.path.join(tempfile.mkdtemp(prefix="accel-cmp-"), "fused_adam.so")
    cxx = os.environ.get("CXX", "c++")
    cmd = [cxx, "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-fno-math-errno",
           "-ffp-contract=off", "-mprefer-vector-width=512", "-I" + os.path.join(KERNELS, "cpu"),
           "-I" + os.path.join(KERNELS, "common"), os.path.join(KERNELS, "cpu", "fused_adam.cpp"), "-o", out]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    print(f"accel fused_adam compiled in {time.perf_counter() - t0:.2f} s")
    lib = ctypes.CDLL(out)
    lib.accel_fused_adam.argtypes = [ctypes.POINTER(HParams), ctypes.POINTER(Tensor), ctypes.c_longlong, ctypes.c_int]
    return lib


class AccelAdamW:
    def __init__(self, lib, p, lr=1e-3, wd=0.01, betas=(0.9, 0.999), eps=1e-8):
        self.lib, self.p, self.lr, self.wd, self.b1, self.b2, self.eps = lib, p, lr, wd, betas[0], betas[1], eps
        self.m = torch.zeros_like(p)
        self.v = torch.zeros_like(p)
        self.step_ = 0
        self.threads = 0

    def step(self):
        self.step_ += 1
        h = HParams(self.lr, self.b1, self.b2, self.eps, self.wd, self.lr / (1 - self.b1 ** self.step_),
                    1 / math.sqrt(1 - self.b2 ** self.step_), 1 - self.lr * self.wd, 1, 0, 0, 0, -1, 0,
                    1 - self.b1, 1 - self.b2)
        t = Tensor(self.p.data_ptr(), self.p.grad.data_ptr(), self.m.data_ptr(), self.v.data_ptr(), None, None,
                   self.p.numel(), 0)
        rc = self.lib.accel_fused_adam(ctypes.byref(h), ctypes.byref(t), 1, self.threads)
        assert rc == 0


def main():
    args = sys.argv[1:]

    def ints(flag, default):
        if flag not in args:
            return default
        i = args.index(flag) + 1
        out = []
        while i < len(args) and args[i].isdigit():
            out.append(int(args[i]))
            i += 1
        return out

    log2s, threads_list, reps = ints("--log2", [24, 26]), ints("--threads", [1, 2]), ints("--reps", [5])[0]
    lib = build_accel()
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except Exception as e:  # noqa: BLE001
        DeepSpeedCPUAdam = None
        print(f"DeepSpeed CPU Adam unavailable: {e}")
    print(f"torch {torch.__version__}; AdamW fp32, one tensor; median of {reps} interleaved steps")
    for lg in log2s:
        n = 1 << lg
        for th in threads_list:
            torch.set_num_threads(th)
            opts = {}

            def param():
                p = torch.nn.Parameter(torch.full((n,), 0.5))
                p.grad = torch.full((n,), 0.01)
                return p

            opts["torch for-loop"] = torch.optim.AdamW([param()], lr=1e-3, weight_decay=0.01, foreach=False)
            opts["torch foreach"] = torch.optim.AdamW([param()], lr=1e-3, weight_decay=0.01, foreach=True)
            opts["torch fused"] = torch.optim.AdamW([param()], lr=1e-3, weight_decay=0.01, fused=True)
            if DeepSpeedCPUAdam is not None:
                opts["DeepSpeedCPUAdam"] = DeepSpeedCPUAdam([param()], lr=1e-3, weight_decay=0.01, adamw_mode=True)
            a = AccelAdamW(lib, param())
            a.threads = th
            opts["accel fused_adam"] = a
            for o in opts.values():
                o.step()  # state allocation, JIT load
            times = {k: [] for k in opts}
            for _ in range(reps):
                for k, o in opts.items():
                    t0 = time.perf_counter()
                    o.step()
                    times[k].append(time.perf_counter() - t0)
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            base = med["accel fused_adam"]
            for k, t in med.items():
                print(f"  2^{lg} threads={th} {k:18s}: {t * 1e3:8.1f} ms/step {n / t / 1e9:6.3f} Gparam/s "
                      f"{28 * n / t / 1e9:5.1f} GB/s  accel speedup {t / base:5.2f}x")
            del opts, a


if __name__ == "__main__":
    main()
