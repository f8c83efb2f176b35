"""uopjit._context: one uj_ctx_t per Python thread and setting.

A uopjit context may be used from one thread at a time, while one parsed
program may run on several threads at once, each with its own context. So
contexts are kept per thread (threading.local) and per (engine, threads)
setting, and shared by every Kernel that thread runs with that setting: the
context holds the compiled kernels, the thread pool and the tiering state,
which are worth keeping across calls and kernels. A thread's contexts are
freed when the thread ends (its threading.local is dropped).
"""
import threading

from . import _lib

_per_thread = threading.local()


class Context:
    """Owns one uj_ctx_t."""

    def __init__(self, engine, threads):
        handle = _lib.lib.uj_ctx_new()
        if not handle:
            raise MemoryError("uopjit: uj_ctx_new failed (out of memory)")
        self.handle = handle
        self.free = _lib.lib.uj_ctx_free
        _lib.check(_lib.lib.uj_ctx_set_engine(handle, engine))
        if threads is not None:
            _lib.check(_lib.lib.uj_ctx_set_threads(handle, threads))

    def __del__(self):
        # At interpreter exit the module globals may already be gone; the
        # function was kept on the object for that reason.
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            self.free(handle)


def engine_value(engine):
    """The uj_engine_t of an engine name ("auto", "interp", "mir", "c", "cuda")."""
    if isinstance(engine, str):
        _lib.check_text(engine, "engine")  # a NUL said where it is, as for every other name
    try:
        return _lib.ENGINES[engine]
    except (KeyError, TypeError):
        raise ValueError(f"uopjit: unknown engine {engine!r}; expected one of "
                         + ", ".join(sorted(_lib.ENGINES, key=_lib.ENGINES.get))) from None


def threads_value(threads):
    """threads (None: the library's default) checked as a C int: ctypes would
    pass 2**32 + 1 as 1. The library checks the range it takes (0 to 1024)."""
    return None if threads is None else _lib.c_integer(threads, "threads", 32)


def get(engine, threads):
    """This thread's context for (engine value, threads or None)."""
    contexts = getattr(_per_thread, "contexts", None)
    if contexts is None:
        contexts = _per_thread.contexts = {}
    key = (engine, threads)
    ctx = contexts.get(key)
    if ctx is None:
        ctx = contexts[key] = Context(engine, threads)
    return ctx


def engine_available(engine):
    """Whether an engine ("mir", "c", "cuda", ...) can run in this build and on this machine."""
    return bool(_lib.lib.uj_engine_available(get(0, None).handle, engine_value(engine)))
