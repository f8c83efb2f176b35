"""uopjit.torch's AdamW under torch.nn.parallel.DistributedDataParallel:
2 processes on the CPU with the gloo backend, each with its own data. The
optimizer needs nothing from DDP: it steps the gradients DDP has averaged,
so every rank must hold the same parameters after each step, and the same
ones as torch.optim.AdamW trained alongside. Each built-in updater steps
the same bits on MIR and C, which keeps tiered replicas identical."""
import os
import socket
import sys

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

STEPS = 10


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, results):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import uopjit.torch as ut
        torch.manual_seed(0)
        base = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        models = [torch.nn.parallel.DistributedDataParallel(_copy(base)) for _ in range(2)]
        opts = [ut.AdamW(models[0].parameters(), lr=1e-2), torch.optim.AdamW(models[1].parameters(), lr=1e-2)]
        g = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
        for _ in range(STEPS):
            x, y = torch.randn(32, 8, generator=g), torch.randn(32, 2, generator=g)
            for model, opt in zip(models, opts):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        flat = [torch.cat([p.detach().flatten() for p in m.parameters()]) for m in models]
        gathered = [torch.zeros_like(flat[0]) for _ in range(world)]
        dist.all_gather(gathered, flat[0])
        worst = max(float((a - flat[0]).abs().max()) for a in gathered)
        vs_torch = float((flat[0] - flat[1]).abs().max() / flat[1].abs().max())
        results.put((rank, worst, vs_torch, int(opts[0].state[next(models[0].parameters())]["step"])))
    finally:
        dist.destroy_process_group()


def _copy(module):
    import copy
    return copy.deepcopy(module)


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch without gloo")
def test_adamw_steps_ddp_replicas_identically_and_as_torch_does():
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(rank, 2, port, results)) for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    codes = [p.exitcode for p in procs]
    assert codes == [0, 0], f"worker exit codes {codes} (python {sys.executable})"
    got = sorted(results.get(timeout=5) for _ in range(2))
    for rank, worst, vs_torch, steps in got:
        assert worst == 0.0, f"rank {rank}: replicas differ by {worst}"
        assert vs_torch <= 5e-5, f"rank {rank}: {vs_torch} from torch.optim.AdamW"
        assert steps == STEPS


# Each process tiers its kernels on its own, so one replica may step on MIR
# while another has moved to C. The replicas stay identical only if every
# built-in updater gives the same bits on both engines: the rules use only
# operations that IEEE arithmetic rounds exactly (LAMB's norms included).
@pytest.mark.parametrize("name", ["AdamW", "Adam", "SGD", "Adagrad", "RMSprop", "Lion", "LAMB"])
def test_each_builtin_steps_the_same_bits_on_mir_and_c(name):
    import uopjit
    import uopjit.torch as ut
    if not (uopjit.engine_available("mir") and uopjit.engine_available("c")):
        pytest.skip("needs the MIR and C engines")
    kw = {"momentum": 0.9, "nesterov": True} if name == "SGD" else {}
    if name in ("AdamW", "Adam"):
        kw["amsgrad"] = True
    trained = {}
    for engine in ("mir", "c"):
        torch.manual_seed(5)
        params = [torch.randn(37, 9, requires_grad=True), torch.randn(1000, requires_grad=True)]
        opt = getattr(ut, name)(params, lr=1e-2, weight_decay=0.1, engine=engine, **kw)
        for _ in range(5):
            for p in params:
                p.grad = torch.randn_like(p)
            opt.step()
        trained[engine] = [p.detach() for p in params] + [s for st in opt.state.values() for s in st.values()
                                                         if torch.is_tensor(s)]
    for a, b in zip(trained["mir"], trained["c"]):
        assert torch.equal(a, b), f"{name}: {int((a != b).sum())} of {a.numel()} elements differ between MIR and C"
