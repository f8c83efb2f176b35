"""uopjit._lib: finds libuopjit.so, loads it with ctypes and declares the C API.

The library is looked for, in order: the file UOPJIT_LIBRARY names (an error
if it does not load: the user asked for that one); the copy installed next to
this package (pip install builds and bundles it); the system's library path
(libuopjit.so.MAJOR, as `make install` leaves it). The first that loads wins.

It is a ctypes.CDLL, not a PyDLL: ctypes releases the GIL around every call
into a CDLL, so a long uj_program_run lets other Python threads run.

Every failing call is turned into uopjit.Error carrying the status's name and
uj_last_error()'s text, read on the same thread right after the call (the
library keeps the message per thread).
"""
import ctypes
import ctypes.util
import numbers
import os

# The ABI this package speaks: libuopjit.so.MAJOR. A different major has
# other struct layouts or enum values, so it is refused rather than used.
ABI_MAJOR = 0
MAX_DIMS = 8

FORWARD = 0

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class Error(RuntimeError):
    """A failure reported by libuopjit: `status` is its status name
    ("UJ_ERR_SHAPE"), the message uopjit's own text."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status
        self.message = message


Dims = ctypes.c_int64 * MAX_DIMS


class Tensor(ctypes.Structure):
    """uj_tensor_t: borrowed, contiguous row-major data."""
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("device", ctypes.c_int),
                ("ndim", ctypes.c_int), ("dims", ctypes.c_int64 * MAX_DIMS)]


class RunInfo(ctypes.Structure):
    """uj_run_info_t: what served a program's last run."""
    _fields_ = [("engine", ctypes.c_int), ("tier", ctypes.c_int), ("mir_ms", ctypes.c_double),
                ("c_ms", ctypes.c_double), ("c_from_disk", ctypes.c_int), ("c_error", ctypes.c_char * 512)]


class OptimGroup(ctypes.Structure):
    """uj_optim_group_t: one parameter, its gradient, its state tensors."""
    _fields_ = [("param", ctypes.POINTER(Tensor)), ("grad", ctypes.POINTER(Tensor)),
                ("state", ctypes.POINTER(ctypes.POINTER(Tensor))), ("param_half", ctypes.POINTER(Tensor))]


class OptimReport(ctypes.Structure):
    """uj_optim_report_t: what a step did."""
    _fields_ = [("skipped", ctypes.c_int), ("grad_norm", ctypes.c_double), ("gscale", ctypes.c_double),
                ("t", ctypes.c_int64)]


CPU, CUDA = 0, 1
TIER_NAMES = ("none", "waiting", "compiling", "ready", "failed")

_TensorPtr = ctypes.POINTER(Tensor)
_p = ctypes.c_void_p
_int = ctypes.c_int
_i64p = ctypes.POINTER(ctypes.c_int64)

# name: (restype, argtypes). Status-returning functions return c_int.
_SIGNATURES = {
    "uj_status_str": (ctypes.c_char_p, [_int]),
    "uj_last_error": (ctypes.c_char_p, []),
    "uj_version": (ctypes.c_char_p, []),
    "uj_dtype_size": (_int, [_int]),
    "uj_dtype_name": (ctypes.c_char_p, [_int]),
    "uj_engine_name": (ctypes.c_char_p, [_int]),
    "uj_ctx_new": (_p, []),
    "uj_ctx_free": (None, [_p]),
    "uj_ctx_set_engine": (_int, [_p, _int]),
    "uj_ctx_set_threads": (_int, [_p, _int]),
    "uj_ctx_synchronize": (_int, [_p]),
    "uj_engine_available": (_int, [_p, _int]),
    "uj_tensor_alloc": (_int, [_p, _int, _int, _int, _i64p, _TensorPtr]),
    "uj_tensor_free": (_int, [_p, _TensorPtr]),
    "uj_tensor_copy": (_int, [_p, _TensorPtr, _TensorPtr]),
    "uj_program_parse": (_int, [ctypes.c_char_p, ctypes.POINTER(_p)]),
    "uj_program_free": (None, [_p]),
    "uj_program_io_count": (_int, [_p, _int]),
    "uj_program_io_name": (ctypes.c_char_p, [_p, _int, _int]),
    "uj_program_input_dtype": (_int, [_p, _int, ctypes.POINTER(_int)]),
    "uj_program_output_dtype": (_int, [_p, _int, ctypes.POINTER(_TensorPtr), _int, ctypes.POINTER(_int)]),
    "uj_program_shape": (_int, [_p, _int, ctypes.POINTER(_TensorPtr), _i64p, _int, ctypes.POINTER(_int), _i64p]),
    "uj_program_run": (_int, [_p, _p, _int, ctypes.POINTER(_TensorPtr), _int, _i64p, _int,
                              ctypes.POINTER(_TensorPtr), _int]),
    "uj_program_last_run": (_int, [_p, _p, _int, ctypes.POINTER(RunInfo)]),
    "uj_optim_builtin_name": (ctypes.c_char_p, [_int]),
    "uj_optim_new": (_int, [ctypes.c_char_p, ctypes.POINTER(_p)]),
    "uj_optim_new_source": (_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_p)]),
    "uj_optim_free": (None, [_p]),
    "uj_optim_state_count": (_int, [_p]),
    "uj_optim_state_name": (ctypes.c_char_p, [_p, _int]),
    "uj_optim_hparam_count": (_int, [_p]),
    "uj_optim_hparam_name": (ctypes.c_char_p, [_p, _int]),
    "uj_optim_set": (_int, [_p, ctypes.c_char_p, ctypes.c_double]),
    "uj_optim_set_per_group": (_int, [_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double), _int]),
    "uj_optim_get": (_int, [_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]),
    "uj_optim_step_count": (ctypes.c_int64, [_p]),
    "uj_optim_set_step_count": (_int, [_p, ctypes.c_int64]),
    "uj_optim_set_grad_scale": (_int, [_p, ctypes.c_double]),
    "uj_optim_set_max_grad_norm": (_int, [_p, ctypes.c_double]),
    "uj_optim_step": (_int, [_p, _p, ctypes.POINTER(OptimGroup), _int, ctypes.POINTER(OptimReport)]),
}


