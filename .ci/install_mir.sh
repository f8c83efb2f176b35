#!/usr/bin/env bash
# .ci/install_mir.sh TARBALL PREFIX: builds MIR from a copy of its source and
# installs it under PREFIX, complete.
#
# The source is unpacked and built in a temporary directory, never inside
# the repository (the project does not carry MIR's source), with MIR's own
# makefile; `make install` of MIR writes its headers, libmir.a and libmir.so
# and tools, but leaves out mir-alloc.h and mir-code-alloc.h, which mir.h
# includes: they are copied next to mir.h. The temporary directory is
# removed however the script ends.
set -euo pipefail

tarball=${1:?usage: install_mir.sh TARBALL PREFIX}
prefix=${2:?usage: install_mir.sh TARBALL PREFIX}

if [ ! -f "$tarball" ]; then
  echo "install_mir.sh: no MIR source at $tarball" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uopjit-mir-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar xzf "$tarball" -C "$work"
# The archive holds one top-level directory, mir-<commit>.
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
if [ -z "$src" ] || [ ! -f "$src/mir.h" ]; then
  echo "install_mir.sh: $tarball does not unpack to a MIR source tree (no mir.h)" >&2
  exit 1
fi

jobs=$(nproc 2>/dev/null || echo 2)
# This script may run under another make (MAKEFLAGS with a jobserver):
# MIR's build is a make of its own.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" -j"$jobs"
mkdir -p "$prefix"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" install PREFIX="$prefix"
install -m 644 "$src/mir-alloc.h" "$src/mir-code-alloc.h" "$prefix/include/"
echo "install_mir.sh: MIR from $(basename "$tarball") installed under $prefix"
