#!/bin/sh
# mk/mir_probe.sh CC INCLUDE_DIR LIB_DIR: whether MIR can be built against.
#
# Prints "yes", or "no (reason)" and still exits 0: the build goes on
# without the MIR engine. Checking that mir.h and libmir.a exist is not
# enough: MIR's own `make install` leaves out mir-alloc.h and
# mir-code-alloc.h, which mir.h includes, and a libmir.a built for another
# machine does not link. So this compiles and links a small program that
# starts MIR and its generator, the calls the MIR engine makes, with the
# flags the library uses, and reports the compiler's first error otherwise.
cc=${1:?usage: mir_probe.sh CC INCLUDE_DIR LIB_DIR}
inc=${2:?usage: mir_probe.sh CC INCLUDE_DIR LIB_DIR}
lib=${3:?usage: mir_probe.sh CC INCLUDE_DIR LIB_DIR}

if [ ! -f "$inc/mir.h" ]; then echo "no (no $inc/mir.h)"; exit 0; fi
if [ ! -f "$lib/libmir.a" ]; then echo "no (no $lib/libmir.a)"; exit 0; fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/uopjit-mir-probe.XXXXXX") || { echo "no (mktemp failed)"; exit 0; }
trap 'rm -rf "$dir"' EXIT
cat > "$dir/probe.c" <<'PROBE'
#include <mir.h>
#include <mir-gen.h>
int main(void) {
  MIR_context_t ctx = MIR_init();
  MIR_gen_init(ctx);
  MIR_gen_finish(ctx);
  MIR_finish(ctx);
  return 0;
}
PROBE
if $cc -std=c11 -D_GNU_SOURCE -I"$inc" -o "$dir/probe" "$dir/probe.c" "$lib/libmir.a" \
     -lm -ldl -lpthread > "$dir/log" 2>&1; then
  echo yes
else
  # The first line that names an error, without the probe's temporary path.
  reason=$(grep -m 1 -E 'error|undefined' "$dir/log" | sed -e "s|$dir/||g" -e 's/^ *//')
  echo "no (${reason:-the probe did not compile}, with $inc and $lib/libmir.a)"
fi
