"""uopjit.optim: fused multi-tensor optimizer steps over lists of NumPy arrays.

A thin wrapper of libuopjit's optimizers (uj_optim_*): an updater, built in
("adamw") or a text of its own, updates every parameter of a list in one
multi-tensor call per pass. The parameters are the caller's float32 arrays,
updated in place; the state tensors (Adam's m and v, ...) are float32 arrays
of each parameter's shape, made here as zeros (as torch makes them) and kept
in `state`, one dict per parameter in the updater's state order.

    opt = uopjit.optim.Optimizer([w, b], "adamw", lr=1e-3, wd=0.01)
    for ...:
        report = opt.step([dw, db])      # {"skipped", "grad_norm", "gscale", "t"}

The arrays are borrowed by address: a parameter must stay the same array
(C-contiguous float32, writable, never reallocated) for the optimizer's
life, which is why anything else is refused rather than copied. Gradients
are only read, so a read-only gradient is fine.
"""
import ctypes

import numpy as np

from . import _context, _lib

__all__ = ["Optimizer", "AdamW", "Adam", "SGD", "builtin_names"]


def builtin_names():
    """The built-in updaters' names ("sgd", "adamw", ...)."""
    names = []
    while True:
        name = _lib.lib.uj_optim_builtin_name(len(names))
        if name is None:
            return names
        names.append(name.decode())


