#!/bin/sh
# tests/test_docs.sh: every command and code block of README.md and
# docs/*.md, as written, as one entry of `make test`.
#
# Blocks are read from the files themselves, so the documents cannot drift
# from what works. By the block's language:
#   c       a program (it must have main): compiled against this build's
#           libuopjit.a and run; where the text after the block says
#           "It prints `...`", the output must be that.
#   sh      line by line (a "$ " prompt marks commands among shown output;
#           a trailing backslash continues a line; comments are dropped):
#             build/uopjit ...  run in a scratch copy of the tree (links to
#                               the source's entries), exit status 0; shown
#                               output lines "check: ok ..." must appear
#             cc ...            the in-tree line builds the file's last c
#                               block; the pkg-config lines are the README's,
#                               which tests/test_install.sh runs against a
#                               staged install
#             make TARGET ...   `make -n` of the same line succeeds: the
#                               targets exist (CI runs make test, debug,
#                               fuzz and run themselves; install is
#                               tests/test_install.sh's)
#             python ... -c     the one-liner, with this build's library
#           Lines that need the network (MIR from its repository, pip's
#           build dependencies) are named and not run; the files they name
#           from this tree must exist.
#   python  run by the pytest suite (python/tests/test_readme.py,
#           test_torch_docs.py); this test checks that each has a runner.
# Blocks without a language are output or diagrams.
#
# make test runs this from the source root as $(BUILD)/tests/test_docs,
# with UJ_TEST_CC, UJ_TEST_SANFLAGS and UOPJIT_CACHE_DIR set.
set -u
root=$(pwd)
build=$(cd "$(dirname "$(dirname "$0")")" && pwd)
cc=${UJ_TEST_CC:-cc}
sanflags=${UJ_TEST_SANFLAGS:-}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/uj-docs-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT INT TERM

passed=0 failed=0 skipped=0
fail() { echo "  FAIL $*"; failed=$((failed + 1)); }
pass() { passed=$((passed + 1)); }
skip() { echo "  skip: $*"; skipped=$((skipped + 1)); }

# The tree the commands run in: a link to every entry of the source root,
# build/ being this build's, so that output files land in the scratch.
tree=$scratch/tree
mkdir -p "$tree"
for entry in "$root"/* "$root"/.ci; do
  name=$(basename "$entry")
  [ "$name" = build ] && continue
  ln -s "$entry" "$tree/$name"
done
ln -s "$build" "$tree/build"
export UOPJIT_CACHE_DIR="$scratch/cache"

# Splits FILE's fenced blocks into $scratch/blocks/N.LANG (N counting from
# 1 in the file) and, per block, the paragraph after it into N.after.
split_blocks() {
  rm -rf "$scratch/blocks"
  mkdir -p "$scratch/blocks"
  awk -v dir="$scratch/blocks" '
    /^```/ {
      if (!inside) { inside = 1; n++; lang = substr($0, 4); if (lang == "") lang = "text"
                     out = dir "/" n "." lang; printf "" > out; after = ""; next }
      inside = 0; close(out); after = dir "/" n ".after"; printf "" > after; gap = 0; next
    }
    inside { print > out; next }
    after != "" { if ($0 == "") { if (gap++) { close(after); after = "" } } else print > after }
  ' "$1"
}

# The logical lines of an sh block, one per line as "SHOWN<tab>COMMAND":
# continuations joined; where the block has "$ " prompts they mark the
# commands, the other lines being output, and SHOWN is 1 when the output
# shown after a command has a "check: ok" line (else 0).
sh_commands() {
  awk '
    { lines[NR] = $0; if ($0 ~ /^\$ /) prompts = 1 }
    END {
      for (i = 1; i <= NR; i++) {
        line = lines[i]
        if (prompts) { if (line !~ /^\$ /) continue; sub(/^\$ /, "", line) }
        while (line ~ /\\$/ && i < NR) { sub(/\\$/, "", line); i++; part = lines[i]; sub(/^ +/, " ", part); line = line part }
        if (line ~ /^ *#/ || line ~ /^ *$/) continue
        shown = 0
        if (prompts) for (j = i + 1; j <= NR && lines[j] !~ /^\$ /; j++) if (lines[j] ~ /^check: ok/) shown = 1
        print shown "\t" line
      }
    }' "$1"
}

# A command line without its trailing comment (one after two spaces and #).
strip_comment() { printf '%s\n' "$1" | sed -e 's/  *# .*$//' -e 's/ *$//'; }

readme_cc_lines=$(awk '/^```sh$/ { s = 1; next } /^```$/ { s = 0 } s && /^cc /' "$root/README.md")

check_c_block() {
  doc=$1 block=$2 n=$3
  what="$doc block $n (c)"
  if ! grep -q 'int main' "$block"; then
    fail "$what: a C block must be a whole program (no main)"
    return
  fi
  cp "$block" "$scratch/example.c"
  # shellcheck disable=SC2086
  if ! $cc -std=c11 -Wall -Wextra -Werror $sanflags -I"$root/include" "$scratch/example.c" "$build/libuopjit.a" \
       -lm -ldl -lpthread -o "$scratch/example" > "$scratch/example.build" 2>&1; then
    sed 's/^/    /' "$scratch/example.build"
    fail "$what: does not build"
    return
  fi
  if ! (cd "$tree" && "$scratch/example") > "$scratch/example.out" 2>&1; then
    sed 's/^/    /' "$scratch/example.out"
    fail "$what: exits non-zero"
    return
  fi
  said=$(tr '\n' ' ' < "${block%.c}.after" | sed -n 's/.*It prints `\([^`]*\)`.*/\1/p')
  got=$(tr '\n' ' ' < "$scratch/example.out" | sed 's/ *$//')
  if [ -n "$said" ] && [ "$said" != "$got" ]; then
    fail "$what: prints \"$got\", the text says \"$said\""
    return
  fi
  echo "  ok   $what${said:+: prints $said}"
  pass
}

