#!/usr/bin/env python3
"""bench/py_bench.py: uopjit's Python package against numexpr and NumPy, in one process,
and against the same kernel run from C by the `uopjit run` tool.

Workloads, the programs of bench/*.uj (the C bench's own), f32 inputs uniform
in [0.5, 1.5), lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8:

  sigmoid  y = 1/(1+exp(-(a*x+b))) over 2^24 elements (--log2-size)
           uopjit (k(x=, a=, b=, out=y)), numexpr.evaluate(..., out=y),
           numpy ufuncs into preallocated arrays (out=)
  adam     m, v, p updated in place over 2^24 elements: uopjit (out= the
           inputs), numexpr (three evaluates in place), numpy (out=)
  softmax  over the rows of a 4096x4096 matrix (--rows, --cols): uopjit,
           numpy (max, subtract, exp, sum, divide, out=); numexpr has no row
           reductions

Runners: "python c" and "python auto" are uopjit.Kernel with engine "c" and
the default "auto" (timed once its C kernel serves: a tiered kernel's first
calls run on MIR), writing into preallocated outputs as the C side does;
"python c, new output" (sigmoid) lets the call allocate its output, which
costs the page faults of fresh memory on every call; "c (uopjit run)" is the
same program on the C engine in the `uopjit run` tool (its median of
--samples runs after a warm-up; the same threads through UOPJIT_THREADS).
"python c, interleaved" and "c in process (interleaved)" (sigmoid) are the
same kernel through the Python package and through C in this process:
bench/py_bench_driver.c, compiled at run time (cc, or $CC, -O2) against the
library the package loads and called with ctypes, times each uj_program_run
with clock_gettime, so no Python runs on its side; round by round (--samples
rounds) one batch of Kernel calls (out=) then one batch of driver calls, on
the same arrays, engine c and threads, so that both meet the same load,
which the separate `uopjit run` process does not. Their times are per call,
over all rounds (samples_ns: every call).
numexpr runs on the same thread counts (numexpr.set_num_threads); NumPy's
ufuncs use one thread and get 1-thread rows only.

Memory pages: where transparent huge pages are granted on request
(/sys/kernel/mm/transparent_hugepage/enabled: madvise), NumPy asks for them
for its large arrays and `uopjit run`'s malloc'ed buffers get 4 KiB pages;
at 2^24 elements that alone can make a kernel twice as fast on the Python
side. --no-huge-pages turns NumPy's request off for a like-for-like
comparison with the tool; the table's first line says which was used.

Every runner's result is checked in float64 before it is timed: sigmoid and
Adam (one step) by max |got - ref| / max(1, |ref|) <= 1e-5; softmax by
max |got - ref| / |ref| <= gamma_n + 16u (n the row length, u = 2^-24).

A time is the median over --samples samples of the time per call, each
sample as many back-to-back calls as fill 20 ms.

Output: a table, with the ratios the Python package is held to (sigmoid:
python c within 1.1x of c (uopjit run) and, interleaved, of c in
process, the ratio of medians and of minima; at least 3x faster than numexpr on
the same threads). --json FILE ('-': standard output) writes the rows as
{"generator", "load_average", "numpy_huge_pages", "uopjit_version", "notes",
"measurements": [row, ...]} with each row in
the form of results.json's measurements (bench/results.schema.json):
workload, runner, kind (jit | peer | baseline), shape, elements, dtype,
threads, status (ok | mismatch | failed), samples (count), samples_ns (each
sample), median_ns, min_ns, max_ns, max_error, bytes.

Needs numpy and the uopjit package (importable, or python/ of this
repository with build/libuopjit.so: both are found from this file's place);
numexpr is optional (a note says when it is missing). What it shares with
bench/cpu_peers.py (imports, timing, inputs) is in bench/peers_common.py.
"""
import os
import re
import statistics
import ctypes
import subprocess
import sys
import time

from peers_common import (SeededInputs, cell, finish, import_optional, import_uopjit, load_average_text,
                          load_c_driver, numpy_adam, numpy_sigmoid, row_tolerance, script_parser, table_header,
                          time_samples)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BYTES_PER_ELEMENT = {"sigmoid": 8, "adam": 28, "softmax": 8}
