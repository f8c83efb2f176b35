#!/usr/bin/env python3
"""bench/plots.py RESULTS_JSON OUT_DIR: the plots of `uopjit bench`.

Reads results.json (bench/results.schema.json) and writes five PNGs into
OUT_DIR with matplotlib (Agg, no display needed):

  time_per_element.png  per workload, ns per element against size, log-log,
                        one line per runner (the JIT engines on the most
                        threads measured, AOT, hand-written C, the fastest
                        peer) and the traffic-matched copy kernel dashed
  jit_vs_aot.png        per workload at its largest size, each JIT engine's
                        time over the AOT kernel's on one thread (below 1:
                        the JIT is faster)
  compile_latency.png   per engine: cold, disk-cache hit, memory-cache
                        dispatch and time to first result, log scale
  memory_limit.png      per workload at its largest size, each runner's
                        share of its traffic-matched copy kernel, in %
  conv3x3.png           per 3x3 layer, each convolution backend's GFLOP/s
                        on the most threads measured

Every figure carries the machine in a caption. Prints one line naming the
files; exits 3 with a message when matplotlib cannot be imported (the
report is then written without plots and says why).
"""
import json
import math
import os
import sys

ENGINE_COLORS = {"mir": "tab:blue", "c": "tab:orange", "auto": "tab:green", "aot": "tab:red",
                 "hand": "tab:purple", "unfused": "tab:brown", "copy": "black"}
PEER_COLORS = {"numpy": "tab:olive", "numexpr": "tab:cyan", "torch": "tab:pink"}
WORKLOADS = ["sigmoid", "gelu", "gelu_erf", "adam", "sumsq", "softmax", "layernorm", "adamw"]


def ok(row):
    return row["status"] == "ok" and row["median_ns"] is not None


def caption(fig, data):
    m = data["machine"]
    text = (f"{m['cpu_model']}, {m['cores']} cores, {m['caches']}; load {m['load_average']}; "
            f"uopjit {m['uopjit_version']}, {m['compiler']}; {m['started']}")
    fig.text(0.5, 0.005, text, ha="center", va="bottom", fontsize=7, color="dimgray")


def finish(plt, fig, data, path, top=1.0):
    """The machine's caption under the figure, then the PNG written and the figure closed."""
    caption(fig, data)
    fig.tight_layout(rect=(0, 0.03 if top < 1 else 0.04, 1, top))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def by_workload(rows):
    out = {}
    for r in rows:
        out.setdefault(r["workload"], []).append(r)
    return out


