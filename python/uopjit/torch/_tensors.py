"""uopjit.torch._tensors: torch tensors as uj_tensor_t structs, for the
optimizers (_optim) and the autograd functions (_function)."""
import torch

from .. import _lib

# the torch dtypes uopjit takes, by its names for them
TORCH_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "f16",
                torch.int32: "i32"}


def fill_tensor(struct, t):
    """Points a uj_tensor_t at torch tensor t (contiguous, of a dtype in
    TORCH_DTYPES: both checked by the caller, whose messages name t)."""
    struct.data = t.data_ptr()
    struct.dtype = _lib.DTYPES[TORCH_DTYPES[t.dtype]]
    struct.device = _lib.CUDA if t.is_cuda else _lib.CPU
    struct.ndim = t.dim()
    for k, n in enumerate(t.shape):
        struct.dims[k] = n
