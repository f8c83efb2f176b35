"""Kernels across os.fork(): a process that has run a kernel on several
threads forks (as multiprocessing's default start method on Linux does),
and the child runs kernels, old and new, and exits, while the parent goes on.

fork() copies only the calling thread, so the child has none of the context's
worker threads; the library must start new ones there and never wait for the
parent's (a child that hangs at its first call or at exit, when its contexts
are freed, is the failure these tests catch). A child that hangs must fail
the test, not hang the suite: each child arms an alarm, and the parent waits
with a deadline.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import uopjit
from uopjit import _context

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is not available on this platform")

CHILD_SECONDS = 30  # the child's alarm: a hang ends in SIGALRM
PARENT_SECONDS = 60  # the parent's deadline, past which it kills the child
THREADS = 3
N = 1 << 20  # far more elements than a run needs to be split over the threads


def engines():
    """The CPU JIT engines of this build and machine; an engine that is not
    available is skipped, not failed."""
    return [pytest.param(e, marks=pytest.mark.skipif(not _context.engine_available(e), reason=f"no {e} engine"))
            for e in ("mir", "c")]


def wait_child(pid):
    """The child's exit code (negative: the signal that killed it); a child
    still running after PARENT_SECONDS is killed and fails the test."""
    deadline = time.monotonic() + PARENT_SECONDS
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child still ran after {PARENT_SECONDS} s: it hung")
        time.sleep(0.01)


# The scenario as a program of its own: the child leaves through sys.exit,
# so the interpreter's shutdown frees its contexts (their __del__), as in a
# real program; the parent exits with the child's exit code (negative
# codes, a signal, become 128 + signal). The child's alarm ends a hang.
SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import uopjit

    engine, threads, n, child_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    old = uopjit.Kernel("y = x * 2 + 1", engine=engine, threads=threads)
    x = np.arange(n, dtype=np.float32) * np.float32(0.001)
    assert np.array_equal(old(x=x), x * 2 + 1)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        signal.alarm(child_seconds)
        assert np.array_equal(old(x=x + 1), (x + 1) * 2 + 1), "the old kernel in the child"
        fresh = uopjit.Kernel("y = x * x - 3", engine=engine, threads=threads)  # new to the process
        assert np.array_equal(fresh(x=x), x * x - 3), "a new kernel in the child"
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    assert np.array_equal(old(x=x + 2), (x + 2) * 2 + 1), "the old kernel in the parent after the fork"
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)
""")


def run_script(engine, cache_dir, child_seconds=CHILD_SECONDS):
    # the library's default tier count (make test's suite runs with another)
    env = dict(os.environ, UOPJIT_CACHE_DIR=str(cache_dir), UOPJIT_TIER="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(uopjit.__file__))]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    try:
        return subprocess.run([sys.executable, "-c", SCRIPT, engine, str(THREADS), str(N), str(child_seconds)],
                              env=env, capture_output=True, text=True, timeout=PARENT_SECONDS)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the program still ran after {PARENT_SECONDS} s: it hung\n{e.stderr}")


@pytest.mark.parametrize("engine", engines())
def test_forked_child_calls_kernels_and_exits(engine, tmp_path):
    done = run_script(engine, tmp_path)
    assert done.returncode == 0, (f"exit status {done.returncode} (128 + 14: the child hung and its alarm went off)"
                                  f"\n{done.stdout}\n{done.stderr}")


# AUTO on the CPU is tiered: the first call queues a C compile on a
# background thread of jit/tier.c, which, like the pool's workers, is not
# in the child. The child abandons the parent's JIT state (its tier, its
# cache and their locks) and makes its own. A fresh cache directory makes
# sure the compile is queued rather than found on disk, and the fork comes
# right after the first call, while the compile may still run.
def test_forked_child_calls_tiered_kernels_and_exits(tmp_path):
    if not (_context.engine_available("mir") and _context.engine_available("c")):
        pytest.skip("tiering needs the MIR and C engines")
    done = run_script("auto", tmp_path, child_seconds=10)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("engine", engines())
def test_forked_child_frees_its_context_and_parent_goes_on(engine):
    # In this process: the child runs the kernel, frees its context
    # explicitly and leaves with os._exit (never through pytest).
    k = uopjit.Kernel("y = x * 3 - 1", engine=engine, threads=THREADS)
    x = np.linspace(-1, 1, N, dtype=np.float32)
    np.testing.assert_array_equal(k(x=x), x * 3 - 1)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(CHILD_SECONDS)
            ok = np.array_equal(k(x=x + 1), (x + 1) * 3 - 1)
            # this kernel's context only: uj_ctx_free (Context.__del__). Others
            # that earlier tests left on this thread may be tiered (see above).
            del _context._per_thread.contexts[(_context.engine_value(engine), THREADS)]
            code = 0 if ok else 2
        except BaseException as e:  # noqa: BLE001 - anything, reported as the exit code
            os.write(2, f"child: {e!r}\n".encode())
            code = 3
        finally:
            os._exit(code)
    assert wait_child(pid) == 0
    np.testing.assert_array_equal(k(x=x - 1), (x - 1) * 3 - 1)