def time_per_element(plt, data, path):
    groups = by_workload(data["measurements"])
    names = [w for w in WORKLOADS if w in groups and len({r["elements"] for r in groups[w]}) > 1]
    if not names:
        return False
    top = max(data["run"]["threads"])
    cols = min(3, len(names))
    rows_n = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 4.0 * rows_n + 0.6), squeeze=False)
    for ax, name in zip(axes.flat, names):
        rows = groups[name]
        lines = {}
        for r in rows:
            if not ok(r):
                continue
            if r["kind"] == "jit" and r["threads"] != top:
                continue
            if r["kind"] == "limit" and r["threads"] != top:
                continue
            if r["kind"] == "peer":
                # numpy runs on one thread; the others on the most threads, as the JIT rows
                if r["threads"] != (1 if r["runner"] == "numpy" else top):
                    continue
                label = f"{r['runner']} ({r['threads']} thr)"
            elif r["kind"] == "jit":
                label = f"{r['runner']} ({top} thr)"
            elif r["kind"] == "limit":
                label = f"copy limit ({top} thr)"
            else:
                label = f"{r['runner']} (1 thr)"
            lines.setdefault(label, []).append((r["elements"], r["median_ns"] / r["elements"], r))
        for label, points in sorted(lines.items()):
            points.sort()
            r = points[0][2]
            style = "--" if r["kind"] == "limit" else ":" if r["kind"] == "peer" else "-"
            color = ENGINE_COLORS.get(r["runner"], PEER_COLORS.get(r["runner"], "tab:gray"))
            marker = "x" if r["kind"] == "peer" else "o"
            ax.plot([p[0] for p in points], [p[1] for p in points], style, marker=marker, markersize=3,
                    color=color, label=label, linewidth=1.3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("elements per call")
        ax.set_ylabel("ns per element (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6.5, ncol=2)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle("Time per element against size (lower is better)")
    return finish(plt, fig, data, path, top=0.97)


def largest_rows(data):
    out = {}
    for name, rows in by_workload(data["measurements"]).items():
        n = max(r["elements"] for r in rows)
        out[name] = [r for r in rows if r["elements"] == n]
    return out


def tick_label(name, big):
    return name + "\n" + big[name][0]["shape"].replace(", ", ",\n")


def jit_vs_aot(plt, data, path):
    big = largest_rows(data)
    names = [w for w in WORKLOADS if w in big]
    engines = ["mir", "c", "auto"]
    values = {e: [] for e in engines}
    for name in names:
        aot = [r for r in big[name] if r["runner"] == "aot" and ok(r)]
        for e in engines:
            jit = [r for r in big[name] if r["runner"] == e and r["threads"] == 1 and ok(r)]
            values[e].append(jit[0]["median_ns"] / aot[0]["median_ns"] if aot and jit else float("nan"))
    if not names or all(math.isnan(v) for e in engines for v in values[e]):
        return False
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width = 0.8 / len(engines)
    for k, e in enumerate(engines):
        xs = [i + (k - 1) * width for i in range(len(names))]
        ax.bar(xs, values[e], width, label=e, color=ENGINE_COLORS[e])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([tick_label(n, big) for n in names], fontsize=8)
    ax.set_ylabel("JIT time / AOT time (1 thread; below 1: JIT faster)")
    ax.set_title("JIT engines against the same kernel compiled ahead of time, at the largest size")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    return finish(plt, fig, data, path)


def compile_latency(plt, data, path):
    rows = data["compile"]
    engines = [e for e in ("mir", "c", "auto") if any(r["engine"] == e and r["ok"] for r in rows)]
    if not engines:
        return False
    figures = [("cold_ms", "cold (parse + compile + run)", 1.0), ("disk_hit_ms", "disk-cache hit", 1.0),
               ("dispatch_us", "memory-cache dispatch (per call)", 1e-3), ("first_result_ms", "time to first result", 1.0)]
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width = 0.8 / len(figures)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for k, (key, label, scale) in enumerate(figures):
        vals = []
        for e in engines:
            xs = sorted(r[key] * scale for r in rows if r["engine"] == e and r["ok"] and r[key] is not None)
            vals.append(xs[len(xs) // 2] if xs else float("nan"))
        first = [r for r in rows if r["ok"]]
        if key == "first_result_ms" and first:
            label += f" (2^{int(math.log2(first[0]['first_result_elements']))} elements)"
        ax.bar([i + (k - 1.5) * width for i in range(len(engines))], vals, width, label=label, color=colors[k])
    ax.set_yscale("log")
    ax.set_xticks(range(len(engines)))
    ax.set_xticklabels(engines)
    ax.set_ylabel("milliseconds (log; median over workloads)")
    ax.set_title("Compile latency per engine (1 thread)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return finish(plt, fig, data, path)


def memory_limit(plt, data, path):
    big = largest_rows(data)
    names = [w for w in WORKLOADS if w in big]
    top = max(data["run"]["threads"])
    series = [("c", top), ("mir", top), ("auto", top), ("aot", 1), ("hand", 1)]
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width = 0.8 / len(series)
    drawn = False
    for k, (runner, threads) in enumerate(series):
        vals = []
        for n in names:
            r = [x for x in big[n] if x["runner"] == runner and x["threads"] == threads and ok(x)]
            vals.append(r[0]["percent_of_limit"] if r and r[0]["percent_of_limit"] is not None else float("nan"))
        drawn |= any(not math.isnan(v) for v in vals)
        ax.bar([i + (k - 2) * width for i in range(len(names))], vals, width, label=f"{runner} ({threads} thr)",
               color=ENGINE_COLORS[runner])
    if not drawn:
        plt.close(fig)
        return False
    ax.axhline(100, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([tick_label(n, big) for n in names], fontsize=8)
    ax.set_ylabel("% of the traffic-matched copy kernel's speed")
    ax.set_title("Share of the memory limit at the largest size\n"
                 "(100% = a copy kernel moving the same arrays, same size and threads, this run)", fontsize=10)
    ax.legend(fontsize=8, ncol=3)
    ax.grid(True, axis="y", alpha=0.3)
    return finish(plt, fig, data, path)


def conv3x3(plt, data, path):
    top = max(data["run"]["threads"])
    rows = [r for r in data["measurements"] if r["workload"] == "conv3x3" and r["threads"] == top]
    shapes = sorted({r["shape"] for r in rows}, key=lambda sh: -int(sh.split("x")[0]))
    runners = []
    for r in rows:
        if r["runner"] not in runners:
            runners.append(r["runner"])
    if not shapes or not any(ok(r) for r in rows):
        return False
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width = 0.8 / len(runners)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:olive"]
    for k, runner in enumerate(runners):
        vals = []
        for sh in shapes:
            r = [x for x in rows if x["shape"] == sh and x["runner"] == runner and ok(x)]
            vals.append(r[0]["flops"] / r[0]["median_ns"] if r and r[0]["flops"] else float("nan"))
        label = runner + (" (uops on the JIT engine)" if runner == "ref" else "")
        ax.bar([i + (k - (len(runners) - 1) / 2) * width for i in range(len(shapes))], vals, width, label=label,
               color=colors[k % len(colors)])
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([sh.replace(", ", "\n") for sh in shapes], fontsize=8)
    ax.set_ylabel("GFLOP/s (median; higher is better)")
    ax.set_title(f"3x3 convolutions, f32 NHWC, stride 1, on {top} thread(s)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return finish(plt, fig, data, path)


def main():
    if len(sys.argv) != 3:
        print("usage: plots.py RESULTS_JSON OUT_DIR")
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"matplotlib cannot be imported by {sys.executable} ({e}); install python3-matplotlib")
        return 3
    with open(sys.argv[1]) as f:
        data = json.load(f)
    made = []
    for name, draw in (("time_per_element.png", time_per_element), ("jit_vs_aot.png", jit_vs_aot),
                       ("compile_latency.png", compile_latency), ("memory_limit.png", memory_limit),
                       ("conv3x3.png", conv3x3)):
        path = os.path.join(sys.argv[2], name)
        if draw(plt, data, path):
            made.append(path)
    print(f"plots: {', '.join(made) if made else 'none (nothing to plot)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
