"""uopjit._kernel: Kernel, a parsed uopjit program called with arrays by name,
and evaluate, its one-line form with a per-process cache of kernels.

A call binds each program input to its value, turns every value into a
uj_tensor_t, allocates the outputs not given in out= (with the dtype and
shape the library infers), runs the program once and returns the outputs in
the program's order. Broadcasting is the library's (the expression language
broadcasts as NumPy); the Python side only prepares memory:

  - NumPy arrays are used in place when C-contiguous, aligned and in native
    byte order, else copied into such an array (inputs only: an out= array
    that is none of these is refused, since writing into a copy would lose
    the result);
  - Python numbers are "weak", as in NumPy 2: they take the dtype the program
    declares for the input, else that of the call's array inputs (the widest),
    so that a*x with x f32 stays f32; with no array at all they are f64. As
    in NumPy 2, an int that does not fit that dtype (2**32 for i32) raises
    OverflowError naming the input, never wraps; a float for an input
    declared i32 must be a whole number (_dtypes.number_array);
  - NumPy scalars and 0-d arrays keep their own dtype;
  - GPU arrays (torch, CuPy: _gpu) are borrowed, never copied, and make the
    call run on the CUDA engine; the numbers of such a call go to the GPU as
    0-d tensors of uopjit's own memory.

The cached call. On 1,000 elements a kernel runs in about a microsecond, so
a call's cost is the Python around it. Calls whose values are all NumPy
arrays (exactly np.ndarray, C-contiguous, aligned, native byte order),
Python numbers and NumPy scalars, with out= absent or NumPy arrays, take a
path that reuses what earlier calls of the same signature built
(Kernel._fast): the signature is each input's kind (array, or the number's
type) with an array's dtype and rank, and each output's (allocated, or the
out= array's dtype and rank). Per signature an _Entry keeps the uj_tensor_t
structs and uj_tensor_t* arrays (a call writes only the data pointers, and
the dims where a shape changed), a 0-d cell per number (the dtype of a weak
number follows from the signature, so only its value is written), the
outputs' dtypes and, for the input shapes last seen, their shapes (inferred
again whenever an input's shape changes, through _known_shapes as the
general path does), and the uj_program_run arguments; a function written
for the signature (_compile) does the call in straight-line code, reading
each array's data pointer and flags from the array object itself (_cursor).
Entries are per thread (threading.local), as are the uopjit contexts, so two
threads calling one Kernel never write the same structs; an entry in use is
marked busy, so a call nested in another on the same thread (a finalizer run
by the garbage collector mid-call) goes elsewhere. Whatever else a call holds
(another array type, a copy to make, a value to check or refuse) takes the
general path, which gives every error its usual message.
"""
import collections
import ctypes
import sys
import threading
import weakref

import numpy as np

from . import _context, _dtypes, _gpu, _lib
from ._cached_call import (_ARRAY_DATA, _ASSIGN, _ASSIGN_INT32, _CONVERT, _ENTRIES, _Entry, _FORWARD,
                           _HEADS_READABLE, _MISMATCH, _NUMPY_SCALARS, _SLOW,
                           _ThreadState, _compile, _cursor, _ndarray, _picker, _signature,
                           _words)

_PRIORITY = {"f64": 4, "f32": 3, "f16": 2, "bf16": 2, "i32": 1}


def parse(source):
    """A uj_program_t* for source; a bare expression ('1/(1+exp(-x))') means
    'y = EXPR'. When neither form parses, the error is the one that got
    further into the text, in the columns of the text as given."""
    text = _lib.c_string(source, "source text")
    handle = ctypes.c_void_p()
    status = _lib.lib.uj_program_parse(text, ctypes.byref(handle))
    if status == 0:
        return handle
    first = (_lib.lib.uj_status_str(status).decode(), _lib.lib.uj_last_error().decode(errors="replace"))
    if first[0] != "UJ_ERR_PARSE":
        raise _lib.Error(*first)
    prefix = "y = "
    if _lib.lib.uj_program_parse(prefix.encode() + text, ctypes.byref(handle)) == 0:
        return handle
    second = _lib.lib.uj_last_error().decode(errors="replace")
    column_first, column_second = _column(first[1]), _column(second)
    if column_first is not None and column_second is not None and column_second - len(prefix) > column_first:
        head, rest = second.split(", column ", 1)
        rest = rest[len(str(column_second)):]
        raise _lib.Error("UJ_ERR_PARSE", f"{head}, column {column_second - len(prefix)}{rest}")
    raise _lib.Error(*first)


