"""The GPU interop, without a GPU: __cuda_array_interface__ dicts and DLPack
capsules made by hand (pointing at host memory) are read into tensors, bad
ones refused; the producers' streams are waited for through a recording
stand-in for the CUDA driver. What needs a real GPU (running the kernel,
the driver calls themselves) is not exercised here."""
import ctypes

import numpy as np
import pytest

import uopjit
from uopjit import _gpu, _kernel


class FakeCai:
    """An object exposing a NumPy array's memory through __cuda_array_interface__."""

    def __init__(self, array, **changes):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str, "data": (array.ctypes.data, False),
            "strides": None, "version": 3, "stream": 7}
        self.__cuda_array_interface__.update(changes)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDlpack:
    """A DLPack producer on CUDA device `device` over a NumPy array's memory."""

    def __init__(self, array, code=2, bits=None, device=0, strides=None, byte_offset=0):
        self.array, self.device = array, device
        self.shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides is not None else None
        t = _gpu.DLTensor()
        t.data = array.ctypes.data - byte_offset
        t.byte_offset = byte_offset
        t.device = _gpu.DLDevice(_gpu.KDL_CUDA, device)
        t.ndim = array.ndim
        t.dtype = _gpu.DLDataType(code, bits or array.dtype.itemsize * 8, 1)
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        self.managed = _gpu.DLManagedTensor(t, None, None)
        self.streams_asked = []

    def __dlpack_device__(self):
        return (_gpu.KDL_CUDA, self.device)

    def __dlpack__(self, stream=None):
        self.streams_asked.append(stream)
        self.capsule = _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)
        return self.capsule


class RecordingDriver:
    def __init__(self, device_of_pointers=0):
        self.synchronized, self.device_of_pointers = [], device_of_pointers

    def pointer_device(self, pointer):
        return self.device_of_pointers

    def synchronize_stream(self, device, stream):
        self.synchronized.append((device, stream))


def test_cuda_array_interface_is_read_in_place():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = _gpu.borrow(FakeCai(a), "x")
    assert (t.pointer, t.dtype_name, t.shape, t.stream, t.readonly) == (a.ctypes.data, "f32", (3, 4), 7, False)
    assert _gpu.borrow(FakeCai(a, stream=None), "x").stream is None
    legacy = FakeCai(a)
    del legacy.__cuda_array_interface__["stream"]  # version 2: no key, the legacy stream
    assert _gpu.borrow(legacy, "x").stream == _gpu.LEGACY_STREAM
    dense = FakeCai(a, strides=(16, 4))
    assert _gpu.borrow(dense, "x").shape == (3, 4)
    column = FakeCai(np.zeros((3, 1), np.float32), strides=(4, 999))  # size-1 axes: any stride
    assert _gpu.borrow(column, "x").shape == (3, 1)
    with pytest.raises(ValueError, match="not C-contiguous"):
        _gpu.borrow(FakeCai(a[:, :1], strides=(16, 4)), "x")  # one column of a matrix


@pytest.mark.parametrize("changes,error,match", [
    ({"strides": (4, 12)}, ValueError, "x is not C-contiguous.*contiguous()"),
    ({"typestr": "<i8"}, TypeError, "typestr '<i8'"),
    ({"typestr": ">f4"}, TypeError, "little-endian"),
    ({"mask": object()}, ValueError, "mask"),
    ({"stream": 0}, ValueError, "stream 0"),
    ({"shape": (1,) * 9}, ValueError, "9 axes"),
])
def test_cuda_array_interface_refusals(changes, error, match):
    with pytest.raises(error, match=match):
        _gpu.borrow(FakeCai(np.zeros((3, 4), np.float32), **changes), "x")


def test_dlpack_capsule_is_read_and_left_to_its_producer():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    producer = FakeDlpack(a, device=1, byte_offset=64)
    assert _gpu.is_gpu(producer)
    t = _gpu.borrow(producer, "x")
    assert (t.pointer, t.dtype_name, t.shape, t.device_id, t.stream) == (a.ctypes.data, "f64", (2, 3), 1, 1)
    assert producer.streams_asked == [_gpu.LEGACY_STREAM]
    assert _gpu._capsule_is_valid(producer.capsule, b"dltensor")  # not consumed
    bf16 = _gpu.borrow(FakeDlpack(np.zeros(4, np.uint16), code=4, bits=16), "w")
    assert bf16.dtype_name == "bf16"
    assert _gpu.borrow(FakeDlpack(a, strides=(3, 1)), "x").shape == (2, 3)
    with pytest.raises(ValueError, match="not C-contiguous"):
        _gpu.borrow(FakeDlpack(a, strides=(1, 2)), "x")
    with pytest.raises(TypeError, match="code 1, 8 bits"):
        _gpu.borrow(FakeDlpack(np.zeros(3, np.uint8), code=1), "x")


