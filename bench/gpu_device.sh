#!/bin/bash
# bench/gpu_device.sh [OUT] [STAGES]: the GPU verification in one go, on a
# machine with an NVIDIA GPU, from a clean tree: build, every test, then
# the GPU numbers (uopjit bench --gpu and its PyTorch peers, bench/gpu_peers.py).
#
# A GPU is often lent for minutes, so this prints only what matters to
# stdout (the machine, failing tests, the summary, the tables) and keeps the
# full logs under OUT (default /tmp/uopjit-gpu): machine.txt, build.log,
# test.log, test-logs.tgz (every test binary's log), bench.txt (with the
# peers' table), peers.json, sanitizer.txt.
# STAGES (default "tests bench peers sanitize") picks stages; for a short
# lease, "gputests" runs only the tests that exercise the GPU and
# "benchquick" runs `uopjit bench --gpu --quick` (2^24 only).
#
# MIR: MIR_DIR when it links (mk/mir_probe.sh), else /usr/local, else built
# from the tarball MIR_TARBALL (default .dev/mir-a8ab7c31.tar.gz) under /tmp.
# cuDNN: libcudnn.so.9 where the loader finds it, else the first one under
# /usr, /opt or /usr/local (a pip wheel's, for instance), whose folder joins
# LD_LIBRARY_PATH; its headers come from beside it or from CUDNN_INCLUDE
# (default .dev/cudnn-include), copied into CUDA_DIR/include when missing.
set -u
out=${1:-${OUT:-/tmp/uopjit-gpu}}
stages=${2:-tests bench peers sanitize}
mkdir -p "$out"
: >"$out/build.log"
jobs=$(nproc)
cuda_dir=${CUDA_DIR:-/usr/local/cuda}
want() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
section() { echo; echo "==== $* ($(date +%T))"; }

section machine
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  echo "cores: $jobs"; gcc --version | head -n 1; uname -r
  ls "$cuda_dir"/include/cuda.h "$cuda_dir"/include/nvrtc.h "$cuda_dir"/include/cudnn.h 2>&1
  ls "$cuda_dir"/lib64 2>/dev/null | grep -E 'nvrtc|cudnn' | tr '\n' ' '; echo
} 2>&1 | tee "$out/machine.txt"

# ---- MIR
mir=""
for dir in ${MIR_DIR:-} /usr/local /tmp/mir-prefix; do
  if [ -n "$dir" ] && [ "$(sh mk/mir_probe.sh gcc "$dir/include" "$dir/lib" | cut -d' ' -f1)" = yes ]; then
    mir=$dir
    break
  fi
done
tarball=${MIR_TARBALL:-.dev/mir-a8ab7c31.tar.gz}
if [ -z "$mir" ] && [ -f "$tarball" ]; then
  section "MIR from $tarball"
  rm -rf /tmp/mir-src && mkdir -p /tmp/mir-src /tmp/mir-prefix/include /tmp/mir-prefix/lib
  tar xzf "$tarball" -C /tmp/mir-src --strip-components=1 &&
    make -C /tmp/mir-src -j"$jobs" >"$out/build.log" 2>&1 &&
    make -C /tmp/mir-src install PREFIX=/tmp/mir-prefix >>"$out/build.log" 2>&1 &&
    cp /tmp/mir-src/mir-alloc.h /tmp/mir-src/mir-code-alloc.h /tmp/mir-prefix/include/ &&
    mir=/tmp/mir-prefix
  [ -n "$mir" ] || tail -n 20 "$out/build.log"
fi
echo "MIR: ${mir:-none}"

# ---- cuDNN
cudnn_lib=$(ldconfig -p | awk '/libcudnn\.so\.9 /{print $NF; exit}')
if [ -z "$cudnn_lib" ]; then
  cudnn_lib=$(find /usr /opt /usr/local -name 'libcudnn.so.9' 2>/dev/null | head -n 1)
  [ -n "$cudnn_lib" ] && export LD_LIBRARY_PATH="$(dirname "$cudnn_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -n "$cudnn_lib" ] && [ ! -f "$cuda_dir/include/cudnn.h" ]; then
  for inc in "$(dirname "$cudnn_lib")/../include" "${CUDNN_INCLUDE:-.dev/cudnn-include}"; do
    if [ -f "$inc/cudnn.h" ]; then cp "$inc"/cudnn*.h "$cuda_dir/include/" && break; fi
  done
fi
echo "cuDNN: ${cudnn_lib:-none}"

section build
make_args="-j$jobs CUDA_DIR=$cuda_dir ${mir:+MIR_DIR=$mir REQUIRE_MIR=1}"
# shellcheck disable=SC2086
if ! make $make_args all >>"$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log"
  exit 1
fi
grep -E '^(MIR|CUDA|cuDNN):' "$out/build.log"
build/uopjit info 2>&1 | tee -a "$out/machine.txt"

status=0
if want tests; then
  section "make test"
  # shellcheck disable=SC2086
  timeout 200 make $make_args test >"$out/test.log" 2>&1 || status=1
  grep -vE ' passed |^(\S*/)?(gcc|cc|clang|ar|objcopy|ld|sh) ' "$out/test.log" | tail -n 40
  tar czf "$out/test-logs.tgz" build/tests/*.log 2>/dev/null
fi
if want gputests; then
  section "the GPU tests"
  gpu_tests="test_cuda test_cuda_tensors test_conv_cuda test_conv test_engines test_engines_reduce test_engines_math
             test_uops_reduce test_differential test_index_params test_engines_consts test_dtypes_half
             test_groups_cuda test_optim_cuda"
  # shellcheck disable=SC2086
  timeout 150 make $make_args test TESTS="$(for t in $gpu_tests; do printf 'build/tests/%s ' "$t"; done)" \
    >"$out/test.log" 2>&1 || status=1
  grep -vE ' passed |^(\S*/)?(gcc|cc|clang|ar|objcopy|ld|sh) ' "$out/test.log" | tail -n 30
  tar czf "$out/test-logs.tgz" build/tests/*.log 2>/dev/null
fi
if want benchquick; then
  section "bench --gpu --quick"
  timeout 120 build/uopjit bench --gpu --quick >"$out/bench.txt" 2>&1 || status=1
  cat "$out/bench.txt"
fi
if want bench; then
  section "bench --gpu"
  timeout 150 build/uopjit bench --gpu >"$out/bench.txt" 2>&1 || status=1
  cat "$out/bench.txt"
fi
if want peers; then
  section "PyTorch peers"
  PYTHONUNBUFFERED=1 timeout 80 python3 bench/gpu_peers.py --json "$out/peers.json" 2>&1 | tee -a "$out/bench.txt"
fi
if want sanitize && command -v compute-sanitizer >/dev/null; then
  section "compute-sanitizer memcheck: test_cuda"
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 99 build/tests/test_cuda >"$out/sanitizer.txt" 2>&1
  echo "exit $?"; tail -n 8 "$out/sanitizer.txt"
fi
section done
exit $status
