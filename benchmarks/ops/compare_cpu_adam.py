#!/usr/bin/env python3
"""accel's CPU fused Adam beside DeepSpeed's DeepSpeedCPUAdam and torch's AdamW (fused, foreach,
for-loop), in one Python process, on the same tensors, in interleaved rounds (benchmarks/README.md).

  python3 benchmarks/ops/compare_cpu_adam.py [--log2 24 26] [--threads 1 2] [--rounds 7]
          [--lib build/default/benchmarks/ops/libaccel_capi.so] [--skip-slow] [--json=FILE]
          [--kernel NAME=SO ...] [--clock wall|thread] [--layouts N]

--clock thread times the 1-thread shapes with the calling thread's CPU clock (time.thread_time: with one
OpenMP thread every candidate runs on the calling thread), so that waiting for a core on a busy machine
is not counted; 2-thread shapes are always timed by the wall clock.

--kernel NAME=SO adds a candidate that calls accel_fused_adam of a kernel library compiled elsewhere
(e.g. an earlier kernels/cpu/fused_adam.cpp, built with the op builder's flags: c++ -O3 -march=native
-fopenmp -shared -fPIC -std=c++17 -fno-math-errno -ffp-contract=off -mprefer-vector-width=512
-Ikernels/cpu -Ikernels/common), for before/after comparisons in one process.

accel is called through libaccel_capi.so (its C ABI; FusedAdamOp::step_sync, the op builder's JIT
kernel, as a C++ user calls it). The ceiling is adam_ceiling.h's STREAM-like kernel, the same one
bench_adam_cpu measures: Adam's own traffic (read p, g, m, v; write p, m, v: 28 B/param).

Every optimizer steps the SAME four tensors (one nn.Parameter, its grad, and exp_avg/exp_avg_sq put
into each optimizer's state), so all run on the same memory: with separate tensors, where the pages
happen to lie moved one optimizer's time by up to 20 % here, more than the kernels differ. AdamW
lr=1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, fp32. One round = one step of each
candidate, the order rotated each round; ratios are taken round by round. torch.set_num_threads(T)
sets the OpenMP threads of torch and DeepSpeed (one libgomp in the process: torch's); accel gets T.

--layouts N (default 1) repeats that on N sets of the four tensors, each set's arrays separated by a
different gap of touched memory (SPACERS_MIB: 0, 5, 1, 17, ... MiB; layout 0 is the default's arrays
back to back), and every candidate steps every set in the same interleaved rounds. A kernel's speed can
depend on where its four arrays lie relative to each other: on a Zen 5 EPYC, DeepSpeedCPUAdam's one-thread
step took 13-14 ms with some placements and 7.8-8.6 ms with others, accel's 7.8-9.0 ms (2^24 params;
benchmarks/RESULTS.md, explore/deepspeed_layout.py). The first table then pools every round of every layout
(ratios taken per round and layout); a line per layout follows.
"""
import ctypes
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402

LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01
SPACERS_MIB = [0, 5, 1, 17, 3, 9, 2, 33]  # --layouts: the gap after each array of layout k


def arg_list(args, flag, default, conv=int):
    """The values after every occurrence of flag (`--kernel A=x B=y`, or `--kernel A=x --kernel B=y`)."""
    if flag not in args:
        return default
    out = []
    for start, a in enumerate(args):
        if a != flag:
            continue
        i = start + 1
        while i < len(args) and not args[i].startswith("--"):
            out.append(conv(args[i]))
            i += 1
    return out


def load_lib(path):
    lib = ctypes.CDLL(path)
    f, p, ll = ctypes.c_float, ctypes.c_void_p, ctypes.c_longlong
    lib.accel_capi_cpu_adamw_step.argtypes = [p, p, p, p, ll, ll, f, f, f, f, f, ctypes.c_int]
    lib.accel_capi_adam_ceiling.argtypes = [p, p, p, p, ll, ctypes.c_int]
    lib.accel_capi_last_error.restype = ctypes.c_char_p
    lib.accel_capi_cpu_fused_adam_path.restype = ctypes.c_char_p
    return lib


