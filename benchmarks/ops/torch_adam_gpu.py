#!/usr/bin/env python3
"""accel's CUDA fused AdamW beside torch's (fused=True, foreach=True) in ONE process, on the same tensors,
in interleaved rounds (benchmarks/README.md), with the device copy ceiling measured in the same rounds.

  python3 benchmarks/ops/torch_adam_gpu.py --lib BUILD/benchmarks/ops/libaccel_capi.so
          [--smoke] [--layers N] [--rounds 7] [--impl fused foreach] [--json=FILE]
  python3 benchmarks/ops/torch_adam_gpu.py --device cpu --lib ...   # smoke shapes on the CPU, fp32:
                                                                    # checks the script only, no GPU figure

accel is called through libaccel_capi.so (accel_capi_cuda_adamw_step: FusedAdamOp::step of the
JIT-compiled kernel, enqueued on torch's current stream). Every optimizer steps the same parameters,
gradients and exp_avg/exp_avg_sq (put into torch's optimizer state), so all run on the same memory.
Shapes (as bench_adam_gpu): one tensor of 2^28 elements; a Llama-7B-shaped list (per decoder layer
q,k,v,o 4096x4096, gate/up/down 4096x11008, two 4096 norms; embedding and lm_head 32000x4096, final
norm), 16 layers or fewer where 16 B/param would exceed 70 % of the device's memory. Dtypes: fp32
(28 B/param moved) and bf16 (all bf16: 14 B/param; torch keeps Adam's states in the param dtype).
AdamW lr=1e-3 weight_decay=0.01, params 0.5, grads 0.01. A sample is the CUDA-event time of k steps
in a row divided by k (k calibrated to >= 0.1 s once); a round takes one sample of each candidate,
the order rotated each round; ratios are taken round by round. Ceiling: dst.copy_(src) of 2 GiB
(device to device, 2 x 2 GiB moved). Without CUDA (and without --device cpu) it prints a skip line and
exits 0.
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

HIDDEN, FFN, VOCAB = 4096, 11008, 32000
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01


def layer_params(h, f):
    return 4 * h * h + 3 * h * f + 2 * h


def fixed_params(h, v):
    return 2 * v * h + h


def llama_layers(wanted, total_bytes, h=HIDDEN, f=FFN, v=VOCAB):
    budget = 0.70 * total_bytes / 16.0
    fit = math.floor((budget - fixed_params(h, v)) / layer_params(h, f))
    return max(0, min(wanted, fit))


def llama(layers, h, f, v, tag):
    numels = [v * h]
    for _ in range(layers):
        numels += [h * h] * 4 + [h * f] * 3 + [h, h]
    numels += [h, v * h]
    return (f"{tag}_L{layers}", numels)


def arg(args, flag, default, conv=str):
    return conv(args[args.index(flag) + 1]) if flag in args else default


class Timer:
    """Seconds per call of fn: k calls between two CUDA events (host clock on the CPU), divided by k."""

    def __init__(self, fn, cuda, min_time):
        self.fn, self.cuda = fn, cuda
        if cuda:
            self.start, self.stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        one = self.sample(1)
        self.k = max(1, min(1000, math.ceil(min_time / max(one, 1e-6))))

    def sample(self, k=None):
        k = k or self.k
        if self.cuda:
            self.start.record()
            for _ in range(k):
                self.fn()
            self.stop.record()
            self.stop.synchronize()
            return self.start.elapsed_time(self.stop) / 1e3 / k
        t0 = time.perf_counter()
        for _ in range(k):
            self.fn()
        return (time.perf_counter() - t0) / k

    def __call__(self):
        return self.sample()


class AccelStep:
    """accel's fused AdamW over a list of tensors, through libaccel_capi.so."""

    def __init__(self, lib, params, ms, vs, on_cpu, dtype_code):
        self.lib, self.params, self.ms, self.vs, self.on_cpu, self.step_ = lib, params, ms, vs, on_cpu, 0
        n = len(params)
        arr = ctypes.c_void_p * n
        self.p = arr(*[p.data_ptr() for p in params])
        self.g = arr(*[p.grad.data_ptr() for p in params])
        self.m = arr(*[m.data_ptr() for m in ms])
        self.v = arr(*[v.data_ptr() for v in vs])
        self.numel = (ctypes.c_longlong * n)(*[p.numel() for p in params])
        self.dtype_code = dtype_code
        self.device = 0 if on_cpu else params[0].device.index

    def __call__(self):
        self.step_ += 1
        if self.on_cpu:
            for i in range(len(self.params)):
                rc = self.lib.accel_capi_cpu_adamw_step(self.p[i], self.g[i], self.m[i], self.v[i], self.numel[i],
                                                        self.step_, LR, BETAS[0], BETAS[1], EPS, WD, 0)
                if rc:
                    raise RuntimeError(self.lib.accel_capi_last_error().decode())
            return
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.accel_capi_cuda_adamw_step(self.p, self.g, self.m, self.v, self.numel, len(self.params),
                                                 self.dtype_code, self.step_, LR, BETAS[0], BETAS[1], EPS, WD,
                                                 stream, self.device)
        if rc:
            raise RuntimeError(self.lib.accel_capi_last_error().decode())


def load_lib(path):
    lib = ctypes.CDLL(path)
    f, p, ll, i = ctypes.c_float, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int
    lib.accel_capi_cpu_adamw_step.argtypes = [p, p, p, p, ll, ll, f, f, f, f, f, i]
    pp = ctypes.POINTER(ctypes.c_void_p)
    lib.accel_capi_cuda_adamw_step.argtypes = [pp, pp, pp, pp, ctypes.POINTER(ll), i, i, ll, f, f, f, f, f, p, i]
    lib.accel_capi_last_error.restype = ctypes.c_char_p
    return lib


