"""uopjit.torch._function: a uopjit program as a torch.autograd.Function.

    gelu = uopjit.torch.function("y = 0.5*x*(1 + tanh(0.7978845608*(x + 0.044715*x*x*x)))")
    y = gelu(x)                      # inputs by position, in the program's order,
    y = gelu(x=x)                    # or by name
    y.sum().backward()               # x.grad from uopjit's own autodiff

The forward pass runs the program; the backward pass runs the program's
UJ_BACKWARD pass, the uop autodiff of the same source (uops/backward.c),
which takes the inputs and the gradient of each output and gives the
gradient of each input. Both are compiled on first use per signature (each
input's dtype, rank and size-1 axes) and kept by the library; a call builds
only its uj_tensor_t structs.

Values: torch tensors of float32, float64, bfloat16, float16 or int32, on
one device (CPU or CUDA), and Python numbers. A number is "weak", as torch
treats Python scalars: it becomes a 0-d tensor of the dtype the program
declares for it, else of the widest float tensor input (float32 when there
is none; int32 for an int among int32 tensors), and gets no gradient.
Inputs are read in place when contiguous (else a contiguous copy is read);
outputs are new tensors. An int32 output is not differentiable. bf16 and
f16 values have a forward pass only: the backward pass raises, naming the
dtype. Backward is not itself differentiable (once_differentiable).

CUDA: uopjit runs on a stream of its own, so a call waits for torch's
current stream before it and for its own kernels after it.
"""
import ctypes
import numbers

import torch
from torch.autograd.function import once_differentiable

from .. import _context, _dtypes, _kernel, _lib

from ._tensors import TORCH_DTYPES as _TORCH_DTYPES, fill_tensor

_BACKWARD = 1
_OF_NAME = {name: dtype for dtype, name in _TORCH_DTYPES.items()}
_WIDTH = {torch.int32: 0, torch.bfloat16: 1, torch.float16: 1, torch.float32: 2, torch.float64: 3}


class _Struct:
    """uj_tensor_t structs pointing at torch tensors, and their pointer array."""

    def __init__(self, tensors):
        self.structs, self.pointers = _lib.tensor_array(len(tensors))
        for struct, t in zip(self.structs, tensors):
            fill_tensor(struct, t)


