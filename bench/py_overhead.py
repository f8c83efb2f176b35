#!/usr/bin/env python3
"""bench/py_overhead.py: the Python call overhead of uopjit.Kernel and
uopjit.evaluate on small arrays, against numexpr and NumPy, in one process.

At 1,000 elements uj_program_run takes one to two microseconds from C, its
dispatch included (the row "uj_program_run from C"), so what a call costs is
mostly what Python does around it: binding the arguments, describing the
arrays to the library (uj_tensor_t structs), inferring and allocating
outputs, the ctypes call. This script times exactly that, and the floors
under it.

Workloads, f32 inputs uniform in [0.5, 1.5) (--elements, default 1000):

  sigmoid  y = 1/(1+exp(-(a*x+b))), a = 0.5, b = 0.1
  adam     m, v, p updated in place from g: m = b1*m + (1-b1)*g;
           v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps), lr, b1, b2,
           eps = 1e-3, 0.9, 0.999, 1e-8 (bench/py_bench.py's adam)

Runners on the CPU:

  uopjit Kernel, out=         k(x=x, a=0.5, b=0.1, out=y); adam: out= the
                              inputs m, v, p (in place)
  uopjit Kernel, new output   the call allocates its output(s)
  uopjit evaluate, out=       uopjit.evaluate(source, x=x, ..., out=y)
  uopjit evaluate, new output uopjit.evaluate(source, x=x, ...)
  uj_program_run via ctypes   the library's entry point called straight from
                              a Python loop on structs and arguments built
                              once (the same program, context and engine as
                              the Kernel rows), through a ctypes function
                              without argtypes, as the package calls it: the
                              floor of a ctypes binding
  ... with argtypes           the same through the package's declared
                              function (lib.uj_program_run, argtypes set):
                              what converting the arguments costs
  uj_program_run from C       sigmoid only: bench/py_bench_driver.c (as
                              bench/py_bench.py compiles it: cc -O2) times
                              each uj_program_run with clock_gettime, with no
                              Python around it: the library's own dispatch
                              (engine c; omitted without a C compiler)
  numexpr, out=               numexpr.evaluate(expr, local_dict=..., out=y);
                              adam: three evaluates in place
  numexpr, new output         the same, allocating
  numpy ufuncs, out=          one ufunc per operation into preallocated
                              arrays (bench/peers_common.numpy_sigmoid and
                              py_bench.py's numpy Adam step)

The Kernels run on --engine (default "auto") and --threads (default: the
package's, UOPJIT_THREADS else every core; numexpr is then left at its own
default), and are warmed until their C kernel serves (auto tiers from MIR to
C), as in bench/py_bench.py.

CUDA: when torch imports and torch.cuda.is_available(), the same workloads on
CUDA tensors (uopjit Kernel with out= and, sigmoid, allocating; uopjit
evaluate with out=) against torch eager ops (with out= and, sigmoid,
allocating). A uopjit GPU call is
synchronous (it waits for the producers' streams, then for its own kernels),
so every torch call is followed by torch.cuda.synchronize() to compare like
with like. Without torch or a GPU this part is skipped with a note.

Every runner's result is checked in float64 before it is timed: max |got -
ref| / max(1, |ref|) <= 1e-5 (Adam: one step from the same start).

Method: a time is the median over --samples samples (default 15) of the time
per call, each sample as many back-to-back calls as fill 20 ms
(bench/peers_common.time_samples). The table gives each median in
microseconds and its ratio to numexpr (the numexpr row with the same output
mode: out= rows against "numexpr, out=", allocating rows against "numexpr,
new output") and to "numpy ufuncs, out=".

--json FILE ('-': standard output) writes {"generator", "load_average",
"uopjit_version", "elements", "notes", "measurements": [row, ...]}, each row
{workload, device, runner, elements, dtype, threads, status (ok | mismatch |
failed), samples, samples_ns, median_ns, min_ns, max_ns, max_error,
vs_numexpr, vs_numpy}.

Needs numpy and the uopjit package (importable, or python/ of this repository
with build/libuopjit.so: both are found from this file's place); numexpr and
torch are optional (a note says when they are missing).
"""
import ctypes
import os
import statistics
import sys
import time

