"""Kernels from several Python threads: each thread gets its own uopjit
context, results stay right, and the GIL is released while a kernel runs."""
import threading

import numpy as np

import uopjit


def test_two_threads_run_kernels_concurrently_with_right_results(rng):
    k = uopjit.Kernel("y = 1/(1+exp(-(a*x+b)))", threads=1)
    inputs = [rng.standard_normal(1 << 16) for _ in range(2)]
    failures, start = [], threading.Barrier(2)

    def work(x, a):
        start.wait()
        for _ in range(20):
            y = k(x=x, a=a, b=0.5)
            err = np.max(np.abs(y - 1 / (1 + np.exp(-(a * x + 0.5)))))
            if not err <= 1e-13:
                failures.append(f"a={a}: error {err}")

    threads = [threading.Thread(target=work, args=(x, float(i + 1))) for i, x in enumerate(inputs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_the_gil_is_released_while_a_kernel_runs():
    # While one thread's call runs, this thread reads the output: seeing it
    # partly written proves Python ran during the call. Were the GIL held for
    # the whole call, every read would see it untouched or complete. The
    # interpreter engine on one thread writes slowly enough to be caught in
    # the act; the call is repeated a few times in case a run is missed.
    k = uopjit.Kernel("y = sqrt(x) * 2 + 1", engine="interp", threads=1)
    x = np.ones(1 << 22)
    y = np.empty_like(x)
    probe = slice(None, None, 4099)
    for attempt in range(10):
        y.fill(np.nan)
        runner = threading.Thread(target=k, kwargs={"x": x, "out": y})
        runner.start()
        seen_partial = False
        while runner.is_alive() and not seen_partial:
            written = np.isnan(y[probe])
            seen_partial = bool(written.any() and not written.all())
        runner.join()
        np.testing.assert_array_equal(y, 3.0)
        if seen_partial:
            return
    raise AssertionError("the output was never seen half-written in 10 calls: the GIL seems held during runs")


def test_last_run_reports_the_calling_threads_own_call():
    # One kernel, two threads taking turns with different sizes: each
    # thread's last_run() is its own call's, not whichever thread called
    # last. A thread that never called gets the library's "never run"
    # answer. With tiering on, a call's own record has a tier (waiting,
    # compiling, ready, failed); another thread's run, read through this
    # thread's context, has none, which is how a borrowed report shows.
    k = uopjit.Kernel("y = x * 3 + 1")
    never = {"engine": "auto", "tier": "none", "mir_ms": -1.0, "c_ms": -1.0, "c_from_disk": False, "c_error": ""}
    assert k.last_run() == never
    turn = [threading.Event() for _ in range(3)]
    seen = {}

    def first():
        k(x=np.ones(1000))
        seen["a"] = k.last_run()
        turn[0].set()
        turn[1].wait()
        seen["a again"] = k.last_run()
        turn[2].set()

    def second():
        turn[0].wait()
        k(x=np.ones(3000))
        seen["b"] = k.last_run()
        turn[1].set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert turn[2].is_set(), seen
    assert k.last_run() == never, "the main thread never called the kernel"
    a, again = seen["a"], seen["a again"]
    assert a["engine"] != "auto" and seen["b"]["engine"] != "auto"
    assert again["engine"] == a["engine"]
    # the tier may have moved on (compiling -> ready), but it stays this thread's
    assert (again["tier"] == "none") == (a["tier"] == "none"), (a, again)
