"""uopjit.torch: uopjit's fused optimizers as torch.optim optimizers, and
uopjit programs as torch.autograd functions. Importable when torch is.

    import torch, uopjit.torch
    opt = uopjit.torch.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        sched.step()

    gelu = uopjit.torch.function("y = x*sigmoid(1.702*x)")
    gelu(x).sum().backward()      # x.grad by uopjit's autodiff (_function)

The optimizers are torch.optim.Optimizer subclasses with torch's argument
names, defaults, param groups, state names and state_dict layout, so
checkpoints move both ways between torch.optim and uopjit.torch. A step
updates every parameter with a gradient in one multi-tensor call per
(update rule, device, dtype, step count), in place (see _optim).
"""
import torch  # noqa: F401  (an ImportError here says torch is missing)

from ._function import Function, function
from ._optim import LAMB, SGD, Adagrad, Adam, AdamW, Lion, Optimizer, RMSprop

__all__ = ["Optimizer", "AdamW", "Adam", "SGD", "Adagrad", "RMSprop", "Lion", "LAMB", "function", "Function"]