def _candidates():
    """(description, path or soname) in the order they are tried."""
    names = sorted(n for n in os.listdir(_PACKAGE_DIR) if n.startswith("libuopjit.so"))
    found = [("installed with the package", os.path.join(_PACKAGE_DIR, n)) for n in names]
    system = ctypes.util.find_library("uopjit")
    found.append(("the system's library path", system or f"libuopjit.so.{ABI_MAJOR}"))
    return found


def _load():
    explicit = os.environ.get("UOPJIT_LIBRARY")
    if explicit:
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise ImportError(f"uopjit: UOPJIT_LIBRARY={explicit!r} does not load: {e}") from None
    tried = []
    for where, path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({where}): {e}")
    raise ImportError("uopjit: libuopjit.so not found; tried " + "; ".join(tried) +
                      ". Build it (make in the repository) and set UOPJIT_LIBRARY to build/libuopjit.so, "
                      "or reinstall the package from the repository (pip install ./python)")


lib, path = _load()
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError(f"uopjit: {path} has no {_name}: it is older than this package") from None
    _fn.restype, _fn.argtypes = _restype, _argtypes

version = lib.uj_version().decode()
if int(version.split(".")[0]) != ABI_MAJOR:
    raise ImportError(f"uopjit: {path} is version {version}; this package speaks libuopjit.so.{ABI_MAJOR}")


def check(status):
    """Raises Error for a non-zero uj_status_t, with this thread's message."""
    if status != 0:
        raise Error(lib.uj_status_str(status).decode(), lib.uj_last_error().decode(errors="replace"))


def check_text(text, what):
    """text, a str that may go to the library as a C string, or a ValueError
    naming `what` and where the text goes wrong. C reads a string up to its
    first NUL, so "y = x\\0 + 100" would silently be the program "y = x": a
    NUL is refused wherever it is. So is a str UTF-8 cannot encode (a lone
    surrogate), which would otherwise fail with no name attached."""
    if not isinstance(text, str):
        raise TypeError(f"uopjit: {what} is a str, got {type(text).__name__}")
    bad, kind = text.find("\0"), "a NUL character"
    if bad < 0:
        try:
            text.encode()
        except UnicodeEncodeError as e:
            bad, kind = e.start, f"the character {text[e.start]!r}, which UTF-8 cannot encode,"
    if bad >= 0:
        # offsets count characters from 0; lines and columns from 1, as the parser's messages do
        line = text.count("\n", 0, bad) + 1
        column = bad - (text.rfind("\n", 0, bad) + 1) + 1
        raise ValueError(f"uopjit: {what} contains {kind} at offset {bad}, line {line}, column {column}")
    return text


def c_string(text, what):
    """text checked by check_text, as the bytes of a C string argument."""
    return check_text(text, what).encode()


def c_integer(value, what, bits):
    """value as a Python int that fits a C signed integer of `bits` bits.
    ctypes would pass a larger one modulo 2**bits (2**32 + 1 threads is 1),
    and int() would truncate a float: both raise here instead, naming `what`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"uopjit: {what} is a whole number, got {value!r}")
    value = int(value)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise OverflowError(f"uopjit: {what} is {value}, out of bounds for a {bits}-bit integer "
                            f"[{low}, {high}]")
    return value


def c_double(value, what):
    """value as a float for a C double argument; the TypeError, ValueError or
    OverflowError of float() (an int past 1.8e308) names `what`."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise type(e)(f"uopjit: {what} is not a number a double can hold: {e}") from None


def _names(name_fn, limit):
    """Enum value by name, for every value the library names (it answers "?"
    past the last): dtypes added to the library appear here unchanged."""
    table = {}
    for value in range(limit):
        name = name_fn(value).decode()
        if name != "?":
            table[name] = value
    return table


DTYPES = _names(lib.uj_dtype_name, 32)
ENGINES = _names(lib.uj_engine_name, 16)
ENGINE_NAMES = {v: k for k, v in ENGINES.items()}


def tensor_pointers(tensors):
    """A C array of uj_tensor_t* for a list of Tensor structs."""
    return (_TensorPtr * max(len(tensors), 1))(*map(ctypes.pointer, tensors))


def tensor_array(count):
    """(structs, pointers): `count` zeroed uj_tensor_t in one C array, and a C
    array of uj_tensor_t* pointing at them in order, both made once and
    refilled in place call after call (_kernel's cached calls)."""
    structs = (Tensor * max(count, 1))()
    return structs, (_TensorPtr * max(count, 1))(*(ctypes.pointer(structs[i]) for i in range(max(count, 1))))


# uj_program_run once more, with no argtypes: ctypes then checks and converts
# nothing, which saves about a microsecond a call on a 1,000-element kernel.
# Its callers pass exactly what the C signature takes: the context and the
# program as ctypes.c_void_p, the tensor arrays as ctypes arrays (passed by
# address), None for the absent gradient, and Python ints for the enum and
# the counts (passed as C int). It is still a CDLL function: the GIL is
# released while it runs.
program_run_unchecked = lib["uj_program_run"]
program_run_unchecked.restype = ctypes.c_int
