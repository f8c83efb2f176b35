#!/usr/bin/env python3
"""bench/cpu_peers.py: the CPU peers of `bench`, timed in the same run.

The workloads of bench/*.uj as a Python user would write them, each in the
fastest plain form of its library:

  sigmoid    y = 1/(1+exp(-(a*x+b)))  numpy (ufuncs into preallocated arrays,
             out=), numexpr (one evaluate, out=y), torch (the eager expression)
  adam       m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
             p = p - lr*m/(sqrt(v)+eps), in place: numpy (out=), numexpr (three
             evaluates in place), torch (the in-place ops of torch.optim.Adam's
             single-tensor step: mul_, add_, addcmul_, addcdiv_)
  gelu       y = 0.5*x*(1+tanh(0.7978845608*(x+0.044715*x^3))): numpy (out=),
             numexpr (one evaluate), torch (gelu, approximate="tanh")
  sumsq      s = sum(x*x): numpy (np.dot(x, x)), numexpr (sum(x*x)), torch (dot)
  softmax    over the rows of a matrix: numpy (max, subtract, exp, sum, divide,
             out=), torch.softmax(x, -1, out=y)
  layernorm  over the rows, w and b of one row, eps 1e-5: numpy (mean,
             subtract, square, mean, sqrt, divide, multiply, add, out=),
             torch.nn.functional.layer_norm

at each size of --elements (a row program on rows x --cols, rows =
elements / cols, or the one --rows x --cols matrix when --rows is given),
on 1 and 2 threads (torch.set_num_threads, numexpr.set_num_threads; numpy's
ufuncs use one thread, so numpy has 1-thread rows only). Inputs are f32,
uniform in [0.5, 1.5); lr, b1, b2, eps are 1e-3, 0.9, 0.999, 1e-8 as bench
gives them.

Every result is checked against the same formula in float64 on the same
inputs before it is timed, as bench checks its engines: sigmoid and Adam
(one step from the initial values) by max |got - ref| / max(1, |ref|) <=
1e-5; softmax and layernorm by max |got - ref| / scale <= gamma_n + 16u with
the per-element scale of bench/rows.c (softmax |ref|; layernorm from the
row's mean |x|, mean |x - mean| and variance), n the row's length,
u = 2^-24.

A time is the median over --samples samples of the time per call, each
sample as many back-to-back calls as fill 20 ms (a slower call is a sample
of its own).

Output: a table in bench's format, or with --tsv the lines bench reads:
  note<TAB>text
  row<TAB>workload<TAB>elements<TAB>peer<TAB>threads<TAB>ns per call<TAB>max error<TAB>ok|MISMATCH
Without numpy it prints a note and exits 0; numexpr and torch are optional
(a note says which are missing). What it shares with bench/py_bench.py
(imports, timing, inputs) is in bench/peers_common.py.
"""
import argparse
import statistics
import sys

from peers_common import (SeededInputs, describe_versions, import_optional, numpy_sigmoid, row_tolerance,
                          time_samples)

BYTES_PER_ELEMENT = {"sigmoid": 8, "gelu": 8, "adam": 28, "sumsq": 4, "softmax": 8, "layernorm": 8}


