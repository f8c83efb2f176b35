#!/bin/sh
# tests/test_install.sh: the README's example, built the ways the README
# says, against the tree `make install` writes; and the installed ABI.
#
# The C example and its build commands are read from README.md itself (the
# first ```c block and the first ```sh block of its "## Example" section), so
# the README cannot drift from what works. The commands are run as written,
# with only the file names pointed into a scratch directory, the build
# directory of this build, and `cc` replaced by this build's compiler and
# sanitizer flags. The in-tree line runs first; then `make install` into a
# DESTDIR staging tree and the two pkg-config lines (shared, static) against
# it, with PKG_CONFIG_SYSROOT_DIR standing for DESTDIR. The three programs
# must print the same thing; the shared one must load libuopjit.so.MAJOR,
# the static one must not. The installed headers must compile on their own,
# in C and in C++, through <uopjit.h> (which includes uopjit_optim.h), and
# uopjit_optim.h included by itself must stop with its own message. The
# shared library must export exactly the uj_* functions the installed
# headers declare, and name its SONAME; the static library's global symbols
# must be those same functions. Last, `make uninstall` removes every file
# install wrote.
#
# make test runs this from the source root as $(BUILD)/tests/test_install,
# with UJ_TEST_CC, UJ_TEST_SANFLAGS and UJ_TEST_MAKE_ARGS (BUILD=, DEBUG=,
# TSAN=) set. Output and the closing "N passed, N failed, N skipped" line
# follow tests/harness.h.
set -u

build=$(dirname "$(dirname "$0")")
cc=${UJ_TEST_CC:-cc}
sanflags=${UJ_TEST_SANFLAGS:-}
make_args=${UJ_TEST_MAKE_ARGS:-BUILD=$build}

passed=0 failed=0 skipped=0
current="" current_failed=0 current_skipped=0