def test_producers_are_waited_for_once_per_stream_on_uopjits_device():
    a = np.zeros(4, np.float32)
    driver = RecordingDriver()
    tensors = [("x", _gpu.borrow(FakeCai(a, stream=5), "x")), ("y", _gpu.borrow(FakeCai(a, stream=5), "y")),
               ("z", _gpu.borrow(FakeCai(a, stream=None), "z")), ("w", _gpu.borrow(FakeDlpack(a), "w"))]
    _gpu.wait_for_producers(tensors, driver, 0)
    assert driver.synchronized == [(0, 5), (0, _gpu.LEGACY_STREAM)]
    with pytest.raises(ValueError, match="x is on CUDA device 2, but uopjit runs on device 0"):
        _gpu.wait_for_producers(tensors[:1], RecordingDriver(device_of_pointers=2), 0)
    with pytest.raises(ValueError, match="on CUDA device 1"):
        _gpu.wait_for_producers([("w", _gpu.borrow(FakeDlpack(a, device=1), "w"))], RecordingDriver(), 0)


@pytest.fixture
def recording_driver(monkeypatch):
    if uopjit.engine_available("cuda"):
        pytest.skip("a GPU is present: the fakes point at host memory and must not run on it")
    driver = RecordingDriver()
    monkeypatch.setattr(_kernel, "_driver", driver)
    return driver


def test_a_gpu_call_waits_then_reports_the_librarys_reason(recording_driver):
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    k = uopjit.Kernel("y = x * 2")
    with pytest.raises(uopjit.Error) as e:
        k(x=FakeCai(x, stream=9), out=FakeCai(y, stream=None))
    assert e.value.status in ("UJ_ERR_DEVICE", "UJ_ERR_UNSUPPORTED") and e.value.message
    assert recording_driver.synchronized == [(0, 9)]
    np.testing.assert_array_equal(y, 0)
    with pytest.raises(uopjit.Error, match="UJ_ERR_DEVICE|UJ_ERR_UNSUPPORTED"):
        uopjit.Kernel("y = x * a")(x=FakeCai(x), a=2.0, out=FakeCai(y))  # the number goes to the GPU


def test_gpu_calls_refuse_what_they_cannot_do_without_copies(recording_driver):
    x = np.ones(8, np.float32)
    k = uopjit.Kernel("y = x * b")
    with pytest.raises(ValueError, match="input 'b' is in host memory"):
        k(x=FakeCai(x), b=np.ones(8, np.float32))
    with pytest.raises(TypeError, match="needs out= when no input is a torch or CuPy"):
        uopjit.Kernel("y = x * 2")(x=FakeCai(x))
    with pytest.raises(ValueError, match="read-only"):
        uopjit.Kernel("y = x * 2")(x=FakeCai(x), out=FakeCai(x, data=(x.ctypes.data, True)))
    with pytest.raises(TypeError, match="out\\['y'\\] is f64, but output 'y' is f32"):
        uopjit.Kernel("y = x * 2")(x=FakeCai(x), out=FakeCai(np.zeros(8)))


def test_torch_cpu_tensors_are_host_arrays():
    torch = pytest.importorskip("torch")
    t = torch.arange(5, dtype=torch.float32)
    assert not _gpu.is_gpu(t)
    np.testing.assert_array_equal(uopjit.evaluate("y = t * 2", t=t), np.arange(5, dtype=np.float32) * 2)


def test_gpu_calls_check_numbers_before_anything_runs(recording_driver):
    # The numbers of a GPU call become 0-d tensors on the GPU: an int that
    # does not fit the dtype raises naming the input, as on the host.
    x = np.arange(8, dtype=np.int32)
    with pytest.raises(OverflowError, match="input 'b' .*out of bounds for i32"):
        uopjit.Kernel("y = x + b")(x=FakeCai(x), b=2 ** 32, out=FakeCai(np.zeros(8, np.int32)))
    assert recording_driver.synchronized == []