class Peers(SeededInputs):
    def __init__(self, args, np):
        super().__init__(np)
        self.args = args
        self.rows = []

    def row_tolerance(self):
        return row_tolerance(self.args.cols)

    def add(self, workload, elements, peer, threads, err, tolerance, call):
        ok = err <= tolerance
        ns = statistics.median(time_samples(call, self.args.samples)) if ok else float("nan")
        self.rows.append((workload, elements, peer, threads, ns, err, ok))

    # ---- 1-D programs ----

    def gelu(self, ne, torch):
        np, n = self.np, self.args.elements
        x = self.uniform(n)
        w = x.astype(np.float64)
        ref = 0.5 * w * (1 + np.tanh(0.7978845608 * (w + 0.044715 * w * w * w)))
        y, t = np.empty_like(x), np.empty_like(x)
        c, k = np.float32(0.7978845608), np.float32(0.044715)
        # numexpr takes a bare literal as f64, which would not cast back into y
        consts = {"x": x, "c": c, "k": k, "h": np.float32(0.5), "one": np.float32(1)}

        def numpy_call():
            np.multiply(x, x, out=t)
            np.multiply(t, x, out=t)
            np.multiply(t, k, out=t)
            np.add(t, x, out=t)
            np.multiply(t, c, out=t)
            np.tanh(t, out=t)
            np.add(t, np.float32(1), out=t)
            np.multiply(t, x, out=t)
            np.multiply(t, np.float32(0.5), out=y)

        numpy_call()
        self.add("gelu", n, "numpy", 1, self.relative_to_one(y, ref), 1e-5, numpy_call)
        for threads in self.args.threads:
            if ne:
                ne.set_num_threads(threads)
                call = lambda: ne.evaluate("h*x*(one+tanh(c*(x+k*x*x*x)))", local_dict=consts, out=y)
                call()
                self.add("gelu", n, "numexpr", threads, self.relative_to_one(y, ref), 1e-5, call)
            if torch:
                torch.set_num_threads(threads)
                tx = torch.from_numpy(x)
                call = lambda: torch.nn.functional.gelu(tx, approximate="tanh")
                got = call().numpy()
                self.add("gelu", n, "torch", threads, self.relative_to_one(got, ref), 1e-5, call)

    def sumsq(self, ne, torch):
        np, n = self.np, self.args.elements
        x = self.uniform(n)
        ref = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
        tolerance = max(1e-5, n * 1e-9)

        def error(got):
            return abs(float(got) - ref) / max(1.0, abs(ref))

        call = lambda: np.dot(x, x)
        self.add("sumsq", n, "numpy", 1, error(call()), tolerance, call)
        for threads in self.args.threads:
            if ne:
                ne.set_num_threads(threads)
                call = lambda: ne.evaluate("sum(x*x)", local_dict={"x": x})
                self.add("sumsq", n, "numexpr", threads, error(call()), tolerance, call)
            if torch:
                torch.set_num_threads(threads)
                tx = torch.from_numpy(x)
                call = lambda: torch.dot(tx, tx)
                self.add("sumsq", n, "torch", threads, error(call().item()), tolerance, call)

    def sigmoid(self, ne, torch):
        np, n = self.np, self.args.elements
        x = self.uniform(n)
        a, b = np.float32(0.75), np.float32(1.25)
        ref = 1.0 / (1.0 + np.exp(-(float(a) * x.astype(np.float64) + float(b))))
        y, t = np.empty_like(x), np.empty_like(x)

        def numpy_call():
            numpy_sigmoid(np, x, a, b, t, y)

        numpy_call()
        self.add("sigmoid", n, "numpy", 1, self.relative_to_one(y, ref), 1e-5, numpy_call)
        for threads in self.args.threads:
            if ne:
                ne.set_num_threads(threads)
                call = lambda: ne.evaluate("1/(1+exp(-(a*x+b)))", local_dict={"a": a, "x": x, "b": b}, out=y)
                call()
                self.add("sigmoid", n, "numexpr", threads, self.relative_to_one(y, ref), 1e-5, call)
            if torch:
                torch.set_num_threads(threads)
                tx, fa, fb = torch.from_numpy(x), float(a), float(b)
                call = lambda: 1 / (1 + torch.exp(-(fa * tx + fb)))
                got = call().numpy()
                self.add("sigmoid", n, "torch", threads, self.relative_to_one(got, ref), 1e-5, call)

    def adam(self, ne, torch):
        np, n = self.np, self.args.elements
        b1, b2, lr, eps = np.float32(0.9), np.float32(0.999), np.float32(1e-3), np.float32(1e-8)
        m0, g, v0, p0 = self.uniform(n), self.uniform(n), self.uniform(n), self.uniform(n)
        wide = [a.astype(np.float64) for a in (m0, g, v0, p0)]
        m_ref = float(b1) * wide[0] + (1 - float(b1)) * wide[1]
        v_ref = float(b2) * wide[2] + (1 - float(b2)) * wide[1] * wide[1]
        p_ref = wide[3] - float(lr) * m_ref / (np.sqrt(v_ref) + float(eps))

        def check(m, v, p):
            return max(self.relative_to_one(m, m_ref), self.relative_to_one(v, v_ref), self.relative_to_one(p, p_ref))

        m, v, p, t = m0.copy(), v0.copy(), p0.copy(), np.empty_like(m0)

        def numpy_call():
            np.multiply(m, b1, out=m)
            np.multiply(g, np.float32(1) - b1, out=t)
            np.add(m, t, out=m)
            np.multiply(v, b2, out=v)
            np.multiply(g, g, out=t)
            np.multiply(t, np.float32(1) - b2, out=t)
            np.add(v, t, out=v)
            np.sqrt(v, out=t)
            np.add(t, eps, out=t)
            np.divide(m, t, out=t)
            np.multiply(t, lr, out=t)
            np.subtract(p, t, out=p)

        numpy_call()
        self.add("adam", n, "numpy", 1, check(m, v, p), 1e-5, numpy_call)
        scalars = {"b1": b1, "b2": b2, "lr": lr, "eps": eps}
        for threads in self.args.threads:
            if ne:
                ne.set_num_threads(threads)
                m, v, p = m0.copy(), v0.copy(), p0.copy()

                def numexpr_call():
                    ne.evaluate("b1*m + (1-b1)*g", local_dict=dict(scalars, m=m, g=g), out=m)
                    ne.evaluate("b2*v + (1-b2)*g*g", local_dict=dict(scalars, v=v, g=g), out=v)
                    ne.evaluate("p - lr*m/(sqrt(v)+eps)", local_dict=dict(scalars, p=p, m=m, v=v), out=p)

                numexpr_call()
                self.add("adam", n, "numexpr", threads, check(m, v, p), 1e-5, numexpr_call)
            if torch:
                torch.set_num_threads(threads)
                m, v, p = m0.copy(), v0.copy(), p0.copy()
                tm, tv, tp, tg = (torch.from_numpy(a) for a in (m, v, p, g))
                fb1, fb2, flr, feps = float(b1), float(b2), float(lr), float(eps)

                def torch_call():
                    tm.mul_(fb1).add_(tg, alpha=1 - fb1)
                    tv.mul_(fb2).addcmul_(tg, tg, value=1 - fb2)
                    tp.addcdiv_(tm, tv.sqrt().add_(feps), value=-flr)

                torch_call()
                self.add("adam", n, "torch", threads, check(m, v, p), 1e-5, torch_call)

    # ---- row programs ----

    def softmax(self, torch):
        np, rows, cols = self.np, self.args.rows, self.args.cols
        x = self.uniform(rows, cols)
        wide = x.astype(np.float64)
        e = np.exp(wide - wide.max(axis=1, keepdims=True))
        ref = e / e.sum(axis=1, keepdims=True)

        def error(got):
            return float(np.max(np.abs(got.astype(np.float64) - ref) / np.abs(ref)))

        y, top, total = np.empty_like(x), np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)

        def numpy_call():
            np.max(x, axis=1, keepdims=True, out=top)
            np.subtract(x, top, out=y)
            np.exp(y, out=y)
            np.sum(y, axis=1, keepdims=True, out=total)
            np.divide(y, total, out=y)

        numpy_call()
        self.add("softmax", rows * cols, "numpy", 1, error(y), self.row_tolerance(), numpy_call)
        if torch:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            for threads in self.args.threads:
                torch.set_num_threads(threads)
                call = lambda: torch.softmax(tx, -1, out=ty)
                y.fill(np.nan)
                call()
                self.add("softmax", rows * cols, "torch", threads, error(y), self.row_tolerance(), call)

    def layernorm(self, torch):
        np, rows, cols = self.np, self.args.rows, self.args.cols
        x, w, b = self.uniform(rows, cols), self.uniform(cols), self.uniform(cols)
        xw, ww, bw = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
        mean = xw.mean(axis=1, keepdims=True)
        d = xw - mean
        var = (d * d).mean(axis=1, keepdims=True) + 1e-5
        r = 1 / np.sqrt(var)
        ref = d * r * ww + bw
        # the scale of bench/rows.c's layernorm_error_scale
        mean_abs = np.abs(xw).mean(axis=1, keepdims=True)
        mean_dev = np.abs(d).mean(axis=1, keepdims=True)
        scale = np.abs(ww) * r * (mean_abs + np.abs(d) * (0.5 + mean_abs * mean_dev / var)) + np.abs(ww * d * r) + np.abs(bw)
        del xw, d

        def error(got):
            return float(np.max(np.abs(got.astype(np.float64) - ref) / scale))

        y, dev = np.empty_like(x), np.empty_like(x)
        mu, spread = np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)

        def numpy_call():
            np.mean(x, axis=1, keepdims=True, out=mu)
            np.subtract(x, mu, out=dev)
            np.multiply(dev, dev, out=y)
            np.mean(y, axis=1, keepdims=True, out=spread)
            np.add(spread, np.float32(1e-5), out=spread)
            np.sqrt(spread, out=spread)
            np.divide(dev, spread, out=y)
            np.multiply(y, w, out=y)
            np.add(y, b, out=y)

        numpy_call()
        self.add("layernorm", rows * cols, "numpy", 1, error(y), self.row_tolerance(), numpy_call)
        if torch:
            tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
            for threads in self.args.threads:
                torch.set_num_threads(threads)
                call = lambda: torch.nn.functional.layer_norm(tx, (cols,), tw, tb, 1e-5)
                got = call().numpy()
                self.add("layernorm", rows * cols, "torch", threads, error(got), self.row_tolerance(), call)


