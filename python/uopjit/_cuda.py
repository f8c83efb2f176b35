"""uopjit._cuda: the few CUDA driver calls the GPU interop needs, through ctypes.

Waiting for a producer's stream needs that stream's context current on the
calling thread: torch and CuPy use each device's primary context, as
libuopjit does, so the primary context is retained, pushed, the stream
synchronized, and the context popped and released. libcuda.so.1 is loaded
on first use only, so machines without a GPU never need it.
"""
import ctypes

CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


class Driver:
    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"uopjit: GPU tensors given, but no CUDA driver (libcuda.so.1): {e}") from None
        self._call("cuInit", 0)

    def _fn(self, name):
        # The driver exports the current ABI of some functions as name_v2.
        for candidate in (name + "_v2", name):
            fn = getattr(self.lib, candidate, None)
            if fn is not None:
                return fn
        raise RuntimeError(f"uopjit: libcuda.so.1 has no {name}")

    def _call(self, name, *args):
        result = self._fn(name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(text))
            raise RuntimeError(f"uopjit: {name} failed: {(text.value or b'?').decode()} ({result})")

    def pointer_device(self, pointer):
        """The ordinal of the device that holds GPU memory at pointer."""
        ordinal = ctypes.c_int()
        self._call("cuPointerGetAttribute", ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                   ctypes.c_void_p(pointer))
        return ordinal.value

    def synchronize_stream(self, device, stream):
        dev, ctx, popped = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
        self._call("cuDeviceGet", ctypes.byref(dev), device)
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        try:
            self._call("cuCtxPushCurrent", ctx)
            try:
                self._call("cuStreamSynchronize", ctypes.c_void_p(stream))
            finally:
                self._call("cuCtxPopCurrent", ctypes.byref(popped))
        finally:
            self._call("cuDevicePrimaryCtxRelease", dev)