def _float32_array(value, what, written):
    """value as the array the library may read (and when `written`, write) in
    place, or a clear error."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"uopjit.optim: {what} is a {type(value).__name__}; expected a numpy.ndarray of float32")
    if value.dtype != np.float32:
        raise TypeError(f"uopjit.optim: {what} has dtype {value.dtype}; expected float32 "
                        f"(convert it once with .astype(np.float32) and keep that array)")
    if not value.flags.c_contiguous:
        raise ValueError(f"uopjit.optim: {what} is not C-contiguous; pass np.ascontiguousarray(...) "
                         f"and keep that array")
    if value.ndim > _lib.MAX_DIMS:
        raise ValueError(f"uopjit.optim: {what} has {value.ndim} axes; uopjit takes at most {_lib.MAX_DIMS}")
    # The library writes through the pointer regardless of NumPy's flag: a
    # read-only memmap (mode='r') is a SIGSEGV, a frozen array or one over
    # bytes (np.frombuffer) would change behind its owner's back.
    if written and not value.flags.writeable:
        raise ValueError(f"uopjit.optim: {what} is read-only; the optimizer updates it in place "
                         f"(for a memmap, open it with mode='r+')")
    return value


def _tensor(array):
    return _lib.Tensor(array.__array_interface__["data"][0], _lib.DTYPES["f32"], _lib.CPU, array.ndim,
                       _lib.Dims(*array.shape))


class Optimizer:
    """An updater stepping `params` (a list of C-contiguous float32 arrays) in place.

    updater: a built-in name (builtin_names()); engine: "auto", "interp",
    "mir" or "c"; threads: the host threads (None: the library's default).
    grad_scale: the loss scale the gradients carry; max_grad_norm: clip by
    the global 2-norm (either makes a step with a NaN or infinity in a
    gradient write nothing and report skipped). Other keywords set
    hyperparameters: a number is shared by every parameter, a list or tuple
    gives one value per parameter.
    """

    def __init__(self, params, updater="adamw", engine="auto", threads=None, grad_scale=None,
                 max_grad_norm=None, **hparams):
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.uj_optim_new(_lib.c_string(updater, "updater name"), ctypes.byref(handle)))
        self._setup(handle, params, engine, threads, grad_scale, max_grad_norm, hparams)

    @classmethod
    def from_source(cls, text, params, name="custom", engine="auto", threads=None, grad_scale=None,
                    max_grad_norm=None, **hparams):
        """An optimizer running the updater in `text` (sections [defaults],
        [scalars], [update], [apply]; see docs/OPTIMIZERS.md), called `name` in messages."""
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.uj_optim_new_source(_lib.c_string(name, "updater name"),
                                                _lib.c_string(text, "updater text"), ctypes.byref(handle)))
        self = cls.__new__(cls)
        self._setup(handle, params, engine, threads, grad_scale, max_grad_norm, hparams)
        return self

    def _setup(self, handle, params, engine, threads, grad_scale, max_grad_norm, hparams):
        # Owned from here on, so a failure below still frees it (__del__).
        self._handle = handle.value
        self._free = _lib.lib.uj_optim_free
        self._engine = _context.engine_value(engine)
        self._threads = _context.threads_value(threads)
        self.params = [_float32_array(p, f"params[{i}]", written=True) for i, p in enumerate(params)]
        if not self.params:
            raise ValueError("uopjit.optim: params is empty; an optimizer needs at least one array")
        count = _lib.lib.uj_optim_state_count(self._handle)
        self.state_names = tuple(_lib.lib.uj_optim_state_name(self._handle, i).decode() for i in range(count))
        self.state = [{name: np.zeros_like(p) for name in self.state_names} for p in self.params]
        # The structs that point at parameters and state are made once: the
        # arrays are fixed for the optimizer's life.
        self._param_tensors = [_tensor(p) for p in self.params]
        self._state_tensors = [[_tensor(s[name]) for name in self.state_names] for s in self.state]
        self._state_pointers = [_lib.tensor_pointers(ts) for ts in self._state_tensors]
        if grad_scale is not None:
            self.set_grad_scale(grad_scale)
        if max_grad_norm is not None:
            self.set_max_grad_norm(max_grad_norm)
        for name, value in hparams.items():
            self.set(name, value)

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._free(handle)

    @property
    def hparam_names(self):
        """The updater's hyperparameters, in order of first use."""
        count = _lib.lib.uj_optim_hparam_count(self._handle)
        return tuple(_lib.lib.uj_optim_hparam_name(self._handle, i).decode() for i in range(count))

    def set(self, name, value):
        """Sets hyperparameter `name`: a number for every parameter, or a
        sequence with one value per parameter."""
        key = _lib.c_string(name, "hyperparameter name")
        if isinstance(value, (list, tuple, np.ndarray)):
            values = [_lib.c_double(v, f"hyperparameter {name!r}[{i}]") for i, v in enumerate(value)]
            if len(values) != len(self.params):
                raise ValueError(f"uopjit.optim: {len(values)} values for {name!r}; "
                                 f"expected one per parameter ({len(self.params)})")
            array = (ctypes.c_double * len(values))(*values)
            _lib.check(_lib.lib.uj_optim_set_per_group(self._handle, key, array, len(values)))
        else:
            _lib.check(_lib.lib.uj_optim_set(self._handle, key, _lib.c_double(value, f"hyperparameter {name!r}")))

    def get(self, name):
        """The shared value of hyperparameter `name`."""
        value = ctypes.c_double()
        _lib.check(_lib.lib.uj_optim_get(self._handle, _lib.c_string(name, "hyperparameter name"),
                                         ctypes.byref(value)))
        return value.value

    def set_grad_scale(self, scale):
        """The loss scale the gradients carry (0 or 1: none)."""
        _lib.check(_lib.lib.uj_optim_set_grad_scale(self._handle, _lib.c_double(scale, "grad_scale")))

    def set_max_grad_norm(self, max_norm):
        """Clip the unscaled gradients by their global 2-norm (0: none)."""
        _lib.check(_lib.lib.uj_optim_set_max_grad_norm(self._handle, _lib.c_double(max_norm, "max_grad_norm")))

    @property
    def step_count(self):
        """Steps taken (skipped ones not counted); settable to resume a run."""
        return _lib.lib.uj_optim_step_count(self._handle)

    @step_count.setter
    def step_count(self, count):
        _lib.check(_lib.lib.uj_optim_set_step_count(self._handle, _lib.c_integer(count, "step_count", 64)))

    def step(self, grads):
        """One step with `grads`, one float32 array per parameter, of its
        shape (the library checks the shapes and names the one that
        differs). Returns {"skipped": bool, "grad_norm": float or None,
        "gscale": float, "t": int}."""
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"uopjit.optim: {len(grads)} gradients for {len(self.params)} parameters")
        grads = [_float32_array(g, f"grads[{i}]", written=False) for i, g in enumerate(grads)]
        grad_tensors = [_tensor(g) for g in grads]
        groups = (_lib.OptimGroup * len(grads))()
        for i, group in enumerate(groups):
            group.param = ctypes.pointer(self._param_tensors[i])
            group.grad = ctypes.pointer(grad_tensors[i])
            if self.state_names:
                group.state = self._state_pointers[i]
        report = _lib.OptimReport()
        ctx = _context.get(self._engine, self._threads)
        _lib.check(_lib.lib.uj_optim_step(ctx.handle, self._handle, groups, len(grads), ctypes.byref(report)))
        return {"skipped": bool(report.skipped), "grad_norm": None if report.grad_norm < 0 else report.grad_norm,
                "gscale": report.gscale, "t": report.t}


def AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, **options):
    """torch.optim.AdamW's rule and defaults (decoupled decay: p *= 1 - lr*wd)."""
    return Optimizer(params, "adamw", lr=lr, b1=betas[0], b2=betas[1], eps=eps, wd=weight_decay, **options)


def Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **options):
    """torch.optim.Adam's rule and defaults (weight decay as L2, added to g)."""
    return Optimizer(params, "adam", lr=lr, b1=betas[0], b2=betas[1], eps=eps, wd=weight_decay, **options)


def SGD(params, lr=1e-3, weight_decay=0.0, **options):
    """Plain SGD, torch.optim.SGD's rule without momentum."""
    return Optimizer(params, "sgd", lr=lr, wd=weight_decay, **options)
