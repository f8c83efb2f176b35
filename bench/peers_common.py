"""bench/peers_common.py: what bench/cpu_peers.py, bench/py_bench.py and bench/py_overhead.py share
so that their peer rows are measured alike.

  import_optional    a peer library (numpy, numexpr, torch) when this python
                     can import it, else None and the reason
  describe_versions  the libraries' versions and python's, and which are
                     missing, for the note that heads a run
  time_samples       per-call times: each sample as many back-to-back calls
                     as fill 20 ms (a slower call is a sample of its own)
  numpy_sigmoid      NumPy's sigmoid peer, ufuncs into preallocated arrays
  row_tolerance      the error bound of a row program (softmax, layernorm)
                     over rows of n elements: gamma_n + 16u
  SeededInputs       f32 inputs uniform in [0.5, 1.5) from one fixed seed,
                     and the error of a result against a float64 reference
                     relative to max(1, |ref|)
  import_uopjit      the installed package, else this tree's python/ and build
  load_c_driver      bench/py_bench_driver.c compiled against the library,
                     for rows of uj_program_run timed from C
  script_parser,     what py_bench.py and py_overhead.py share around their
  table_header,      measurements: the options' parser, the table's header,
  load_average_text, cells and notes, the JSON report and the exit status
  cell, finish

Both scripts run from bench/ as scripts, so this module is found beside
them.
"""
import argparse
import ctypes
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The unit roundoff of f32.
U = 2.0 ** -24
# One seed for every run, so that runs time and check the same data.
INPUT_SEED = 20240607


def import_optional(name):
    """(module, None), or (None, the ImportError) when it cannot be imported."""
    try:
        return importlib.import_module(name), None
    except ImportError as e:
        return None, e


def describe_versions(modules):
    """modules: (name, module or None) pairs, e.g. "numpy 1.24.2, torch 2.1
    (python 3.11.2); not importable: numexpr"."""
    versions = [f"{name} {module.__version__}" for name, module in modules if module is not None]
    missing = [name for name, module in modules if module is None]
    return (f"{', '.join(versions)} (python {sys.version.split()[0]})"
            + (f"; not importable: {', '.join(missing)}" if missing else ""))


def numpy_sigmoid(np, x, a, b, t, y):
    """y = 1/(1+exp(-(a*x+b))) as a NumPy user writes it for speed: one ufunc
    per operation, each into a preallocated array (t, scratch of x's shape),
    so that no call allocates. a and b are np.float32, keeping it in f32."""
    np.multiply(x, a, out=t)
    np.add(t, b, out=t)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.add(t, np.float32(1), out=t)
    np.divide(np.float32(1), t, out=y)


def numpy_adam(np, t, c, tmp):
    """One Adam step in place on t["p"], t["m"], t["v"] from t["g"], as a
    NumPy user writes it for speed: one ufunc per operation, into tmp
    (scratch of p's shape) or the state itself. c holds lr, b1, b2 and eps
    as np.float32, keeping it in f32."""
    p, g, m, v = t["p"], t["g"], t["m"], t["v"]
    np.multiply(m, c["b1"], out=m)
    np.multiply(g, np.float32(1) - c["b1"], out=tmp)
    np.add(m, tmp, out=m)
    np.multiply(v, c["b2"], out=v)
    np.multiply(g, g, out=tmp)
    np.multiply(tmp, np.float32(1) - c["b2"], out=tmp)
    np.add(v, tmp, out=v)
    np.sqrt(v, out=tmp)
    np.add(tmp, c["eps"], out=tmp)
    np.divide(m, tmp, out=tmp)
    np.multiply(tmp, c["lr"], out=tmp)
    np.subtract(p, tmp, out=p)


def write_json(path, report):
    """report as indented JSON to the file at path, or to standard output
    for "-" (the scripts' --json)."""
    if path == "-":
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)