from peers_common import (SeededInputs, cell, finish, import_optional, import_uopjit, load_average_text,
                          load_c_driver, numpy_adam, numpy_sigmoid, script_parser, table_header, time_samples)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIGMOID = "y = 1/(1+exp(-(a*x+b)))"
SIGMOID_EXPR = "1/(1+exp(-(a*x+b)))"
ADAM = "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)"
SIGMOID_SCALARS = {"a": 0.5, "b": 0.1}
ADAM_SCALARS = {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8}
TOLERANCE = 1e-5
OUT_NUMEXPR, NEW_NUMEXPR, NUMPY = "numexpr, out=", "numexpr, new output", "numpy ufuncs, out="
TORCH_OUT, TORCH_NEW = "torch eager, out=", "torch eager, new output"


class Bench(SeededInputs):
    def __init__(self, args, np, uopjit, ne):
        super().__init__(np)
        self.args, self.uopjit, self.ne = args, uopjit, ne
        self.rows, self.notes = [], []

    def add(self, workload, device, runner, per_call, error):
        ok = per_call is not None and error is not None and error <= TOLERANCE
        timed = per_call or []
        self.rows.append({
            "workload": workload, "device": device, "runner": runner, "elements": self.args.elements,
            "dtype": "f32", "threads": self.args.threads,
            "status": "ok" if ok else ("failed" if per_call is None else "mismatch"),
            "samples": len(timed), "samples_ns": [round(t) for t in timed],
            "median_ns": statistics.median(timed) if timed else None,
            "min_ns": min(timed) if timed else None, "max_ns": max(timed) if timed else None,
            "max_error": error, "vs_numexpr": None, "vs_numpy": None})

    def measure(self, workload, device, runner, call, check):
        """Times call after check() (run once, the max error of its result)."""
        try:
            error = check()
        except Exception as e:  # a runner that fails is a row that says so
            self.notes.append(f"{workload} {device} {runner}: {type(e).__name__}: {e}")
            self.add(workload, device, runner, None, None)
            return
        self.add(workload, device, runner, time_samples(call, self.args.samples), error)

    def kernel(self, source, call):
        """A Kernel on --engine and --threads, warmed until its C kernel serves."""
        k = self.uopjit.Kernel(source, engine=self.args.engine, threads=self.args.threads)
        self.warm(k, call)
        return k

    def warm(self, k, call):
        deadline = time.monotonic() + 120
        while True:
            call(k)
            info = k.last_run()
            if info["engine"] == "c" or self.args.engine not in ("auto", "c") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if self.args.engine in ("auto", "c") and info["engine"] != "c":
            self.notes.append(f"{k.source!r} still on {info['engine']} after 120 s ({info})")

    def evaluate_kernel(self, source, call):
        """Warms evaluate's own cached kernel for source (the package's
        per-process cache, uopjit._kernel.cached_kernel)."""
        from uopjit import _kernel
        call()
        self.warm(_kernel.cached_kernel(source, self.args.engine, self.args.threads), lambda k: call())

    def ctypes_floor(self, k, inputs, outputs, argtypes=False):
        """A call of uj_program_run through ctypes on structs built once for
        inputs and outputs (NumPy arrays, in program order), on k's program
        and this thread's context for k's setting: no Python but the call.
        argtypes: through the package's declared function, else through one
        without argtypes (arguments as ctypes objects and ints)."""
        from uopjit import _context, _lib
        keep = []

        def tensor(a):
            assert a.flags.c_contiguous and a.dtype == self.np.float32  # (ascontiguousarray would make 0-d 1-d)
            keep.append(a)
            return _lib.Tensor(a.ctypes.data, _lib.DTYPES["f32"], _lib.CPU, a.ndim, _lib.Dims(*a.shape))

        ins = _lib.tensor_pointers([tensor(a) for a in inputs])
        outs = _lib.tensor_pointers([tensor(a) for a in outputs])
        ctx = ctypes.c_void_p(_context.get(k._engine, k._threads).handle)
        if argtypes:
            run = _lib.lib.uj_program_run
        else:
            run = _lib.lib["uj_program_run"]  # a function object of its own: no argtypes
            run.restype = ctypes.c_int
        args = (ctx, k._program.handle, 0, ins, len(inputs), None, 0, outs, len(outputs))

        def call():
            status = run(*args)
            if status:
                _lib.check(status)
        call.keep = keep
        return call

    def c_driver(self):
        """bench/py_bench_driver.c compiled (cc -O2) against the library the
        package loaded, or None with a note."""
        if hasattr(self, "_driver"):
            return self._driver
        self._driver, self._driver_dir, why = load_c_driver(self.uopjit.library_path, "py_overhead_driver")
        if why:
            self.notes.append("uj_program_run from C skipped: " + why)
        return self._driver

    def c_sigmoid(self, x, y, ref):
        """Row "uj_program_run from C": per-call times of the driver, each
        sample the median of as many calls as fill about 20 ms."""
        d = self.c_driver()
        if d is None:
            return
        threads = self.args.threads if self.args.threads is not None else (os.cpu_count() or 1)
        handle = d.driver_open(SIGMOID.encode(), threads)
        if not handle:
            self.notes.append("uj_program_run from C: could not open the program on the C engine")
            return
        try:
            a, b = SIGMOID_SCALARS["a"], SIGMOID_SCALARS["b"]
            calls = 4096
            per_call = (ctypes.c_int64 * calls)()
            y.fill(self.np.nan)
            for _ in range(3):  # the C engine compiles on the first call
                if d.driver_run(handle, x.ctypes.data, a, b, y.ctypes.data, x.size, 1, per_call) < 0:
                    self.notes.append("uj_program_run from C: uj_program_run failed")
                    return
            error = self.relative_to_one(y, ref)
            samples = []
            for _ in range(self.args.samples):
                start = time.perf_counter_ns()
                d.driver_run(handle, x.ctypes.data, a, b, y.ctypes.data, x.size, calls, per_call)
                samples.append(statistics.median(per_call))
                calls = max(16, min(calls, int(calls * 20e6 / max(time.perf_counter_ns() - start, 1))))
        finally:
            d.driver_close(handle)
        self.add("sigmoid", "cpu", "uj_program_run from C", samples, error)

    # ---- CPU workloads -----------------------------------------------------------

    def sigmoid(self):
        np, uopjit, n = self.np, self.uopjit, self.args.elements
        x, y = self.uniform(n), np.empty(n, np.float32)
        a, b = SIGMOID_SCALARS["a"], SIGMOID_SCALARS["b"]
        ref = 1 / (1 + np.exp(-(a * x.astype(np.float64) + b)))
        held = {}

        def into_y(call):
            def check():
                y.fill(np.nan)
                call()
                return self.relative_to_one(y, ref)
            return check

        def fresh(call):
            def run():
                held["y"] = call()

            def check():
                run()
                return self.relative_to_one(held["y"], ref)
            return run, check

        k = self.kernel(SIGMOID, lambda k: k(x=x, a=a, b=b, out=y))
        call = lambda: k(x=x, a=a, b=b, out=y)  # noqa: E731
        self.measure("sigmoid", "cpu", "uopjit Kernel, out=", call, into_y(call))
        self.measure("sigmoid", "cpu", "uopjit Kernel, new output", *fresh(lambda: k(x=x, a=a, b=b)))
        engine, threads = self.args.engine, self.args.threads
        self.evaluate_kernel(SIGMOID, lambda: uopjit.evaluate(SIGMOID, x=x, a=a, b=b, out=y,
                                                              engine=engine, threads=threads))
        call = lambda: uopjit.evaluate(SIGMOID, x=x, a=a, b=b, out=y, engine=engine, threads=threads)  # noqa: E731
        self.measure("sigmoid", "cpu", "uopjit evaluate, out=", call, into_y(call))
        self.measure("sigmoid", "cpu", "uopjit evaluate, new output",
                     *fresh(lambda: uopjit.evaluate(SIGMOID, x=x, a=a, b=b, engine=engine, threads=threads)))
        a32, b32 = np.array(a, np.float32), np.array(b, np.float32)
        inputs = {"x": x, "a": a32, "b": b32}
        for argtypes, runner in ((False, "uj_program_run via ctypes"), (True, "... with argtypes")):
            call = self.ctypes_floor(k, [inputs[name] for name in k.inputs], [y], argtypes)
            self.measure("sigmoid", "cpu", runner, call, into_y(call))
        self.c_sigmoid(x, y, ref)
        if self.ne is not None:
            local = {"a": np.float32(a), "b": np.float32(b), "x": x}
            call = lambda: self.ne.evaluate(SIGMOID_EXPR, local_dict=local, out=y)  # noqa: E731
            self.measure("sigmoid", "cpu", OUT_NUMEXPR, call, into_y(call))
            self.measure("sigmoid", "cpu", NEW_NUMEXPR,
                         *fresh(lambda: self.ne.evaluate(SIGMOID_EXPR, local_dict=local)))
        t = np.empty_like(x)
        call = lambda: numpy_sigmoid(np, x, np.float32(a), np.float32(b), t, y)  # noqa: E731
        self.measure("sigmoid", "cpu", NUMPY, call, into_y(call))

    def adam_reference(self, start):
        np, s = self.np, ADAM_SCALARS
        g64 = start["g"].astype(np.float64)
        m = s["b1"] * start["m"] + (1 - s["b1"]) * g64
        v = s["b2"] * start["v"] + (1 - s["b2"]) * g64 * g64
        p = start["p"] - s["lr"] * m / (np.sqrt(v) + s["eps"])
        return {"m": m, "v": v, "p": p}

    def adam(self):
        np, uopjit, n = self.np, self.uopjit, self.args.elements
        start = {name: self.uniform(n) for name in ("p", "g", "m", "v")}
        ref = self.adam_reference(start)
        s = ADAM_SCALARS
        t = {k: v.copy() for k, v in start.items()}

        def in_place(step):
            """(call, check) for a step updating the dict t in place."""
            def check():
                t.update({k: v.copy() for k, v in start.items()})
                step()
                return max(self.relative_to_one(t[k], ref[k]) for k in ("m", "v", "p"))
            return step, check

        def fresh(step):
            """(call, check) for a step returning new m, v, p."""
            held = {}

            def run():
                held["r"] = step()

            def check():
                t.update({k: v.copy() for k, v in start.items()})
                run()
                return max(self.relative_to_one(got, ref[k]) for k, got in zip(("m", "v", "p"), held["r"]))
            return run, check

        def out():
            return {"p": t["p"], "m": t["m"], "v": t["v"]}

        k = self.kernel(ADAM, lambda k: k(**t, **s, out=out()))
        self.measure("adam", "cpu", "uopjit Kernel, out=", *in_place(lambda: k(**t, **s, out=out())))
        self.measure("adam", "cpu", "uopjit Kernel, new output", *fresh(lambda: k(**t, **s)))
        engine, threads = self.args.engine, self.args.threads
        step = lambda: uopjit.evaluate(ADAM, **t, **s, out=out(), engine=engine, threads=threads)  # noqa: E731
        self.evaluate_kernel(ADAM, step)
        self.measure("adam", "cpu", "uopjit evaluate, out=", *in_place(step))
        scalars = {k: np.array(v, np.float32) for k, v in s.items()}
        for argtypes, runner in ((False, "uj_program_run via ctypes"), (True, "... with argtypes")):
            floor = {}

            def floor_step(floor=floor, argtypes=argtypes):
                if "call" not in floor:  # t's arrays are the ones check() just made
                    ins = [t[name] if name in t else scalars[name] for name in k.inputs]
                    floor["call"] = self.ctypes_floor(k, ins, [t[name] for name in k.outputs], argtypes)
                floor["call"]()
            self.measure("adam", "cpu", runner, *in_place(floor_step))
        c = {k: np.float32(v) for k, v in s.items()}
        if self.ne is not None:
            ne = self.ne

            def numexpr_step():
                d = dict(c, **t)
                ne.evaluate("b1*m + (1-b1)*g", local_dict=d, out=t["m"])
                ne.evaluate("b2*v + (1-b2)*g*g", local_dict=d, out=t["v"])
                ne.evaluate("p - lr*m/(sqrt(v)+eps)", local_dict=d, out=t["p"])
            self.measure("adam", "cpu", OUT_NUMEXPR, *in_place(numexpr_step))

            def numexpr_new():
                d = dict(c, **t)
                d["m"] = m = ne.evaluate("b1*m + (1-b1)*g", local_dict=d)
                d["v"] = v = ne.evaluate("b2*v + (1-b2)*g*g", local_dict=d)
                return m, v, ne.evaluate("p - lr*m/(sqrt(v)+eps)", local_dict=d)
            self.measure("adam", "cpu", NEW_NUMEXPR, *fresh(numexpr_new))
        tmp = np.empty(n, np.float32)

        self.measure("adam", "cpu", NUMPY, *in_place(lambda: numpy_adam(np, t, c, tmp)))

    # ---- CUDA workloads ------------------------------------------------------------

    def cuda(self, torch):
        """Both workloads on CUDA tensors, uopjit against torch eager ops."""
        np, uopjit, n = self.np, self.uopjit, self.args.elements
        sync = torch.cuda.synchronize
        a, b = SIGMOID_SCALARS["a"], SIGMOID_SCALARS["b"]
        xh = self.uniform(n)
        ref = 1 / (1 + np.exp(-(a * xh.astype(np.float64) + b)))
        x, y, tmp = torch.from_numpy(xh).cuda(), torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        held = {}

        def error_of(result):
            return self.relative_to_one(result.cpu().numpy(), ref)

        def into_y(call):
            def check():
                y.fill_(float("nan"))
                call()
                return error_of(y)
            return call, check

        def fresh(call):
            def run():
                held["y"] = call()

            def check():
                run()
                return error_of(held["y"])
            return run, check

        k = uopjit.Kernel(SIGMOID, engine="cuda")
        k(x=x, a=a, b=b, out=y)
        self.measure("sigmoid", "cuda", "uopjit Kernel, out=", *into_y(lambda: k(x=x, a=a, b=b, out=y)))
        self.measure("sigmoid", "cuda", "uopjit Kernel, new output", *fresh(lambda: k(x=x, a=a, b=b)))
        self.measure("sigmoid", "cuda", "uopjit evaluate, out=",
                     *into_y(lambda: uopjit.evaluate(SIGMOID, x=x, a=a, b=b, out=y, engine="cuda")))

        def torch_out():
            torch.mul(x, a, out=tmp)
            tmp.add_(b).neg_().exp_().add_(1)
            torch.reciprocal(tmp, out=y)
            sync()

        def torch_new():
            r = 1 / (1 + torch.exp(-(a * x + b)))
            sync()
            return r
        self.measure("sigmoid", "cuda", TORCH_OUT, *into_y(torch_out))
        self.measure("sigmoid", "cuda", TORCH_NEW, *fresh(torch_new))

        start = {name: self.uniform(n) for name in ("p", "g", "m", "v")}
        ref_adam = self.adam_reference(start)
        s = ADAM_SCALARS
        t = {k: torch.from_numpy(v).cuda() for k, v in start.items()}

        def in_place(step):
            def check():
                for name, v in start.items():
                    t[name].copy_(torch.from_numpy(v))
                step()
                return max(self.relative_to_one(t[k].cpu().numpy(), ref_adam[k]) for k in ("m", "v", "p"))
            return step, check

        ka = uopjit.Kernel(ADAM, engine="cuda")
        out = {"p": t["p"], "m": t["m"], "v": t["v"]}
        self.measure("adam", "cuda", "uopjit Kernel, out=", *in_place(lambda: ka(**t, **s, out=out)))
        self.measure("adam", "cuda", "uopjit evaluate, out=",
                     *in_place(lambda: uopjit.evaluate(ADAM, **t, **s, out=out, engine="cuda")))

        def torch_adam():
            m, v, p, g = t["m"], t["v"], t["p"], t["g"]
            m.mul_(s["b1"]).add_(g, alpha=1 - s["b1"])
            v.mul_(s["b2"]).addcmul_(g, g, value=1 - s["b2"])
            torch.sqrt(v, out=tmp)
            p.addcdiv_(m, tmp.add_(s["eps"]), value=-s["lr"])
            sync()
        self.measure("adam", "cuda", TORCH_OUT, *in_place(torch_adam))