def _column(message):
    """The column of a "program line 1, column C: ..." message, else None."""
    start = "program line 1, column "
    if not message.startswith(start):
        return None
    digits = message[len(start):].split(":", 1)[0]
    return int(digits) if digits.isdigit() else None


class _Program:
    """Owns a uj_program_t."""

    def __init__(self, source):
        self.handle = parse(source)
        self.free = _lib.lib.uj_program_free

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            self.free(handle)


def _host_tensor(array, dtype_value):
    if array.ndim > _lib.MAX_DIMS:
        raise ValueError(f"uopjit: an array of {array.ndim} axes; uopjit takes at most {_lib.MAX_DIMS}")
    return _lib.Tensor(array.__array_interface__["data"][0], dtype_value, _lib.CPU, array.ndim,
                       _lib.Dims(*array.shape))


def _gpu_tensor(g, dtype_value):
    t = _lib.Tensor()
    t.data = g.pointer
    t.dtype = dtype_value
    t.device = _lib.CUDA
    t.ndim = len(g.shape)
    for i, d in enumerate(g.shape):
        t.dims[i] = d
    return t


def _host_array(value, what):
    """(array usable in place, dtype name) for a NumPy-like input value."""
    bits = isinstance(value, _dtypes.bf16)
    array = value.array if bits else value if isinstance(value, np.ndarray) else np.asarray(value)
    name = "bf16" if bits else _dtypes.name_of_numpy(array.dtype, what)
    if not (array.flags.c_contiguous and array.flags.aligned and array.dtype.isnative):
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
    return array, name


def _out_array(value, what):
    """(array, dtype name) for an out= value: refused unless writable in place."""
    bits = isinstance(value, _dtypes.bf16)
    array = value.array if bits else value
    if not isinstance(array, np.ndarray):
        raise TypeError(f"uopjit: {what} is a {type(array).__name__}; out= takes NumPy arrays "
                        f"(or GPU arrays on a GPU call)")
    name = "bf16" if bits else _dtypes.name_of_numpy(array.dtype, what)
    if not array.flags.writeable:
        raise ValueError(f"uopjit: {what} is read-only")
    if not (array.flags.c_contiguous and array.flags.aligned and array.dtype.isnative):
        raise ValueError(f"uopjit: {what} is not a C-contiguous, aligned, native-byte-order array "
                         f"(strides {array.strides}); uopjit writes outputs in place only: pass "
                         f"np.ascontiguousarray(...) and copy back, or leave it out of out=")
    return array, name


def bind_inputs(inputs, args, kwargs, who):
    """The values of a call, one per input name in `inputs` (the program's
    order): positional ones first, then keywords. The TypeError of a value
    too many, twice, unknown or missing names it; `who` starts it."""
    if len(args) > len(inputs):
        raise TypeError(f"{who}: {len(args)} positional values for {len(inputs)} inputs {inputs}")
    values = dict(zip(inputs, args))
    for name, value in kwargs.items():
        if name not in inputs:
            raise TypeError(f"{who}: {name!r} is not an input of the program; its inputs are {inputs}")
        if name in values:
            raise TypeError(f"{who}: input {name!r} given twice")
        values[name] = value
    missing = [n for n in inputs if n not in values]
    if missing:
        raise TypeError(f"{who}: missing input{'s' if len(missing) > 1 else ''} "
                        + ", ".join(repr(n) for n in missing) + f" (the program's inputs are {inputs})")
    return [values[n] for n in inputs]


def _is_number(value):
    return isinstance(value, (int, float, bool)) and not isinstance(value, np.generic)