def script_parser(doc):
    """An option parser described by the first paragraph of a script's
    docstring doc, kept as written."""
    return argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def cell(value, spec, scale=1):
    """A table's cell: value / scale formatted by spec, "-" for None."""
    return "-" if value is None else format(value / scale if scale != 1 else value, spec)


def table_header(script, uopjit, details):
    """The line that heads a script's table: the script, the library's
    version and path, then details of the run."""
    return f"{script}: uopjit {uopjit.library_version} ({uopjit.library_path}), {details}"


def load_average_text():
    """os.getloadavg() as "0.52 0.61 0.70", for the header of a table."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def finish(bench, args, print_table, report):
    """The end of a run: print_table(bench, out) on standard output (on
    standard error when the JSON goes there), then bench's notes; report()
    written as JSON where --json asks. The exit status: 1 when a row is not
    ok."""
    out = sys.stderr if args.json == "-" else sys.stdout
    print_table(bench, out)
    for note in bench.notes:
        print("note:", note, file=out)
    if args.json:
        write_json(args.json, report())
    return 1 if any(r["status"] != "ok" for r in bench.rows) else 0


def row_tolerance(n):
    """gamma_n + 16u, u the unit roundoff of f32: what a sum over a row of n
    elements may lose, with room for the few operations around it."""
    return n * U / (1 - n * U) + 16 * U


def time_samples(call, samples, min_sample_ns=20e6):
    """Per-call times in ns, one per sample. The first call, timed alone,
    sets how many calls make a sample."""
    start = time.perf_counter_ns()
    call()
    one = time.perf_counter_ns() - start
    calls = 1 if one >= min_sample_ns else int(-(-min_sample_ns // max(one, 1)))
    per_call = [one] if calls == 1 else []
    while len(per_call) < samples:
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        per_call.append((time.perf_counter_ns() - start) / calls)
    return per_call


class SeededInputs:
    """The inputs of a run and how a result is checked; np is numpy."""

    def __init__(self, np):
        self.np = np
        self.rng = np.random.default_rng(INPUT_SEED)

    def uniform(self, *shape):
        np = self.np
        return (self.rng.random(shape, dtype=np.float32) + np.float32(0.5)).astype(np.float32)

    def relative_to_one(self, got, ref):
        """max |got - ref| / max(1, |ref|), got widened to float64."""
        np = self.np
        return float(np.max(np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))))


def load_c_driver(library, prefix):
    """bench/py_bench_driver.c compiled (cc -O2, or $CC) against `library`
    and loaded with ctypes: (driver, its temporary directory, which the
    caller keeps while it uses the driver, None), or (None, None, why not)."""
    here = os.path.dirname(os.path.abspath(__file__))
    compiler = os.environ.get("CC", "cc")
    if not shutil.which(compiler) or not os.path.exists(library):
        return None, None, f"no {compiler} or no {library}"
    directory = tempfile.TemporaryDirectory(prefix=prefix)
    shared = os.path.join(directory.name, "driver.so")
    lib_dir = os.path.dirname(os.path.abspath(library))
    command = [compiler, "-O2", "-std=c11", "-shared", "-fPIC", "-I", os.path.join(os.path.dirname(here), "include"),
               os.path.join(here, "py_bench_driver.c"), "-o", shared, os.path.abspath(library),
               "-Wl,-rpath," + lib_dir]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return None, None, f"the driver did not compile: {result.stderr.strip()}"
    d = ctypes.CDLL(shared)
    d.driver_open.restype, d.driver_open.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    d.driver_close.restype, d.driver_close.argtypes = None, [ctypes.c_void_p]
    d.driver_run.restype = ctypes.c_int64
    d.driver_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_float, ctypes.c_void_p,
                             ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    return d, directory, None


def import_uopjit():
    """The installed package, else python/ of this tree with its build's library."""
    try:
        import uopjit
        return uopjit
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(root, "python"))
        os.environ.setdefault("UOPJIT_LIBRARY", os.path.join(root, "build", "libuopjit.so"))
        import uopjit
        return uopjit
