"""uopjit.torch._optim: torch.optim.Optimizer subclasses that step through
libuopjit's fused updaters (uj_optim_*).

Each class is torch's optimizer of that name, argument for argument: its
defaults are the installed torch's own (a throwaway torch optimizer is made
with the same arguments, so torch validates them with its messages and the
param groups carry every key torch's step reads), its state has torch's
names (exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer, sum,
square_avg, grad_avg, step) and torch's state_dict()/load_state_dict() are
used unchanged, so a checkpoint moves both ways. What differs is the step:

  * parameters with a gradient are bucketed by (update rule, device, dtype,
    step count): one uj_optim_step per bucket updates all of them in place,
    with the per-group hyperparameters (lr, betas, ...) passed as per-tensor
    values read from the groups at every step, so an lr_scheduler's change
    takes effect at the next step and nothing recompiles;
  * the rule is chosen per group from the options that change which state
    exists (amsgrad, momentum, centered): optim/updaters.c's built-ins;
  * scalars (1 - b2, lr / bias correction) are computed in f64 and rounded
    once, as torch does, by the compiler (lang/build.c);
  * the ctypes structs of a bucket are made once and kept while its
    parameters and state tensors stay the same objects: a step rewrites
    only the gradients' addresses.

The step count lives in state['step'] as torch keeps it (a 0-d float
tensor). The parameters of one bucket share one such tensor, replaced (never
changed in place) after each step; state_dict() gives each parameter a copy
of its own, since torch's step increments its tensors in place.

Mixed precision: torch.cuda.amp.GradScaler drives the step through the
optimizer's grad_scaler protocol (_step_supports_amp_scaling): the loss
scale goes to the library, which unscales inside the update and, when a
gradient holds an inf or NaN, writes nothing and reports it; the scaler then
sees found_inf as with torch's fused optimizers. bf16 or f16 parameters
are stepped directly, their states of their dtype as torch keeps them
(computed in f32 and rounded once per tensor written), or, with
master_weights=True, through an f32 master copy (state['master_param'])
that is stepped and written to the parameter rounded, in the same pass.
"""
import ctypes
import itertools
import operator

import numpy as np
import torch
from torch.optim.optimizer import required

from .. import _context, _lib
from ._tensors import fill_tensor

_DTYPE_NAMES = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "f16"}
_HALF = (torch.bfloat16, torch.float16)
# per-tensor reads of a step, mapped over its tensors at C speed: a step over
# GPT-2 small's 148 tensors has about 150 us of Python to spend in all
_GRAD = operator.attrgetter("grad")
_DATA_PTR = torch.Tensor.data_ptr
_IS_CONTIGUOUS = torch.Tensor.is_contiguous


def _torch_dtype_code(dtype, what):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        raise TypeError(f"uopjit.torch: {what} has dtype {dtype}; expected float32, float64, bfloat16 or float16")
    return _lib.DTYPES[name]


class _Updater:
    """One uj_optim_t: a built-in updater (name) or a text of one's own."""

    def __init__(self, name=None, text=None, label="custom"):
        handle = ctypes.c_void_p()
        if text is None:
            _lib.check(_lib.lib.uj_optim_new(_lib.c_string(name, "updater name"), ctypes.byref(handle)))
        else:
            _lib.check(_lib.lib.uj_optim_new_source(_lib.c_string(label, "updater name"),
                                                    _lib.c_string(text, "updater text"), ctypes.byref(handle)))
        self.handle = handle.value
        self._free = _lib.lib.uj_optim_free
        count = _lib.lib.uj_optim_state_count(self.handle)
        self.states = tuple(_lib.lib.uj_optim_state_name(self.handle, i).decode() for i in range(count))
        count = _lib.lib.uj_optim_hparam_count(self.handle)
        self.hparams = tuple(_lib.lib.uj_optim_hparam_name(self.handle, i).decode() for i in range(count))
        self._given = {}  # what each hyperparameter was last set to: a float, or a tuple per tensor
        self._scale = None

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            self._free(handle)

    def set_values(self, values):
        """values: {name: float shared by the bucket, or a tuple, one per tensor}."""
        for name, value in values.items():
            if self._given.get(name) == value:
                continue
            key = _lib.c_string(name, "hyperparameter name")
            if isinstance(value, tuple):
                array = (ctypes.c_double * len(value))(*value)
                _lib.check(_lib.lib.uj_optim_set_per_group(self.handle, key, array, len(value)))
            else:
                _lib.check(_lib.lib.uj_optim_set(self.handle, key, value))
            self._given[name] = value

    def set_grad_scale(self, scale):
        if scale != self._scale:
            _lib.check(_lib.lib.uj_optim_set_grad_scale(self.handle, scale))
            self._scale = scale


