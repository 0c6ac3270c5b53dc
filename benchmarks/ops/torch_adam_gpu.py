#!/usr/bin/env python3
"""torch.optim.AdamW on CUDA (fused=True and foreach=True) on bench_adam_gpu's shapes and dtypes, with the
same columns, and the ratio accel / torch when given bench_adam_gpu's output.

  python3 torch_adam_gpu.py [--smoke] [--layers N] [--impl fused foreach] [--accel ACCEL_OUTPUT]
  python3 torch_adam_gpu.py --device cpu [...]   # the smoke shapes on the CPU: checks the script only

Shapes (as bench_adam_gpu): one tensor of 2^28 elements; a Llama-7B-shaped list (per decoder layer
q,k,v,o 4096x4096, gate/up/down 4096x11008, two 4096 norms; embedding and lm_head 32000x4096, final
norm), 16 layers or fewer where 16 B/param would exceed 70 % of the device's memory (the same rule).
Dtypes: fp32 (params, grads and states fp32: 28 B/param moved) and bf16 (all bf16: 14 B/param; torch
keeps Adam's states in the param dtype). AdamW lr=1e-3 weight_decay=0.01, params 0.5, grads 0.01.
Each step is timed alone with CUDA events after 3 warm-up steps (the first allocates the state);
repetitions of >= 0.3 s of steps, the median of 3 (--smoke: 1 of >= 0.01 s, smaller shapes).
GB/s is at the B/param above: what the fused kernel moves; foreach makes several passes and moves
more, so its GB/s is the effective figure. Copy ceiling: dst.copy_(src) of 2 GiB (cudaMemcpyAsync device
to device), 2 x 2 GiB moved per copy. --accel FILE: also print accel / torch from bench_adam_gpu's
RESULT lines. Without CUDA it prints a skip line and exits 0.
"""
import math
import statistics
import sys
import time

import torch

HIDDEN, FFN, VOCAB = 4096, 11008, 32000


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


def time_steps(fn, min_time, reps, cuda=True):
    """Median over `reps` repetitions of the mean event-timed seconds per call (after warm-up)."""
    if cuda:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def one():
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / 1e3
    else:  # --device cpu: host wall-clock (checks the script without a GPU; not a GPU figure)

        def one():
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0

    first = one()
    iters = max(1, min(1000, math.ceil(min_time / max(first, 1e-6))))
    means = []
    for _ in range(reps):
        means.append(sum(one() for _ in range(iters)) / iters)
    return statistics.median(means), iters


def parse_accel(path):
    rows = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            kv = dict(item.split("=", 1) for item in line.split()[1:])
            rows[(kv["shape"], kv["dtype"])] = kv
    return rows