check_sh_line() {
  doc=$1 n=$2 line=$3 shown=$4 elsewhere=$5
  cmd=$(strip_comment "$line")
  what="$doc block $n: $cmd"
  # after a clone or a cd, a block's lines run in another tree (MIR's)
  [ "$elsewhere" = 1 ] && cmd="elsewhere: $cmd"
  case "$cmd" in
    build/uopjit*)
      if (cd "$tree" && eval "$cmd") > "$scratch/out" 2>&1; then
        if [ "$shown" = 1 ] && ! grep -q '^check: ok' "$scratch/out"; then
          sed 's/^/    /' "$scratch/out"
          fail "$what: no \"check: ok\" line, as shown"
        else
          echo "  ok   $what"
          pass
        fi
      else
        sed 's/^/    /' "$scratch/out" | tail -n 20
        fail "$what: exit status non-zero"
      fi ;;
    cc\ *pkg-config*)
      if printf '%s\n' "$readme_cc_lines" | grep -qxF -e "$cmd"; then
        echo "  ok   $what (the README's; tests/test_install.sh runs it against a staged install)"
        pass
      else
        fail "$what: a pkg-config build line that is not the README's (tests/test_install.sh runs those)"
      fi ;;
    cc\ *)
      if [ -f "$scratch/example.c" ] && (cd "$scratch" && eval "$(printf '%s\n' "$cmd" | sed -e "s|^cc |$cc $sanflags -I$root/include |" -e "s| build/| $build/|g")") > "$scratch/cc.out" 2>&1 \
         && (cd "$tree" && "$scratch/example") > /dev/null 2>&1; then
        echo "  ok   $what (the block above)"
        pass
      else
        sed 's/^/    /' "$scratch/cc.out" 2>/dev/null
        fail "$what: does not build and run the C block above it"
      fi ;;
    make|make\ *|sudo\ make\ *)
      dry=$(printf '%s\n' "$cmd" | sed -e 's/^sudo //' -e 's/^make /make -n /')
      if (cd "$root" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL sh -c "$dry") > "$scratch/make.out" 2>&1; then
        echo "  ok   $what (make -n: its targets exist)"
        pass
      else
        tail -n 5 "$scratch/make.out" | sed 's/^/    /'
        fail "$what: make -n fails"
      fi ;;
    *python*\ -c\ *)
      code=$(printf '%s\n' "$cmd" | sed -n 's/.* -c "\(.*\)"$/\1/p')
      python=""
      for candidate in ${UJ_TEST_PYTHON:-} python3 /usr/bin/python3; do
        if "$candidate" -c "import numpy" > /dev/null 2>&1; then python=$candidate; break; fi
      done
      if [ -n "$sanflags" ]; then
        skip "$what (a sanitizer build's library does not load into python)"
      elif [ -z "$python" ]; then
        skip "$what (no python3 with numpy)"
      elif PYTHONPATH="$root/python" UOPJIT_LIBRARY="$build/libuopjit.so" "$python" -c "$code" > "$scratch/py.out" 2>&1; then
        echo "  ok   $what: $(cat "$scratch/py.out")"
        pass
      else
        sed 's/^/    /' "$scratch/py.out"
        fail "$what"
      fi ;;
    *)
      # named, not run, with why; the tree's files they name must exist
      case "$cmd" in
        elsewhere:\ git\ clone*) why="fetches MIR from its repository: the network" ;;
        *pip\ install*) why="pip fetches the build's dependencies from the network" ;;
        *-m\ venv*) why="makes the environment for the pip line, which needs the network" ;;
        *) why="a step of building MIR by hand after the clone; .ci/install_mir.sh runs them from a local copy" ;;
      esac
      missing=""
      for word in $cmd; do
        case "$word" in
          /path/to/uopjit/*) [ -e "$root/${word#/path/to/uopjit/}" ] || missing="$missing ${word#/path/to/uopjit/}" ;;
          ./python|.ci/*) [ -e "$root/$word" ] || missing="$missing $word" ;;
        esac
      done
      if [ -n "$missing" ]; then fail "$what: names$missing, which the tree lacks"
      else skip "$what ($why)"; fi ;;
  esac
}

for doc in README.md docs/*.md; do
  echo "$doc"
  split_blocks "$root/$doc"
  rm -f "$scratch/example.c" "$scratch/example"
  n=1
  while :; do
    block=$(ls "$scratch/blocks/$n".* 2>/dev/null | grep -v '\.after$' | head -n 1)
    [ -n "$block" ] || break
    case "$block" in
      *.c) check_c_block "$doc" "$block" "$n" ;;
      *.sh)
        sh_commands "$block" > "$scratch/lines"
        tab=$(printf '\t')
        elsewhere=0
        while IFS= read -r record; do
          case "${record#*"$tab"}" in git\ clone*|cd\ *) elsewhere=1 ;; esac
          check_sh_line "$doc" "$n" "${record#*"$tab"}" "${record%%"$tab"*}" "$elsewhere" < /dev/null
        done < "$scratch/lines" ;;
      *.python)
        case "$doc" in
          README.md|docs/PYTHON.md) runner=python/tests/test_readme.py ;;
          docs/TORCH.md) runner=python/tests/test_torch_docs.py ;;
          *) runner="" ;;
        esac
        if [ -n "$runner" ] && grep -q "$doc" "$root/$runner"; then pass
        else fail "$doc block $n (python): no test of python/tests runs it"; fi ;;
    esac
    n=$((n + 1))
  done
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
