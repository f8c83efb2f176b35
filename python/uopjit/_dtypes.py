"""uopjit._dtypes: NumPy dtypes to and from uopjit's, by name.

uopjit names its dtypes ("f32", "f64", "i32", and in libraries that have them
"bf16", "f16"); _lib asks the loaded library which it has, so this table works
with an older or newer library alike and refuses what the loaded one lacks.

NumPy has no bfloat16. A bf16 array is either an ml_dtypes.bfloat16 array
(when ml_dtypes is installed) or the raw bits in a uint16 array marked with
uopjit.bf16(bits). bf16 outputs come back as ml_dtypes.bfloat16 arrays when
ml_dtypes is importable, else as uint16 arrays of bits.
"""
import numpy as np

from . import _lib

try:  # optional: NumPy's bfloat16 where it exists
    import ml_dtypes
    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

_BY_NUMPY = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
             np.dtype(np.float16): "f16"}
if BFLOAT16 is not None:
    _BY_NUMPY[BFLOAT16] = "bf16"


class bf16:
    """Marks a uint16 (or int16) array as holding bfloat16 bits, for inputs and
    out= alike: k(x=uopjit.bf16(bits)). The array is used as is, not copied
    unless it is not contiguous."""

    def __init__(self, bits):
        bits = bits if isinstance(bits, np.ndarray) else np.asarray(bits)
        if bits.dtype not in (np.dtype(np.uint16), np.dtype(np.int16)):
            raise TypeError(f"uopjit.bf16 wants the bits of bfloat16 values in a uint16 array, got {bits.dtype}")
        self.array = bits


def library_dtype(name, what):
    """The uj_dtype_t value of a dtype name, or TypeError when the loaded
    library lacks it."""
    value = _lib.DTYPES.get(name)
    if value is None:
        raise TypeError(f"uopjit: {what} is {name}, which this libuopjit ({_lib.version}, {_lib.path}) "
                        f"does not have; it has " + ", ".join(sorted(_lib.DTYPES, key=_lib.DTYPES.get)))
    return value


def name_of_numpy(dtype, what):
    """uopjit's name for a NumPy dtype, or TypeError naming what has it."""
    name = _BY_NUMPY.get(np.dtype(dtype).newbyteorder("="))
    if name is None:
        known = ", ".join(sorted(str(d) for d in _BY_NUMPY))
        raise TypeError(f"uopjit: {what} has dtype {np.dtype(dtype)}, which uopjit does not take; "
                        f"use one of {known} (or uopjit.bf16 for bfloat16 bits), e.g. .astype(np.float32)")
    return name


def numpy_of_name(name):
    """The NumPy dtype an output of uopjit dtype `name` is allocated with."""
    if name == "bf16":
        return BFLOAT16 if BFLOAT16 is not None else np.dtype(np.uint16)
    for dtype, n in _BY_NUMPY.items():
        if n == name:
            return dtype
    raise TypeError(f"uopjit: no NumPy dtype for uopjit's {name}")


def number_array(value, name, what="a number"):
    """A 0-d array holding the Python number `value` as uopjit dtype `name`.
    Without ml_dtypes a bf16 number is its bits, rounded to nearest even from
    f32.

    Nothing is wrapped or truncated behind the caller's back, as in NumPy 2
    (NEP 50) for a Python number beside an array: an int out of an integer
    dtype's bounds is an OverflowError (NumPy 1.x would wrap it, with only a
    DeprecationWarning), as is an int past every float (10**400); a float
    for an integer dtype (an input the program declares i32) must be a whole
    number, else TypeError. A float past a float dtype's range becomes inf,
    as NumPy makes it. Every error names `what` (the input)."""
    dtype = numpy_of_name(name)
    if name != "bf16" and dtype.kind in "iu":
        if isinstance(value, float):
            if not value.is_integer():
                raise TypeError(f"uopjit: {what} is {value!r}, not a whole number, but it takes {name} here "
                                f"(the dtype the program declares for it)")
            value = int(value)
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"uopjit: {what} is the Python int {value}, out of bounds for {name} "
                                f"[{info.min}, {info.max}], the dtype it takes here (NumPy 2 raises too, for an "
                                f"int32 array + 2**32); pass a float or an f64 array to compute in floating point")
    elif isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            raise OverflowError(f"uopjit: {what} is a Python int of {len(str(abs(value)))} digits, beyond "
                                f"every float dtype (the largest f64 is about 1.8e308)") from None
    if name == "bf16" and BFLOAT16 is None:
        if not np.isfinite(value):
            return np.array(np.array(value, np.float32).view(np.uint32) >> 16, dtype=np.uint16)
        bits = int(np.array(value, np.float32).view(np.uint32))
        return np.array((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16, dtype=np.uint16)
    return np.array(value, dtype=dtype)


def name_of_value(value):
    """The library's name for the dtype value it reported."""
    for name, v in _lib.DTYPES.items():
        if v == value:
            return name
    raise TypeError(f"uopjit: the library reported an unknown dtype {value}")