class _Bucket:
    """The structs of one multi-tensor call, kept while its tensors stay the
    same objects: parameters (or their masters), half copies, states."""

    def __init__(self, updater, params, targets, halves, states):
        n = len(params)
        self.params, self.targets, self.halves, self.states = params, targets, halves, states
        self.state_dicts = None
        self.param_structs = (_lib.Tensor * n)()
        self.grad_structs = (_lib.Tensor * n)()
        self.half_structs = (_lib.Tensor * n)() if halves else None
        ns = len(updater.states)
        self.state_structs = (_lib.Tensor * max(n * ns, 1))()
        self.state_pointers = (ctypes.POINTER(_lib.Tensor) * max(n * ns, 1))()
        self.groups = (_lib.OptimGroup * n)()
        for i in range(n):
            fill_tensor(self.param_structs[i], targets[i])
            group = self.groups[i]
            group.param = ctypes.pointer(self.param_structs[i])
            group.grad = ctypes.pointer(self.grad_structs[i])
            if halves:
                fill_tensor(self.half_structs[i], halves[i])
                group.param_half = ctypes.pointer(self.half_structs[i])
            for k in range(ns):
                j = i * ns + k
                fill_tensor(self.state_structs[j], states[i][k])
                self.state_pointers[j] = ctypes.pointer(self.state_structs[j])
            if ns:
                address = ctypes.addressof(self.state_pointers) + i * ns * ctypes.sizeof(ctypes.c_void_p)
                group.state = ctypes.cast(address, ctypes.POINTER(ctypes.POINTER(_lib.Tensor)))
            fill_tensor(self.grad_structs[i], params[i])  # a gradient's shape and dtype; its address per step
        # the gradients' addresses, written at every step in one go: the
        # first 8 bytes of each struct
        words = ctypes.sizeof(_lib.Tensor) // 8
        self.grad_data = np.frombuffer(self.grad_structs, dtype=np.uint64).reshape(n, words)[:, 0]
        self.report = _lib.OptimReport()

    def same(self, params, states_of):
        if len(params) != len(self.params):
            return False
        for p, q, s in zip(params, self.params, self.states):
            if p is not q:
                return False
            if any(a is not b for a, b in zip(states_of(p), s)):
                return False
        return True


def _check_dense(t, what):
    if t.is_sparse:
        raise RuntimeError(f"uopjit.torch: {what} is sparse; the fused optimizers take dense tensors")
    if not t.is_contiguous():
        raise ValueError(f"uopjit.torch: {what} is not contiguous; the optimizer updates parameters in place "
                         f"through their memory (use contiguous parameters and gradients)")


