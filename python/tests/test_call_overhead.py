"""The cached call path of Kernel and evaluate (_kernel's entries per thread
and signature): whatever it reuses from call to call, every call's result is
the one NumPy gives for that call's values. Changing arrays, shapes, dtypes,
numbers and arrays for one input, out= and allocated outputs, signatures in
turn, several threads on one Kernel, calls nested in calls, errors followed
by good calls. No test here looks at time."""
import threading

import numpy as np
import pytest

import uopjit
from uopjit import _context, _dtypes, _kernel

SIGMOID = "y = 1/(1+exp(-(a*x+b)))"
ADAM = "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)"


def sigmoid(x, a, b):
    return 1 / (1 + np.exp(-(a * np.asarray(x, np.float64) + b)))


def close(got, ref, tol):
    err = float(np.max(np.abs(np.asarray(got, np.float64) - ref) / np.maximum(1.0, np.abs(ref)), initial=0.0))
    assert err <= tol, f"max relative error {err} > {tol}"


class Plain(np.ndarray):
    """An ndarray subclass: such a value takes the general path, which makes
    it the reference the cached path must agree with bit for bit."""


def general(a):
    return a.view(Plain) if isinstance(a, np.ndarray) else a



def _run_threads(work, count):
    """work(0), ..., work(count - 1), each on a thread of its own, all joined."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

def test_cached_path_is_taken_for_plain_arrays_and_numbers(rng):
    # The point of the cache: were it never used, every other test here
    # would still pass. One signature, called often, is one entry.
    assert _kernel._HEADS_READABLE
    k = uopjit.Kernel(SIGMOID)
    x, y = rng.random(100, dtype=np.float32), np.empty(100, np.float32)
    for _ in range(3):
        k(x=x, a=0.5, b=0.1, out=y)
    assert len(k._local.state.entries) == 1
    k(x=x, a=0.5, b=0.1)
    assert len(k._local.state.entries) == 2


def test_repeated_calls_follow_new_arrays_and_values(rng):
    k = uopjit.Kernel(SIGMOID)
    y = np.empty(1000, np.float32)
    for i in range(20):
        x = rng.standard_normal(1000).astype(np.float32)
        a, b = 0.1 * i, -0.05 * i
        assert k(x=x, a=a, b=b, out=y) is y
        close(y, sigmoid(x, a, b), 1e-6)
        fresh = k(x=x, a=a, b=b)
        assert fresh is not y and fresh.dtype == np.float32
        close(fresh, sigmoid(x, a, b), 1e-6)
    x = rng.standard_normal(1000).astype(np.float32)
    k(x=x, a=1.0, b=0.0, out=y)
    x *= 2  # the same array, new values
    k(x=x, a=1.0, b=0.0, out=y)
    close(y, sigmoid(x, 1.0, 0.0), 1e-6)


def test_allocated_outputs_are_new_arrays_every_call(rng):
    k = uopjit.Kernel("y = x + 1")
    x1, x2 = rng.random(50), rng.random(50)
    y1 = k(x=x1)
    y2 = k(x=x2)
    assert y1 is not y2
    np.testing.assert_array_equal(y1, x1 + 1)
    np.testing.assert_array_equal(y2, x2 + 1)


def test_changing_shapes_never_give_stale_output_shapes(rng):
    k = uopjit.Kernel("y = x * 2 + b")
    for shape_x, shape_b in [((1000,), (1000,)), ((500,), (500,)), ((7,), (1,)), ((7,), (7,)), ((3, 4), (4,)),
                             ((3, 1), (5,)), ((2, 1), (2, 9)), ((3, 4), (4,)), ((1000,), (1000,)), ((0,), (1,)),
                             ((), ()), ((2, 3, 4), (3, 1))]:
        x, b = rng.random(shape_x), rng.random(shape_b)
        ref = x * 2 + b
        y = k(x=x, b=b)
        assert y.shape == ref.shape, (shape_x, shape_b)
        np.testing.assert_allclose(y, ref, rtol=1e-15)
        out = np.full(ref.shape, np.nan)
        assert k(x=x, b=b, out=out) is out
        np.testing.assert_allclose(out, ref, rtol=1e-15)


def test_an_array_reshaped_in_place_between_calls(rng):
    k = uopjit.Kernel("y = x - row")
    x = rng.random(12)
    row4, row3 = rng.random(4), rng.random(3)
    x.shape = (3, 4)
    np.testing.assert_array_equal(k(x=x, row=row4), x - row4)
    x.shape = (4, 3)  # same object and rank, other shape
    y = k(x=x, row=row3)
    assert y.shape == (4, 3)
    np.testing.assert_array_equal(y, x - row3)
    x.shape = (12,)  # other rank: another signature
    np.testing.assert_array_equal(k(x=x, row=np.float64(1.5)), x - 1.5)


def test_reductions_follow_changing_row_lengths(rng):
    k = uopjit.Kernel("_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)")
    for cols in (129, 5, 64, 129, 1):
        x = rng.standard_normal((7, cols)).astype(np.float32)
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        y = k(x=x)
        assert y.shape == x.shape
        close(y, e / e.sum(-1, keepdims=True), 1e-6)
    s = uopjit.Kernel("s = sum(x, -1)")
    for rows, cols in ((3, 4), (5, 2), (3, 4)):
        x = rng.random((rows, cols))
        got = s(x=x)
        assert got.shape == (rows, 1)
        np.testing.assert_allclose(got[:, 0], x.sum(-1), rtol=1e-14)


def test_changing_dtypes_and_weak_numbers(rng):
    k = uopjit.Kernel("y = x * c + 1")
    for dtype in (np.float32, np.float64, np.int32, np.float16, np.float32, np.int32):
        x = (rng.random(33) * 10).astype(dtype)
        for c in (3, 2.5, True, np.float64(2.5), np.float32(0.5), np.int32(3)):
            got = k(x=x, c=c)
            ref = k(x=general(x), c=c)  # the general path decides the dtype
            assert got.dtype == ref.dtype and type(got) is np.ndarray, (dtype, c)
            np.testing.assert_array_equal(got, ref)
            expect = np.asarray(x, np.float64) * float(c) + 1
            tol = {np.float16: 2e-3, np.float32: 1e-6}.get(np.dtype(got.dtype).type, 1e-12)
            close(got, expect, tol)


def test_numbers_take_the_values_the_general_path_gives_them(rng):
    k = uopjit.Kernel("y = x + c")
    for dtype in (np.float32, np.float64, np.float16, np.int32):
        x = np.zeros(3, dtype)
        for c in (0.1, 1 / 3, 1e-45, 3.4028235e38, 1e300, -1e300, float("inf"), float("nan"), 16777217,
                  2 ** 31 - 1, -2 ** 31, 2 ** 40, -2 ** 70, True, False, np.float32(0.1), np.float16(0.1)):
            with np.errstate(over="ignore"):
                try:
                    ref = k(x=general(x), c=c)
                except (OverflowError, TypeError) as e:
                    with pytest.raises(type(e), match="input 'c'"):
                        k(x=x, c=c)
                    continue
                got = k(x=x, c=c)
            assert got.dtype == ref.dtype and got.tobytes() == ref.tobytes(), (dtype, c, got, ref)


def test_declared_integer_inputs_check_every_number(rng):
    k = uopjit.Kernel("x: i32\nb: i32\ny = x + b")
    x = np.arange(4, dtype=np.int32)
    for _ in range(3):
        assert k(x=x, b=2).tolist() == [2, 3, 4, 5]
        assert k(x=x, b=3.0).tolist() == [3, 4, 5, 6]
        with pytest.raises(TypeError, match="input 'b' .*whole number"):
            k(x=x, b=2.5)
        with pytest.raises(OverflowError, match="input 'b'"):
            k(x=x, b=2 ** 31)
        with pytest.raises(OverflowError, match="input 'b'"):
            k(x=x, b=2.0 ** 40)


def test_numbers_and_arrays_for_one_input_in_turn(rng):
    k = uopjit.Kernel("y = x * 2 + b")
    x = rng.random(10)
    for b in (1.0, rng.random(10), 3, np.float64(0.25), rng.random(1), True, 1.0, np.array(4.0)):
        np.testing.assert_allclose(k(x=x, b=b), x * 2 + np.asarray(b, np.float64), rtol=1e-15)


def test_out_and_allocated_and_signatures_in_turn(rng):
    k = uopjit.Kernel(SIGMOID)
    x32, x64 = rng.standard_normal(300).astype(np.float32), rng.standard_normal((4, 5))
    y32, y64 = np.empty_like(x32), np.empty_like(x64)
    calls = [
        (dict(x=x32, a=0.5, b=0.1), y32, x32, 1e-6),
        (dict(x=x32, a=0.5, b=0.1), None, x32, 1e-6),
        (dict(x=x64, a=2, b=-1.0), y64, x64, 1e-13),
        (dict(x=x64, a=2, b=-1.0), None, x64, 1e-13),
        (dict(x=x32, a=np.float32(1.5), b=0.0), None, x32, 1e-6),
        (dict(x=x64[:2], a=0.5, b=0.1), None, x64[:2], 1e-13),
    ]
    for _ in range(4):
        for kwargs, out, x, tol in calls:
            if out is not None:
                out.fill(np.nan)
                assert k(**kwargs, out=out) is out
                got = out
            else:
                got = k(**kwargs)
            close(got, sigmoid(x, float(kwargs["a"]), float(kwargs["b"])), tol)


def test_every_form_of_out_and_positional_values(rng):
    k = uopjit.Kernel("s = x + 1; d = x * 2")
    x = rng.random(16)
    for _ in range(3):
        s, d = np.empty_like(x), np.empty_like(x)
        assert k(x=x, out={"s": s, "d": d}) == (s, d)
        got = k(x=x, out=[s, None])
        assert got[0] is s and got[1] is not d
        np.testing.assert_array_equal(got[1], x * 2)
        got = k(x, out=(None, d))
        assert got[1] is d
        np.testing.assert_array_equal(got[0], x + 1)
        got = k(x=x, out={"d": d})
        assert got[1] is d
        np.testing.assert_array_equal(got[0], x + 1)
        np.testing.assert_array_equal(s, x + 1)
        np.testing.assert_array_equal(d, x * 2)


def test_adam_in_place_repeatedly(rng):
    p, g, m, v = (rng.random(1001, dtype=np.float32) + 0.5 for _ in range(4))
    rp, rm, rv = (a.astype(np.float64) for a in (p, m, v))
    k = uopjit.Kernel(ADAM)
    for step in range(5):
        g = rng.random(1001, dtype=np.float32)  # a new gradient array each step
        result = k(p=p, g=g, m=m, v=v, b1=0.9, b2=0.999, lr=1e-3, eps=1e-8, out={"p": p, "m": m, "v": v})
        assert result[0] is m and result[1] is v and result[2] is p
        rm = 0.9 * rm + 0.1 * g
        rv = 0.999 * rv + 0.001 * g.astype(np.float64) ** 2
        rp = rp - 1e-3 * rm / (np.sqrt(rv) + 1e-8)
        close(m, rm, 1e-5)
        close(v, rv, 1e-5)
        close(p, rp, 1e-5)


def test_views_copies_and_refusals_between_cached_calls(rng):
    k = uopjit.Kernel("y = v * 2")
    base = rng.random((6, 8))
    out = np.empty(7 * 8)
    for _ in range(2):
        np.testing.assert_array_equal(k(v=base[1:]), base[1:] * 2)  # a view starting past the base's start
        np.testing.assert_array_equal(k(v=base[:, ::2]), base[:, ::2] * 2)  # strided: copied
        np.testing.assert_array_equal(k(v=base.T), base.T * 2)
        np.testing.assert_array_equal(k(v=base.astype(">f8")), base * 2)  # byte-swapped: copied
        frozen = base.copy()
        frozen.flags.writeable = False
        np.testing.assert_array_equal(k(v=frozen), base * 2)  # read-only inputs are fine
        with pytest.raises(ValueError, match="read-only"):
            k(v=base, out=frozen)
        with pytest.raises(ValueError, match="not a C-contiguous"):
            k(v=base[:, :4], out=out.reshape(7, 8)[:6, ::2])
        with pytest.raises(TypeError, match="is f32, but output 'y' is f64"):
            k(v=base, out=np.empty((6, 8), np.float32))
        y = np.empty_like(base)
        assert k(v=base, out=y) is y
        np.testing.assert_array_equal(y, base * 2)


def test_an_error_then_a_good_call(rng):
    k = uopjit.Kernel("y = x + b")
    x3, x4 = rng.random(3), rng.random(4)
    out3 = np.full(3, 7.0)
    for _ in range(3):
        np.testing.assert_array_equal(k(x=x3, b=x3), x3 * 2)
        with pytest.raises(uopjit.Error) as e:
            k(x=x3, b=x4, out=out3)  # same signature, shapes that do not broadcast
        assert e.value.status == "UJ_ERR_SHAPE" and "'x'" in e.value.message and "'b'" in e.value.message
        np.testing.assert_array_equal(out3, 7.0)
        with pytest.raises(uopjit.Error, match="UJ_ERR_SHAPE"):
            k(x=x3, b=x3, out=np.empty(4))
        # the shapes of the failed call must not stay behind
        np.testing.assert_array_equal(k(x=x4, b=x4), x4 * 2)
        np.testing.assert_array_equal(k(x=x3, b=1.0), x3 + 1)
        with pytest.raises(TypeError, match="missing input 'b'"):
            k(x=x3)
        with pytest.raises(TypeError, match="'z' is not an input"):
            k(x=x3, b=1.0, z=2.0)
        with pytest.raises(TypeError, match="names 'q', which is not an output"):
            k(x=x3, b=1.0, out={"q": out3})
        with pytest.raises(TypeError, match="int64.*astype"):
            k(x=np.arange(3), b=1.0)
        with pytest.raises(OverflowError, match="input 'b'"):
            k(x=x3.astype(np.float32), b=10 ** 400)
        np.testing.assert_array_equal(k(x=x3, b=x3, out=out3), x3 * 2)
        out3.fill(7.0)


def test_evaluate_repeatedly_with_changing_values(rng):
    y = np.empty(500, np.float32)
    for i in range(10):
        x = rng.standard_normal(500).astype(np.float32)
        assert uopjit.evaluate(SIGMOID, x=x, a=0.1 * i, b=0.5, out=y) is y
        close(y, sigmoid(x, 0.1 * i, 0.5), 1e-6)
        close(uopjit.evaluate(SIGMOID, x=x, a=0.1 * i, b=0.5), sigmoid(x, 0.1 * i, 0.5), 1e-6)
        scale = float(i)
        np.testing.assert_array_equal(uopjit.evaluate("x * scale"), x * np.float32(scale))  # the caller's variables
    x = rng.random((3, 4))
    np.testing.assert_array_equal(uopjit.evaluate("x * scale", x=x, scale=2), x * 2)


def test_threads_share_a_kernel_with_their_own_arrays(rng):
    k = uopjit.Kernel(SIGMOID, threads=1)
    count, rounds = 4, 200
    start, failures = threading.Barrier(count), []

    def work(index):
        local = np.random.default_rng(index)
        start.wait()
        for r in range(rounds):
            n = 1000 + 17 * ((index + r) % 5)  # shapes change from call to call, and differ between threads
            dtype = np.float32 if (index + r) % 3 else np.float64
            x = local.standard_normal(n).astype(dtype)
            a, b = 0.1 * index + 0.01 * r, float(index)
            ref = sigmoid(x, a, b)
            tol = 1e-6 if dtype == np.float32 else 1e-13
            if r % 2:
                y = np.empty(n, dtype)
                got = k(x=x, a=a, b=b, out=y)
                ok = got is y
            else:
                got = k(x=x, a=a, b=b)
                ok = got.shape == (n,) and got.dtype == dtype
            err = float(np.max(np.abs(got.astype(np.float64) - ref)))
            if not ok or not err <= tol:
                failures.append(f"thread {index} round {r}: shape {got.shape}, error {err}")

    _run_threads(work, count)
    assert not failures, failures[:5]


def test_threads_share_evaluate_and_in_place_updates():
    count, failures = 3, []
    start = threading.Barrier(count)

    def work(index):
        local = np.random.default_rng(100 + index)
        p, g, m, v = (local.random(777, dtype=np.float32) + 0.5 for _ in range(4))
        rp, rm, rv = (a.astype(np.float64) for a in (p, m, v))
        start.wait()
        for _ in range(50):
            uopjit.evaluate(ADAM, p=p, g=g, m=m, v=v, b1=0.9, b2=0.999, lr=1e-3, eps=1e-8,
                            out={"p": p, "m": m, "v": v})
            rm = 0.9 * rm + 0.1 * g
            rv = 0.999 * rv + 0.001 * g.astype(np.float64) ** 2
            rp = rp - 1e-3 * rm / (np.sqrt(rv) + 1e-8)
        err = max(float(np.max(np.abs(a - r) / np.maximum(1, np.abs(r)))) for a, r in ((m, rm), (v, rv), (p, rp)))
        if not err <= 1e-5:
            failures.append(f"thread {index}: error {err}")

    _run_threads(work, count)
    assert not failures


def test_a_call_nested_in_a_call_on_the_same_thread(rng, monkeypatch):
    # A number the cached call converts through _dtypes.number_array (a
    # float for an input declared i32) lets a call run inside another, as
    # a finalizer run by the garbage collector mid-call could: the inner
    # call must not write the structs the outer one is filling.
    k = uopjit.Kernel("x: i32\nb: i32\ny = x * 10 + b")
    outer_x, inner_x = np.arange(5, dtype=np.int32), np.arange(100, 107, dtype=np.int32)
    real, inner = _dtypes.number_array, {}

    def nested(value, name, what="a number"):
        if not inner:
            inner["y"] = None
            inner["y"] = k(x=inner_x, b=7.0)
        return real(value, name, what)

    monkeypatch.setattr(_dtypes, "number_array", nested)
    got = k(x=outer_x, b=3.0)
    np.testing.assert_array_equal(got, outer_x * 10 + 3)
    np.testing.assert_array_equal(inner["y"], inner_x * 10 + 7)
    inner.clear()
    got = k(x=outer_x, b=4.0)  # now through the cached entry
    np.testing.assert_array_equal(got, outer_x * 10 + 4)
    np.testing.assert_array_equal(inner["y"], inner_x * 10 + 7)


def test_a_dropped_context_is_replaced_not_reused(rng):
    engine, threads = _context.engine_value("auto"), 1
    k = uopjit.Kernel("y = x * 3", threads=threads)
    x = rng.random(64)
    np.testing.assert_array_equal(k(x=x), x * 3)
    del _context._per_thread.contexts[(engine, threads)]  # frees it: uj_ctx_free
    np.testing.assert_array_equal(k(x=x), x * 3)
    np.testing.assert_array_equal(k(x=x + 1), (x + 1) * 3)
