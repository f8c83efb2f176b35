#!/usr/bin/env python3
"""bench/torch_optim.py: an AdamW step over GPT-2 small's parameters through
uopjit.torch, against torch.optim.AdamW, in one process.

Workload: the 148 parameter tensors of GPT-2 small (124M f32 elements:
token and position embeddings, 12 blocks of two layer norms, attention
c_attn and c_proj, MLP c_fc and c_proj, and the final layer norm), random
gradients, AdamW(lr=3e-4, weight_decay=0.1).

Runners: "uopjit.torch" (uopjit.torch.AdamW, engine auto: timed once the C
kernels serve), torch.optim.AdamW with foreach=True (the multi-tensor path)
and foreach=False (its default on the CPU in torch 1.13); on a GPU, when
torch sees one, the same with the tensors on it and torch's fused=True
where the installed torch has it.

A step's memory traffic is 28 bytes per element (p, g, m, v read; p, m, v
written): the table gives each runner's GB/s at that count, for comparison
with the machine's copy bandwidth (the bench's STREAM rows). "python us"
is the step's time outside the library's uj_optim_step (the bucketing,
the per-gradient address writes, the hyperparameters and the step
tensors): measured by timing each uj_optim_step call and subtracting.
Measured there, after a call that streamed 3.5 GB through the caches, it
is the Python of a cold cache. So it is measured a second way, as on a GPU,
where the update does not pass through the host's caches: the same 148
tensors with 8 elements each, new gradient tensors at every step (as after
zero_grad(set_to_none=True) and backward), --overhead-steps steps, the
median per step of the time outside uj_optim_step ("python us, warm").

A time is the median of --samples steps after --warmup steps; the steps
are interleaved runner by runner so that all meet the same load.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import uopjit
import uopjit.torch as ut
from uopjit import _lib


def gpt2_small_shapes():
    d, vocab, ctx, layers = 768, 50257, 1024, 12
    shapes = [(vocab, d), (ctx, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,), (d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    return shapes + [(d,), (d,)]


def make_params(shapes, device, seed):
    g = torch.Generator().manual_seed(seed)
    params = []
    for s in shapes:
        p = torch.nn.Parameter((torch.randn(s, generator=g) * 0.02).to(device))
        p.grad = (torch.randn(s, generator=g) * 1e-3).to(device)
        params.append(p)
    return params


class CallTimer:
    """Wraps the library's uj_optim_step to time the calls into it."""

    def __init__(self):
        self.inner = _lib.lib.uj_optim_step
        self.seconds = 0.0

    def __call__(self, *args):
        start = time.perf_counter()
        try:
            return self.inner(*args)
        finally:
            self.seconds += time.perf_counter() - start


def python_overhead(shapes, steps):
    """Median Python time per step (outside uj_optim_step) of uopjit.torch.AdamW
    over len(shapes) tensors of 8 elements, with new gradients every step."""
    params = [torch.nn.Parameter(torch.zeros(8)) for _ in shapes]
    pools = [[torch.randn(8) for _ in shapes] for _ in range(2)]
    opt = ut.AdamW(params, lr=3e-4, weight_decay=0.1)
    timer = CallTimer()
    _lib.lib.uj_optim_step = timer
    times = []
    try:
        for k in range(steps + 10):
            for p, g in zip(params, pools[k % 2]):
                p.grad = g
            timer.seconds = 0.0
            start = time.perf_counter()
            opt.step()
            if k >= 10:
                times.append((time.perf_counter() - start - timer.seconds) * 1e6)
    finally:
        _lib.lib.uj_optim_step = timer.inner
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--overhead-steps", type=int, default=1000)
    ap.add_argument("--json", help="write the rows as JSON to this file ('-': standard output)")
    args = ap.parse_args()
    device = torch.device(args.device)
    shapes = gpt2_small_shapes()
    elements = sum(torch.Size(s).numel() for s in shapes)
    runners = {"uopjit.torch": lambda ps: ut.AdamW(ps, lr=3e-4, weight_decay=0.1)}
    runners["torch foreach=True"] = lambda ps: torch.optim.AdamW(ps, lr=3e-4, weight_decay=0.1, foreach=True)
    if device.type == "cpu":
        runners["torch foreach=False"] = lambda ps: torch.optim.AdamW(ps, lr=3e-4, weight_decay=0.1, foreach=False)
    else:
        try:
            torch.optim.AdamW([torch.zeros(1, device=device, requires_grad=True)], fused=True)
            runners["torch fused=True"] = lambda ps: torch.optim.AdamW(ps, lr=3e-4, weight_decay=0.1, fused=True)
        except (TypeError, RuntimeError) as e:
            print(f"torch fused=True not available: {e}", file=sys.stderr)
    opts = {name: make(make_params(shapes, device, 1)) for name, make in runners.items()}
    timer = CallTimer()
    _lib.lib.uj_optim_step = timer
    times = {name: [] for name in opts}
    python_us = []
    for k in range(args.warmup + args.samples):
        for name, opt in opts.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            timer.seconds = 0.0
            start = time.perf_counter()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            if k >= args.warmup:
                times[name].append(seconds)
                if name == "uopjit.torch":
                    python_us.append((seconds - timer.seconds) * 1e6)
    _lib.lib.uj_optim_step = timer.inner
    # the runners took the same steps from the same start: compare their parameters
    ref = list(opts)[1]
    worst = 0.0
    for p, q in zip(opts["uopjit.torch"].param_groups[0]["params"], opts[ref].param_groups[0]["params"]):
        worst = max(worst, float((p - q).abs().max() / q.abs().max()))
    rows = []
    base = statistics.median(times[ref])
    print(f"AdamW step over GPT-2 small ({len(shapes)} tensors, {elements / 1e6:.1f}M f32 elements) on {device}, "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}, medians of {args.samples}")
    print(f"{'runner':22} {'ms':>9} {'GB/s':>7} {'vs ' + ref:>24}")
    for name, ts in times.items():
        median = statistics.median(ts)
        gbs = 28 * elements / median / 1e9
        print(f"{name:22} {median * 1e3:9.2f} {gbs:7.2f} {base / median:23.2f}x")
        rows.append({"runner": name, "median_ms": median * 1e3, "samples_ms": [t * 1e3 for t in ts],
                     "gb_per_s": gbs, "speedup_vs_" + ref.replace(" ", "_"): base / median})
    print(f"uopjit.torch: python time per step (outside uj_optim_step) median {statistics.median(python_us):.0f} us; "
          f"largest difference from {ref} after {args.warmup + args.samples} steps: {worst:.2g} "
          f"of each tensor's largest magnitude")
    warm_us = python_overhead(shapes, args.overhead_steps)
    print(f"uopjit.torch: python time per step, warm ({len(shapes)} tensors of 8 elements, new gradients every step, "
          f"median of {args.overhead_steps}): {warm_us:.0f} us")
    if args.json:
        out = {"workload": "adamw-gpt2-small", "device": str(device), "tensors": len(shapes), "elements": elements,
               "torch": torch.__version__, "uopjit": uopjit.library_version(), "rows": rows,
               "python_us_median": statistics.median(python_us), "python_us_warm": warm_us, "max_relative_difference": worst}
        text = json.dumps(out, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