class Kernel:
    """A uopjit program, compiled on first call for the dtypes and ranks it
    meets, called with arrays and numbers by name:

        k = uopjit.Kernel("y = 1/(1+exp(-(a*x+b)))")
        y = k(x=x, a=1.5, b=0.2)

    engine: "auto" (tiered MIR then C on the CPU, CUDA for GPU arrays),
    "interp", "mir", "c" or "cuda". threads: the CPU threads of a call (None:
    UOPJIT_THREADS, else every core)."""

    def __init__(self, source, engine="auto", threads=None):
        self._engine = _context.engine_value(engine)
        threads = self._threads = _context.threads_value(threads)
        _context.get(self._engine, threads)  # an unavailable engine or bad count fails here
        self.source = source
        self._program = _Program(source)
        handle = self._program.handle
        lib = _lib.lib
        self.inputs = tuple(lib.uj_program_io_name(handle, 0, i).decode()
                            for i in range(lib.uj_program_io_count(handle, 0)))
        self.outputs = tuple(lib.uj_program_io_name(handle, 1, i).decode()
                             for i in range(lib.uj_program_io_count(handle, 1)))
        declared = ctypes.c_int()
        self._known_shapes = {}  # input signature -> [(output dtype name, shape)]
        self._declared = tuple(_dtypes.name_of_value(declared.value)
                               if lib.uj_program_input_dtype(handle, i, ctypes.byref(declared)) else None
                               for i in range(len(self.inputs)))
        # The cached call (_fast): the inputs picked from keyword arguments in
        # program order (and the outputs from an out= dict), the outputs'
        # names, each thread's entries.
        self._pick, self._pick_out = _picker(self.inputs), _picker(self.outputs)
        self._output_set = frozenset(self.outputs)
        self._no_out = (None,) * len(self.outputs)
        self._n_in, self._n_out, self._handle = len(self.inputs), len(self.outputs), handle
        self._local = threading.local()

    def __repr__(self):
        return f"uopjit.Kernel({self.source!r}): inputs {self.inputs}, outputs {self.outputs}"

    def _bind(self, args, kwargs):
        return bind_inputs(self.inputs, args, kwargs, "uopjit")

    def _bind_out(self, out):
        """{output index: value} from out= (a dict by name, a sequence in
        program order, or one array for a one-output program)."""
        if out is None:
            return {}
        if isinstance(out, dict):
            unknown = [k for k in out if k not in self.outputs]
            if unknown:
                raise TypeError(f"uopjit: out= names {unknown[0]!r}, which is not an output; "
                                f"the outputs are {self.outputs}")
            return {self.outputs.index(k): v for k, v in out.items() if v is not None}
        if isinstance(out, (tuple, list)):
            if len(out) != len(self.outputs):
                raise TypeError(f"uopjit: out= has {len(out)} arrays for {len(self.outputs)} outputs {self.outputs}")
            return {i: v for i, v in enumerate(out) if v is not None}
        if len(self.outputs) != 1:
            raise TypeError(f"uopjit: one out= array for {len(self.outputs)} outputs {self.outputs}: "
                            f"pass a dict by name")
        return {0: out}

    def __call__(self, *args, out=None, **kwargs):
        if not args:
            try:
                values = self._pick(kwargs)
            except KeyError:  # a name missing: the general path says which
                values = None
            if values is not None and len(values) == len(kwargs):
                result = self._fast(values, out)
                if result is not _SLOW:
                    return result
        elif len(args) == self._n_in and not kwargs:
            result = self._fast(args, out)
            if result is not _SLOW:
                return result
        values = self._bind(args, kwargs)
        given_out = self._bind_out(out)
        ctx = _context.get(self._engine, self._threads)
        if any(_gpu.is_gpu(v) for v in values) or any(_gpu.is_gpu(v) for v in given_out.values()):
            return self._run_gpu(ctx, values, given_out)
        return self._run_host(ctx, values, given_out)

    def _outs(self, out):
        """out= (not None) as one value or None (allocate) per output, in
        program order; None when it is not a form the cached call takes (the
        general path reads it, or says what is wrong with it)."""
        kind = type(out)
        if kind is _ndarray:
            return (out,) if self._n_out == 1 else None
        if kind is dict:
            return tuple(map(out.get, self.outputs)) if out.keys() <= self._output_set else None
        if kind is tuple or kind is list:
            return out if len(out) == self._n_out else None
        return None

    def _fast(self, values, out):
        """The call through this thread's entry for the signature of values
        (one per input, in program order) and out=, or _SLOW when the general
        path must take it. Raises only what the general path would raise at
        the same point: uopjit.Error of shape inference and of the run."""
        if out is None:
            outs = self._no_out
        else:
            kind = type(out)
            if kind is _ndarray and self._n_out == 1:
                outs = (out,)
            elif kind is dict and len(out) == self._n_out:  # every output named, as for updates in place
                try:
                    outs = self._pick_out(out)
                except KeyError:
                    outs = None
            else:
                outs = self._outs(out)
            if outs is None:
                return _SLOW
        try:
            state = self._local.state
        except AttributeError:
            if not _HEADS_READABLE:
                return _SLOW
            state = self._local.state = _ThreadState()
        context = state.context()
        if context is None:  # this thread's first call, or its context was dropped
            context = _context.get(self._engine, self._threads)
            state.context, state.context_arg = weakref.ref(context), ctypes.c_void_p(context.handle)
            state.entries.clear()  # their run_args name the context they were made for
            state.last = None
        call = state.last
        if call is not None:
            result = call(self, values, outs)
            if result is not _MISMATCH:
                return result
        key = _signature(values, outs)
        if key is None:
            return _SLOW
        call = state.entries.get(key)
        if call is None:
            call = self._entry(values, outs, state.context_arg)
            if call is None:
                return _SLOW
            if len(state.entries) >= _ENTRIES:
                state.entries.clear()
            state.entries[key] = call
        state.last = call
        result = call(self, values, outs)
        return _SLOW if result is _MISMATCH else result  # busy: a call nested in one that uses it

    def _entry(self, values, outs, context_arg):
        """The call (_compile) of a new _Entry for the signature of values and
        outs, run on the context context_arg, with the outputs' dtypes and
        shapes inferred for these values; None when the general path must
        take the call (a dtype uopjit lacks, a byte order not native, too
        many axes, out= arrays of other dtypes than inferred, shapes that do
        not broadcast: it copies, or raises, there)."""
        entry = _Entry()
        entry.busy = False
        aim, cursor = entry.aim, entry.cursor = _cursor()
        try:
            names = [None] * len(values)
            for i, v in enumerate(values):
                if type(v) is _ndarray or type(v) in _NUMPY_SCALARS:
                    if not v.dtype.isnative or v.ndim > _lib.MAX_DIMS:
                        return None
                    names[i] = _dtypes.name_of_numpy(v.dtype, f"input {self.inputs[i]!r}")
            array_names = [n for n in names if n is not None]
            structs, entry.in_ptrs = _lib.tensor_array(len(values))
            arrays, numbers, shapes = [], [], []
            for i, v in enumerate(values):
                t, tensor = type(v), structs[i]
                if t is _ndarray:
                    aim[0] = id(v)
                    tensor.data, tensor.ndim = cursor[_ARRAY_DATA], v.ndim
                    tensor.dims[:v.ndim] = v.shape
                    arrays.append((i, v.dtype, tensor, v.ndim, len(shapes)))
                    shapes.append(v.shape)
                else:
                    if t in _NUMPY_SCALARS:
                        how = _ASSIGN
                    else:
                        names[i] = self._number_dtype(i, v, array_names)
                        floats = names[i] in ("f32", "f64", "f16")
                        how = (_ASSIGN if t is float and floats else
                               _ASSIGN_INT32 if t is not float and (floats or names[i] == "i32") else _CONVERT)
                    cell = np.zeros((), _dtypes.numpy_of_name(names[i]))
                    numbers.append((i, t, cell, how))
                    tensor.data, tensor.ndim = cell.ctypes.data, 0
                tensor.dtype = _dtypes.library_dtype(names[i], f"input {self.inputs[i]!r}")
                tensor.device = _lib.CPU
            entry.in_structs, entry.in_words, entry.shapes = structs, _words(structs), shapes
            entry.names, entry.arrays, entry.numbers = tuple(names), tuple(arrays), tuple(numbers)
            specs = self._shapes(self._handle, entry.in_ptrs, len(outs),
                                 tuple((n, v.shape if type(v) is _ndarray else ()) for n, v in zip(names, values)))
            structs, entry.out_ptrs = _lib.tensor_array(len(outs))
            outputs = []
            for j, (o, (name, shape)) in enumerate(zip(outs, specs)):
                tensor, what = structs[j], f"out[{self.outputs[j]!r}]"
                tensor.device, tensor.dtype = _lib.CPU, _dtypes.library_dtype(name, what)
                if o is None:
                    outputs.append((False, _dtypes.numpy_of_name(name), tensor))
                    tensor.ndim = len(shape)
                    tensor.dims[:len(shape)] = shape
                else:
                    if (not o.dtype.isnative or o.ndim > _lib.MAX_DIMS
                            or _dtypes.name_of_numpy(o.dtype, what) != name):
                        return None
                    outputs.append((True, o.dtype, tensor))
                    tensor.ndim = o.ndim
            entry.out_structs, entry.out_words, entry.outputs = structs, _words(structs), tuple(outputs)
            entry.out_dims = [None] * len(outs)
            entry.out_names, entry.out_shapes = [name for name, _ in specs], [shape for _, shape in specs]
            entry.run_args = (context_arg, self._handle, _FORWARD, entry.in_ptrs, len(values), None, 0,
                              entry.out_ptrs, len(outs))
            return _compile(entry)
        except Exception:  # noqa: BLE001 - the general path raises it again, as it always has
            return None

    def _infer(self, entry):
        """Infers entry's output shapes for the input shapes its structs now
        hold (the general path's _shapes, and its cache). False when the
        outputs' dtypes come out other than entry's (the general path then
        takes the call)."""
        entry.out_shapes = None  # should inference raise, the next call infers again
        shapes = [()] * self._n_in
        for i, _, _, _, k in entry.arrays:
            shapes[i] = entry.shapes[k]
        specs = self._shapes(self._handle, entry.in_ptrs, self._n_out, tuple(zip(entry.names, shapes)))
        if [name for name, _ in specs] != entry.out_names:
            return False
        for (given, _, tensor), (_, shape) in zip(entry.outputs, specs):
            if not given:
                tensor.ndim = len(shape)
                tensor.dims[:len(shape)] = shape
        entry.out_shapes = [shape for _, shape in specs]
        return True

    def _number_dtype(self, index, value, array_names):
        if self._declared[index] is not None:
            return self._declared[index]
        widest = max(array_names, key=lambda n: _PRIORITY.get(n, 0)) if array_names else "f64"
        # A fraction beside integer arrays is not rounded to an integer.
        return "f64" if widest == "i32" and isinstance(value, float) else widest

    def _shapes(self, handle, pointers, count, signature):
        """[(dtype name, shape)] of every output for these inputs, kept per
        signature (the inputs' dtypes and shapes) for the next calls."""
        known = self._known_shapes.get(signature)
        if known is not None:
            return known
        lib, result = _lib.lib, []
        dtype, ndim, dims = ctypes.c_int(), ctypes.c_int(), (ctypes.c_int64 * _lib.MAX_DIMS)()
        for i in range(count):
            _lib.check(lib.uj_program_output_dtype(handle, _lib.FORWARD, pointers, i, ctypes.byref(dtype)))
            _lib.check(lib.uj_program_shape(handle, _lib.FORWARD, pointers, None, i, ctypes.byref(ndim), dims))
            result.append((_dtypes.name_of_value(dtype.value), tuple(dims[:ndim.value])))
        if len(self._known_shapes) >= 64:
            self._known_shapes.clear()
        self._known_shapes[signature] = result
        return result

    def _run_host(self, ctx, values, given_out):
        arrays, names = [None] * len(values), [None] * len(values)
        for i, value in enumerate(values):
            if not _is_number(value):
                arrays[i], names[i] = _host_array(value, f"input {self.inputs[i]!r}")
        array_names = [n for n in names if n is not None]
        for i, value in enumerate(values):
            if arrays[i] is None:
                names[i] = self._number_dtype(i, value, array_names)
                arrays[i] = _dtypes.number_array(value, names[i], f"input {self.inputs[i]!r}")
        tensors = [_host_tensor(a, _dtypes.library_dtype(n, f"input {self.inputs[i]!r}"))
                   for i, (a, n) in enumerate(zip(arrays, names))]
        in_ptrs = _lib.tensor_pointers(tensors)
        handle = self._program.handle
        results, out_tensors = [], []
        signature = tuple((n, a.shape) for n, a in zip(names, arrays))
        for i, (name, shape) in enumerate(self._shapes(handle, in_ptrs, len(self.outputs), signature)):
            what = f"out[{self.outputs[i]!r}]"
            if i in given_out:
                array, given_name = _out_array(given_out[i], what)
                if given_name != name:
                    raise TypeError(f"uopjit: {what} is {given_name}, but output {self.outputs[i]!r} is {name} "
                                    f"for these inputs")
                results.append(given_out[i] if isinstance(given_out[i], np.ndarray) else array)
            else:
                array = np.empty(shape, dtype=_dtypes.numpy_of_name(name))
                results.append(array)
            out_tensors.append(_host_tensor(array, _dtypes.library_dtype(name, what)))
        out_ptrs = _lib.tensor_pointers(out_tensors)
        _lib.check(_lib.lib.uj_program_run(ctx.handle, handle, _lib.FORWARD, in_ptrs, len(tensors), None, 0,
                                           out_ptrs, len(out_tensors)))
        return results[0] if len(results) == 1 else tuple(results)

    def _run_gpu(self, ctx, values, given_out):
        borrowed, names, numbers = [None] * len(values), [None] * len(values), []
        for i, value in enumerate(values):
            what = f"input {self.inputs[i]!r}"
            if _is_number(value) or isinstance(value, np.generic):
                numbers.append(i)
            elif _gpu.is_gpu(value):
                borrowed[i] = _gpu.borrow(value, what)
                names[i] = borrowed[i].dtype_name
            else:
                raise ValueError(f"uopjit: {what} is in host memory ({type(value).__name__}) but other tensors of "
                                 f"the call are on the GPU; move it to the GPU (or pass a number)")
        device = _gpu_device()
        waits = [(f"input {self.inputs[i]!r}", b) for i, b in enumerate(borrowed) if b is not None]
        scalars = []  # uopjit's own GPU memory for the numbers, freed below
        try:
            array_names = [n for n in names if n is not None]
            tensors = [None] * len(values)
            for i in range(len(values)):
                if borrowed[i] is not None:
                    tensors[i] = _gpu_tensor(borrowed[i], _dtypes.library_dtype(names[i], f"input {self.inputs[i]!r}"))
            for i in numbers:
                value = values[i]
                name = (_dtypes.name_of_numpy(value.dtype, f"input {self.inputs[i]!r}")
                        if isinstance(value, np.generic) else self._number_dtype(i, value, array_names))
                tensors[i] = _device_scalar(ctx, value, name, scalars, f"input {self.inputs[i]!r}")
            in_ptrs = _lib.tensor_pointers(tensors)
            handle = self._program.handle
            allocate = _gpu.allocator_for([b.owner for b in borrowed if b is not None])
            results, out_tensors = [], []
            signature = ("gpu",) + tuple((t.dtype, tuple(t.dims[:t.ndim])) for t in tensors)
            for i, (name, shape) in enumerate(self._shapes(handle, in_ptrs, len(self.outputs), signature)):
                what = f"out[{self.outputs[i]!r}]"
                if i in given_out:
                    g = _gpu.borrow(given_out[i], what)
                    if g.readonly:
                        raise ValueError(f"uopjit: {what} is read-only")
                    if g.dtype_name != name:
                        raise TypeError(f"uopjit: {what} is {g.dtype_name}, but output {self.outputs[i]!r} is "
                                        f"{name} for these inputs")
                    waits.append((what, g))
                    results.append(given_out[i])
                elif allocate is None:
                    raise TypeError(f"uopjit: output {self.outputs[i]!r} of a GPU call needs out= when no input "
                                    f"is a torch or CuPy array")
                else:
                    g = _gpu.borrow(allocate(shape, name), what)
                    results.append(g.owner)
                out_tensors.append(_gpu_tensor(g, _dtypes.library_dtype(name, what)))
            _gpu.wait_for_producers(waits, driver(), device)
            _lib.check(_lib.lib.uj_program_run(ctx.handle, handle, _lib.FORWARD, in_ptrs, len(tensors), None, 0,
                                               _lib.tensor_pointers(out_tensors), len(out_tensors)))
            _lib.check(_lib.lib.uj_ctx_synchronize(ctx.handle))
        finally:
            for t in scalars:
                _lib.lib.uj_tensor_free(ctx.handle, ctypes.byref(t))
        return results[0] if len(results) == 1 else tuple(results)

    def last_run(self):
        """What served this thread's last call of this kernel: {"engine": "c",
        "tier": "ready", ...}. Before this thread's first call: engine "auto",
        tier "none" (the library's answer for a program never run).

        Each thread runs kernels on contexts of its own (_context), and the
        library answers per context (uj_program_last_run), so another
        thread's calls never show here."""
        return self._read_last_run(_context.get(self._engine, self._threads))

    def _read_last_run(self, ctx):
        """uj_program_last_run's answer for ctx, as last_run's dict."""
        info = _lib.RunInfo()
        _lib.check(_lib.lib.uj_program_last_run(ctx.handle, self._program.handle, _lib.FORWARD, ctypes.byref(info)))
        return {"engine": _lib.ENGINE_NAMES.get(info.engine, "?"), "tier": _lib.TIER_NAMES[info.tier],
                "mir_ms": info.mir_ms, "c_ms": info.c_ms, "c_from_disk": bool(info.c_from_disk),
                "c_error": info.c_error.decode(errors="replace")}


