"""Kernel and evaluate against NumPy in float64: elementwise chains, Adam in
place, broadcasting, reductions, dtypes of numbers, copied inputs."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import uopjit

SIGMOID = "y = 1/(1+exp(-(a*x+b)))"
ADAM = "m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)"


def close(got, ref, tol):
    """max |got - ref| / max(1, |ref|) <= tol, with the figure on failure."""
    err = float(np.max(np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))))
    assert err <= tol, f"max relative error {err} > {tol}"


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-13)])
def test_sigmoid_chain_matches_numpy(rng, dtype, tol):
    x = rng.standard_normal(10007).astype(dtype)
    y = uopjit.Kernel(SIGMOID)(x=x, a=1.5, b=0.2)
    assert y.dtype == dtype and y.shape == x.shape
    close(y, 1 / (1 + np.exp(-(1.5 * x.astype(np.float64) + 0.2))), tol)


def test_adam_updates_in_place(rng):
    p, g, m, v = (rng.random(4099, dtype=np.float32) + 0.5 for _ in range(4))
    ref_m = 0.9 * m.astype(np.float64) + 0.1 * g
    ref_v = 0.999 * v.astype(np.float64) + 0.001 * g.astype(np.float64) ** 2
    ref_p = p - 1e-3 * ref_m / (np.sqrt(ref_v) + 1e-8)
    k = uopjit.Kernel(ADAM)
    result = k(p=p, g=g, m=m, v=v, b1=0.9, b2=0.999, lr=1e-3, eps=1e-8, out={"p": p, "m": m, "v": v})
    assert k.outputs == ("m", "v", "p")
    assert result[0] is m and result[1] is v and result[2] is p
    close(m, ref_m, 1e-6)
    close(v, ref_v, 1e-6)
    close(p, ref_p, 1e-6)


def test_outputs_come_in_program_order_and_out_takes_each_form(rng):
    x = rng.random(64)
    k = uopjit.Kernel("s = x + 1; d = x * 2")
    s, d = k(x=x)
    np.testing.assert_array_equal(s, x + 1)
    np.testing.assert_array_equal(d, x * 2)
    into = np.empty_like(x)
    s2, d2 = k(x, out=(None, into))
    assert d2 is into
    np.testing.assert_array_equal(into, x * 2)
    single = np.empty_like(x)
    assert uopjit.Kernel("y = x - 1")(x=x, out=single) is single
    np.testing.assert_array_equal(single, x - 1)


def test_broadcasting_follows_numpy(rng):
    x = rng.random((5, 7))
    row, col = rng.random(7), rng.random((5, 1))
    got = uopjit.evaluate("y = max(x + row, 0) * col", x=x, row=row, col=col)
    np.testing.assert_allclose(got, np.maximum(x + row, 0) * col, rtol=1e-15)


def test_row_softmax_reduces_the_last_axis(rng):
    x = rng.standard_normal((33, 129)).astype(np.float32)
    y = uopjit.evaluate("_e = exp(x - amax(x, -1)); y = _e / sum(_e, -1)", x=x)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    close(y, e / e.sum(-1, keepdims=True), 1e-6)
    total = uopjit.evaluate("s = sum(x)", x=x)
    assert total.shape == (1, 1)
    assert abs(float(total[0, 0]) - x.astype(np.float64).sum()) <= 1e-5 * np.abs(x).sum()


def test_numbers_are_weak_and_numpy_scalars_are_not(rng):
    x = rng.random(10, dtype=np.float32)
    assert uopjit.evaluate("x * 2.5", x=x).dtype == np.float32
    assert uopjit.evaluate("x * c", x=x, c=np.float64(2.5)).dtype == np.float64
    assert uopjit.evaluate("a + b", a=1.5, b=2).dtype == np.float64
    ints = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(uopjit.evaluate("i * 3", i=ints), ints * 3)
    half = uopjit.evaluate("i * c", i=ints, c=0.5)  # a fraction passed is not rounded to i32
    np.testing.assert_array_equal(half, ints * 0.5)


def test_declared_dtype_gives_numbers_their_dtype():
    y = uopjit.evaluate("x: f32\nc: f32\ny = x * c", x=np.ones(3, np.float32), c=1 / 3)
    assert y.dtype == np.float32
    assert y[0] == np.float32(1 / 3)


def test_non_contiguous_and_foreign_inputs_are_copied(rng):
    x = rng.random((6, 8))
    for view in (x.T, x[:, ::2], x[::-1]):
        np.testing.assert_array_equal(uopjit.evaluate("y = v * 2", v=view), view * 2)
    swapped = x.astype(x.dtype.newbyteorder(">"))
    np.testing.assert_array_equal(uopjit.evaluate("y = v + 1", v=swapped), x + 1)
    raw = np.zeros(8 * 10 + 1, np.uint8)[1:].view(np.float64)  # misaligned
    raw[:] = np.arange(10)
    assert not raw.flags.aligned
    np.testing.assert_array_equal(uopjit.evaluate("y = v + 1", v=raw), np.arange(10) + 1)
    np.testing.assert_array_equal(uopjit.evaluate("y = v * 2", v=[1.0, 2.0]), [2.0, 4.0])


def test_in_place_with_a_view_shared_by_input_and_output(rng):
    x = rng.random(100)
    ref = x * 3 + 1
    uopjit.evaluate("x = x * 3 + 1", x=x, out=x)
    np.testing.assert_array_equal(x, ref)


def test_evaluate_reads_the_callers_variables_and_caches_kernels(rng):
    x = rng.random(5)
    scale = 4.0
    np.testing.assert_array_equal(uopjit.evaluate("x * scale"), x * 4.0)
    from uopjit import _kernel
    first = _kernel.cached_kernel("x * scale", "auto", None)
    uopjit.evaluate("x * scale", x=x, scale=1.0)
    assert _kernel.cached_kernel("x * scale", "auto", None) is first


@pytest.mark.parametrize("engine", ["interp", "mir", "c"])
def test_every_cpu_engine(rng, engine):
    if not uopjit.engine_available(engine):
        pytest.skip(f"{engine} is not available in this build")
    x = rng.standard_normal(1000)
    k = uopjit.Kernel(SIGMOID, engine=engine, threads=1)
    close(k(x=x, a=0.5, b=-1.0), 1 / (1 + np.exp(-(0.5 * x - 1.0))), 1e-13)
    assert k.last_run()["engine"] == engine


# A program of its own, with a cache directory of its own, so that the C
# kernel cannot already be on disk (it would then serve from the first call).
LOOP_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import uopjit

    k = uopjit.Kernel("y = x * x * 0.25 - x / 3 + 1.5")
    x = np.random.default_rng(int(sys.argv[1])).standard_normal(4096).astype(np.float32)
    want = x * x * np.float32(0.25) - x / np.float32(3) + np.float32(1.5)
    seen, worst = [], 0.0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        y = k(x=x)
        run = k.last_run()
        seen.append(run["engine"])
        worst = max(worst, float(np.max(np.abs(y - want) / np.abs(want))))
        if run["engine"] == "c":
            break
        time.sleep(0.01)
    print(json.dumps({"seen": seen, "tier": run["tier"], "worst": worst}))
""")