def ratios(rows):
    """Fills vs_numexpr and vs_numpy: each row's median over the matching peer's."""
    def median(workload, device, runner):
        for r in rows:
            if (r["workload"], r["device"], r["runner"]) == (workload, device, runner) and r["status"] == "ok":
                return r["median_ns"]
        return None
    for r in rows:
        if r["median_ns"] is None:
            continue
        fresh = "new output" in r["runner"]
        if r["device"] == "cpu":
            peer, base = median(r["workload"], "cpu", NEW_NUMEXPR if fresh else OUT_NUMEXPR), \
                median(r["workload"], "cpu", NUMPY)
        else:
            peer, base = None, median(r["workload"], "cuda", TORCH_NEW if fresh else TORCH_OUT)
        r["vs_numexpr"] = r["median_ns"] / peer if peer else None
        r["vs_numpy"] = r["median_ns"] / base if base else None


def print_table(bench, out):
    args = bench.args
    print(table_header("bench/py_overhead.py", bench.uopjit,
                       f"{args.elements} f32 elements, engine {args.engine}, threads "
                       f"{args.threads if args.threads is not None else 'default'}, {args.samples} samples, "
                       f"load average {load_average_text()}"), file=out)
    print(f"{'workload':8} {'device':6} {'runner':28} {'median us':>10} {'min us':>8} {'max us':>8} "
          f"{'/numexpr':>9} {'/numpy':>8} {'max error':>10}  status", file=out)
    for r in bench.rows:
        us = [cell(r[k], ".2f", 1e3) for k in ("median_ns", "min_ns", "max_ns")]
        ne, base, error = cell(r["vs_numexpr"], ".2f"), cell(r["vs_numpy"], ".2f"), cell(r["max_error"], ".2e")
        print(f"{r['workload']:8} {r['device']:6} {r['runner']:28} {us[0]:>10} {us[1]:>8} {us[2]:>8} "
              f"{ne:>9} {base:>8} {error:>10}  {r['status']}", file=out)
    print("/numexpr: median over numexpr's with the same output mode; /numpy: over numpy ufuncs, out= "
          "(cuda rows: /numpy is over torch eager with the same output mode)", file=out)