class HParams(ctypes.Structure):  # kernels/common/accel_ops_abi.h
    _fields_ = [(n, ctypes.c_float) for n in ("lr", "beta1", "beta2", "eps", "weight_decay", "step_size",
                                              "inv_bc2_sqrt", "decay_factor")] + \
               [(n, ctypes.c_int) for n in ("adamw", "amsgrad", "param_dtype", "grad_dtype", "model_copy_dtype",
                                            "maximize")] + \
               [("one_minus_beta1", ctypes.c_float), ("one_minus_beta2", ctypes.c_float)]


class Tensor(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in ("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                                               "model_copy")] + [("numel", ctypes.c_longlong),
                                                                 ("reserved", ctypes.c_longlong)]


class RawKernel:
    """accel_fused_adam of a kernel library, called with the ABI structs (fp32 AdamW)."""

    def __init__(self, path, p, m, v, threads):
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.lib.accel_fused_adam.argtypes = [ctypes.POINTER(HParams), ctypes.POINTER(Tensor), ctypes.c_longlong,
                                              ctypes.c_int]
        self.t = Tensor(p.data_ptr(), p.grad.data_ptr(), m.data_ptr(), v.data_ptr(), None, None, p.numel(), 0)
        self.threads, self.step_ = threads, 0

    def step(self):
        self.step_ += 1
        b1, b2 = BETAS
        h = HParams(LR, b1, b2, EPS, WD, LR / (1 - b1 ** self.step_), 1 / math.sqrt(1 - b2 ** self.step_),
                    1 - LR * WD, 1, 0, 0, 0, -1, 0, 1 - b1, 1 - b2)
        if self.lib.accel_fused_adam(ctypes.byref(h), ctypes.byref(self.t), 1, self.threads) != 0:
            raise RuntimeError("accel_fused_adam failed")


class Accel:
    """accel's fused AdamW on (p, g, m, v) through the C ABI."""

    def __init__(self, lib, p, m, v, threads):
        self.lib, self.p, self.m, self.v, self.threads, self.step_ = lib, p, m, v, threads, 0

    def step(self):
        self.step_ += 1
        rc = self.lib.accel_capi_cpu_adamw_step(self.p.data_ptr(), self.p.grad.data_ptr(), self.m.data_ptr(),
                                                self.v.data_ptr(), self.p.numel(), self.step_, LR, BETAS[0],
                                                BETAS[1], EPS, WD, self.threads)
        if rc != 0:
            raise RuntimeError(self.lib.accel_capi_last_error().decode())


def layout_candidates(arrays, lib, th, n, kernels, DeepSpeedCPUAdam, skip_slow):
    """Every candidate, stepping one set of the four tensors (p, g, m, v)."""
    p = torch.nn.Parameter(arrays[0])
    p.grad = arrays[1]
    m, v = arrays[2], arrays[3]

    def torch_opt(**kw):
        o = torch.optim.AdamW([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, **kw)
        o.state[p] = {"step": torch.tensor(0.0), "exp_avg": m, "exp_avg_sq": v}
        return o

    cands = {"ceiling": lambda: lib.accel_capi_adam_ceiling(p.data_ptr(), p.grad.data_ptr(), m.data_ptr(),
                                                            v.data_ptr(), n, th),
             "accel": Accel(lib, p, m, v, th).step}
    for name, so in kernels:
        cands[name] = RawKernel(so, p, m, v, th).step
    if DeepSpeedCPUAdam is not None:
        ds = DeepSpeedCPUAdam([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, adamw_mode=True)
        ds.state[p].update({"step": 0, "exp_avg": m, "exp_avg_sq": v})
        cands["DeepSpeedCPUAdam"] = ds.step
    cands["torch fused"] = torch_opt(fused=True).step
    if not skip_slow:
        cands["torch foreach"] = torch_opt(foreach=True).step
        cands["torch for-loop"] = torch_opt(foreach=False).step
    return cands


def main():
    args = sys.argv[1:]
    bs.exit_on_help(__doc__, args)
    log2s = arg_list(args, "--log2", [24, 26])
    threads_list = arg_list(args, "--threads", [1, 2])
    rounds = arg_list(args, "--rounds", [7])[0]
    lib_path = arg_list(args, "--lib", [os.path.join(HERE, "..", "..", "build", "default", "benchmarks", "ops",
                                                     "libaccel_capi.so")], str)[0]
    skip_slow = "--skip-slow" in args
    kernels = [k.split("=", 1) for k in arg_list(args, "--kernel", [], str)]
    clock_name = arg_list(args, "--clock", ["wall"], str)[0]
    layouts = arg_list(args, "--layouts", [1])[0]
    lib = load_lib(os.path.abspath(lib_path))
    try:
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        ds_version = deepspeed.__version__
    except Exception as e:  # noqa: BLE001
        DeepSpeedCPUAdam, ds_version = None, None
        print(f"DeepSpeed CPU Adam unavailable: {e}")
    report = bs.Report("cpu_adam", [os.path.relpath(__file__)] + args)
    report.rounds = rounds
    report.notes = {"torch": torch.__version__, "deepspeed": str(ds_version),
                    "accel kernel": lib.accel_capi_cpu_fused_adam_path().decode()}
    print(report.header())
    print(f"torch {torch.__version__}, DeepSpeed {ds_version}; AdamW fp32, one tensor shared by all; "
          f"{rounds} interleaved rounds; median (min-max)")
    for lg in log2s:
        n = 1 << lg
        for th in threads_list:
            torch.set_num_threads(th)
            keep, cands, spacer = [], {}, {}
            for k in range(layouts):
                gap = SPACERS_MIB[k % len(SPACERS_MIB)]
                arrays = []
                for value in (0.5, 0.01, 0.0, 0.0):  # p, g, m, v; each followed by the layout's gap
                    arrays.append(torch.full((n,), value))
                    if gap:
                        keep.append(torch.ones(gap << 18))  # touched, so that the next array's pages come after it
                suffix = f"@{k}" if layouts > 1 else ""
                spacer[suffix] = gap
                layout = layout_candidates(arrays, lib, th, n, kernels, DeepSpeedCPUAdam, skip_slow)
                names = list(layout)
                cands.update((name + suffix, fn) for name, fn in layout.items())
            load = bs.load_average()
            thread_clock = clock_name == "thread" and th == 1
            per_layout = bs.interleaved_rounds(cands, rounds, time.thread_time if thread_clock else time.perf_counter)
            # every round of every layout, in the same (layout, round) order for each candidate
            times = {c: [t for suffix in spacer for t in per_layout[c + suffix]] for c in names}
            group = f"threads={th}"
            print(f"\n2^{lg} params, {th} thread(s), load {load:.2f}, "
                  f"{'thread CPU clock' if thread_clock else 'wall clock'}"
                  f"{f', {layouts} layouts pooled' if layouts > 1 else ''}:")
            print(f"  {'':18s} {'ms/step':>22s} {'Gparam/s':>22s} {'of ceiling':>20s} {'accel speedup':>22s}")
            for k, t in times.items():
                ms = bs.summarize([x * 1e3 for x in t])
                rate = bs.summarize([n / x / 1e9 for x in t])
                frac = bs.ratio_per_round(times["ceiling"], t)
                speedup = bs.ratio_per_round(t, times["accel"])
                report.point(k, group, n, "Gparam/s", rate)
                report.point(k, group, n, "fraction of ceiling", frac)
                baseline = k not in ("accel", "ceiling")
                if baseline:
                    report.ratio("accel", k, group, n, speedup)
                print(f"  {k:18s} {bs.fmt(ms, 1):>22s} {bs.fmt(rate, 3):>22s} {bs.fmt(frac):>20s} "
                      f"{bs.fmt(speedup) + 'x' if baseline else '':>22s}")
            if layouts > 1:
                for suffix, gap in spacer.items():
                    line = f"  layout {suffix[1:]} ({gap:2d} MiB gaps):"
                    for k in names:
                        ms = bs.summarize([x * 1e3 for x in per_layout[k + suffix]])
                        line += f" {k} {ms['median']:.1f} ms"
                        if k not in ("accel", "ceiling"):
                            speedup = bs.ratio_per_round(per_layout[k + suffix], per_layout["accel" + suffix])
                            report.ratio(f"accel, layout {suffix[1:]} ({gap} MiB gaps)", k, group, n, speedup)
                            line += f" (accel {speedup['median']:.2f}x)"
                    print(line + ";")
            del cands, keep
    report.write()


if __name__ == "__main__":
    main()
