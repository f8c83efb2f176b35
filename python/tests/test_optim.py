"""uopjit.optim against NumPy in float64: torch's AdamW rule over several
arrays of different shapes, a custom updater text, a shape error carrying the
library's message, and a found-inf step that writes nothing."""
import numpy as np
import pytest

import uopjit


def adamw_reference(params, grads_per_step, lr, b1, b2, eps, wd):
    """torch.optim.AdamW in float64: p *= 1 - lr*wd; m, v; bias corrections with t."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        for i, g in enumerate(grads):
            g = g.astype(np.float64)
            params[i] *= 1 - lr * wd
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            params[i] -= lr / bc1 * m[i] / (np.sqrt(v[i]) / np.sqrt(bc2) + eps)
    return params, m, v


SHAPES = [(37,), (5, 19), (3, 4, 33), (1,)]


@pytest.mark.parametrize("engine", ["auto", "interp"])
def test_adamw_matches_numpy_float64(rng, engine):
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    start = [p.copy() for p in params]
    grads_per_step = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(3)]
    hp = dict(lr=1e-2, b1=0.9, b2=0.99, eps=1e-8, wd=0.05)
    opt = uopjit.optim.Optimizer(params, "adamw", engine=engine, **hp)
    assert opt.state_names == ("m", "v")
    for t, grads in enumerate(grads_per_step, start=1):
        report = opt.step(grads)
        assert report == {"skipped": False, "grad_norm": None, "gscale": 1.0, "t": t}
    want_p, want_m, want_v = adamw_reference(start, grads_per_step, **hp)
    for i in range(len(SHAPES)):
        np.testing.assert_allclose(params[i], want_p[i], rtol=1e-5, atol=1e-6, err_msg=f"param {i}")
        np.testing.assert_allclose(opt.state[i]["m"], want_m[i], rtol=1e-5, atol=1e-6, err_msg=f"m {i}")
        np.testing.assert_allclose(opt.state[i]["v"], want_v[i], rtol=1e-5, atol=1e-7, err_msg=f"v {i}")
    assert not np.array_equal(params[0], start[0])


def test_adamw_convenience_uses_torch_names(rng):
    params = [rng.standard_normal(8).astype(np.float32)]
    opt = uopjit.optim.AdamW(params, lr=3e-4, betas=(0.8, 0.95), weight_decay=0.1)
    assert (opt.get("lr"), opt.get("b1"), opt.get("b2"), opt.get("wd")) == pytest.approx((3e-4, 0.8, 0.95, 0.1))


def test_custom_text_with_per_group_learning_rate(rng):
    text = "[defaults]\nlr = 0.5\n[update]\nacc = acc + g*g\np = p - lr*g/sqrt(acc + 1e-12)\n"
    params = [rng.standard_normal(s).astype(np.float32) for s in [(6,), (2, 3)]]
    start = [p.astype(np.float64) for p in params]
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    opt = uopjit.optim.Optimizer.from_source(text, params, name="sign_step", lr=[0.1, 0.2])
    assert opt.state_names == ("acc",) and "lr" in opt.hparam_names
    opt.step(grads)
    for p, p0, g, lr, s in zip(params, start, grads, [0.1, 0.2], opt.state):
        g = g.astype(np.float64)
        np.testing.assert_allclose(s["acc"], g * g, rtol=1e-6)
        np.testing.assert_allclose(p, p0 - lr * g / np.sqrt(g * g + 1e-12), rtol=1e-5, atol=1e-6)


def test_wrong_grad_shape_raises_the_library_message(rng):
    params = [np.zeros(4, np.float32), np.zeros((2, 3), np.float32)]
    opt = uopjit.optim.Optimizer(params, "adamw")
    with pytest.raises(uopjit.Error) as caught:
        opt.step([np.ones(4, np.float32), np.ones((3, 2), np.float32)])
    assert caught.value.status == "UJ_ERR_SHAPE"
    assert "group 1" in caught.value.message, caught.value.message
    assert np.array_equal(params[0], np.zeros(4)), "a refused step wrote a parameter"
    assert opt.step_count == 0


def test_refuses_arrays_it_cannot_update_in_place():
    with pytest.raises(TypeError, match="float64"):
        uopjit.optim.Optimizer([np.zeros(3)], "sgd")
    with pytest.raises(ValueError, match="C-contiguous"):
        uopjit.optim.Optimizer([np.zeros((4, 4), np.float32)[:, ::2]], "sgd")
    with pytest.raises(uopjit.Error, match="adamw"):
        uopjit.optim.Optimizer([np.zeros(3, np.float32)], "no_such_updater")
    opt = uopjit.optim.Optimizer([np.zeros(3, np.float32)], "sgd")
    with pytest.raises(ValueError, match="2 gradients for 1 parameters"):
        opt.step([np.zeros(3, np.float32)] * 2)


def test_found_inf_skips_the_step_and_writes_nothing(rng):
    params = [rng.standard_normal(s).astype(np.float32) for s in [(10,), (3, 3)]]
    start = [p.copy() for p in params]
    opt = uopjit.optim.Optimizer(params, "adamw", grad_scale=1024.0, lr=0.1)
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    grads[1][2, 1] = np.inf
    report = opt.step(grads)
    assert report["skipped"] and report["t"] == 0 and opt.step_count == 0
    for p, p0, s in zip(params, start, opt.state):
        assert np.array_equal(p, p0)
        assert not s["m"].any() and not s["v"].any()
    grads[1][2, 1] = 1.0
    report = opt.step(grads)
    assert not report["skipped"] and report["t"] == 1 and report["gscale"] == pytest.approx(1 / 1024)
    assert report["grad_norm"] == pytest.approx(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads)) / 1024,
                                                rel=1e-5)
    assert not np.array_equal(params[0], start[0])


def test_the_docs_optim_example_runs():
    import os
    import re
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "PYTHON.md"), encoding="utf-8").read()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "uopjit.optim.Optimizer(" in b]
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/PYTHON.md (uopjit.optim)", "exec"), {})


def test_read_only_parameters_are_refused_before_any_write(tmp_path):
    frozen = np.ones(4, np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match=r"params\[1\] is read-only"):
        uopjit.optim.Optimizer([np.ones(3, np.float32), frozen], "sgd", lr=0.5)
    assert np.array_equal(frozen, np.ones(4))
    raw = bytes(bytearray(np.arange(4, dtype=np.float32).tobytes()))  # immutable memory
    with pytest.raises(ValueError, match=r"params\[0\] is read-only"):
        uopjit.optim.SGD([np.frombuffer(raw, np.float32)], lr=0.5)
    assert np.array_equal(np.frombuffer(raw, np.float32), np.arange(4))
    # Gradients are only read: a read-only one is fine.
    p = np.ones(4, np.float32)
    uopjit.optim.SGD([p], lr=0.5).step([frozen])
    np.testing.assert_array_equal(p, 0.5)


def test_a_read_only_memmap_parameter_raises_instead_of_crashing(tmp_path):
    # A mode='r' memmap is mapped read-only: a write into it is SIGSEGV,
    # so this runs in a child process that a crash cannot take pytest with.
    import os
    import subprocess
    import sys
    path = tmp_path / "weights.f32"
    np.arange(16, dtype=np.float32).tofile(path)
    code = ("import sys, numpy as np, uopjit\n"
            f"w = np.memmap({str(path)!r}, dtype=np.float32, mode='r')\n"
            "try:\n"
            "    uopjit.optim.SGD([w], lr=0.5).step([np.ones(16, np.float32)])\n"
            "except ValueError as e:\n"
            "    print(e)\n"
            "    sys.exit(3)\n")
    package = os.path.dirname(os.path.dirname(os.path.abspath(uopjit.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert "params[0] is read-only" in result.stdout
    np.testing.assert_array_equal(np.fromfile(path, np.float32), np.arange(16))


def test_a_nul_in_updater_names_and_text_is_refused():
    params = [np.zeros(3, np.float32)]
    with pytest.raises(ValueError, match="updater name contains a NUL character at offset 3, line 1, column 4"):
        uopjit.optim.Optimizer(params, "sgd\0junk")
    text = "[defaults]\nlr = 0.5\n[update]\np = p - lr*g\0\np = p * 100\n"
    with pytest.raises(ValueError, match="updater text contains a NUL character at offset 41, line 4, column 13"):
        uopjit.optim.Optimizer.from_source(text, params)
    with pytest.raises(ValueError, match="updater name contains a NUL"):
        uopjit.optim.Optimizer.from_source(text.replace("\0", ""), params, name="mine\0")
    opt = uopjit.optim.Optimizer(params, "sgd")
    with pytest.raises(ValueError, match="hyperparameter name contains a NUL character at offset 2"):
        opt.set("lr\0junk", 0.1)
    with pytest.raises(ValueError, match="hyperparameter name contains a NUL"):
        opt.set("lr\0junk", [0.1])
    with pytest.raises(ValueError, match="hyperparameter name contains a NUL"):
        opt.get("lr\0junk")
    with pytest.raises(ValueError, match="engine contains a NUL"):
        uopjit.optim.Optimizer(params, "sgd", engine="c\0")


def test_integer_settings_beyond_their_c_type_raise_not_wrap():
    opt = uopjit.optim.Optimizer([np.zeros(3, np.float32)], "sgd")
    for count, error in [(2 ** 64 + 5, OverflowError), (-2 ** 63 - 1, OverflowError), (3.7, TypeError)]:
        with pytest.raises(error, match="step_count"):
            opt.step_count = count
    assert opt.step_count == 0
    opt.step_count = np.int64(7)
    assert opt.step_count == 7
    with pytest.raises(OverflowError, match="threads"):
        uopjit.optim.Optimizer([np.zeros(3, np.float32)], "sgd", threads=2 ** 32 + 1)
    with pytest.raises(OverflowError, match="'lr'"):
        opt.set("lr", 10 ** 400)
    with pytest.raises(OverflowError, match=r"'lr'\[0\]"):
        opt.set("lr", [10 ** 400])
    with pytest.raises(OverflowError, match="grad_scale"):
        opt.set_grad_scale(10 ** 400)
