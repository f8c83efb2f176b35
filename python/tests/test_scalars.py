"""What a program computes from 0-d values alone is computed in f64 and
rounded once where it meets a tensor (lang/build.c), on every engine;
the optimizer's scalars follow torch's double arithmetic."""
import numpy as np
import pytest

import uopjit

ENGINES = [e for e in ("interp", "mir", "c") if uopjit.engine_available(e)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_scalar_expression_is_computed_in_f64_and_rounded_once(engine):
    b = np.float32(0.999)
    got = uopjit.Kernel("y = 1 - b", engine=engine)(b=b)
    assert got.dtype == np.float32
    assert got == np.float32(1 - np.float64(b))  # not np.float32(1) - b, which is 0.0009999871
    x = np.linspace(-2, 2, 1001, dtype=np.float32)
    got = uopjit.Kernel("y = x*(1 - b) + sqrt(a*a + b*b)", engine=engine)(x=x, a=np.float32(0.3), b=b)
    a64, b64 = np.float64(np.float32(0.3)), np.float64(b)
    want = x * np.float32(1 - b64) + np.float32(np.sqrt(a64 * a64 + b64 * b64))
    assert got.dtype == np.float32 and np.array_equal(got, want)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_f64_scalar_still_makes_an_expression_f64_outside_optimizers(engine):
    x = np.arange(5, dtype=np.float32)
    got = uopjit.Kernel("y = x*(1 - b)", engine=engine)(x=x, b=np.float64(0.999))
    assert got.dtype == np.float64 and np.array_equal(got, x.astype(np.float64) * (1 - 0.999))


@pytest.mark.parametrize("engine", ENGINES)
def test_adam_second_moment_after_one_step_is_torchs(engine):
    # 1 - b2 in double, rounded once: v = 0.001 (in f32), not 0.0009999871
    p, g = np.zeros(1, np.float32), np.ones(1, np.float32)
    opt = uopjit.optim.Optimizer([p], "adam", engine=engine, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8, wd=0)
    opt.step([g])
    assert opt.state[0]["v"][0] == np.float32(0.001)
    assert opt.state[0]["m"][0] == np.float32(0.1)
