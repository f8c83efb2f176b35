"""uopjit._gpu: GPU tensors of other libraries (torch, CuPy, ...) as uj_tensor_t, without copies.

Two interfaces are read, __cuda_array_interface__ (a dict: data pointer,
shape, typestr, strides, stream) first, and DLPack otherwise (a PyCapsule
named "dltensor" holding a DLManagedTensor; also the fallback when the dict
is refused, as torch refuses it for bfloat16). Either way the tensor must be
C-contiguous: a GPU tensor is never copied behind the caller's back, so a
strided one is refused with the fix (.contiguous()).

The DLPack capsule is read but not consumed (not renamed "used_dltensor"):
it stays the producer's, whose destructor frees it when it is dropped after
the call, while the producer's object keeps the memory alive meanwhile.

Streams. uopjit runs on a stream of its own that no producer knows. So a GPU
call is synchronous at both ends: before it, the work the producer queued
on the tensors is waited for on the host (the stream the dict names; for
DLPack the producer is asked to order its work before the legacy default
stream, stream=1, which is then waited for); after it, uj_ctx_synchronize
waits for uopjit's kernels, so the results are complete for any stream.
The waiting is done through libcuda (_cuda.Driver), a seam tests replace.
"""
import ctypes

from . import _lib

# DLPack's enums (dlpack.h): device types and dtype codes.
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DLPACK_DTYPES = {(2, 32): "f32", (2, 64): "f64", (0, 32): "i32", (2, 16): "f16", (4, 16): "bf16"}
_TYPESTRS = {"f4": "f32", "f8": "f64", "i4": "i32", "f2": "f16"}
LEGACY_STREAM = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype, _capsule_is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class GpuTensor:
    """A borrowed GPU tensor: where it is, what it holds, and what to wait for."""

    def __init__(self, owner, pointer, dtype_name, shape, device_id, stream, readonly):
        self.owner = owner              # keeps the memory alive through the call
        self.pointer = pointer
        self.dtype_name = dtype_name
        self.shape = tuple(int(d) for d in shape)
        self.device_id = device_id      # None: ask the driver where the pointer lives
        self.stream = stream            # a stream to wait for before the call, or None
        self.readonly = readonly
        self.capsule = None             # a DLPack capsule, kept alive with the tensor


def is_gpu(value):
    """Whether value offers one of the GPU interfaces on a CUDA device."""
    if hasattr(value, "__cuda_array_interface__"):
        return True
    device = getattr(value, "__dlpack_device__", None)
    if device is None or not hasattr(value, "__dlpack__"):
        return False
    try:
        return device()[0] in (KDL_CUDA, KDL_CUDA_MANAGED)
    except Exception:  # a producer that cannot say: not a GPU tensor we can take
        return False


def _check_contiguous(what, shape, strides, itemsize):
    """Refuses strides (in bytes) that are not row-major dense; size-1 axes
    and empty tensors may have any."""
    if strides is None or 0 in shape:
        return
    expected = itemsize
    for axis in reversed(range(len(shape))):
        if shape[axis] != 1 and strides[axis] != expected:
            raise ValueError(f"uopjit: {what} is not C-contiguous (shape {tuple(shape)}, strides in bytes "
                             f"{tuple(strides)}): GPU tensors are not copied; pass x.contiguous() "
                             f"(torch) or cupy.ascontiguousarray(x)")
        expected *= shape[axis]


