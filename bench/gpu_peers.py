#!/usr/bin/env python3
"""bench/gpu_peers.py: the GPU peers of `bench --gpu`, timed by PyTorch.

The same workloads as bench/gpu.c and bench/gpu_rows.c, on the same sizes,
through what a PyTorch user would call: a device-to-device copy, the
sigmoid chain in eager mode, torch.optim.Adam(fused=True) on one tensor,
torch.optim.AdamW (fused=True and foreach=True) over GPT-2 small's 148
parameter tensors, torch.softmax and layer_norm over the rows of
8192x8192, 65536x1024 and 1024x65536. Times are medians of CUDA-event timings of batches of calls
after a warm-up; bandwidth counts the same bytes bench/gpu.c counts (each
array the workload must read once, each it must write once), and "% of
copy" is against the copy measured here, in the same run.

Prints one table; with --json PATH also writes the rows there. Without
torch or a CUDA device it says so and exits 0.
"""
import json
import statistics
import sys


def main():
    json_path = None
    if len(sys.argv) == 3 and sys.argv[1] == "--json":
        json_path = sys.argv[2]
    elif len(sys.argv) != 1:
        print("usage: gpu_peers.py [--json PATH]", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"GPU peers skipped: torch is not importable ({e})")
        return 0
    if not torch.cuda.is_available():
        print("GPU peers skipped: torch sees no CUDA device")
        return 0

    dev = torch.device("cuda")
    rows = []

    def time_ms(fn, samples=9, target_ms=4.0):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        one = max(start.elapsed_time(end), 1e-3)
        calls = max(1, min(1000, int(target_ms / one)))
        times = []
        for _ in range(samples):
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / calls)
        return statistics.median(times)

    copy_gbs = None

    def row(name, shape, ms, nbytes, note=""):
        gbs = nbytes / (ms * 1e6)
        share = 100.0 * gbs / copy_gbs if copy_gbs else float("nan")
        rows.append({"workload": name, "size": shape, "ms": ms, "gbs": gbs, "percent_of_copy": share, "note": note})
        print(f"  {name:<30} {shape:<12} {ms:9.3f} ms  {gbs:8.1f} GB/s  {share:5.1f}% of copy  {note}", flush=True)

    print(f"\nGPU peers: torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    n = 1 << 26
    a = torch.rand(n, device=dev) + 0.5
    b = torch.empty_like(a)
    ms = time_ms(lambda: b.copy_(a))
    copy_gbs = 8.0 * n / (ms * 1e6)
    row("copy (tensor.copy_)", "2^26", ms, 8.0 * n)
    del a, b

    for log2 in (24, 26, 28):
        n = 1 << log2
        x = torch.rand(n, device=dev) + 0.5
        y = torch.empty_like(x)
        ms = time_ms(lambda: torch.sigmoid(torch.add(x, 0.2, alpha=1.5), out=y))
        row("sigmoid chain (eager)", f"2^{log2}", ms, 8.0 * n, "2 kernels")
        del x, y

    for log2 in (24, 26, 28):
        n = 1 << log2
        p = torch.nn.Parameter(torch.rand(n, device=dev) + 0.5)
        p.grad = torch.rand(n, device=dev) + 0.5
        opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, fused=True)
        ms = time_ms(opt.step)
        row("Adam fused=True", f"2^{log2}", ms, 28.0 * n)
        del p, opt

    sizes = gpt2_sizes()
    params = [torch.nn.Parameter(torch.rand(s, device=dev) + 0.5) for s in sizes]
    for prm in params:
        prm.grad = torch.rand_like(prm) + 0.5
    total = sum(sizes)
    for kind in ("fused", "foreach"):
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **{kind: True})
        ms = time_ms(opt.step)
        row(f"AdamW {kind}=True, GPT-2 small", f"{len(sizes)} tensors", ms, 28.0 * total, f"{total} parameters")
        del opt
    del params

    for rows_, cols in ((8192, 8192), (65536, 1024), (1024, 65536)):
        shape = f"{rows_}x{cols}"
        x = torch.rand(rows_, cols, device=dev) + 0.5
        y = torch.empty_like(x)
        ms = time_ms(lambda: torch.softmax(x, -1, out=y))
        row("torch.softmax", shape, ms, 8.0 * x.numel())
        w = torch.rand(cols, device=dev) + 0.5
        bias = torch.rand(cols, device=dev) + 0.5
        ms = time_ms(lambda: torch.nn.functional.layer_norm(x, (cols,), w, bias, 1e-5))
        row("torch layer_norm", shape, ms, 8.0 * x.numel())
        del x, y

    if json_path:
        with open(json_path, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
    return 0


def gpt2_sizes():
    """GPT-2 small's parameter tensors' element counts, as bench/gpu_rows.c lists them."""
    d, vocab, context = 768, 50257, 1024
    sizes = [vocab * d, context * d]
    for _ in range(12):
        sizes += [d, d, d * 3 * d, 3 * d, d * d, d, d, d, d * 4 * d, 4 * d, 4 * d * d, d]
    return sizes + [d, d]


if __name__ == "__main__":
    sys.exit(main())