finish_test() {
  [ -n "$current" ] || return 0
  if [ "$current_failed" -ne 0 ]; then
    failed=$((failed + 1))
    echo "  FAILED ($current_failed checks)"
  elif [ "$current_skipped" -ne 0 ]; then
    skipped=$((skipped + 1))
  else
    passed=$((passed + 1))
  fi
  current=""
}
begin_test() {
  finish_test
  current=$1 current_failed=0 current_skipped=0
  echo "$1"
}
fail() {
  current_failed=$((current_failed + 1))
  echo "  FAIL tests/test_install.sh: $*"
}
skip() {
  current_skipped=1
  echo "  skip: $*"
}
# check DESCRIPTION COMMAND...: runs COMMAND, its output into the log.
check() {
  what=$1
  shift
  if ! "$@"; then fail "$what"; return 1; fi
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/uopjit-test-install.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
stage=$scratch/stage
prefix=/opt/uopjit
libdir=$stage$prefix/lib

header_number() { sed -n "s/^#define UJ_VERSION_$1 \\([0-9][0-9]*\\)\$/\\1/p" include/uopjit.h; }
major=$(header_number MAJOR)
version=$major.$(header_number MINOR).$(header_number PATCH)

# The text of the first block of the given language in README's ## Example.
readme_block() {
  awk -v lang="$1" '
    /^## / { in_section = ($0 == "## Example") }
    in_section && !done && $0 == "```" lang { inside = 1; next }
    inside && $0 == "```" { inside = 0; done = 1 }
    inside' README.md
}

# Runs one README build line with the scratch file names, then the program;
# its output goes to $scratch/NAME.out.
build_and_run() {
  name=$1 line=$2
  cmd=$(printf '%s\n' "$line" | sed -e "s|^cc |$cc $sanflags |" \
        -e "s| example\\.c | $scratch/example.c |" -e "s|-o example\$|-o $scratch/$name|" \
        -e "s| build/| $build/|g")
  echo "  \$ $cmd"
  if ! eval "$cmd" > "$scratch/$name.build" 2>&1; then
    sed 's/^/    /' "$scratch/$name.build"
    fail "the README's line did not build: $line"
    return 1
  fi
  if ! LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$scratch/$name" \
       > "$scratch/$name.out" 2>&1; then
    sed 's/^/    /' "$scratch/$name.out"
    fail "the example built by \"$line\" failed"
    return 1
  fi
  echo "  prints: $(cat "$scratch/$name.out")"
}

# The shared library's NEEDED entries.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# The functions the installed headers declare: the preprocessed text of
# uopjit.h (which includes uopjit_optim.h from beside it), comments gone.
header_functions() {
  $cc -E -P "$stage$prefix/include/uopjit.h" | grep -oE '\buj_[a-z0-9_]+[[:space:]]*\(' | tr -d ' \t(' | sort -u
}

# The same set, or what differs.
same_set() {
  what=$1 expected=$2 got=$3
  if [ "$expected" != "$got" ]; then
    missing=$(printf '%s\n' "$expected" | grep -vxF -e "$got" | tr '\n' ' ')
    extra=$(printf '%s\n' "$got" | grep -vxF -e "$expected" | tr '\n' ' ')
    fail "$what: missing [${missing}] extra [${extra}]"
  fi
}

begin_test readme_example_found
readme_block c > "$scratch/example.c"
readme_block sh | grep '^cc ' > "$scratch/lines"
in_tree_line=$(grep -v 'pkg-config' "$scratch/lines")
shared_line=$(grep 'pkg-config --cflags --libs' "$scratch/lines")
static_line=$(grep 'pkg-config --static' "$scratch/lines")
check "README's ## Example has a main() in its first \`\`\`c block" grep -q 'int main' "$scratch/example.c"
for which in in_tree_line shared_line static_line; do
  eval "line=\$$which"
  [ "$(printf '%s' "$line" | grep -c '^cc ')" -eq 1 ] ||
    fail "README's ## Example \`\`\`sh block has no single ${which%_line} build line (one starting with cc)"
done

begin_test readme_in_tree_build
build_and_run example_tree "$in_tree_line"

begin_test install_tree
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install DESTDIR="$stage" PREFIX="$prefix" \
     $make_args > "$scratch/install.log" 2>&1; then
  sed 's/^/    /' "$scratch/install.log"
  fail "make install DESTDIR=$stage PREFIX=$prefix failed"
fi
for f in include/uopjit.h include/uopjit_optim.h lib/libuopjit.so.$version lib/libuopjit.a bin/uopjit lib/pkgconfig/uopjit.pc; do
  [ -f "$stage$prefix/$f" ] || fail "make install did not write $prefix/$f"
done
[ "$(readlink "$libdir/libuopjit.so.$major")" = "libuopjit.so.$version" ] ||
  fail "lib/libuopjit.so.$major is not a link to libuopjit.so.$version"
[ "$(readlink "$libdir/libuopjit.so")" = "libuopjit.so.$major" ] ||
  fail "lib/libuopjit.so is not a link to libuopjit.so.$major"
grep -qx "prefix=$prefix" "$libdir/pkgconfig/uopjit.pc" ||
  fail "uopjit.pc does not say prefix=$prefix (DESTDIR must not be in it)"
"$stage$prefix/bin/uopjit" info > "$scratch/info.out" 2>&1 || fail "the installed uopjit info failed"

# pkg-config reads the staged tree as if it were installed under /.
export PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
have_pkg_config=yes
command -v pkg-config > /dev/null 2>&1 || have_pkg_config=no

begin_test pkg_config_version
if [ $have_pkg_config = no ]; then skip "pkg-config is not installed"; else
  got=$(pkg-config --modversion uopjit 2>&1)
  [ "$got" = "$version" ] || fail "pkg-config --modversion uopjit: $got, expected $version"
fi

begin_test readme_shared_build
if [ $have_pkg_config = no ]; then skip "pkg-config is not installed"; else
  if build_and_run example_shared "$shared_line"; then
    needed "$scratch/example_shared" | grep -qx "libuopjit.so.$major" ||
      fail "the shared build does not load libuopjit.so.$major: $(needed "$scratch/example_shared" | tr '\n' ' ')"
    cmp -s "$scratch/example_tree.out" "$scratch/example_shared.out" ||
      fail "the shared build prints other results than the in-tree one"
  fi
fi

begin_test readme_static_build
if [ $have_pkg_config = no ]; then skip "pkg-config is not installed"; else
  if build_and_run example_static "$static_line"; then
    if needed "$scratch/example_static" | grep -q libuopjit; then
      fail "the static build loads libuopjit.so: $(needed "$scratch/example_static" | tr '\n' ' ')"
    fi
    cmp -s "$scratch/example_tree.out" "$scratch/example_static.out" ||
      fail "the static build prints other results than the in-tree one"
  fi
fi

# A program that includes only <uopjit.h> from the installed tree and calls
# a function of each header: compiled as C11 with every warning, and built
# as C++ against the installed shared library and run, which links only
# when each header declares its functions extern "C" (unmangled names). The
# C++ build takes this build's sanitizer flags, as a sanitized library
# loads only into a program built with the same runtime.
begin_test installed_headers
cat > "$scratch/headers.c" <<'EOF_C'
#include <uopjit.h>
int main(void) {
  uj_optim_t* opt = 0;
  if (uj_optim_new("sgd", &opt) != UJ_OK || !uj_version()) return 1;
  uj_optim_free(opt);
  return 0;
}
EOF_C
include_dir=$stage$prefix/include
check "the installed <uopjit.h> does not compile as C11 with -Wall -Wextra -Werror" \
  $cc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$include_dir" "$scratch/headers.c"
if command -v c++ > /dev/null 2>&1; then
  if ! c++ $sanflags -Wall -Wextra -Werror -x c++ -I"$include_dir" "$scratch/headers.c" -x none -L"$libdir" -luopjit \
       -o "$scratch/headers_cxx" > "$scratch/headers_cxx.log" 2>&1; then
    sed 's/^/    /' "$scratch/headers_cxx.log"
    fail "a C++ program including the installed <uopjit.h> did not build against libuopjit.so"
  elif ! LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$scratch/headers_cxx"; then
    fail "the C++ program calling uj_optim_new and uj_version failed"
  fi
else
  skip "no c++ compiler to check the headers' extern \"C\" blocks"
fi
printf '#include <uopjit_optim.h>\n' > "$scratch/optim_alone.c"
if $cc -fsyntax-only -I"$include_dir" "$scratch/optim_alone.c" > "$scratch/optim_alone.log" 2>&1; then
  fail "uopjit_optim.h included by itself compiled; it must name uopjit.h instead"
elif ! grep -q 'include <uopjit.h> instead' "$scratch/optim_alone.log"; then
  sed 's/^/    /' "$scratch/optim_alone.log"
  fail "uopjit_optim.h included by itself failed without its message naming uopjit.h"
fi

declared=$(header_functions)

begin_test shared_library_abi
so=$libdir/libuopjit.so.$version
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libuopjit.so.$major" ] || fail "SONAME of libuopjit.so.$version: '$soname', expected libuopjit.so.$major"
exported=$(nm -D --defined-only "$so" | awk '{ print $NF }' | sort -u)
[ -n "$declared" ] || fail "no uj_* function found in the installed uopjit.h"
same_set "nm -D --defined-only libuopjit.so.$version against the installed headers" "$declared" "$exported"

begin_test static_library_abi
globals=$(nm -g --defined-only "$libdir/libuopjit.a" | awk 'NF == 3 { print $3 }' | sort -u)
same_set "nm -g --defined-only libuopjit.a against the installed headers" "$declared" "$globals"
undefined_mir=$(nm -u "$libdir/libuopjit.a" | grep -c ' MIR_')
[ "$undefined_mir" -eq 0 ] || fail "libuopjit.a leaves $undefined_mir MIR_ symbols undefined (it should carry MIR)"

begin_test uninstall
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s uninstall DESTDIR="$stage" PREFIX="$prefix" \
     $make_args > "$scratch/uninstall.log" 2>&1; then
  sed 's/^/    /' "$scratch/uninstall.log"
  fail "make uninstall failed"
fi
left=$(find "$stage" ! -type d | tr '\n' ' ')
[ -z "$left" ] || fail "make uninstall left $left"

finish_test
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
