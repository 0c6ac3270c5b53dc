#!/usr/bin/env python3
"""Cold JIT build of the CPU Adam op: DeepSpeed's CPUAdamBuilder().load() against accel's op builder, in
one Python process, interleaved rounds (benchmarks/README.md).

  python3 benchmarks/ops/compare_jit.py [--rounds 3] [--lib build/default/benchmarks/ops/libaccel_capi.so]
          [--json=FILE]

Each round gives each a cold start: DeepSpeed builds into a fresh TORCH_EXTENSIONS_DIR (torch's
cpp_extension + ninja, -O3 -march=native -fopenmp, then import), with its loaded-op cache cleared;
accel builds into a fresh cache directory (accel_capi_cpu_fused_adam_cold_load: the op builder's
load(), host compiler -O3 -march=native -fopenmp, then dlopen). What is timed is the call a user
makes. The order alternates each round. Both compile on however many cores the machine has.
"""
import ctypes
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_support as bs  # noqa: E402


def arg(args, flag, default, conv=str):
    return conv(args[args.index(flag) + 1]) if flag in args else default


def main():
    args = sys.argv[1:]
    bs.exit_on_help(__doc__, args)
    rounds = arg(args, "--rounds", 3, int)
    lib_path = arg(args, "--lib", os.path.join(HERE, "..", "..", "build", "default", "benchmarks", "ops",
                                              "libaccel_capi.so"))
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    lib.accel_capi_cpu_fused_adam_cold_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_double),
                                                        ctypes.POINTER(ctypes.c_int)]
    lib.accel_capi_last_error.restype = ctypes.c_char_p
    import torch  # noqa: F401  (DeepSpeed's build needs it; imported before timing)
    import deepspeed
    from deepspeed.ops.op_builder import CPUAdamBuilder
    from deepspeed.ops.op_builder.builder import OpBuilder

    report = bs.Report("jit_cold", [os.path.relpath(__file__)] + args)
    report.rounds = rounds
    report.notes = {"deepspeed": deepspeed.__version__, "torch": torch.__version__}
    print(report.header())
    dirs = []

    def deepspeed_cold():
        d = tempfile.mkdtemp(prefix="ds-ext-")
        dirs.append(d)
        os.environ["TORCH_EXTENSIONS_DIR"] = d
        OpBuilder._loaded_ops.pop("cpu_adam", None)
        t0 = time.perf_counter()
        CPUAdamBuilder().load(verbose=False)
        return time.perf_counter() - t0

    def accel_cold():
        d = tempfile.mkdtemp(prefix="accel-jit-")
        dirs.append(d)
        seconds, source = ctypes.c_double(), ctypes.c_int()
        t0 = time.perf_counter()
        rc = lib.accel_capi_cpu_fused_adam_cold_load(d.encode(), ctypes.byref(seconds), ctypes.byref(source))
        wall = time.perf_counter() - t0
        if rc != 0 or source.value != 0:
            raise RuntimeError(f"accel cold load: rc {rc}, source {source.value}: {lib.accel_capi_last_error()}")
        return wall

    times = {"accel": [], "DeepSpeed CPUAdamBuilder": []}
    try:
        for r in range(rounds):
            order = [("accel", accel_cold), ("DeepSpeed CPUAdamBuilder", deepspeed_cold)]
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                times[name].append(fn())
                print(f"  round {r + 1}: {name} {times[name][-1]:.2f} s (load {bs.load_average():.2f})", flush=True)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    for name, t in times.items():
        s = bs.summarize(t)
        report.point(name, "", 0, "seconds", s)
        print(f"{name:26s} cold build + load {bs.fmt(s)} s")
    speed = bs.ratio_per_round(times["DeepSpeed CPUAdamBuilder"], times["accel"])
    report.ratio("accel", "DeepSpeed CPUAdamBuilder", "", 0, speed)
    print(f"accel speedup (DeepSpeed / accel, round by round): {bs.fmt(speed, 1)}x")
    report.write()


if __name__ == "__main__":
    main()