class Function:
    """A uopjit program called on torch tensors, differentiable by torch's
    autograd. function(source) makes one; see the module's docstring."""

    def __init__(self, source, engine="auto", threads=None):
        self._engine = _context.engine_value(engine)
        self._threads = _context.threads_value(threads)
        _context.get(self._engine, self._threads)  # an unavailable engine or bad count fails here
        self.source = source
        self._program = _kernel._Program(source)
        handle, lib = self._program.handle, _lib.lib
        self.inputs = tuple(lib.uj_program_io_name(handle, 0, i).decode()
                            for i in range(lib.uj_program_io_count(handle, 0)))
        self.outputs = tuple(lib.uj_program_io_name(handle, 1, i).decode()
                             for i in range(lib.uj_program_io_count(handle, 1)))
        declared = ctypes.c_int()
        self._declared = tuple(_OF_NAME[_dtypes.name_of_value(declared.value)]
                               if lib.uj_program_input_dtype(handle, i, ctypes.byref(declared)) else None
                               for i in range(len(self.inputs)))

    def __repr__(self):
        return f"uopjit.torch.function({self.source!r}): inputs {self.inputs}, outputs {self.outputs}"

    def __call__(self, *args, **kwargs):
        values = _kernel.bind_inputs(self.inputs, args, kwargs, "uopjit.torch")
        tensors, numbers_at = self._tensors(values)
        outputs = _Apply.apply(self, numbers_at, *tensors)
        return outputs if len(self.outputs) > 1 else outputs[0]

    # ---- binding ---------------------------------------------------------------

    def _tensors(self, values):
        """(one tensor per input, the indices of the inputs given as numbers)."""
        device, widest = None, None
        for name, v in zip(self.inputs, values):
            if isinstance(v, torch.Tensor):
                if v.dtype not in _TORCH_DTYPES:
                    raise TypeError(f"uopjit.torch: input {name!r} has dtype {v.dtype}; uopjit takes "
                                    f"float32, float64, bfloat16, float16 and int32")
                if v.layout != torch.strided:
                    raise TypeError(f"uopjit.torch: input {name!r} is a {v.layout} tensor; uopjit takes dense "
                                    f"tensors")
                if v.dim() > _lib.MAX_DIMS:
                    raise ValueError(f"uopjit.torch: input {name!r} has {v.dim()} axes; uopjit takes at most "
                                     f"{_lib.MAX_DIMS}")
                if device is None:
                    device = v.device
                elif v.device != device:
                    raise ValueError(f"uopjit.torch: input {name!r} is on {v.device}, the others on {device}; "
                                     f"a call runs on one device")
                if widest is None or _WIDTH[v.dtype] > _WIDTH[widest]:
                    widest = v.dtype
            elif isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"uopjit.torch: input {name!r} is a {type(v).__name__}; expected a torch "
                                f"tensor or a number")
        device = device or torch.device("cpu")
        tensors, numbers_at = [], []
        for i, v in enumerate(values):
            if isinstance(v, torch.Tensor):
                if self._declared[i] is not None and v.dtype != self._declared[i]:
                    raise TypeError(f"uopjit.torch: input {self.inputs[i]!r} is declared "
                                    f"{_TORCH_DTYPES[self._declared[i]]} in the program; got {v.dtype}")
                tensors.append(v if v.is_contiguous() else v.contiguous())
                continue
            dtype = self._declared[i]
            if dtype is None and widest is not None and widest != torch.int32:
                dtype = widest
            elif dtype is None:
                whole = isinstance(v, numbers.Integral)
                dtype = torch.int32 if whole and widest == torch.int32 else torch.get_default_dtype()
            if dtype == torch.int32:
                v = _lib.c_integer(v, f"input {self.inputs[i]!r}", 32)
            tensors.append(torch.tensor(v, dtype=dtype, device=device))
            numbers_at.append(i)
        return tensors, tuple(numbers_at)

    # ---- running ---------------------------------------------------------------

    def _run(self, pass_, inputs, shapes_from):
        """Runs a pass on inputs (contiguous tensors), allocating one output
        per result (as many as the pass gives, with the shapes and dtypes the
        library infers); shapes_from: the tensors whose device they go on."""
        lib, handle = _lib.lib, self._program.handle
        given = _Struct(inputs)
        count = len(self.inputs) if pass_ == _BACKWARD else len(self.outputs)
        device = shapes_from[0].device if shapes_from else torch.device("cpu")
        outs = []
        ndim, dims, dtype = ctypes.c_int(), _lib.Dims(), ctypes.c_int()
        for j in range(count):
            _lib.check(lib.uj_program_shape(handle, pass_, given.pointers, None, j, ctypes.byref(ndim), dims))
            _lib.check(lib.uj_program_output_dtype(handle, pass_, given.pointers, j, ctypes.byref(dtype)))
            shape = tuple(dims[k] for k in range(ndim.value))
            outs.append(torch.empty(shape, dtype=_OF_NAME[_dtypes.name_of_value(dtype.value)], device=device))
        written = _Struct(outs)
        ctx = _context.get(self._engine, self._threads)
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.current_stream(device).synchronize()
        _lib.check(lib.uj_program_run(ctx.handle, handle, pass_, given.pointers, len(inputs), None, 0,
                                      written.pointers, len(outs)))
        if cuda:
            _lib.check(lib.uj_ctx_synchronize(ctx.handle))
        return outs


class _Apply(torch.autograd.Function):
    """The autograd node of a Function call."""

    @staticmethod
    def forward(ctx, fn, numbers_at, *inputs):
        ctx.fn, ctx.numbers_at = fn, numbers_at
        outputs = fn._run(_lib.FORWARD, inputs, inputs)
        ctx.save_for_backward(*inputs)
        ctx.mark_non_differentiable(*[o for o in outputs if not o.is_floating_point()])
        return tuple(outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grad_outputs):
        fn, inputs = ctx.fn, ctx.saved_tensors
        grads = [g.contiguous() for g in grad_outputs]
        result = fn._run(_BACKWARD, list(inputs) + grads, inputs)
        for i in ctx.numbers_at:
            result[i] = None
        for i, t in enumerate(inputs):
            if not t.is_floating_point() or not ctx.needs_input_grad[2 + i]:
                result[i] = None
        return (None, None, *result)


def function(source, engine="auto", threads=None):
    """A uopjit program as a differentiable torch function (a Function).

    source: a program of the expression language, or a bare expression
    ('x*sigmoid(1.702*x)' means 'y = ...'). engine: "auto" (tiered MIR then
    C on the CPU, CUDA for CUDA tensors), "interp", "mir", "c" or "cuda".
    threads: host threads (None: UOPJIT_THREADS, else every core)."""
    return Function(source, engine, threads)
