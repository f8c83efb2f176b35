#!/usr/bin/env bash
# .ci/mir_stamp.sh TARBALL CC: prints what identifies a MIR build made by
# .ci/install_mir.sh from TARBALL with compiler command CC: the archive's
# name, the checksum of each project patch applied to it, and CC. install_mir.sh writes it next to the
# installed MIR (PREFIX/share/uopjit/mir-build); .ci/run compares it with
# what it would install, so that an unpatched or older MIR under the same
# prefix is rebuilt rather than trusted.
set -euo pipefail
tarball=${1:?usage: mir_stamp.sh TARBALL CC}
cc=${2:?usage: mir_stamp.sh TARBALL CC}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=$(basename "$tarball" .tar.gz)
echo "source $name"
for p in "$dir/$name"-*.patch; do
  [ -f "$p" ] || continue
  echo "patch $(basename "$p") $(cksum < "$p" | cut -d' ' -f1)"
done
echo "cc $cc"
