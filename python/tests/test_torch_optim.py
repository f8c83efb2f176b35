"""uopjit.torch's optimizers against torch.optim: the same MLP trained with
both, checkpoints moved both ways, param groups, schedulers, closures,
GradScaler's protocol and the errors a user can meet."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")
import uopjit.torch as ut  # noqa: E402

STEPS = 200
TOL = 5e-5  # relative to each tensor's largest magnitude


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def _batches(seed, count):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(64, 16, generator=g), torch.randn(64, 4, generator=g)) for _ in range(count)]


def _train(model, opt, batches, sched=None, start=0, stop=None):
    for x, y in batches[start:stop]:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if sched is not None:
            sched.step()


def _train_pair(m1, o1, m2, o2, batches, s1=None, s2=None, start=0, stop=None):
    """Trains m2 with o2 and steps m1 with o1 on the same gradients, m2's.

    Two models trained apart drift apart chaotically whatever the
    optimizer: a last-bit difference (torch's CPU add_ with alpha is a fused
    multiply-add, its addcmul_ is not) moves a unit across a ReLU's kink and
    from there its gradient differs by O(1). Measured here, uopjit's AdamW
    against torch's on this MLP: 2e-7 of the largest parameter up to step
    80, then 3e-4. Giving both the same gradients compares the update rules
    themselves, over the whole run."""
    for x, y in batches[start:stop]:
        o1.zero_grad(set_to_none=True)
        o2.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(m2(x), y).backward()
        for p, q in zip(m1.parameters(), m2.parameters()):
            p.grad = None if q.grad is None else q.grad.clone()
        o1.step()
        o2.step()
        for s in (s1, s2):
            if s is not None:
                s.step()


def _close(a, b, what):
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-30)
    err = float((a.double() - b.double()).abs().max()) / scale
    assert err <= TOL, f"{what}: relative difference {err:.3g} (seed printed by the test)"


def _compare(m1, o1, m2, o2, what):
    for i, (p, q) in enumerate(zip(m1.parameters(), m2.parameters())):
        _close(p.detach(), q.detach(), f"{what}: parameter {i}")
        s1, s2 = o1.state[p], o2.state[q]
        assert set(k for k in s1 if s1[k] is not None) == set(k for k in s2 if s2[k] is not None), what
        for k, v in s2.items():
            if torch.is_tensor(v) and k != "step":
                _close(s1[k], v, f"{what}: state {k} of parameter {i}")
            elif k == "step":
                assert float(s1[k]) == float(v), f"{what}: step of parameter {i}"


# (uopjit class, torch class, keyword arguments): each built-in and its common options
CASES = [
    ("AdamW", dict(lr=3e-3, weight_decay=0.1)),
    ("AdamW", dict(lr=3e-3, betas=(0.8, 0.9999), amsgrad=True)),
    ("AdamW", dict(lr=1e-3, maximize=True)),
    ("Adam", dict(lr=3e-3)),
    ("Adam", dict(lr=3e-3, weight_decay=0.01, amsgrad=True)),
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=1e-4, momentum=0.8, dampening=0.1, maximize=True)),
    ("Adagrad", dict(lr=0.05, lr_decay=1e-3, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.05, weight_decay=1e-2)),
    ("RMSprop", dict(lr=1e-3)),
    ("RMSprop", dict(lr=1e-3, centered=True, weight_decay=1e-3)),
    ("RMSprop", dict(lr=1e-3, momentum=0.9)),
    ("RMSprop", dict(lr=1e-3, momentum=0.9, centered=True)),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_each_builtin_trains_an_mlp_as_torch_does(name, kwargs):
    print("seed 1 (model), 2 (data)")
    batches = _batches(2, STEPS)
    m1, m2 = _mlp(1), _mlp(1)
    o1 = getattr(ut, name)(m1.parameters(), **kwargs)
    o2 = getattr(torch.optim, name)(m2.parameters(), **kwargs)
    s1 = torch.optim.lr_scheduler.StepLR(o1, step_size=50, gamma=0.5)
    s2 = torch.optim.lr_scheduler.StepLR(o2, step_size=50, gamma=0.5)
    _train_pair(m1, o1, m2, o2, batches, s1, s2)
    _compare(m1, o1, m2, o2, f"{name} {kwargs}")
    assert o1.param_groups[0]["lr"] == o2.param_groups[0]["lr"] == kwargs["lr"] * 0.5 ** 4


def _lion_reference(params, lr, betas, wd, state):
    for p in params:
        m = state.setdefault(p, torch.zeros_like(p))
        c = betas[0] * m + (1 - betas[0]) * p.grad
        p.mul_(1 - lr * wd).sub_(lr * torch.sign(c))
        m.mul_(betas[1]).add_(p.grad, alpha=1 - betas[1])


def _lamb_reference(params, lr, betas, eps, wd, state, t):
    for p in params:
        m, v = state.setdefault(p, (torch.zeros_like(p), torch.zeros_like(p)))
        m.mul_(betas[0]).add_(p.grad, alpha=1 - betas[0])
        v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
        u = (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps) + wd * p
        wn, un = p.double().norm(), u.double().norm()
        r = float(wn / un) if wn > 0 and un > 0 else 1.0
        p.sub_(lr * r * u)


@pytest.mark.parametrize("name", ["Lion", "LAMB"])
def test_lion_and_lamb_follow_their_papers(name):
    batches = _batches(3, 60)
    m1, m2 = _mlp(4), _mlp(4)
    o1 = ut.Lion(m1.parameters(), lr=1e-3, weight_decay=0.1) if name == "Lion" else ut.LAMB(m1.parameters(), lr=1e-2)
    _train(m1, o1, batches)
    state = {}
    for t, (x, y) in enumerate(batches, 1):
        for p in m2.parameters():
            p.grad = None
        torch.nn.functional.mse_loss(m2(x), y).backward()
        with torch.no_grad():
            if name == "Lion":
                _lion_reference(list(m2.parameters()), 1e-3, (0.9, 0.99), 0.1, state)
            else:
                _lamb_reference(list(m2.parameters()), 1e-2, (0.9, 0.999), 1e-6, 0.01, state, t)
    for i, (p, q) in enumerate(zip(m1.parameters(), m2.parameters())):
        # Lion's sign flips where its argument is near 0: a few elements may step apart
        if name == "Lion":
            assert float((p - q).abs().gt(1e-4).float().mean()) < 0.01, f"Lion parameter {i}"
        else:
            _close(p.detach(), q.detach(), f"LAMB parameter {i}")
    assert set(o1.state[next(m1.parameters())]) >= ({"exp_avg"} if name == "Lion" else {"exp_avg", "exp_avg_sq"})


@pytest.mark.parametrize("name,kwargs", [("AdamW", dict(lr=3e-3, weight_decay=0.1)),
                                         ("SGD", dict(lr=0.05, momentum=0.9)),
                                         ("RMSprop", dict(lr=1e-3, momentum=0.5, centered=True)),
                                         ("Adagrad", dict(lr=0.05))])
def test_checkpoints_move_both_ways_between_torch_and_uopjit(name, kwargs):
    batches = _batches(5, 80)
    reference, ref_opt = _mlp(6), None
    ref_opt = getattr(torch.optim, name)(reference.parameters(), **kwargs)
    _train(reference, ref_opt, batches, stop=40)
    # torch's checkpoint, continued in uopjit and in torch
    model = copy.deepcopy(reference)
    opt = getattr(ut, name)(model.parameters(), **kwargs)
    opt.load_state_dict(copy.deepcopy(ref_opt.state_dict()))
    _train_pair(model, opt, reference, ref_opt, batches, start=40, stop=60)
    _compare(model, opt, reference, ref_opt, f"{name}: torch checkpoint continued in uopjit")
    # uopjit's checkpoint, continued in torch, on the gradients uopjit's run sees
    back = copy.deepcopy(model)
    back_opt = getattr(torch.optim, name)(back.parameters(), **kwargs)
    back_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    _train_pair(back, back_opt, model, opt, batches, start=60)
    _compare(back, back_opt, model, opt, f"{name}: uopjit checkpoint continued in torch")


def test_a_one_line_custom_rule_matches_torch_sgd_with_momentum():
    rule = "buf = where(t > 1, momentum*buf + g, g); p = p - lr*buf"
    batches = _batches(7, 100)
    m1, m2 = _mlp(8), _mlp(8)
    o1 = ut.Optimizer.from_source(rule, m1.parameters(), lr=0.05, momentum=0.9)
    o2 = torch.optim.SGD(m2.parameters(), lr=0.05, momentum=0.9)
    _train_pair(m1, o1, m2, o2, batches)
    for i, (p, q) in enumerate(zip(m1.parameters(), m2.parameters())):
        _close(p.detach(), q.detach(), f"custom momentum: parameter {i}")
        _close(o1.state[p]["buf"], o2.state[q]["momentum_buffer"], f"custom momentum: buffer {i}")
    assert o1.param_groups[0]["lr"] == 0.05


def test_param_groups_step_with_their_own_hyperparameters_and_none_grads_are_skipped():
    m1, m2 = _mlp(9), _mlp(9)
    def groups(m):
        layers = list(m.children())
        return [{"params": layers[0].parameters(), "lr": 1e-2},
                {"params": layers[2].parameters(), "weight_decay": 0.5, "betas": (0.5, 0.9)},
                {"params": layers[4].parameters()}]
    o1, o2 = ut.AdamW(groups(m1), lr=3e-3), torch.optim.AdamW(groups(m2), lr=3e-3)
    batches = _batches(10, 30)
    for k, (x, y) in enumerate(batches):
        for m, o in ((m1, o1), (m2, o2)):
            o.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(m(x), y).backward()
            if k % 3 == 0:  # the middle layer has no gradient on these steps
                for p in list(m.children())[2].parameters():
                    p.grad = None
            o.step()
    _compare(m1, o1, m2, o2, "three param groups")


def test_step_takes_a_closure_and_returns_its_loss():
    model, batches = _mlp(11), _batches(12, 1)
    opt = ut.SGD(model.parameters(), lr=0.1)
    x, y = batches[0]

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss
    before = closure().item()
    for _ in range(20):
        loss = opt.step(closure)
    assert loss.item() < before


class _FakeScaler:
    """What torch.cuda.amp.GradScaler gives an optimizer with
    _step_supports_amp_scaling (it needs CUDA; this is its protocol)."""

    def __init__(self, scale):
        from collections import defaultdict
        from torch.cuda.amp.grad_scaler import OptState
        self._scale = torch.full((1,), scale)
        self._per_optimizer_states = defaultdict(lambda: {"stage": OptState.READY, "found_inf_per_device": {}})

    def _get_scale_async(self):
        return self._scale


def test_the_grad_scaler_protocol_unscales_inside_and_skips_inf_steps_bit_identically():
    m1, m2 = _mlp(13), _mlp(13)
    o1, o2 = ut.AdamW(m1.parameters(), lr=1e-2), torch.optim.AdamW(m2.parameters(), lr=1e-2)
    x, y = _batches(14, 1)[0]
    scale = 1024.0
    for m in (m1, m2):
        (torch.nn.functional.mse_loss(m(x), y) * (scale if m is m1 else 1)).backward()
    scaler = _FakeScaler(scale)
    o1.step(grad_scaler=scaler)
    o2.step()
    _compare(m1, o1, m2, o2, "a scaled step")
    assert float(next(iter(scaler._per_optimizer_states[id(o1)]["found_inf_per_device"].values()))) == 0.0
    # an inf gradient: nothing moves, found_inf says so, the step count stays
    before = [p.detach().clone() for p in m1.parameters()] + [s.clone() for st in o1.state.values()
                                                            for s in st.values() if torch.is_tensor(s)]
    next(m1.parameters()).grad[0, 0] = math.inf
    scaler = _FakeScaler(scale)
    o1.step(grad_scaler=scaler)
    after = [p.detach() for p in m1.parameters()] + [s for st in o1.state.values() for s in st.values()
                                                     if torch.is_tensor(s)]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    assert float(next(iter(scaler._per_optimizer_states[id(o1)]["found_inf_per_device"].values()))) == 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GradScaler needs a GPU")
def test_grad_scaler_on_the_gpu_matches_torch_and_skips_inf_steps():
    m1, m2 = _mlp(15).cuda(), _mlp(15).cuda()
    o1, o2 = ut.AdamW(m1.parameters(), lr=1e-3), torch.optim.AdamW(m2.parameters(), lr=1e-3)
    sc1, sc2 = torch.cuda.amp.GradScaler(), torch.cuda.amp.GradScaler()
    for k, (x, y) in enumerate(_batches(16, 20)):
        x, y = x.cuda(), y.cuda()
        for m, o, sc in ((m1, o1, sc1), (m2, o2, sc2)):
            o.zero_grad(set_to_none=True)
            sc.scale(torch.nn.functional.mse_loss(m(x), y)).backward()
            if k == 5:
                next(m.parameters()).grad[0, 0] = math.inf
            sc.step(o)
            sc.update()
    assert sc1.get_scale() == sc2.get_scale()
    _compare(m1, o1, m2, o2, "GradScaler on the GPU")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_parameters_step_directly(dtype):
    """Without master weights a bf16/f16 parameter is stepped in place, its
    states of its dtype as torch keeps them. One step against the rule in
    f64 from the same values, rounded once: within one unit of the dtype;
    ten steps against torch.optim.AdamW on the same parameters and
    gradients (torch rounds after each operation, uopjit once per tensor):
    within 2% of each tensor's largest magnitude, where torch's CPU kernels
    take the dtype (torch 1.13 has no f16 addcmul on the CPU). The
    checkpoint loads into torch."""
    torch.manual_seed(19)
    params = [torch.nn.Parameter((torch.rand(300) + 0.5).to(dtype)) for _ in range(3)]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt = ut.AdamW(params, lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(twins, lr=1e-2, weight_decay=0.1)
    grads = [(torch.rand(300) * 0.5 + 0.25).to(dtype) for _ in params]
    for p, q, g in zip(params, twins, grads):
        p.grad, q.grad = g.clone(), g.clone()
    before = [p.detach().double() for p in params]
    opt.step()
    try:
        ref_opt.step()
    except RuntimeError as e:  # "addcmul_cpu_out" not implemented for 'Half'
        print(f"torch.optim.AdamW on {dtype} here: {e}")
        ref_opt = None
    for p, p0, g in zip(params, before, grads):
        g = g.double()
        m, v = 0.1 * g, 0.001 * g * g
        expect = p0 * (1 - 1e-2 * 0.1) - 1e-2 * (m / 0.1) / ((v / 0.001).sqrt() + 1e-8)
        state = opt.state[p]
        assert state["exp_avg"].dtype == dtype and state["exp_avg_sq"].dtype == dtype
        torch.testing.assert_close(state["exp_avg"], m.to(dtype), rtol=0, atol=0)
        ulp = torch.finfo(dtype).eps * expect.abs()
        assert ((p.detach().double() - expect).abs() <= ulp).all()
    for _ in range(9 if ref_opt else 0):
        for p, q, g in zip(params, twins, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        ref_opt.step()
    for i, (p, q) in enumerate(zip(params, twins) if ref_opt else ()):
        scale = float(q.detach().float().abs().max())
        assert float((p.detach().float() - q.detach().float()).abs().max()) <= 0.02 * scale, f"parameter {i}"
    ref_opt = torch.optim.AdamW(twins, lr=1e-2, weight_decay=0.1)
    ref_opt.load_state_dict(opt.state_dict())
    assert ref_opt.state[twins[0]]["exp_avg"].dtype == dtype


def test_bf16_parameters_step_through_an_f32_master_copy():
    model = _mlp(17).to(torch.bfloat16)
    opt = ut.AdamW(model.parameters(), lr=1e-2, master_weights=True)
    reference = _mlp(17)
    with torch.no_grad():
        for p, q in zip(reference.parameters(), model.parameters()):
            p.copy_(q.float())
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    for x, y in _batches(18, 10):
        opt.zero_grad(set_to_none=True)
        (model(x.bfloat16()).float() - y).pow(2).mean().backward()
        for p, q in zip(reference.parameters(), model.parameters()):
            p.grad = q.grad.float()  # the same gradients, so that only the step is compared
        opt.step()
        ref_opt.step()
    for i, (p, q) in enumerate(zip(reference.parameters(), model.parameters())):
        master = opt.state[q]["master_param"]
        _close(master, p.detach(), f"master of parameter {i}")
        assert torch.equal(q.detach(), master.to(torch.bfloat16)), f"bf16 copy of parameter {i}"


def test_bad_input_is_refused_with_a_message_naming_it():
    with pytest.raises(ValueError, match="Invalid learning rate"):
        ut.AdamW([torch.zeros(2, requires_grad=True)], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta"):
        ut.Lion([torch.zeros(2, requires_grad=True)], betas=(1.5, 0.9))
    with pytest.raises(ValueError, match="'gamma' is not a hyperparameter"):
        ut.Optimizer.from_source("p = p - lr*g", [torch.zeros(2, requires_grad=True)], gamma=1)
    p = torch.zeros(4, 4, requires_grad=True)
    q = torch.zeros(4, 4).t().requires_grad_()
    opt = ut.SGD([p, q], lr=0.1)
    p.grad, q.grad = torch.ones(4, 4), torch.ones(4, 4)
    with pytest.raises(ValueError, match="not contiguous"):
        opt.step()
    assert torch.equal(p.detach(), torch.zeros(4, 4))  # checked before anything is written
    r = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(TypeError, match="parameter 0 has dtype torch.int32"):
        opt = ut.Adam([r.float().requires_grad_()])
        opt.param_groups[0]["params"] = [r]
        r.grad = torch.ones(3, dtype=torch.int32)
        opt.step()
