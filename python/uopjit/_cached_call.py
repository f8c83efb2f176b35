"""uopjit._cached_call: the pieces of Kernel's cached call (see _kernel).

A call whose values are all NumPy arrays (C-contiguous, aligned, native
order) and numbers of the types below reuses, per thread and per signature
(_signature: each array's dtype and rank, each number's type, each output
allocated or given), one _Entry: the uj_tensor_t arrays uj_program_run
reads, refilled in place, and a function written out for that signature
(_compile). The function's source is made here from the signature's shape
alone (counts and positions, v0, D0, ...): no name or text of the caller
reaches it. It reads each array's data pointer and flags from the array
object itself (_cursor), where NumPy's inline accessors read them, after
_heads_readable has checked that layout against NumPy's public attributes
at import; where they disagree, every call takes the general path.
"""
import ctypes
import operator
import sys

import numpy as np

from . import _dtypes, _lib

class _ArrayHead(ctypes.Structure):
    """The head of a NumPy array object (PyArrayObject_fields in NumPy's
    ndarraytypes.h). The cached call reads an array's data pointer and flags
    there in place (_cursor), in a fraction of what .ctypes.data or
    __array_interface__ cost (each builds objects: at 1,000 elements that
    was the better part of a call). The layout is NumPy's ABI, which its own
    inline PyArray_DATA and PyArray_FLAGS read; _heads_readable checks the
    reads against the public attributes at import, and where they disagree
    every call takes the general path."""
    _fields_ = [("_object", ctypes.c_char * object.__basicsize__), ("data", ctypes.c_size_t), ("nd", ctypes.c_int),
                ("dimensions", ctypes.c_void_p), ("strides", ctypes.c_void_p), ("base", ctypes.c_void_p),
                ("descr", ctypes.c_void_p), ("flags", ctypes.c_int)]


# NumPy's NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_ALIGNED and NPY_ARRAY_WRITEABLE.
_C_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x1, 0x100, 0x400
_IN_FLAGS = _C_CONTIGUOUS | _ALIGNED
_OUT_FLAGS = _C_CONTIGUOUS | _ALIGNED | _WRITEABLE
# The uint64 words of an array object that hold its data pointer and, in
# the low half (little-endian), its flags.
_ARRAY_DATA, _ARRAY_FLAGS = _ArrayHead.data.offset // 8, _ArrayHead.flags.offset // 8


def _cursor():
    """(aim, words): words, a ctypes pointer to uint64, whose items
    (words[_ARRAY_DATA], words[_ARRAY_FLAGS]) are read as Python ints
    without a ctypes object built per read; aim, a uint64 memoryview over
    that pointer's own storage, so that aim[0] = id(array) points it at an
    array object. A cursor serves one entry (so one thread, one call at a
    time): aiming and reading are separate steps."""
    words = ctypes.POINTER(ctypes.c_uint64)()
    return memoryview(words).cast("B").cast("Q"), words


def _heads_readable():
    """Whether a _cursor reads what NumPy's attributes say, on arrays of
    every kind the cached call meets (views, 0-d, empty, read-only,
    misaligned, strided, byte-swapped): CPython's id() is the object's
    address, and NumPy's layout is the one _ArrayHead describes."""
    if (sys.implementation.name != "cpython" or sys.byteorder != "little"
            or _ArrayHead.data.offset % 8 or _ArrayHead.flags.offset % 8):
        return False
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    samples = [base, base[1:, 2:], base[:, ::2], base.T, np.zeros(()), np.empty(0, np.float32), frozen,
               np.zeros(8 * 10 + 1, np.uint8)[1:].view(np.float64), np.ones(3, ">f4")]
    aim, words = _cursor()
    for a in samples:
        aim[0] = id(a)
        flags = words[_ARRAY_FLAGS] & 0xFFFFFFFF
        if (words[_ARRAY_DATA] != a.__array_interface__["data"][0] or flags != a.flags.num
                or bool(flags & _C_CONTIGUOUS) != a.flags.c_contiguous
                or bool(flags & _ALIGNED) != a.flags.aligned
                or bool(flags & _WRITEABLE) != a.flags.writeable):
            return False
    return True


_HEADS_READABLE = _heads_readable()
_ndarray = np.ndarray
_empty = np.empty
_run_unchecked = _lib.program_run_unchecked
_FORWARD = _lib.FORWARD
_SLOW = object()       # _fast: this call takes the general path
_MISMATCH = object()   # a compiled call: the values are not of its signature (nothing ran)
_ENTRIES = 64          # signatures kept per kernel and thread
_INT32_LOW, _INT32_HIGH = -(1 << 31), 1 << 31