def main():
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    on_cpu = "--device" in args and args[args.index("--device") + 1] == "cpu"
    if not on_cpu and not torch.cuda.is_available():
        print("torch_adam_gpu: skipped, torch sees no CUDA device")
        return 0
    smoke = "--smoke" in args
    layers = int(args[args.index("--layers") + 1]) if "--layers" in args else 16
    impls = ["fused", "foreach"]
    if "--impl" in args:
        i = args.index("--impl") + 1
        impls = []
        while i < len(args) and not args[i].startswith("--"):
            impls.append(args[i])
            i += 1
    accel_path = args[args.index("--accel") + 1] if "--accel" in args else None
    min_time, reps = (0.01, 1) if smoke else (0.3, 3)

    if on_cpu:
        dev = torch.device("cpu")
        total_mem = 16 << 30
        smoke = True
    else:
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        total_mem = torch.cuda.mem_get_info(dev)[1]
    if smoke:
        shapes = [("single_2^20", [1 << 20]), llama(2, HIDDEN // 16, FFN // 16, VOCAB // 16, "llama7b_div16")]
        copy_bytes = 64 << 20
    else:
        shapes = [("single_2^28", [1 << 28]), llama(llama_layers(layers, total_mem), HIDDEN, FFN, VOCAB, "llama7b")]
        copy_bytes = 2 << 30
    name = "cpu (--device cpu: host timings, not a GPU figure)" if on_cpu else torch.cuda.get_device_name(dev)
    print(f"torch {torch.__version__} AdamW on {name} ({total_mem / 2**30:.1f} GiB), lr=1e-3 wd=0.01; "
          f"{shapes[1][0]}: {len(shapes[1][1])} tensors, {sum(shapes[1][1]) / 1e9:.3f} Gparam; "
          f"{shapes[0][0]}: {sum(shapes[0][1]) / 1e9:.3f} Gparam")

    src = torch.full((copy_bytes,), 1, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    dst.copy_(src)
    copy_s, _ = time_steps(lambda: dst.copy_(src), min_time, reps, not on_cpu)
    copy_gbps = 2 * copy_bytes / copy_s / 1e9
    del src, dst
    if not on_cpu:
        torch.cuda.empty_cache()
    print(f"copy ceiling: dst.copy_(src) of {copy_bytes >> 20} MiB = {copy_gbps:.1f} GB/s (read + write)\n")

    results = {}
    print("| impl | shape | dtype | ms/step | Gparam/s | B/param | GB/s | of copy |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, numels in shapes:
        n = sum(numels)
        for dtype_name, dtype, bpp in (("fp32", torch.float32, 28), ("bf16", torch.bfloat16, 14)):
            for impl in impls:
                params = opt = None
                try:
                    params = [torch.nn.Parameter(torch.full((k,), 0.5, dtype=dtype, device=dev)) for k in numels]
                    for p in params:
                        p.grad = torch.full_like(p, 0.01)
                    kw = {"fused": True} if impl == "fused" else {"foreach": True}
                    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kw)
                    for _ in range(3):
                        opt.step()
                    if not on_cpu:
                        torch.cuda.synchronize()
                    t, _ = time_steps(opt.step, min_time, reps, not on_cpu)
                    gbps = n * bpp / t / 1e9
                    results[(impl, shape, dtype_name)] = t
                    print(f"| torch {impl} | {shape} | {dtype_name} | {t * 1e3:.3f} | {n / t / 1e9:.2f} | {bpp} | "
                          f"{gbps:.1f} | {100 * gbps / copy_gbps:.1f} % |", flush=True)
                except torch.OutOfMemoryError:
                    print(f"| torch {impl} | {shape} | {dtype_name} | out of memory | | | | |", flush=True)
                del params, opt
                if not on_cpu:
                    torch.cuda.empty_cache()

    print(f"\nRESULT impl=torch shape=ceiling dtype=memcpy_d2d ms={copy_s * 1e3:.6f} gbps={copy_gbps:.3f}")
    for (impl, shape, dtype_name), t in results.items():
        print(f"RESULT impl=torch_{impl} shape={shape} dtype={dtype_name} ms={t * 1e3:.6f}")

    if accel_path:
        accel = parse_accel(accel_path)
        print(f"\naccel / torch (torch ms per step / accel ms per step; > 1: accel faster), accel from {accel_path}\n")
        print("| shape | dtype | accel ms | " + " | ".join(f"torch {i} ms | vs {i}" for i in impls) + " |")
        print("|---|---|---|" + "---|---|" * len(impls))
        for shape, _ in shapes:
            for dtype_name in ("fp32", "bf16"):
                a = accel.get((shape, dtype_name))
                if a is None:
                    continue
                am = float(a["ms"])
                cells = []
                for impl in impls:
                    t = results.get((impl, shape, dtype_name))
                    cells.append(f"{t * 1e3:.3f} | {t * 1e3 / am:.2f}x" if t else "- | -")
                print(f"| {shape} | {dtype_name} | {am:.3f} | " + " | ".join(cells) + " |")
        lst = shapes[1][0]
        fused = [results.get(("fused", lst, d)) for d in ("fp32", "bf16")]
        acc = [accel.get((lst, d)) for d in ("fp32", "bf16")]
        for d, t, a in zip(("fp32", "bf16"), fused, acc):
            if t and a:
                r = t * 1e3 / float(a["ms"])
                print(f"target >= 1.1x torch fused on the tensor list ({d}): {r:.2f}x, {'met' if r >= 1.1 else 'MISSED'}")
        for (shape, d), a in accel.items():
            if "frac" in a:
                f = float(a["frac"])
                print(f"target >= 85 % of copy bandwidth, accel {shape} {d}: {100 * f:.1f} %, "
                      f"{'met' if f >= 0.85 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