SCALARS = {"a": 1.5, "b": 0.2, "lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8}


def program(name):
    with open(os.path.join(HERE, name + ".uj")) as f:
        return f.read().strip()


class Bench(SeededInputs):
    def __init__(self, args, np, uopjit, ne):
        super().__init__(np)
        self.args, self.uopjit, self.ne = args, uopjit, ne
        self.rows, self.notes = [], []

    def add(self, workload, runner, kind, shape, threads, per_call, error, tolerance, median_only=False):
        """One row; median_only: per_call is [the median] another program
        measured over --samples runs, whose runs are not known one by one."""
        elements = 1
        for d in shape:
            elements *= d
        ok = per_call is not None and (error <= tolerance if error is not None else median_only)
        timed = per_call or []
        spread = bool(timed) and not median_only
        self.rows.append({
            "workload": workload, "runner": runner, "kind": kind, "shape": "x".join(map(str, shape)),
            "elements": elements, "dtype": "f32", "threads": threads,
            "status": "ok" if ok else ("failed" if per_call is None else "mismatch"),
            "samples": self.args.samples if median_only and timed else len(timed),
            "samples_ns": [round(t) for t in timed] if spread else [],
            "median_ns": statistics.median(timed) if timed else None,
            "min_ns": min(timed) if spread else None, "max_ns": max(timed) if spread else None,
            "max_error": error, "bytes": BYTES_PER_ELEMENT[workload] * elements})

    def uopjit_kernel(self, source, engine, threads, call):
        """A Kernel on engine, warmed until its C kernel serves (auto tiers)."""
        k = self.uopjit.Kernel(source, engine=engine, threads=threads)
        deadline = time.monotonic() + 120
        while True:
            call(k)
            info = k.last_run()
            if info["engine"] == "c" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if info["engine"] != "c":
            self.notes.append(f"{engine} on {threads} threads still on {info['engine']} after 120 s ({info})")
        return k

    def cli(self, workload, source, cli_args, threads):
        """[median ns] of the program in `uopjit run` on the C engine, or None.
        Its results are not compared here (max_error null): the kernel is the
        one the "python c" row checked."""
        env = dict(os.environ, UOPJIT_THREADS=str(threads))
        command = [self.args.cli, "run", source, "--engine", "c", "--repeat", str(self.args.samples)] + cli_args
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        match = re.search(r"time: median ([0-9.]+) ms", result.stdout)
        if result.returncode != 0 or not match:
            self.notes.append(f"{workload}: uopjit run failed: {result.stderr.strip() or result.stdout.strip()}")
            return None
        return [float(match.group(1)) * 1e6]

    def c_driver(self):
        """bench/py_bench_driver.c compiled (cc -O2) against build/libuopjit.so
        and loaded with ctypes, or None with a note (no compiler, no library)."""
        if hasattr(self, "_driver"):
            return self._driver
        self._driver, self._driver_dir, why = load_c_driver(os.environ.get("UOPJIT_LIBRARY") or os.path.join(ROOT, "build", "libuopjit.so"), "py_bench_driver")
        if why:
            self.notes.append("in-process C driver skipped: " + why)
        return self._driver

    def interleaved(self, k, source, threads, x, a, b, y, ref, tol):
        """Rows "python c, interleaved" and "c in process (interleaved)": round
        by round, one batch of Kernel calls (out=y), then one batch of the C
        driver's uj_program_run calls on the same arrays, engine c and threads,
        so that both see the same load. Times are per call, over all rounds."""
        np, d = self.np, self.c_driver()
        if d is None:
            return
        handle = d.driver_open(source.encode(), threads)
        if not handle:
            self.notes.append("in-process C driver: could not open the program on the C engine")
            return
        try:
            n = x.size
            xp, yp = x.ctypes.data, y.ctypes.data
            start = time.perf_counter_ns()
            k(x=x, a=a, b=b, out=y)
            one = time.perf_counter_ns() - start
            calls = max(3, int(20e6 // max(one, 1)))
            per_call = (ctypes.c_int64 * calls)()
            y.fill(np.nan)
            if d.driver_run(handle, xp, a, b, yp, n, 1, per_call) < 0:
                self.notes.append("in-process C driver: uj_program_run failed")
                return
            c_error = self.relative_to_one(y, ref)
            py_times, c_times = [], []
            for _ in range(self.args.samples):
                for _ in range(calls):
                    t0 = time.perf_counter_ns()
                    k(x=x, a=a, b=b, out=y)
                    py_times.append(time.perf_counter_ns() - t0)
                d.driver_run(handle, xp, a, b, yp, n, calls, per_call)
                c_times.extend(per_call)
            py_error = self.relative_to_one(y, ref)
        finally:
            d.driver_close(handle)
        shape = (x.size,)
        self.add("sigmoid", "python c, interleaved", "jit", shape, threads, py_times, py_error, tol)
        self.add("sigmoid", "c in process (interleaved)", "jit", shape, threads, c_times, c_error, tol)

    # ---- workloads ---------------------------------------------------------------

    def sigmoid(self, threads):
        np, n = self.np, 1 << self.args.log2_size
        source = program("sigmoid")
        x, a, b = self.uniform(n), SCALARS["a"], SCALARS["b"]
        ref = 1 / (1 + np.exp(-(a * x.astype(np.float64) + b)))
        y = np.empty_like(x)
        shape, tol, samples = (n,), 1e-5, self.args.samples

        def measure(runner, kind, call, result):
            y.fill(np.nan)
            call()
            self.add("sigmoid", runner, kind, shape, threads, time_samples(call, samples),
                     self.relative_to_one(result(), ref), tol)

        for engine in ("c", "auto"):
            k = self.uopjit_kernel(source, engine, threads, lambda k: k(x=x, a=a, b=b, out=y))
            measure(f"python {engine}", "jit", lambda: k(x=x, a=a, b=b, out=y), lambda: y)
            if engine == "c":
                fresh = {}
                measure("python c, new output", "jit", lambda: fresh.update(y=k(x=x, a=a, b=b)), lambda: fresh["y"])
                self.interleaved(k, source, threads, x, a, b, y, ref, tol)
        self.add("sigmoid", "c (uopjit run)", "jit", shape, threads,
                 self.cli("sigmoid", source, ["--scalar", "a,b", "--shape", str(n)], threads),
                 None, tol, median_only=True)
        if self.ne is not None:
            self.ne.set_num_threads(threads)
            expr = "1/(1+exp(-(a*x+b)))"
            a32, b32 = np.float32(a), np.float32(b)
            measure("numexpr", "peer", lambda: self.ne.evaluate(expr, local_dict={"a": a32, "b": b32, "x": x}, out=y),
                    lambda: y)
        if threads == 1:
            t = np.empty_like(x)
            a32, b32 = np.float32(a), np.float32(b)

            measure("numpy", "peer", lambda: numpy_sigmoid(np, x, a32, b32, t, y), lambda: y)

    def adam(self, threads):
        np, n = self.np, 1 << self.args.log2_size
        source = program("adam")
        start = {name: self.uniform(n) for name in ("p", "g", "m", "v")}
        s = {k: SCALARS[k] for k in ("lr", "b1", "b2", "eps")}
        g64 = start["g"].astype(np.float64)
        m_ref = s["b1"] * start["m"] + (1 - s["b1"]) * g64
        v_ref = s["b2"] * start["v"] + (1 - s["b2"]) * g64 * g64
        p_ref = start["p"] - s["lr"] * m_ref / (np.sqrt(v_ref) + s["eps"])
        shape, tol = (n,), 1e-5

        def measure(runner, kind, step):
            t = {k: v.copy() for k, v in start.items()}
            step(t)
            error = max(self.relative_to_one(t["m"], m_ref), self.relative_to_one(t["v"], v_ref),
                        self.relative_to_one(t["p"], p_ref))
            self.add("adam", runner, kind, shape, threads, time_samples(lambda: step(t), self.args.samples),
                     error, tol)

        for engine in ("c", "auto"):
            scratch = {k: v.copy() for k, v in start.items()}

            def run(k, t):
                k(**t, **s, out={"p": t["p"], "m": t["m"], "v": t["v"]})
            k = self.uopjit_kernel(source, engine, threads, lambda k: run(k, scratch))
            measure(f"python {engine}", "jit", lambda t, k=k: run(k, t))
        self.add("adam", "c (uopjit run)", "jit", shape, threads,
                 self.cli("adam", source, ["--scalar", "b1,b2,lr,eps", "--shape", str(n)], threads),
                 None, tol, median_only=True)
        if self.ne is not None:
            self.ne.set_num_threads(threads)
            c = {k: np.float32(v) for k, v in s.items()}

            def numexpr_step(t):
                d = dict(c, **t)
                self.ne.evaluate("b1*m + (1-b1)*g", local_dict=d, out=t["m"])
                self.ne.evaluate("b2*v + (1-b2)*g*g", local_dict=d, out=t["v"])
                self.ne.evaluate("p - lr*m/(sqrt(v)+eps)", local_dict=d, out=t["p"])
            measure("numexpr", "peer", numexpr_step)
        if threads == 1:
            c = {k: np.float32(v) for k, v in s.items()}
            tmp = np.empty(n, np.float32)

            measure("numpy", "peer", lambda t: numpy_adam(np, t, c, tmp))

    def softmax(self, threads):
        np, rows, cols = self.np, self.args.rows, self.args.cols
        source = program("softmax")
        x = self.uniform(rows, cols)
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
        y = np.empty_like(x)
        tol = row_tolerance(cols)

        def measure(runner, kind, call):
            y.fill(np.nan)
            call()
            error = float(np.max(np.abs(y.astype(np.float64) - ref) / np.abs(ref)))
            self.add("softmax", runner, kind, (rows, cols), threads, time_samples(call, self.args.samples), error, tol)

        for engine in ("c", "auto"):
            k = self.uopjit_kernel(source, engine, threads, lambda k: k(x=x, out=y))
            measure(f"python {engine}", "jit", lambda k=k: k(x=x, out=y))
        self.add("softmax", "c (uopjit run)", "jit", (rows, cols), threads,
                 self.cli("softmax", source, ["--shape", f"{rows},{cols}"], threads),
                 None, tol, median_only=True)
        if threads == 1:
            row = np.empty((rows, 1), np.float32)

            def numpy_softmax():
                np.max(x, axis=-1, keepdims=True, out=row)
                np.subtract(x, row, out=y)
                np.exp(y, out=y)
                np.sum(y, axis=-1, keepdims=True, out=row)
                np.divide(y, row, out=y)
            measure("numpy", "peer", numpy_softmax)


def median_of(rows, workload, runner, threads):
    for r in rows:
        if (r["workload"], r["runner"], r["threads"]) == (workload, runner, threads) and r["status"] == "ok":
            return r["median_ns"]
    return None


def print_table(bench, out):
    args = bench.args
    print(table_header("bench/py_bench.py", bench.uopjit,
                       f"load average {load_average_text()}, NumPy huge pages "
                       f"{'off' if args.no_huge_pages else 'as NumPy asks (madvise)'}"), file=out)
    print(f"{'workload':9} {'shape':>10} {'threads':>7}  {'runner':28} {'median ms':>10} {'min ms':>8} "
          f"{'max ms':>8} {'max error':>10}  status", file=out)
    for r in bench.rows:
        ms = [cell(r[k], ".3f", 1e6) for k in ("median_ns", "min_ns", "max_ns")]
        error = cell(r["max_error"], ".2e")
        print(f"{r['workload']:9} {r['shape']:>10} {r['threads']:>7}  {r['runner']:28} {ms[0]:>10} {ms[1]:>8} "
              f"{ms[2]:>8} {error:>10}  {r['status']}", file=out)
    for threads in args.threads:
        py, c, ne = (median_of(bench.rows, "sigmoid", r, threads)
                     for r in ("python c", "c (uopjit run)", "numexpr"))
        if py and c:
            verdict = "yes" if py <= 1.1 * c else "NO"
            print(f"sigmoid, {threads} thread(s): python c / c (uopjit run) = {py / c:.3f} "
                  f"(within 1.1x: {verdict})", file=out)
        ipy, ic = (next((r for r in bench.rows if (r["workload"], r["runner"], r["threads"]) == ("sigmoid", name, threads)
                         and r["status"] == "ok"), None)
                   for name in ("python c, interleaved", "c in process (interleaved)"))
        if ipy and ic:
            ratio = ipy["median_ns"] / ic["median_ns"]
            print(f"sigmoid, {threads} thread(s): python c / c in process (interleaved) = {ratio:.3f} median, "
                  f"{ipy['min_ns'] / ic['min_ns']:.3f} min (within 1.1x: {'yes' if ratio <= 1.1 else 'NO'})", file=out)
        if py and ne:
            verdict = "yes" if ne >= 3 * py else "NO"
            print(f"sigmoid, {threads} thread(s): numexpr / python c = {ne / py:.2f} (at least 3x: {verdict})",
                  file=out)


def main():
    parser = script_parser(__doc__)
    parser.add_argument("--workloads", default="sigmoid,adam,softmax")
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--samples", type=int, default=11)
    parser.add_argument("--log2-size", type=int, default=24, help="sigmoid and adam: 2^N elements")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "uopjit"), help="the uopjit tool")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON ('-': standard output)")
    parser.add_argument("--no-huge-pages", action="store_true",
                        help="stop NumPy asking for transparent huge pages (madvise) for its arrays, so that they "
                             "get the pages the C side's malloc'ed buffers get")
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    workloads = args.workloads.split(",")
    unknown = [w for w in workloads if w not in BYTES_PER_ELEMENT]
    if unknown or args.samples < 1 or min(args.threads) < 1:
        parser.error(f"workloads are {', '.join(BYTES_PER_ELEMENT)}; samples and threads at least 1")
    np, _ = import_optional("numpy")
    if np is None:
        print("bench/py_bench.py: no numpy in this python; nothing to compare")
        return 0
    if args.no_huge_pages:
        np.core.multiarray._set_madvise_hugepage(False)
    ne, _ = import_optional("numexpr")
    bench = Bench(args, np, import_uopjit(), ne)
    if ne is None:
        bench.notes.append("no numexpr in this python: its rows are missing")
    for workload in workloads:
        for threads in args.threads:
            getattr(bench, workload)(threads)
    return finish(bench, args, print_table,
                  lambda: {"generator": "bench/py_bench.py", "load_average": list(os.getloadavg()),
                           "numpy_huge_pages": not args.no_huge_pages,
                           "uopjit_version": bench.uopjit.library_version, "notes": bench.notes,
                           "measurements": bench.rows})


if __name__ == "__main__":
    sys.exit(main())
