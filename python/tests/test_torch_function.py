"""uopjit.torch.function: programs as torch.autograd functions. gradcheck in
f64 on every CPU engine, f32 against torch's own autograd, inputs of every
kind (numbers, broadcast, non-contiguous, int32), training inside a module,
and the errors a user can meet."""
import pytest

torch = pytest.importorskip("torch")
import uopjit  # noqa: E402
import uopjit.torch as ut  # noqa: E402

SEED = 3101

PROGRAMS = [
    # (source, shapes of the inputs in the program's order)
    ("y = x*x*sin(w) + exp(-x)/(1 + w*w)", [(3, 4), (4,)]),
    ("m = amax(x, 1); e = exp(x - m); y = e/sum(e, 1)", [(4, 6)]),
    ("_mu = mean(x, 1); _d = x - _mu; y = g*_d*rsqrt(mean(_d*_d, 1) + 0.00001) + b", [(3, 8), (8,), (8,)]),
    ("y = sum(x*w, 1); z = tanh(x) - y", [(3, 5), (5,)]),
    ("p = p - lr*g*p", [(6,), (), (6,)]),
    ("a = x*2; b = a", [(5,)]),
]


def _engines():
    return [e for e in ("interp", "mir", "c") if uopjit.engine_available(e)]


@pytest.mark.parametrize("engine", _engines())
@pytest.mark.parametrize("source,shapes", PROGRAMS)
def test_gradcheck_f64(engine, source, shapes):
    print(f"random seed {SEED}")
    torch.manual_seed(SEED)
    f = ut.function(source, engine=engine)
    inputs = tuple(torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes)
    assert torch.autograd.gradcheck(f, inputs)


def test_f32_matches_torch_autograd():
    """GELU's tanh form and a sigmoid gate in f32 against the same formulas
    written in torch, forward and backward."""
    torch.manual_seed(SEED)
    f = ut.function("y = 0.5*x*(1 + tanh(0.7978845608*(x + 0.044715*x*x*x))) * sigmoid(w)")
    x = torch.randn(64, 33, requires_grad=True)
    w = torch.randn(33, requires_grad=True)
    y = f(x, w)
    gy = torch.randn_like(y)
    y.backward(gy)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y2 = 0.5 * x2 * (1 + torch.tanh(0.7978845608 * (x2 + 0.044715 * x2 * x2 * x2))) * torch.sigmoid(w2)
    y2.backward(gy)
    assert y.dtype == torch.float32 and x.grad.dtype == torch.float32
    torch.testing.assert_close(y, y2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-5, atol=1e-4)


def test_inputs_by_name_numbers_and_layouts():
    torch.manual_seed(SEED)
    f = ut.function("y = a*x + b")
    assert f.inputs == ("a", "x", "b") and f.outputs == ("y",)
    x = torch.randn(4, 3, dtype=torch.float64).t().requires_grad_()  # not contiguous
    y = f(x=x, a=2.0, b=1)
    assert y.dtype == torch.float64 and y.shape == (3, 4)
    torch.testing.assert_close(y, 2 * x + 1)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3, 4), 2.0, dtype=torch.float64))
    # a number is weak: it takes the tensors' dtype
    assert f(2.0, torch.ones(3), 1.0).dtype == torch.float32
    assert torch.autograd.gradcheck(lambda x: f(x=x, a=2.0, b=1), (x.detach().requires_grad_(),))


def test_two_outputs_and_in_place_rule():
    torch.manual_seed(SEED)
    f = ut.function("m = b1*m + (1 - b1)*g; p = p - lr*m")
    m, g, p = (torch.randn(8, requires_grad=True) for _ in range(3))
    m_new, p_new = f(b1=0.9, m=m, g=g, p=p, lr=0.1)
    (m_new.sum() + 2 * p_new.sum()).backward()
    # dm_new/dm = 0.9; dp_new/dm = -lr*0.9; dp_new/dg = -lr*0.1; dm_new/dg = 0.1
    torch.testing.assert_close(m.grad, torch.full((8,), 0.9 - 2 * 0.1 * 0.9))
    torch.testing.assert_close(g.grad, torch.full((8,), 0.1 - 2 * 0.1 * 0.1))
    torch.testing.assert_close(p.grad, torch.full((8,), 2.0))
    assert not m.grad.isnan().any()


def test_int32_inputs_and_outputs():
    f = ut.function("y = x * k; c = k > 0")
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    k = torch.tensor([1, -2, 0, 3, 4], dtype=torch.int32)
    y, c = f(x, k)
    assert c.dtype == torch.int32 and not c.requires_grad
    assert c.tolist() == [1, 0, 0, 1, 1]
    y.sum().backward()
    torch.testing.assert_close(x.grad, k.double())


def test_half_forward_only():
    f = ut.function("y = x*2")
    x = torch.randn(4, dtype=torch.bfloat16, requires_grad=True)
    y = f(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, x.detach() * 2)
    with pytest.raises(uopjit.Error, match="bf16"):
        y.sum().backward()


def test_trains_inside_a_module():
    """A layer whose activation is a uopjit function learns as the same layer
    with torch's activation does (same start, same batches)."""
    torch.manual_seed(SEED)
    act = ut.function("y = x*sigmoid(1.702*x)")

    class Net(torch.nn.Module):
        def __init__(self, mine):
            super().__init__()
            self.a, self.b, self.mine = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1), mine

        def forward(self, x):
            h = self.a(x)
            return self.b(act(h) if self.mine else h * torch.sigmoid(1.702 * h))

    ours, theirs = Net(True), Net(False)
    theirs.load_state_dict(ours.state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (ours, theirs)]
    g = torch.Generator().manual_seed(SEED)
    data = [(torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)) for _ in range(20)]
    losses = {0: [], 1: []}
    for x, target in data:
        for i, (m, o) in enumerate(zip((ours, theirs), opts)):
            o.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), target)
            loss.backward()
            o.step()
            losses[i].append(loss.item())
    assert losses[0][-1] < losses[0][0]
    for a, b in zip(losses[0], losses[1]):
        assert a == pytest.approx(b, rel=1e-4)


def test_errors_name_the_argument():
    f = ut.function("y = x + w")
    with pytest.raises(TypeError, match="input 'x' has dtype torch.int64"):
        f(torch.ones(3, dtype=torch.int64), torch.ones(3))
    with pytest.raises(TypeError, match="missing input 'w'"):
        f(torch.ones(3))
    with pytest.raises(TypeError, match="'z' is not an input"):
        f(x=torch.ones(3), w=torch.ones(3), z=1)
    with pytest.raises(TypeError, match="input 'w' is a str"):
        f(torch.ones(3), "1")
    with pytest.raises(uopjit.Error, match="UJ_ERR_SHAPE"):
        f(torch.ones(3), torch.ones(4))
    with pytest.raises(uopjit.Error, match="UJ_ERR_PARSE"):
        ut.function("y = (x")
    with pytest.raises(TypeError, match="declared f64"):
        ut.function("x: f64; y = x*2")(torch.ones(2))
    with pytest.raises(ValueError, match="unknown engine"):
        ut.function("y = x", engine="gpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors():
    f = ut.function("y = x*x*sin(w)")
    x = torch.randn(300, 7, dtype=torch.float64, device="cuda", requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, w))
    with pytest.raises(ValueError, match="on cpu"):
        f(x, w.detach().cpu())