def main():
    parser = script_parser(__doc__)
    parser.add_argument("--workloads", default="sigmoid,adam")
    parser.add_argument("--elements", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads of the Kernels (and numexpr)")
    parser.add_argument("--no-cuda", action="store_true", help="skip the CUDA part even where it could run")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON ('-': standard output)")
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    if any(w not in ("sigmoid", "adam") for w in workloads) or args.samples < 1 or args.elements < 1:
        parser.error("workloads are sigmoid and adam; samples and elements at least 1")
    np, _ = import_optional("numpy")
    if np is None:
        print("bench/py_overhead.py: no numpy in this python; nothing to compare")
        return 0
    ne, _ = import_optional("numexpr")
    bench = Bench(args, np, import_uopjit(), ne)
    if ne is None:
        bench.notes.append("no numexpr in this python: its rows are missing")
    elif args.threads is not None:
        ne.set_num_threads(args.threads)
    for workload in workloads:
        getattr(bench, workload)()
    torch, why = import_optional("torch")
    if args.no_cuda:
        bench.notes.append("CUDA part skipped (--no-cuda)")
    elif torch is None:
        bench.notes.append(f"CUDA part skipped: torch is not importable ({why})")
    elif not torch.cuda.is_available():
        bench.notes.append("CUDA part skipped: torch.cuda.is_available() is False (no GPU or no CUDA build)")
    elif not bench.uopjit.engine_available("cuda"):
        bench.notes.append("CUDA part skipped: this libuopjit has no CUDA engine on this machine")
    else:
        bench.cuda(torch)
    ratios(bench.rows)
    return finish(bench, args, print_table,
                  lambda: {"generator": "bench/py_overhead.py", "load_average": list(os.getloadavg()),
                           "uopjit_version": bench.uopjit.library_version, "elements": args.elements,
                           "notes": bench.notes, "measurements": bench.rows})


if __name__ == "__main__":
    sys.exit(main())