# The types of values a cached call takes as numbers: Python's, converted
# to the dtype the signature gives them, and NumPy's scalars, which keep
# their own dtype (the general path reads them as 0-d arrays).
_PYTHON_NUMBERS = frozenset((float, int, bool))
_NUMPY_SCALARS = frozenset([np.float16, np.float32, np.float64, np.int32]
                           + ([_dtypes.BFLOAT16.type] if _dtypes.BFLOAT16 is not None else []))
_NUMBERS = _PYTHON_NUMBERS | _NUMPY_SCALARS

# How a number's value reaches its cell: written as is (a float into a
# float dtype, a NumPy scalar into its own: the result np.array(value,
# dtype) gives), written as is when an int within int32 (else, as for any
# other pairing, through _dtypes.number_array and its checks).
_ASSIGN, _ASSIGN_INT32, _CONVERT = 0, 1, 2


def _no_context():
    return None


class _ThreadState:
    """One thread's cached calls of one Kernel: a weak reference to this
    thread's context (_context keeps it; one it drops is not kept alive
    here), that context as the ctypes argument, the entries' calls by
    signature (_compile) and the one the last call used (tried first)."""
    __slots__ = ("context", "context_arg", "entries", "last")

    def __init__(self):
        self.context, self.context_arg, self.entries, self.last = _no_context, None, {}, None


class _Entry:
    """What the calls of one signature reuse on one thread: made by
    Kernel._entry, used through call(kernel, values, outs), a function
    written for the signature (_compile), which holds the entry (the entry
    does not hold it, so that the two make no reference cycle).

    busy: a call is using the entry (a call nested in it on the same thread,
    from a finalizer the garbage collector ran mid-call, goes elsewhere).
    aim, cursor: the entry's _cursor. names: the inputs' dtype names.
    arrays: per array input (i, dtype, tensor, ndim, k): i, its place among
    the inputs; tensor, its Tensor; k, its place in shapes, the shapes the
    Tensors' dims hold. numbers: per number input (i, type, cell, how):
    cell, the 0-d array its Tensor points at for good; how, _ASSIGN,
    _ASSIGN_INT32 or _CONVERT. outputs: per output (given, dtype, tensor):
    an out= array of that dtype (the shape its Tensor holds in out_dims),
    else one allocated with it. out_names: the outputs' dtype names;
    out_shapes: their shapes for the input shapes held (None: to infer
    again). in_structs, in_ptrs, in_words (a uint64 view of in_structs) and
    the same for the outputs: what uj_program_run reads; run_args, its
    arguments, the context's included (an entry serves one context)."""
    __slots__ = ("busy", "aim", "cursor", "names", "arrays", "numbers", "shapes", "in_structs", "in_ptrs",
                 "in_words", "outputs", "out_dims", "out_structs", "out_ptrs", "out_words", "out_names",
                 "out_shapes", "run_args")


_TENSOR_WORDS, _TENSOR_DATA = ctypes.sizeof(_lib.Tensor) // 8, _lib.Tensor.data.offset // 8


def _words(structs):
    """A uint64 view of a Tensor array: Tensor i's data pointer is word
    i * _TENSOR_WORDS + _TENSOR_DATA (a write there is cheaper than a field's)."""
    return memoryview(structs).cast("B").cast("Q")


