"""setup.py: builds libuopjit.so with the repository's Makefile and bundles it.

Installed from the source tree (pip install ./python), the package sits in
python/ of the repository; its build step runs `make` there for the shared
library (nothing to do when it is up to date) and copies it into the
package, which _lib loads first after UOPJIT_LIBRARY. When UOPJIT_LIBRARY is
set at install time, the library it names is used at run time instead and
nothing is built; outside a source tree nothing is bundled and the library
is looked for on the system's library path.

The wheel is tagged for this platform (py3-none-<platform>): it holds no
extension module, but a native library.
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: pip builds through its own
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(HERE)


def build_library():
    """The path of the library built in the repository, or None outside one."""
    if not (os.path.isfile(os.path.join(REPOSITORY, "Makefile"))
            and os.path.isfile(os.path.join(REPOSITORY, "include", "uopjit.h"))):
        return None
    jobs = str(os.cpu_count() or 1)
    command = ["make", "-C", REPOSITORY, "-j" + jobs, "build/libuopjit.so"]
    print("uopjit: building the library:", " ".join(command), file=sys.stderr)
    try:
        subprocess.run(command, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"uopjit: building libuopjit.so failed ({e}); it needs make and a C11 compiler "
                         f"(gcc), or set UOPJIT_LIBRARY to a built libuopjit.so")
    return os.path.realpath(os.path.join(REPOSITORY, "build", "libuopjit.so"))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        if os.environ.get("UOPJIT_LIBRARY"):
            print(f"uopjit: UOPJIT_LIBRARY is set: the package will load {os.environ['UOPJIT_LIBRARY']}",
                  file=sys.stderr)
            return
        library = build_library()
        if library:
            target = os.path.join(self.build_lib, "uopjit")
            for stale in os.listdir(target):
                if stale.startswith("libuopjit.so"):
                    os.remove(os.path.join(target, stale))
            shutil.copy2(library, os.path.join(target, "libuopjit.so"))


commands = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", super().get_tag()[2]
    commands["bdist_wheel"] = PlatformWheel

setup(cmdclass=commands)