def print_table(rows):
    print(f"{'program':<9} {'elements':>9} {'engine':<8} {'thr':>3} {'check':<11} {'max err':>8} {'ns/elem':>9} {'GB/s':>8}")
    for workload, elements, peer, threads, ns, err, ok in rows:
        timed = ok and ns == ns
        per = f"{ns / elements:9.3f}" if timed else f"{'-':>9}"
        gbs = f"{BYTES_PER_ELEMENT[workload] * elements / ns:8.2f}" if timed else f"{'-':>8}"
        print(f"{workload:<9} {elements:>9} {peer:<8} {threads:>3} {'ok' if ok else 'MISMATCH':<11} {err:8.1e} {per} {gbs}")


def main():
    parser = argparse.ArgumentParser(description="numpy, numexpr and torch on bench's workloads")
    parser.add_argument("--tsv", action="store_true", help="the lines bench reads instead of a table")
    parser.add_argument("--elements", default=str(1 << 24), help="sizes, comma-separated (default 2^24)")
    parser.add_argument("--rows", type=int, default=None, help="the row programs' rows (default: elements / cols)")
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--workloads", default="sigmoid,gelu,adam,sumsq,softmax,layernorm")
    args = parser.parse_args()
    sizes = [int(e) for e in args.elements.split(",") if e]
    args.threads = [int(t) for t in args.threads.split(",") if t]
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in BYTES_PER_ELEMENT]
    if unknown or not sizes or min(sizes) < 1 or (args.rows is not None and args.rows < 1) or args.cols < 1 or args.samples < 1 or not args.threads:
        parser.error(f"unknown workloads {unknown}" if unknown else "sizes, samples and threads must be >= 1")

    def note(text):
        print(f"note\t{text}" if args.tsv else text, flush=True)

    np, error = import_optional("numpy")
    if np is None:
        note(f"peers skipped: {sys.executable} cannot import numpy ({error})")
        return 0
    ne, _ = import_optional("numexpr")
    torch, _ = import_optional("torch")
    note(describe_versions([("numpy", np), ("numexpr", ne), ("torch", torch)]))

    peers = Peers(args, np)
    fixed_rows = args.rows
    for size in sizes:
        args.elements = size
        args.rows = fixed_rows if fixed_rows is not None else size // args.cols
        for workload in workloads:
            if workload in ("softmax", "layernorm"):
                if args.rows >= 1 and (fixed_rows is None or size == sizes[-1]):
                    getattr(peers, workload)(torch)
            else:
                getattr(peers, workload)(ne, torch)
    if args.tsv:
        for workload, elements, peer, threads, ns, err, ok in peers.rows:
            print(f"row\t{workload}\t{elements}\t{peer}\t{threads}\t{ns:.1f}\t{err:.3e}\t{'ok' if ok else 'MISMATCH'}")
    else:
        print_table(peers.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