class Optimizer(torch.optim.Optimizer):
    """A torch.optim.Optimizer stepping with a uopjit updater.

    Subclasses (AdamW, Adam, ...) choose the built-in rule per group; use
    Optimizer.from_source(text, params, **defaults) for a rule of your own.
    engine: "auto", "interp", "mir", "c" (the host engines; CUDA tensors run
    on "cuda" under "auto"); threads: host threads (None: the library's
    default); master_weights: keep an f32 master copy for bf16/f16 params.
    """

    _step_supports_amp_scaling = True
    # the updater's state names -> torch's, and its hyperparameters from a group
    _STATE_NAMES = {}

    def __init__(self, params, defaults, *, engine="auto", threads=None, master_weights=False):
        self._plan = None
        super().__init__(params, defaults)
        self._engine = _context.engine_value(engine)
        self._threads = _context.threads_value(threads)
        self._master_weights = bool(master_weights)
        self._updaters = {}
        self._buckets = {}
        self._source = None

    # ---- what a subclass says -------------------------------------------------

    def _rule(self, group):
        """The built-in updater's name for this group's options."""
        raise NotImplementedError

    def _values(self, group):
        """{updater hyperparameter: float} from a param group."""
        raise NotImplementedError

    def _init_state(self, p, group, names):
        """Fills a new state: torch's names, zeros (Adagrad starts elsewhere)."""
        state = self.state[p]
        target = state["master_param"] if "master_param" in state else p
        for name in names:
            state[name] = torch.zeros_like(target, memory_format=torch.contiguous_format)

    def _uses_step(self):
        return True

    # ---- from a text -----------------------------------------------------------

    @classmethod
    def from_source(cls, text, params, *, name="custom", engine="auto", threads=None, master_weights=False,
                    **defaults):
        """An optimizer running the updater text (sections [defaults],
        [scalars], [update], [apply]: see docs/PYTHON.md); every
        hyperparameter is a param-group key, its default the text's unless
        given here. State tensors keep the text's names."""
        updater = _Updater(text=text, label=name)
        merged = {}
        for h in updater.hparams:
            value = ctypes.c_double()
            if _lib.lib.uj_optim_get(updater.handle, h.encode(), ctypes.byref(value)) == 0:
                merged[h] = value.value
        for key, value in defaults.items():
            if key not in updater.hparams:
                raise ValueError(f"uopjit.torch: {key!r} is not a hyperparameter of updater {name!r}; "
                                 f"it has {', '.join(updater.hparams) or 'none'}")
            merged[key] = _lib.c_double(value, f"hyperparameter {key!r}")
        self = cls.__new__(cls)
        Optimizer.__init__(self, params, merged, engine=engine, threads=threads, master_weights=master_weights)
        self._source = updater
        return self

    # ---- the step ----------------------------------------------------------------

    def _updater(self, rule):
        if self._source is not None:
            return self._source
        updater = self._updaters.get(rule)
        if updater is None:
            updater = self._updaters[rule] = _Updater(name=rule)
        return updater

    def _custom_values(self, group):
        values = {}
        for h in self._source.hparams:
            if h not in group:
                raise ValueError(f"uopjit.torch: hyperparameter {h!r} has no value: give it as a keyword "
                                 f"of from_source or in the param group")
            values[h] = _lib.c_double(group[h], f"hyperparameter {h!r}")
        return values

    def _next_step(self, state, known):
        """The step t this parameter takes next (1 on its first)."""
        step = state.get("step")
        if step is None:
            return 1
        entry = known.get(id(step))
        if entry is None or entry[0] is not step:
            entry = known[id(step)] = (step, int(step.item()) if torch.is_tensor(step) else int(step))
        return entry[1] + 1

    def _target(self, p, index):
        """The tensor a step updates for p: p, or its f32 master copy."""
        if p.dtype in _HALF and self._master_weights:
            state = self.state[p]
            if "master_param" not in state:
                state["master_param"] = p.detach().float().contiguous()
            return state["master_param"]
        _torch_dtype_code(p.dtype, f"parameter {index}")
        return p

    def _scaler_begin(self, grad_scaler):
        """(loss scale for the library, skip the step) under a GradScaler."""
        if grad_scaler is None:
            return 1.0, False
        from torch.cuda.amp.grad_scaler import OptState
        state = grad_scaler._per_optimizer_states[id(self)]
        if state["stage"] is OptState.UNSCALED:
            # unscale_(optimizer) ran already (to clip): gradients are plain
            # and the scaler holds found_inf
            found = sum(float(v.item()) for v in state["found_inf_per_device"].values())
            return 1.0, found != 0
        return float(grad_scaler._get_scale_async().item()), False

    @torch.no_grad()
    def step(self, closure=None, *, grad_scaler=None):
        """One step over every parameter with a gradient (None ones are
        skipped). closure: re-evaluates the model and returns the loss;
        grad_scaler: given by torch.cuda.amp.GradScaler.step."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        scale, skip = self._scaler_begin(grad_scaler)
        if skip:
            return loss
        # The plan of the last step (its buckets) serves again while the
        # same parameters have gradients and their step tensors are the ones
        # it left: then the per-parameter walk below is skipped, and a step
        # costs little more than one address per gradient.
        groups = self.param_groups
        params = groups[0]["params"] if len(groups) == 1 else [p for g in groups for p in g["params"]]
        grads = list(map(_GRAD, params))
        # which gradients are None, by identity (`None in grads` would call Tensor.__eq__)
        key = (tuple(map(id, params)), tuple(map(operator.is_, grads, itertools.repeat(None))))
        plan = self._plan
        if plan is None or plan[0] != key or not self._plan_current(plan[1]):
            plan = self._plan = (key, self._make_plan())
        buckets = plan[1]
        if not buckets:
            return loss
        if grad_scaler is not None and len(buckets) > 1:
            # one step is all or nothing: the library skips per call
            bad = any(not torch.isfinite(p.grad).all() for b in buckets for p in b["params"])
            if bad:
                self._record_found_inf(grad_scaler, buckets, True)
                return loss
        skipped = False
        for b in buckets:
            whole = len(b["index"]) == len(grads)
            one = self._run_bucket(b, scale, grads if whole else [grads[i] for i in b["index"]])
            skipped |= one
            if not one:
                b["t"] = b["t"] + 1 if self._uses_step() else 2
                b["step"] = self.state[b["params"][0]].get("step")
            elif not self._uses_step():
                b["t"] = self._momentum_step(self.state[b["params"][0]])
        if grad_scaler is not None:
            self._record_found_inf(grad_scaler, buckets, skipped)
        return loss

    def _plan_current(self, buckets):
        if not self._uses_step():
            return True
        return all(self.state[b["params"][0]].get("step") is b["step"] for b in buckets)

    def _make_plan(self):
        """The buckets of a step: parameters with a gradient grouped by
        (rule, device, dtype, step count), with their state made."""
        buckets, known, index = {}, {}, 0
        for gi, group in enumerate(self.param_groups):
            rule = None if self._source is not None else self._rule(group)
            for p in group["params"]:
                index += 1
                if p.grad is None:
                    continue
                state = self.state[p]
                target = self._target(p, index - 1)
                if len(state) == 0 or (len(state) == 1 and "master_param" in state):
                    self._init_state(p, group, [self._state_name(rule, s) for s in self._updater(rule).states])
                t = self._next_step(state, known) if self._uses_step() else self._momentum_step(state)
                bucket = buckets.get((rule, p.device, p.dtype, t))
                if bucket is None:
                    bucket = buckets[(rule, p.device, p.dtype, t)] = {
                        "rule": rule, "device": p.device, "t": t, "params": [], "targets": [], "group_ids": [],
                        "index": [], "step": None}
                bucket["params"].append(p)
                bucket["targets"].append(target)
                bucket["group_ids"].append(gi)
                bucket["index"].append(index - 1)
        for bucket in buckets.values():
            bucket["one_group"] = len(set(bucket["group_ids"])) == 1
        return list(buckets.values())

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        self._plan = None

    def _record_found_inf(self, grad_scaler, buckets, skipped):
        devices = {b["device"] for b in buckets}
        state = grad_scaler._per_optimizer_states[id(self)]
        state["found_inf_per_device"] = {d: torch.full((1,), 1.0 if skipped else 0.0, dtype=torch.float32, device=d)
                                         for d in devices}

    def _state_name(self, rule, name):
        return self._STATE_NAMES.get(name, name)

    def _run_bucket(self, plan, scale, grads):
        """One multi-tensor call: the bucket `plan` of _make_plan, with these
        gradients (one per parameter). True when the library skipped it."""
        rule, device, t, params, targets = plan["rule"], plan["device"], plan["t"], plan["params"], plan["targets"]
        group_ids = plan["group_ids"]
        updater = self._updater(rule)
        names = [self._state_name(rule, s) for s in updater.states]
        key = (rule, device, params[0].dtype)
        bucket = self._buckets.get(key)
        halves = params if targets[0] is not params[0] else None

        def states_of(p):
            state = self.state[p]
            return [state[n] for n in names]
        if bucket is None or (bucket.params is not params and (not bucket.same(params, states_of) or any(
                a is not b for a, b in zip(targets, bucket.targets)))):
            for i, p in enumerate(params):
                _check_dense(p, f"parameter {i} of the bucket")
                for n in names:
                    s = self.state[p][n]
                    if s.shape != targets[i].shape or s.dtype != targets[i].dtype or not s.is_contiguous():
                        raise ValueError(f"uopjit.torch: state {n!r} of a parameter of shape {tuple(p.shape)} has "
                                         f"shape {tuple(s.shape)} and dtype {s.dtype}; expected the shape and "
                                         f"dtype {targets[i].dtype} of the tensor it updates, contiguous")
            bucket = self._buckets[key] = _Bucket(updater, params, targets, halves,
                                                  [states_of(p) for p in params])
        if bucket.params is not params or bucket.state_dicts is None:
            bucket.params = params  # the plan's list: the next step's identity check
            bucket.state_dicts = [self.state[p] for p in params]
        # gradients: new tensors at every step (zero_grad(set_to_none=True)).
        # torch refuses a .grad of another shape, dtype or device than its
        # parameter's, so the structs keep the parameter's (set once, in
        # _Bucket); only the layout may differ, and the address.
        try:
            dense = all(map(_IS_CONTIGUOUS, grads))
        except RuntimeError:  # a sparse tensor has no is_contiguous
            dense = False
        if not dense:
            for i, g in enumerate(grads):
                _check_dense(g, f"the gradient of parameter {i} of the bucket")
        bucket.grad_data[:] = np.fromiter(map(_DATA_PTR, grads), np.uint64, len(grads))
        # hyperparameters, read from the groups now (schedulers change them)
        values_of = self._custom_values if self._source is not None else self._values
        first = group_ids[0]
        if plan["one_group"]:
            values = values_of(self.param_groups[first])
        else:
            per_group = {gi: values_of(self.param_groups[gi]) for gi in set(group_ids)}
            values = {}
            for name in per_group[first]:
                column = tuple(per_group[gi][name] for gi in group_ids)
                values[name] = column[0] if all(v == column[0] for v in column) else column
        updater.set_values(values)
        updater.set_grad_scale(scale)
        _lib.check(_lib.lib.uj_optim_set_step_count(updater.handle, t - 1))
        ctx = _context.get(self._engine, self._threads)
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        _lib.check(_lib.lib.uj_optim_step(ctx.handle, updater.handle, bucket.groups, len(params),
                                          ctypes.byref(bucket.report)))
        if device.type == "cuda":
            _lib.check(_lib.lib.uj_ctx_synchronize(ctx.handle))
        if bucket.report.skipped:
            return True
        if self._uses_step():
            step = torch.tensor(float(t))
            for state in bucket.state_dicts:
                state["step"] = step
        return False

    def _momentum_step(self, state):
        return 1

    def state_dict(self):
        """torch's layout; each parameter's step a tensor of its own (torch
        increments them in place, and a shared one would count once per
        parameter there)."""
        packed = super().state_dict()
        for key, state in packed["state"].items():
            if torch.is_tensor(state.get("step")):
                packed["state"][key] = dict(state, step=state["step"].clone())
        return packed

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._buckets.clear()
        self._plan = None


def _torch_defaults(cls, **kwargs):
    """The defaults torch's own optimizer `cls` makes of these arguments:
    its checks, its messages and every key its step reads."""
    probe = torch.zeros(1, requires_grad=True)
    return dict(cls([probe], **kwargs).defaults)


class AdamW(Optimizer):
    """torch.optim.AdamW: decoupled weight decay; amsgrad and maximize."""
    _STATE_NAMES = {"m": "exp_avg", "v": "exp_avg_sq", "vmax": "max_exp_avg_sq"}
    _TORCH = torch.optim.AdamW
    _RULES = ("adamw", "adamw_amsgrad")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, engine="auto", threads=None, master_weights=False, **torch_options):
        defaults = _torch_defaults(self._TORCH, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                   amsgrad=amsgrad, maximize=maximize, **torch_options)
        super().__init__(params, defaults, engine=engine, threads=threads, master_weights=master_weights)

    def _rule(self, group):
        return self._RULES[1] if group["amsgrad"] else self._RULES[0]

    def _values(self, group):
        b1, b2 = group["betas"]
        return {"lr": float(group["lr"]), "b1": float(b1), "b2": float(b2), "eps": float(group["eps"]),
                "wd": float(group["weight_decay"]), "maximize": float(bool(group.get("maximize", False)))}


class Adam(AdamW):
    """torch.optim.Adam: L2 weight decay added to the gradient."""
    _TORCH = torch.optim.Adam
    _RULES = ("adam", "adam_amsgrad")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, **options):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, **options)


class SGD(Optimizer):
    """torch.optim.SGD: momentum, dampening, nesterov, weight_decay, maximize."""
    _STATE_NAMES = {"buf": "momentum_buffer"}

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, engine="auto", threads=None, master_weights=False,
                 **torch_options):
        defaults = _torch_defaults(torch.optim.SGD, lr=lr, momentum=momentum, dampening=dampening,
                                   weight_decay=weight_decay, nesterov=nesterov, maximize=maximize, **torch_options)
        super().__init__(params, defaults, engine=engine, threads=threads, master_weights=master_weights)

    def _rule(self, group):
        return "sgd_momentum" if group["momentum"] != 0 else "sgd"

    def _values(self, group):
        values = {"lr": float(group["lr"]), "wd": float(group["weight_decay"]),
                  "maximize": float(bool(group.get("maximize", False)))}
        if group["momentum"] != 0:
            values.update(momentum=float(group["momentum"]), dampening=float(group["dampening"]),
                          nesterov=float(bool(group["nesterov"])))
        return values

    def _uses_step(self):
        return False

    def _init_state(self, p, group, names):
        # torch keeps momentum_buffer = None until a step with momentum makes it
        self.state[p]["momentum_buffer"] = None

    def _momentum_step(self, state):
        # the rule starts the buffer as the gradient on t = 1 (torch: a clone)
        return 1 if state.get("momentum_buffer") is None else 2

    def _run_bucket(self, plan, scale, grads):
        rule, t, params = plan["rule"], plan["t"], plan["params"]
        if rule == "sgd_momentum":
            for p in params:
                state = self.state[p]
                if state.get("momentum_buffer") is None:
                    target = state["master_param"] if "master_param" in state else p
                    state["momentum_buffer"] = torch.zeros_like(target, memory_format=torch.contiguous_format)
        skipped = super()._run_bucket(plan, scale, grads)
        if skipped and t == 1:
            for p in params:  # a skipped first step made no buffer
                self.state[p]["momentum_buffer"] = None
        return skipped


class Adagrad(Optimizer):
    """torch.optim.Adagrad: lr_decay, initial_accumulator_value, weight_decay, maximize."""
    _STATE_NAMES = {"acc": "sum"}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False, engine="auto", threads=None, master_weights=False, **torch_options):
        defaults = _torch_defaults(torch.optim.Adagrad, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                   initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize,
                                   **torch_options)
        super().__init__(params, defaults, engine=engine, threads=threads, master_weights=master_weights)
        # torch makes the state when the optimizer is made; so does this
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = torch.tensor(0.0)
                init = group["initial_accumulator_value"]
                target = torch.empty(p.shape, dtype=torch.float32 if p.dtype in _HALF else p.dtype, device=p.device)
                state["sum"] = torch.full_like(target, init, memory_format=torch.contiguous_format)

    def _rule(self, group):
        return "adagrad"

    def _values(self, group):
        return {"lr": float(group["lr"]), "lr_decay": float(group["lr_decay"]), "eps": float(group["eps"]),
                "wd": float(group["weight_decay"]), "maximize": float(bool(group.get("maximize", False)))}


class RMSprop(Optimizer):
    """torch.optim.RMSprop: alpha, eps, weight_decay, momentum, centered, maximize."""
    _STATE_NAMES = {"v": "square_avg", "ga": "grad_avg", "buf": "momentum_buffer"}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False, engine="auto", threads=None, master_weights=False, **torch_options):
        defaults = _torch_defaults(torch.optim.RMSprop, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                   momentum=momentum, centered=centered, maximize=maximize, **torch_options)
        super().__init__(params, defaults, engine=engine, threads=threads, master_weights=master_weights)

    def _rule(self, group):
        return "rmsprop" + ("_centered" if group["centered"] else "") + ("_momentum" if group["momentum"] > 0 else "")

    def _values(self, group):
        values = {"lr": float(group["lr"]), "alpha": float(group["alpha"]), "eps": float(group["eps"]),
                  "wd": float(group["weight_decay"]), "maximize": float(bool(group.get("maximize", False)))}
        if group["momentum"] > 0:
            values["momentum"] = float(group["momentum"])
        return values


def _check_betas(lr, betas, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Lion(Optimizer):
    """Lion (Chen et al. 2023): the sign of an interpolation of the momentum
    and the gradient; state exp_avg. Not in torch.optim: its arguments are
    the usual ones (lr, betas, weight_decay)."""
    _STATE_NAMES = {"m": "exp_avg"}

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *, engine="auto", threads=None,
                 master_weights=False):
        _check_betas(lr, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay), engine=engine,
                         threads=threads, master_weights=master_weights)

    def _rule(self, group):
        return "lion"

    def _values(self, group):
        b1, b2 = group["betas"]
        return {"lr": float(group["lr"]), "b1": float(b1), "b2": float(b2), "wd": float(group["weight_decay"])}


class LAMB(Optimizer):
    """LAMB (You et al. 2019): Adam's step scaled per tensor by the trust
    ratio ||p|| / ||update||; state exp_avg, exp_avg_sq."""
    _STATE_NAMES = {"m": "exp_avg", "v": "exp_avg_sq"}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, *, engine="auto",
                 threads=None, master_weights=False):
        _check_betas(lr, betas, weight_decay)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay), engine=engine,
                         threads=threads, master_weights=master_weights)

    def _rule(self, group):
        return "lamb"

    def _values(self, group):
        b1, b2 = group["betas"]
        return {"lr": float(group["lr"]), "b1": float(b1), "b2": float(b2), "eps": float(group["eps"]),
                "wd": float(group["weight_decay"])}