def test_auto_moves_a_kernel_called_in_a_loop_to_c(tmp_path, rng):
    # Tiering as a training loop meets it: the first calls on MIR, then, once
    # the background compile is done, on C, with C's results. Any tier count
    # (UOPJIT_TIER) will do.
    if not (uopjit.engine_available("mir") and uopjit.engine_available("c")):
        pytest.skip("tiering needs the MIR and C engines")
    env = dict(os.environ, UOPJIT_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(uopjit.__file__))]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    seed = int(rng.integers(1 << 30))
    done = subprocess.run([sys.executable, "-c", LOOP_SCRIPT, str(seed)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["seen"][0] == "mir" and got["seen"][-1] == "c", got
    assert set(got["seen"]) == {"mir", "c"} and got["tier"] == "ready", got
    assert got["worst"] <= 1e-6, got


def test_one_kernel_follows_changing_shapes_and_dtypes(rng):
    k = uopjit.Kernel("y = x * 2 + b")
    cases = [(rng.random(5, dtype=np.float32), 1.0, np.float32), (rng.random((3, 4)), rng.random(4), np.float64),
             (rng.random(5, dtype=np.float32), np.float64(1.0), np.float64),  # a NumPy scalar keeps its dtype
             (rng.random((2, 1)), rng.random(3), np.float64), (rng.random(5, dtype=np.float32), 1.0, np.float32)]
    for x, b, dtype in cases:
        y = k(x=x, b=b)
        ref = x.astype(np.float64) * 2 + b
        assert y.shape == ref.shape and y.dtype == dtype
        np.testing.assert_allclose(y, ref, rtol=1e-6)