def _compile(entry):
    """call(kernel, values, outs) for entry, written out for its signature as
    straight-line code: at 1,000 elements, loops over the inputs cost about
    as much as the work in them. values and outs are in program order, one
    per input and output (None: allocate). The call writes each array's
    data pointer (and its dims when its shape changed: the outputs' shapes
    are then inferred again, kernel._infer), each number into its cell,
    allocates the outputs not given, runs the program and returns the
    outputs (one, or a tuple); else it returns _MISMATCH (a value not of
    the signature, or the entry busy: nothing ran) or _SLOW (for the general
    path, which copies, converts or refuses what this code does not take)."""
    names = {"MISMATCH": _MISMATCH, "SLOW": _SLOW, "ndarray": _ndarray, "empty": _empty, "id": id, "type": type,
             "len": len, "Exception": Exception, "number_array": _dtypes.number_array, "check": _lib.check,
             "run": _run_unchecked, "run_args": entry.run_args, "entry": entry, "aim": entry.aim,
             "cursor": entry.cursor, "in_words": entry.in_words, "out_words": entry.out_words,
             "shapes": entry.shapes, "out_dims": entry.out_dims}
    body = []

    def array(value, dtype, tensor, ndim, words, word, flags, held):
        """Lines checking array `value` and writing it into `tensor`, whose
        dims hold the shape `held`."""
        body.extend([
            f"if type({value}) is not ndarray: return MISMATCH",
            f"d = {value}.dtype",
            f"if d is not {dtype} and d != {dtype}: return MISMATCH",
            f"aim[0] = id({value})",
            f"if cursor[{_ARRAY_FLAGS}] & {flags} != {flags}: return SLOW",
            f"{words}[{word}] = cursor[{_ARRAY_DATA}]",
            f"s = {value}.shape",
            f"if s != {held}:",
            f"    if len(s) != {ndim}: return MISMATCH"]
            + ([f"    {tensor}.dims[:{ndim}] = s"] if ndim else [])
            + [f"    {held} = s"])

    for i, dtype, tensor, ndim, k in entry.arrays:
        names[f"D{i}"], names[f"T{i}"] = dtype, tensor
        array(f"v{i}", f"D{i}", f"T{i}", ndim, "in_words", i * _TENSOR_WORDS + _TENSOR_DATA, _IN_FLAGS,
              f"shapes[{k}]")
        body.append("    entry.out_shapes = None  # to infer for the new shapes, even should this call not run")
    for i, kind, cell, how in entry.numbers:
        names[f"K{i}"], names[f"C{i}"], names[f"N{i}"] = kind, cell, entry.names[i]
        body.append(f"if type(v{i}) is not K{i}: return MISMATCH")
        if how == _ASSIGN:
            body.append(f"C{i}[()] = v{i}")
            continue
        indent = ""
        if how == _ASSIGN_INT32:
            body.extend([f"if {_INT32_LOW} <= v{i} < {_INT32_HIGH}: C{i}[()] = v{i}", "else:"])
            indent = "    "
        body.extend([f"{indent}try: C{i}[()] = number_array(v{i}, N{i})",
                     f"{indent}except Exception: return SLOW  # the general path raises it, naming the input"])
    body.append("if entry.out_shapes is None and not kernel._infer(entry): return SLOW")
    if not all(given for given, _, _ in entry.outputs):
        body.append("out_shapes = entry.out_shapes")
    for j, (given, dtype, tensor) in enumerate(entry.outputs):
        names[f"E{j}"], names[f"U{j}"] = dtype, tensor
        word = j * _TENSOR_WORDS + _TENSOR_DATA
        if given:
            array(f"o{j}", f"E{j}", f"U{j}", tensor.ndim, "out_words", word, _OUT_FLAGS, f"out_dims[{j}]")
        else:
            body.extend([f"if o{j} is not None: return MISMATCH",
                         f"o{j} = empty(out_shapes[{j}], E{j})",
                         f"aim[0] = id(o{j})",
                         f"out_words[{word}] = cursor[{_ARRAY_DATA}]"])
    n_in, n_out = len(entry.names), len(entry.outputs)
    results = "o0" if n_out == 1 else "(" + "".join(f"o{j}, " for j in range(n_out)) + ")"
    source = "\n".join(
        ["def call(kernel, values, outs):",
         "    if entry.busy: return MISMATCH"]
        + ([f"    {''.join(f'v{i}, ' for i in range(n_in))}= values"] if n_in else [])
        + ([f"    {''.join(f'o{j}, ' for j in range(n_out))}= outs"] if n_out else [])
        + ["    entry.busy = True",
           "    try:"]
        + ["        " + line for line in body]
        + ["        status = run(*run_args)",
           "    finally:",
           "        entry.busy = False",
           "    if status: check(status)",
           f"    return {results}"])
    exec(compile(source, f"<uopjit cached call, {n_in} inputs, {n_out} outputs>", "exec"), names)
    return names["call"]


def _picker(names):
    """A function of a dict that returns its values for `names`, a tuple in
    their order (KeyError for one missing)."""
    if len(names) == 1:
        only = names[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*names) if names else lambda values: ()


def _signature(values, outs):
    """The key of a call's entry: per input the array's (dtype, rank) or the
    number's type, per output None (allocated) or the out= array's (dtype,
    rank); None when a value is of no kind the cached call takes."""
    key = []
    for v in values:
        t = type(v)
        if t is _ndarray:
            key.append((v.dtype, v.ndim))
        elif t in _NUMBERS:
            key.append(t)
        else:
            return None
    for o in outs:
        if o is None:
            key.append(None)
        elif type(o) is _ndarray:
            key.append((o.dtype, o.ndim))
        else:
            return None
    return tuple(key)