def _device_scalar(ctx, value, name, keep, what):
    """A 0-d tensor on the GPU holding value as dtype `name`."""
    host = _dtypes.number_array(value, name, what)
    dtype = _dtypes.library_dtype(name, "a number")
    t = _lib.Tensor()
    _lib.check(_lib.lib.uj_tensor_alloc(ctx.handle, _lib.CUDA, dtype, 0, None, ctypes.byref(t)))
    keep.append(t)
    _lib.check(_lib.lib.uj_tensor_copy(ctx.handle, ctypes.byref(t), ctypes.byref(_host_tensor(host, dtype))))
    return t


def _gpu_device():
    """The device uopjit's contexts use: UOPJIT_CUDA_DEVICE, default 0 (the
    library checks the variable's form; a malformed one fails the run)."""
    import os
    text = os.environ.get("UOPJIT_CUDA_DEVICE", "").strip()
    return int(text) if text.isdigit() else 0


_driver = None


def driver():
    """The CUDA driver seam (_cuda.Driver), made on the first GPU call."""
    global _driver
    if _driver is None:
        from . import _cuda
        _driver = _cuda.Driver()
    return _driver


_CACHE_SIZE = 256
_cache = collections.OrderedDict()
_cache_lock = threading.Lock()


def cached_kernel(source, engine, threads):
    """The process's Kernel for (source, engine, threads), kept among the
    _CACHE_SIZE most recently used."""
    key = (source, engine, threads)
    if type(source) is str and type(engine) is str and (threads is None or type(threads) is int):
        # A hit needs no lock: with keys of plain str and int, get and
        # move_to_end are each one step of the C OrderedDict, under the GIL,
        # and a kernel another thread evicts in between is still good for
        # this call.
        kernel = _cache.get(key)
        if kernel is not None:
            try:
                _cache.move_to_end(key)
            except KeyError:
                pass
            return kernel
    with _cache_lock:
        kernel = _cache.get(key)
        if kernel is not None:
            _cache.move_to_end(key)
            return kernel
    kernel = Kernel(source, engine=engine, threads=threads)
    with _cache_lock:
        kernel = _cache.setdefault(key, kernel)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return kernel


def evaluate(source, *, out=None, engine="auto", threads=None, **values):
    """Runs a program or bare expression once, as numexpr.evaluate does:

        uopjit.evaluate("1/(1+exp(-x))", x=x)

    Inputs not passed by name are taken from the caller's local, then global
    variables. The compiled kernel is kept for the next call with the same
    source (per process). Returns one array, or a tuple in program order."""
    kernel = cached_kernel(source, engine, threads)
    try:
        picked = kernel._pick(values)
    except KeyError:  # inputs to find in the caller's variables
        picked = None
    if picked is not None and len(picked) == len(values):
        result = kernel._fast(picked, out)
        if result is not _SLOW:
            return result
    missing = [n for n in kernel.inputs if n not in values]
    if missing:
        frame = sys._getframe(1)
        try:
            for name in missing:
                if name in frame.f_locals:
                    values[name] = frame.f_locals[name]
                elif name in frame.f_globals:
                    values[name] = frame.f_globals[name]
        finally:
            del frame
    return kernel(out=out, **values)


def cache_clear():
    """Empties evaluate's kernel cache."""
    with _cache_lock:
        _cache.clear()
