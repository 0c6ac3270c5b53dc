#!/usr/bin/env python3
"""torch.optim.Adam/AdamW on the CPU, for comparison with accel's fused Adam.

  python3 torch_adam.py reference OUT.bin   # fixed inputs -> torch's results after 20 steps (tests/ops
                                            # compares accel's CPU Adam against this file)
(Timings of torch's CPU Adam beside accel's and DeepSpeed's: compare_cpu_adam.py, one process.)

Inputs are generated from an integer hash, identically in C++ (tests/ops/test_torch_reference.cpp):
x(k, s, seed) = ((h % 20001) - 10000) / 10000 with h = (k*2654435761 + s*40503 + seed*97) mod 2^32,
rounded from double to float32. Params start at 0.5 * x(k, 1000, seed); grad of step s is x(k, s, seed).
"""
import struct
import sys

import torch

N = 1024
STEPS = 20
CASES = [
    # name, lr, beta1, beta2, eps, weight_decay, adamw, amsgrad, maximize, seed
    ("adam", 1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False, 1),
    ("adam_l2", 1e-3, 0.9, 0.999, 1e-8, 0.01, False, False, False, 2),
    ("adamw", 3e-3, 0.9, 0.95, 1e-8, 0.1, True, False, False, 3),
    ("adam_amsgrad", 1e-3, 0.8, 0.99, 1e-6, 0.01, False, True, False, 4),
    ("adamw_amsgrad_maximize", 1e-2, 0.9, 0.999, 1e-8, 0.05, True, True, True, 5),
]


def x(k, s, seed):
    h = (k * 2654435761 + s * 40503 + seed * 97) & 0xFFFFFFFF
    return ((h % 20001) - 10000) / 10000.0


def reference(path):
    out = bytearray(b"ACCELTR1")
    out += struct.pack("<III", N, STEPS, len(CASES))
    for name, lr, b1, b2, eps, wd, adamw, amsgrad, maximize, seed in CASES:
        p = torch.nn.Parameter(torch.tensor([0.5 * x(k, 1000, seed) for k in range(N)], dtype=torch.float32))
        cls = torch.optim.AdamW if adamw else torch.optim.Adam
        opt = cls([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=amsgrad, maximize=maximize,
                  foreach=False)
        for s in range(1, STEPS + 1):
            p.grad = torch.tensor([x(k, s, seed) for k in range(N)], dtype=torch.float32)
            opt.step()
        st = opt.state[p]
        vmax = st["max_exp_avg_sq"] if amsgrad else torch.zeros(N)
        out += name.encode().ljust(64, b"\0")
        out += struct.pack("<5d", lr, b1, b2, eps, wd)
        out += struct.pack("<II", int(adamw) | int(amsgrad) << 1 | int(maximize) << 2, seed)
        for t in (p.detach(), st["exp_avg"], st["exp_avg_sq"], vmax):
            out += t.to(torch.float32).contiguous().numpy().tobytes() if hasattr(t, "numpy") and _numpy_ok() \
                else struct.pack("<%df" % N, *t.tolist())
    with open(path, "wb") as f:
        f.write(out)
    print(f"wrote {path}: {len(CASES)} cases, {N} params, {STEPS} steps, torch {torch.__version__}")


def _numpy_ok():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "reference":
        reference(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
