#!/usr/bin/env python3
"""The engine's GPT in PyTorch: a correctness check against accel, and the speed baseline.

  torch_gpt.py check DIR       DIR from `engine --dump DIR --dropout 0 ...`: loads accel's initial
                               weights and its batches, trains the same steps with torch.optim.AdamW
                               (accel's learning rate of each step), and compares per-step training
                               losses (relative error <= 1e-5) and every gradient tensor of the first
                               step (max|a - b| / max|b| <= 1e-5). Exit status 0 when all pass.
  torch_gpt.py bench [--size tiny|shakespeare|gpt2] [--threads N] [--steps N] [--compile] [--data FILE]
                     [--dtype fp32|bf16] [--device cpu|cuda]
                               tokens/s of the same model and training step in PyTorch (eager or
                               torch.compile) on the same corpus, for benchmarks/engine/compare.py;
                               --dtype bf16: the forward under torch.autocast (bfloat16 on the device
                               the model is on), fp32 weights and optimizer as autocast keeps them;
                               --device cuda: on the GPU with SDPA attention and fused AdamW.
  torch_gpt.py ddp [--size tiny|shakespeare] [--procs 2] [--threads 1] [--steps N]
                               the same step under DistributedDataParallel (gloo) on --procs processes
                               of --threads threads, the global batch split over them (tiny: 12);
                               prints rank 0's median ms/step and the global tokens/s.
  torch_gpt.py train --seconds S [...]   the README's yardstick: train tiny for S seconds (AdamW lr 1e-3
                               constant, betas 0.9/0.99, wd 0.1 on 2-D weights, clip 1.0, no dropout,
                               batch 12), then print the validation loss (mean of 20 fixed batches).

The model is nanoGPT's GPT with bias-free Linear layers (LayerNorm keeps its bias), the LM head tied
to the token embedding, GELU (tanh), pre-LayerNorm blocks. PyTorch is never a dependency of accel:
`pip install torch` to run this.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C, bias=False)
        self.attn.c_proj = nn.Linear(C, C, bias=False)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C, bias=False)
        self.mlp.c_proj = nn.Linear(4 * C, C, bias=False)
        self.NH = NH

    def forward(self, x, sdpa):
        B, T, C = x.shape
        h = self.ln_1(x)
        q, k, v = self.attn.c_attn(h).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        if sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        x = x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, L, NH, C, T, Vp, V, sdpa=True):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(Vp, C)
        self.transformer.wpe = nn.Embedding(T, C)
        self.transformer.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.transformer.ln_f = nn.LayerNorm(C)
        self.V = V
        self.sdpa = sdpa
        self.checkpoint = False  # bench --checkpoint: torch.utils.checkpoint around each block
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            if self.checkpoint and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, self.sdpa, use_reentrant=False)
            else:
                x = block(x, self.sdpa)
        x = self.transformer.ln_f(x)
        logits = x @ self.transformer.wte.weight.t()
        logits = logits[..., : self.V]
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))


def optimizer(model, lr, betas, wd, eps=1e-8, fused=False):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    kind = {"fused": True} if fused else {"foreach": False}
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps, **kind)


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            if k:
                out.setdefault(k, []).append(v)
    return out


def check(args):
    d = args.dir
    cfg = {k: v[0] for k, v in read_kv(os.path.join(d, "config.txt")).items()}
    L, NH, C, T = (int(cfg[k]) for k in ("layers", "heads", "width", "block"))
    V, Vp, B, accum = (int(cfg[k]) for k in ("vocab", "vocab_padded", "batch", "accum"))
    if float(cfg["dropout"]) != 0:
        sys.exit("torch_gpt.py check: the dump must be made with --dropout 0")
    step0 = os.path.join(d, "step_00000000")
    manifest = read_kv(os.path.join(step0, "manifest.txt"))
    flat = np.fromfile(os.path.join(step0, "params.f32"), dtype=np.float32)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT(L, NH, C, T, Vp, V, sdpa=False)
    params = dict(model.named_parameters())
    views = {}
    for line in manifest["tensor"]:
        parts = line.split()
        name, offset, numel = parts[1], int(parts[3]), int(parts[4])
        shape = [int(s) for s in parts[5:]]
        views[name] = (offset, numel, shape)
        with torch.no_grad():
            params[name].copy_(torch.from_numpy(flat[offset:offset + numel].reshape(shape)))
    missing = set(params) - set(views)
    if missing:
        sys.exit(f"torch_gpt.py check: accel's checkpoint lacks {sorted(missing)}")
    losses = [line.split() for line in open(os.path.join(d, "losses.txt"))]
    steps = min(args.steps, len(losses))
    batches = np.fromfile(os.path.join(d, "batches.i32"), dtype=np.int32).reshape(-1, 2, accum, B, T)
    opt = optimizer(model, 1.0, (float(cfg["beta1"]), float(cfg["beta2"])), float(cfg["weight_decay"]), float(cfg["eps"]))
    clip = float(cfg["clip"])
    worst_loss = 0.0
    ok = True
    print(f"{'step':>4} {'accel loss':>12} {'torch loss':>12} {'rel. error':>10}")
    for s in range(steps):
        lr = float(losses[s][2])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(accum):
            x = torch.from_numpy(batches[s, 0, m].astype(np.int64))
            y = torch.from_numpy(batches[s, 1, m].astype(np.int64))
            loss = model(x, y) / accum
            loss.backward()
            total += loss.item()
        if s == 0:
            grads = np.fromfile(os.path.join(d, "grads0.f32"), dtype=np.float32)
            worst = (0.0, "")
            for name, p in params.items():
                offset, numel, shape = views[name]
                a = grads[offset:offset + numel].astype(np.float64)
                b = p.grad.detach().double().numpy().reshape(-1)
                err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)
                worst = max(worst, (err, name))
                if err > 1e-5:
                    ok = False
                    print(f"  gradient {name}: max|a-b|/max|b| = {err:.3g} > 1e-5")
            print(f"step-0 gradients: {len(params)} tensors, worst max|a-b|/max|b| = {worst[0]:.3g} ({worst[1]})")
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        a = float(losses[s][1])
        rel = abs(a - total) / abs(total)
        worst_loss = max(worst_loss, rel)
        ok = ok and rel <= 1e-5
        print(f"{s:>4} {a:>12.7f} {total:>12.7f} {rel:>10.2e}")
    print(f"{steps} steps: worst relative loss error {worst_loss:.3g} (limit 1e-5); "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


SIZES = {"tiny": (4, 4, 128, 64, 12), "shakespeare": (6, 6, 384, 256, 64), "gpt2": (12, 12, 768, 1024, 8)}


def load_corpus(path):
    # The engine's characters (examples/engine/corpus.hpp): a UTF-8 text's code points while there
    # are at most 65,536 of them, else (or for a text that is not UTF-8) its bytes.
    data = open(path, "rb").read()
    try:
        text = data.decode("utf-8")
        units = text if len(set(text)) <= 65536 else data
    except UnicodeDecodeError:
        units = data
    vocab = sorted(set(units))
    stoi = {c: i for i, c in enumerate(vocab)}
    tokens = np.array([stoi[c] for c in units], dtype=np.int64)
    n = len(tokens) * 9 // 10
    return torch.from_numpy(tokens[:n]), torch.from_numpy(tokens[n:]), len(vocab)


def get_batch(split, B, T, gen):
    ix = torch.randint(len(split) - T, (B,), generator=gen)
    return torch.stack([split[i:i + T] for i in ix]), torch.stack([split[i + 1:i + 1 + T] for i in ix])


def default_data():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "data", "shakespeare", "shakespeare.txt")


def timed_steps(forward, model, opt, train, B, T, gen, warmup, steps, autocast=False, device="cpu"):
    """Trains warmup + steps steps (forward, backward, clip 1.0, AdamW; the loss read back, as the
    engine does) and returns the last `steps` step times in seconds, sorted. On CUDA the batch's copy
    to the device is inside the step, as the engine's is."""
    times = []
    for s in range(warmup + steps):
        x, y = get_batch(train, B, T, gen)
        t0 = time.perf_counter()
        x, y = x.to(device), y.to(device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            loss = forward(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        if s >= warmup:
            times.append(time.perf_counter() - t0)
    return sorted(times)


def bench(args):
    L, NH, C, T, B = SIZES[args.size]
    if args.batch:
        B = args.batch
    if args.threads > 0:  # 0: PyTorch's default (compare.py --device cuda)
        torch.set_num_threads(args.threads)
    train, _, V = load_corpus(args.data)
    torch.manual_seed(1337)
    # gpt2: the vocabulary padded to a multiple of 64, as the engine pads it.
    Vp = (V + 63) // 64 * 64 if args.size == "gpt2" else V
    on_gpu = args.device == "cuda"
    # On a GPU the fastest eager PyTorch: SDPA attention (flash) and the fused AdamW kernel.
    model = GPT(L, NH, C, T, Vp, V, sdpa=on_gpu).to(args.device)
    model.checkpoint = args.checkpoint
    opt = optimizer(model, 1e-3, (0.9, 0.99), 0.1, fused=on_gpu)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    gen = torch.Generator().manual_seed(1)
    autocast = args.dtype == "bf16"
    times = timed_steps(step_fn, model, opt, train, B, T, gen, args.warmup, args.steps, autocast, args.device)
    med = times[len(times) // 2]
    where = torch.cuda.get_device_name() if on_gpu else f"threads {args.threads}"
    print(f"torch {torch.__version__} {'compile' if args.compile else 'eager'}{' autocast bf16' if autocast else ''}"
          f"{' checkpointed blocks' if args.checkpoint else ''} "
          f"{args.size} batch {B} {where}: "
          f"{B * T / med:.0f} tokens/s ({med * 1e3:.1f} ms/step median of {len(times)}, "
          f"min {times[0] * 1e3:.1f}, max {times[-1] * 1e3:.1f})")


def _ddp_worker(rank, args, port, out):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    L, NH, C, T, B = SIZES[args.size]
    B = (args.batch or B) // args.procs
    train, _, V = load_corpus(args.data)
    torch.manual_seed(1337)
    model = torch.nn.parallel.DistributedDataParallel(GPT(L, NH, C, T, V, V))
    opt = optimizer(model.module, 1e-3, (0.9, 0.99), 0.1)
    gen = torch.Generator().manual_seed(1 + rank)
    times = timed_steps(model, model, opt, train, B, T, gen, args.warmup, args.steps, args.dtype == "bf16")
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        med = times[len(times) // 2]
        out.put((med, times[0], times[-1], B * args.procs * T))


def ddp(args):
    import torch.multiprocessing as mp
    import random
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = random.randint(20000, 60000)
    mp.spawn(_ddp_worker, args=(args, port, q), nprocs=args.procs, join=True)
    med, lo, hi, tokens = q.get()
    print(f"torch {torch.__version__} DDP (gloo){' autocast bf16' if args.dtype == 'bf16' else ''} {args.size}: {args.procs} processes x {args.threads} threads, global batch "
          f"{tokens // SIZES[args.size][3]}: {tokens / med:.0f} tokens/s ({med * 1e3:.1f} ms/step median of {args.steps}, "
          f"min {lo * 1e3:.1f}, max {hi * 1e3:.1f})")


def train_for(args):
    L, NH, C, T, B = SIZES["tiny"]
    torch.set_num_threads(args.threads)
    train, val, V = load_corpus(args.data)
    torch.manual_seed(1337)
    model = GPT(L, NH, C, T, V, V)
    opt = optimizer(model, 1e-3, (0.9, 0.99), 0.1)
    gen = torch.Generator().manual_seed(1)
    vgen = torch.Generator().manual_seed(2)
    val_batches = [get_batch(val, B, T, vgen) for _ in range(20)]

    def val_loss():
        with torch.no_grad():
            return sum(model(x, y).item() for x, y in val_batches) / len(val_batches)

    rows = []
    start = time.perf_counter()
    steps = 0
    paused = 0.0  # evaluations are not training time
    while time.perf_counter() - start - paused < args.seconds:
        x, y = get_batch(train, B, T, gen)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps += 1
        if args.csv and steps % args.eval_every == 0:
            t0 = time.perf_counter()
            rows.append((steps, t0 - start - paused, loss.item(), val_loss()))
            paused += time.perf_counter() - t0
    elapsed = time.perf_counter() - start - paused
    v = val_loss()
    rows.append((steps, elapsed, loss.item(), v))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("step,elapsed_s,train_loss,val_loss\n")
            for r in rows:
                f.write("%d,%.3f,%.6f,%.6f\n" % r)
    print(f"torch {torch.__version__} tiny, {args.threads} threads: {steps} steps in {elapsed:.1f} s "
          f"({steps * B * T / elapsed:.0f} tokens/s), val loss {v:.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--steps", type=int, default=20)
    c.add_argument("--threads", type=int, default=2)
    b = sub.add_parser("bench")
    b.add_argument("--size", choices=SIZES, default="tiny")
    b.add_argument("--batch", type=int, default=0)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--steps", type=int, default=50)
    b.add_argument("--warmup", type=int, default=10)
    b.add_argument("--compile", action="store_true")
    b.add_argument("--checkpoint", action="store_true",
                   help="torch.utils.checkpoint around each block (the engine's --activation-checkpointing)")
    b.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="bf16: torch.autocast on the device")
    b.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the model on the GPU, SDPA attention, fused AdamW")
    b.add_argument("--data", default=default_data())
    d = sub.add_parser("ddp")
    d.add_argument("--size", choices=SIZES, default="tiny")
    d.add_argument("--batch", type=int, default=0, help="global batch (default: the size's)")
    d.add_argument("--procs", type=int, default=2)
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--steps", type=int, default=50)
    d.add_argument("--warmup", type=int, default=10)
    d.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="bf16: the forward under torch.autocast")
    d.add_argument("--data", default=default_data())
    t = sub.add_parser("train")
    t.add_argument("--seconds", type=float, default=60)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--data", default=default_data())
    t.add_argument("--csv", default="", help="write step, seconds, train and validation loss every --eval-every steps")
    t.add_argument("--eval-every", type=int, default=250)
    args = p.parse_args()
    if args.cmd == "check":
        return check(args)
    if args.cmd == "bench":
        return bench(args)
    if args.cmd == "ddp":
        return ddp(args)
    return train_for(args)


if __name__ == "__main__":
    sys.exit(main())