def from_cuda_array_interface(value, what):
    cai = value.__cuda_array_interface__
    try:
        shape = tuple(cai["shape"])
        typestr = cai["typestr"]
        pointer, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"uopjit: {what}'s __cuda_array_interface__ is malformed ({e!r})") from None
    if cai.get("mask") is not None:
        raise ValueError(f"uopjit: {what} has a mask in its __cuda_array_interface__; uopjit takes no masked arrays")
    if len(typestr) < 3 or typestr[0] not in "<|=" or typestr[1:] not in _TYPESTRS:
        raise TypeError(f"uopjit: {what} has typestr {typestr!r}; uopjit takes little-endian "
                        + ", ".join(sorted(_TYPESTRS)) + " (bfloat16 through DLPack)")
    if len(shape) > _lib.MAX_DIMS:
        raise ValueError(f"uopjit: {what} has {len(shape)} axes; uopjit takes at most {_lib.MAX_DIMS}")
    _check_contiguous(what, shape, cai.get("strides"), int(typestr[2:]))
    # Version 3's "stream": None asks for no wait, an int names the stream to
    # wait for; without the key (versions before 3) the legacy stream.
    stream = cai["stream"] if "stream" in cai else LEGACY_STREAM
    if stream == 0:
        raise ValueError(f"uopjit: {what}'s __cuda_array_interface__ names stream 0, which the interface "
                         f"forbids (ambiguous between the legacy and per-thread default streams)")
    return GpuTensor(value, pointer or 0, _TYPESTRS[typestr[1:]], shape, None, stream, bool(readonly))


def from_dlpack(value, what):
    device_type, device_id = value.__dlpack_device__()
    try:
        capsule = value.__dlpack__(stream=LEGACY_STREAM)
    except TypeError:  # a producer of DLPack before streams
        capsule = value.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise ValueError(f"uopjit: {what}.__dlpack__() gave no unused 'dltensor' capsule")
    managed = DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    if t.device.device_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise ValueError(f"uopjit: {what}'s DLPack tensor is on device type {t.device.device_type}, not CUDA")
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _DLPACK_DTYPES:
        raise TypeError(f"uopjit: {what}'s DLPack dtype is code {t.dtype.code}, {t.dtype.bits} bits, "
                        f"{t.dtype.lanes} lanes; uopjit takes f32, f64, i32, f16 and bf16")
    if not 0 <= t.ndim <= _lib.MAX_DIMS:
        raise ValueError(f"uopjit: {what} has {t.ndim} axes; uopjit takes at most {_lib.MAX_DIMS}")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = t.dtype.bits // 8
    strides = tuple(t.strides[i] * itemsize for i in range(t.ndim)) if t.strides else None
    _check_contiguous(what, shape, strides, itemsize)
    tensor = GpuTensor(value, (t.data or 0) + t.byte_offset, _DLPACK_DTYPES[key], shape,
                       t.device.device_id, LEGACY_STREAM, False)
    tensor.capsule = capsule
    return tensor


def borrow(value, what):
    """A GpuTensor for a torch or CuPy (or any interface-speaking) GPU array."""
    if hasattr(value, "__cuda_array_interface__"):
        try:
            return from_cuda_array_interface(value, what)
        except TypeError:
            if not hasattr(value, "__dlpack__"):
                raise
    elif not hasattr(value, "__dlpack__"):
        raise TypeError(f"uopjit: {what} has neither __cuda_array_interface__ nor __dlpack__")
    return from_dlpack(value, what)


def wait_for_producers(tensors, driver, device):
    """Waits on the host for the streams the tensors name, after checking
    they live on uopjit's device."""
    waited = set()
    for what, t in tensors:
        where = t.device_id if t.device_id is not None else driver.pointer_device(t.pointer)
        if where != device:
            raise ValueError(f"uopjit: {what} is on CUDA device {where}, but uopjit runs on device {device} "
                             f"(UOPJIT_CUDA_DEVICE)")
        if t.stream is not None and t.stream not in waited:
            driver.synchronize_stream(device, t.stream)
            waited.add(t.stream)


def allocator_for(owners):
    """A function (shape, dtype name) -> new GPU array of the same kind and
    device as the first torch or CuPy input; None when there is none."""
    for owner in owners:
        module = type(owner).__module__.split(".")[0]
        if module == "torch":
            import torch
            dtypes = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32,
                      "f16": torch.float16, "bf16": torch.bfloat16}
            return lambda shape, name, o=owner: torch.empty(shape, dtype=dtypes[name], device=o.device)
        if module == "cupy":
            import cupy
            from . import _dtypes

            def cupy_empty(shape, name, o=owner):
                with cupy.cuda.Device(o.device.id):
                    return cupy.empty(shape, dtype=_dtypes.numpy_of_name(name))
            return cupy_empty
    return None