def main():
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    on_cpu = arg(args, "--device", "cuda") == "cpu"
    if not on_cpu and not torch.cuda.is_available():
        print("torch_adam_gpu: skipped, torch sees no CUDA device")
        return 0
    smoke = "--smoke" in args or on_cpu
    layers = arg(args, "--layers", 16, int)
    rounds = 1 if "--smoke" in args else arg(args, "--rounds", 7, int)
    impls = ["fused", "foreach"]
    if "--impl" in args:
        i, impls = args.index("--impl") + 1, []
        while i < len(args) and not args[i].startswith("--"):
            impls.append(args[i])
            i += 1
    lib_path = arg(args, "--lib", "")
    lib = load_lib(os.path.abspath(lib_path)) if lib_path else None
    if lib is not None and not on_cpu and not lib.accel_capi_has_cuda():
        print(f"torch_adam_gpu: {lib_path} was built without CUDA; accel not measured")
        lib = None
    min_time = 0.01 if smoke else 0.1

    if on_cpu:
        dev, total_mem, name = torch.device("cpu"), 16 << 30, "CPU (--device cpu: checks the script, not a GPU figure)"
    else:
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        total_mem, name = torch.cuda.mem_get_info(dev)[1], torch.cuda.get_device_name(dev)
    if smoke:
        shapes = [("single_2^20", [1 << 20]), llama(2, HIDDEN // 16, FFN // 16, VOCAB // 16, "llama7b_div16")]
        copy_bytes = 64 << 20
    else:
        shapes = [("single_2^28", [1 << 28]), llama(llama_layers(layers, total_mem), HIDDEN, FFN, VOCAB, "llama7b")]
        copy_bytes = 2 << 30
    report = bs.Report("gpu_adam", [os.path.relpath(__file__)] + args, device=name)
    report.rounds = rounds
    report.notes = {"torch": torch.__version__, "accel": lib_path or "not measured"}
    print(report.header())
    print(f"torch {torch.__version__} and accel ({lib_path or 'not measured: no --lib'}) AdamW on {name} "
          f"({total_mem / 2**30:.1f} GiB); {rounds} interleaved rounds, median (min-max); "
          f"{shapes[1][0]}: {len(shapes[1][1])} tensors, {sum(shapes[1][1]) / 1e9:.3f} Gparam")

    src = torch.full((copy_bytes,), 1, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy = Timer(lambda: dst.copy_(src), not on_cpu, min_time)

    print("\n| shape | dtype | candidate | ms/step | GB/s | of copy bw | accel speedup |")
    print("|---|---|---|---|---|---|---|")
    dtypes = (("fp32", torch.float32, 28, 0),) if on_cpu else (("fp32", torch.float32, 28, 0),
                                                                  ("bf16", torch.bfloat16, 14, 2))
    for shape, numels in shapes:
        n = sum(numels)
        for dtype_name, dtype, bpp, code in dtypes:
            params = ms = vs = None
            try:
                params = [torch.nn.Parameter(torch.full((k,), 0.5, dtype=dtype, device=dev)) for k in numels]
                for p in params:
                    p.grad = torch.full_like(p, 0.01)
                ms = [torch.zeros_like(p) for p in params]
                vs = [torch.zeros_like(p) for p in params]
                cands = {"copy": copy}
                for impl in impls:
                    kw = {"fused": True} if impl == "fused" else {"foreach": True}
                    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, **kw)
                    for p, m, v in zip(params, ms, vs):
                        step = torch.zeros((), dtype=torch.float32, device=dev if impl == "fused" else "cpu")
                        opt.state[p] = {"step": step, "exp_avg": m, "exp_avg_sq": v}
                    cands[f"torch {impl}"] = Timer(opt.step, not on_cpu, min_time)
                if lib is not None:
                    cands["accel"] = Timer(AccelStep(lib, params, ms, vs, on_cpu, code), not on_cpu, min_time)
                times = {k: [] for k in cands}
                names = list(cands)
                for r in range(rounds):
                    for j in range(len(names)):
                        k = names[(r + j) % len(names)]
                        times[k].append(cands[k]())
            except torch.OutOfMemoryError:
                print(f"| {shape} | {dtype_name} | out of memory | | | | |", flush=True)
                times = None
            del params, ms, vs
            if not on_cpu:
                torch.cuda.empty_cache()
            if times is None:
                continue
            group = f"{shape} {dtype_name}"
            copy_gbps = [2 * copy_bytes / t / 1e9 for t in times["copy"]]
            for k, t in times.items():
                if k == "copy":
                    gb = bs.summarize(copy_gbps)
                    print(f"| {shape} | {dtype_name} | copy ceiling | {bs.fmt(bs.summarize([x * 1e3 for x in t]), 3)} | "
                          f"{bs.fmt(gb, 1)} | | |")
                    continue
                gbps = [n * bpp / x / 1e9 for x in t]
                frac = bs.summarize([a / b for a, b in zip(gbps, copy_gbps)])
                report.point(k, group, n, "GB/s", bs.summarize(gbps))
                report.point(k, group, n, "fraction of copy bandwidth", frac)
                speed = ""
                if "accel" in times and k != "accel":
                    s = bs.ratio_per_round(t, times["accel"])
                    report.ratio("accel", k, group, n, s)
                    speed = bs.fmt(s) + "x"
                print(f"| {shape} | {dtype_name} | {k} | {bs.fmt(bs.summarize([x * 1e3 for x in t]), 3)} | "
                      f"{bs.fmt(bs.summarize(gbps), 1)} | {bs.fmt(frac)} | {speed} |", flush=True)
    report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
