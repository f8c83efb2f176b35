#!/usr/bin/env python3
"""bench/groups_peers.py: torch's AdamW step over a list of parameters, the
peer of `bench --groups` (bench/groups.c runs it in the same run).

The parameters have the shapes given on stdin, one per line as comma-separated
sizes (GPT-2 small's 148 when bench runs it); gradients, parameters and the
optimizer's moments are f32, uniform in [0.5, 1.5). The step is
torch.optim.AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
with foreach=True, and fused=True where this torch offers it on the CPU (a
note says when it does not), on 1 and 2 threads (torch.set_num_threads).

Before timing, one step from known values is checked against the same
update in float64 on the first, the largest and the last parameter (max
|got - ref| / max(1, |ref|) <= 1e-5). The first step creates the moments and
is not timed. A time is the median over --samples samples of one step each.

Output lines (tab-separated):
  note<TAB>text
  row<TAB>peer<TAB>threads<TAB>ns per step<TAB>max error<TAB>ok|MISMATCH
"""
import argparse
import inspect
import statistics
import sys
import time

LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01


def reference(p0, g, step):
    """The AdamW update from zero moments, `step` times with the same g, in float64."""
    p, m, v = p0.double(), g.double() * 0, g.double() * 0
    gd = g.double()
    for t in range(1, step + 1):
        p = p * (1 - LR * WD)
        m = BETAS[0] * m + (1 - BETAS[0]) * gd
        v = BETAS[1] * v + (1 - BETAS[1]) * gd * gd
        bc1, bc2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
        p = p - (LR / bc1) * m / (v.sqrt() / bc2 ** 0.5 + EPS)
    return p


def measure(torch, shapes, peer, threads, samples):
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(1)
    params = [torch.nn.Parameter(torch.rand(s, generator=gen) + 0.5) for s in shapes]
    for p in params:
        p.grad = torch.rand(p.shape, generator=gen) + 0.5
    kwargs = {"foreach": True} if peer == "foreach" else {"fused": True}
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, **kwargs)
    checked = [0, max(range(len(params)), key=lambda i: params[i].numel()), len(params) - 1]
    before = {i: params[i].detach().clone() for i in checked}
    with torch.no_grad():
        opt.step()
    err = 0.0
    for i in checked:
        ref = reference(before[i], params[i].grad, 1)
        got = params[i].detach().double()
        err = max(err, float(((got - ref).abs() / ref.abs().clamp(min=1)).max()))
    times = []
    with torch.no_grad():
        for _ in range(samples):
            t0 = time.perf_counter_ns()
            opt.step()
            times.append(time.perf_counter_ns() - t0)
    return statistics.median(times), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in line.split(",")) for line in sys.stdin.read().split() if line]
    try:
        import torch
    except ImportError:
        print("note\ttorch is not importable: no peer rows")
        return
    peers = ["foreach"]
    if "fused" in inspect.signature(torch.optim.AdamW).parameters:
        peers.append("fused")
    else:
        print(f"note\ttorch {torch.__version__} has no fused AdamW (foreach only)")
    for peer in peers:
        for threads in (1, 2):
            try:
                ns, err = measure(torch, shapes, peer, threads, args.samples)
            except (RuntimeError, TypeError) as e:  # fused=True on the CPU is refused by some versions
                print(f"note\ttorch AdamW {peer}: {str(e).splitlines()[0]}")
                break
            ok = "ok" if err <= 1e-5 else "MISMATCH"
            print(f"row\t{peer}\t{threads}\t{ns:.0f}\t{err:.3g}\t{ok}", flush=True)


if __name__ == "__main__":
    main()
