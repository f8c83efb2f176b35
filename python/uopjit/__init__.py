"""uopjit: fused elementwise and row kernels for NumPy, torch and CuPy arrays.

A thin ctypes binding of libuopjit (no compiled extension): a program in
uopjit's expression language is parsed once, compiled on first call for the
dtypes and ranks it meets, and run on the caller's arrays in place.

    import numpy as np, uopjit
    x = np.linspace(-4, 4, 1 << 20, dtype=np.float32)
    y = uopjit.evaluate("1/(1+exp(-x))", x=x)                # cached per process
    adam = uopjit.Kernel("m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; "
                         "p = p - lr*m/(sqrt(v)+eps)")
    adam(p=p, g=g, m=m, v=v, b1=0.9, b2=0.999, lr=1e-3, eps=1e-8,
         out={"p": p, "m": m, "v": v})                       # in place

The library is found through UOPJIT_LIBRARY, next to this package, or on the
system's library path (see _lib).
"""
from ._context import engine_available
from ._dtypes import bf16
from ._kernel import Kernel, cache_clear, evaluate
from . import optim
from ._lib import Error, version as library_version
from ._lib import path as library_path

__version__ = "0.1.0"
__all__ = ["Kernel", "evaluate", "cache_clear", "Error", "bf16", "engine_available", "library_version",
           "library_path", "optim"]
