#!/usr/bin/env bash
# .ci/install_mir.sh TARBALL PREFIX: builds MIR from a copy of its source and
# installs it under PREFIX, complete, with the project's patches applied.
#
# Patches: every .ci/mir-*.patch whose name starts with the archive's
# directory name (mir-<commit>) is applied, in name order, before the build;
# a patch that does not apply stops the install. Each patch file opens with
# why it exists. MIR is built hardened: CC is "${CC:-gcc}" followed by the
# flags of .ci/hardening_flags (-fstack-protector-strong -D_FORTIFY_SOURCE=2;
# MIR_CC overrides the whole command), so a stack overflow in MIR aborts on
# every distribution, as Ubuntu's default flags make it do there, instead of
# corrupting memory silently. PREFIX/share/uopjit/mir-build records what
# was built (.ci/mir_stamp.sh).
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

patch_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for p in "$patch_dir/$(basename "$src")"-*.patch; do
  [ -f "$p" ] || continue
  echo "install_mir.sh: applying $(basename "$p")"
  if command -v patch >/dev/null 2>&1; then
    patch -p1 -s -d "$src" < "$p"
  else
    (cd "$src" && git apply "$p")
  fi
done

mir_cc=${MIR_CC:-"${CC:-gcc} $(cat "$patch_dir/hardening_flags")"}
echo "install_mir.sh: building with CC=$mir_cc"
jobs=$(nproc 2>/dev/null || echo 2)
# This script may run under another make (MAKEFLAGS with a jobserver):
# MIR's build is a make of its own.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" -j"$jobs" CC="$mir_cc"
mkdir -p "$prefix"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" install PREFIX="$prefix"
install -m 644 "$src/mir-alloc.h" "$src/mir-code-alloc.h" "$prefix/include/"
# What was installed, for .ci/run to tell this build from another MIR
# under the same prefix (see mir_build_stamp there).
mkdir -p "$prefix/share/uopjit"
bash "$patch_dir/mir_stamp.sh" "$tarball" "$mir_cc" > "$prefix/share/uopjit/mir-build"
echo "install_mir.sh: MIR from $(basename "$tarball") installed under $prefix"
