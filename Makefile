# Makefile: builds libuopjit (static and shared), the uopjit CLI and the
# tests, out of tree under build/ (GNU make).
#
#   make            the libraries and build/uopjit
#   make test       everything, then every tests/test_* binary (N at a time
#                   under -jN), a line for each as it ends, then the total
#   make debug      the same tests built with ASan + UBSan under build/debug/
#   make tsan       the tests that start threads, built with ThreadSanitizer under build/tsan/
#   make run        the CLI's demo, the sigmoid and Adam chains checked, and the quick bench
#   make bench      `uopjit bench`: every CPU engine against AOT C, hand-written C and
#                   the peers, as a report in build/bench-report; then the convolution
#                   backends on network layers (uopjit bench --conv)
#   make fuzz       libFuzzer targets (clang, ASan + UBSan), each run FUZZ_SECONDS
#   make fuzz-replay those targets once over their committed seed corpus
#   make install    the header, both libraries, the CLI and uopjit.pc under
#                   PREFIX (default /usr/local), below DESTDIR if set; make uninstall
#   make clean
#
# Optional parts (MIR, CUDA, cuDNN) are detected here and reported once.
# CUDA and cuDNN only need their headers at build time: the libraries are
# dlopen'ed at run time so one build runs with or without a GPU.

# make's built-in default for CC is "cc"; prefer gcc unless the user chose.
ifeq ($(origin CC),default)
CC := gcc
endif
AR ?= ar
OBJCOPY ?= objcopy

# The build directory and mode; `make debug` re-enters with both set,
# `make tsan` with BUILD and TSAN.
BUILD ?= build
DEBUG ?= 0
TSAN ?= 0

ifeq ($(DEBUG),1)
OPTFLAGS := -O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all \
            -DUJ_VERIFY_PASSES
SANFLAGS := -fsanitize=address,undefined,float-cast-overflow
else ifeq ($(TSAN),1)
# ThreadSanitizer cannot be combined with ASan; -O1 keeps its reports'
# stacks readable.
OPTFLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
SANFLAGS := -fsanitize=thread
else
# Asserts stay on in every build: they guard internal invariants only.
OPTFLAGS := -O2 -g
SANFLAGS :=
endif

# `override` so that a CFLAGS given on the command line adds to these rather
# than silently dropping -std, -Werror and the include path.
override CFLAGS += -std=c11 -Wall -Wextra -Werror -MMD -MP -fPIC $(OPTFLAGS) -D_GNU_SOURCE -Iinclude
override LDFLAGS += $(SANFLAGS)
LIBS := -lm -ldl -lpthread

# ---- optional parts --------------------------------------------------------------

ifdef MIR_DIR
MIR_INC := $(MIR_DIR)/include
MIR_LIB := $(MIR_DIR)/lib
else
MIR_INC := /usr/local/include
MIR_LIB := /usr/local/lib
endif
# MIR is there when a small program using it compiles and links
# (mk/mir_probe.sh): "yes", or "no (the reason)" and the build goes on
# without the MIR engine. Probed once: recursive makes inherit the answer.
# REQUIRE_MIR=1 (as CI sets it) makes a missing MIR an error instead.
ifndef UJ_MIR_PROBE
UJ_MIR_PROBE := $(shell sh mk/mir_probe.sh '$(CC)' '$(MIR_INC)' '$(MIR_LIB)')
export UJ_MIR_PROBE
endif
HAVE_MIR := $(firstword $(UJ_MIR_PROBE))
ifeq ($(REQUIRE_MIR)$(HAVE_MIR),1no)
$(error MIR: $(UJ_MIR_PROBE); REQUIRE_MIR=1 asks for the MIR engine (see the README's MIR section))
endif
ifeq ($(HAVE_MIR),yes)
override CFLAGS += -DUJ_HAVE_MIR -I$(MIR_INC)
MIR_ARCHIVE := $(MIR_LIB)/libmir.a
LIBS := $(MIR_ARCHIVE) $(LIBS)
endif

CUDA_DIR ?= /usr/local/cuda
HAVE_CUDA := $(if $(and $(wildcard $(CUDA_DIR)/include/cuda.h),$(wildcard $(CUDA_DIR)/include/nvrtc.h)),yes,no)
ifeq ($(HAVE_CUDA),yes)
# Headers only: libcuda and libnvrtc are dlopen'ed, never linked. The
# toolkit's directory is where NVRTC is looked for when the loader's path
# does not have it.
override CFLAGS += -DUJ_HAVE_CUDA -DUJ_CUDA_DIR='"$(CUDA_DIR)"' -I$(CUDA_DIR)/include
endif

CUDNN_HEADER := $(firstword $(wildcard $(CUDA_DIR)/include/cudnn.h /usr/include/cudnn.h \
                                       /usr/include/x86_64-linux-gnu/cudnn.h))
HAVE_CUDNN := $(if $(CUDNN_HEADER),yes,no)
ifeq ($(HAVE_CUDNN),yes)
override CFLAGS += -DUJ_HAVE_CUDNN
# The system directories are searched anyway; CUDA's is added above when
# the toolkit is complete. Only a lone cudnn.h under CUDA_DIR needs its own.
ifeq ($(HAVE_CUDA)$(CUDNN_HEADER),no$(CUDA_DIR)/include/cudnn.h)
override CFLAGS += -I$(CUDA_DIR)/include
endif
endif

# Report once: recursive makes (make debug) would repeat it. An exported
# marker rather than MAKELEVEL, so that a make driving this one (MAKELEVEL
# already 1) still sees the report.
ifndef UJ_CONFIG_REPORTED
$(info MIR: $(UJ_MIR_PROBE))
$(info CUDA: $(HAVE_CUDA))
$(info cuDNN: $(HAVE_CUDNN))
export UJ_CONFIG_REPORTED := 1
endif

# A quiet build: one line per target (what is made, and its name); V=1
# prints every command in full.
ifeq ($(V),1)
Q :=
say =
else
Q := @
say = @printf '  %-8s %s\n' '$(1)' '$(2)'
endif

# ---- sources and outputs ---------------------------------------------------------

# find, not wildcard, so that new files and subdirectories (backends/conv/, optim/)
# are picked up without touching this file; backends/ may not exist yet.
LIB_SRCS := $(sort $(shell find rt ir uops lang jit backends optim -name '*.c' 2>/dev/null))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
# Every object of the library in one archive: what the CLI, the tests and
# the bench link, since they call internal functions too.
LIB_A := $(BUILD)/obj/libuopjit-internal.a

# What is installed: the version from the header, the one place it is kept.
UJ_VERSION_PART = $(shell sed -n 's/^\#define UJ_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' include/uopjit.h)
VERSION_MAJOR := $(call UJ_VERSION_PART,MAJOR)
VERSION := $(VERSION_MAJOR).$(call UJ_VERSION_PART,MINOR).$(call UJ_VERSION_PART,PATCH)
# libuopjit.a for users: the library's objects and MIR's prelinked into one
# object in which only the uj_* functions stay global, so that it needs no
# libmir at link time and clashes with nothing a program defines.
LIB_STATIC := $(BUILD)/libuopjit.a
LIB_STATIC_OBJ := $(BUILD)/obj/libuopjit-public.o
# libuopjit.so.MAJOR.MINOR.PATCH, with SONAME libuopjit.so.MAJOR and the two
# links a loader and a linker look for.
SONAME := libuopjit.so.$(VERSION_MAJOR)
LIB_SO_FILE := $(BUILD)/libuopjit.so.$(VERSION)
LIB_SO_LINKS := $(BUILD)/$(SONAME) $(BUILD)/libuopjit.so

# The bench's code (bench/*.c) is part of the tool: `uopjit bench`; except
# bench/py_bench_driver.c, which bench/py_bench.py compiles at run time
# into a library of its own and loads beside the Python package.
CLI_SRCS := $(sort $(wildcard tools/*.c) $(filter-out bench/py_bench_driver.c,$(wildcard bench/*.c)))
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
CLI := $(BUILD)/uopjit

TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TESTS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test debug tsan install uninstall run bench fuzz fuzz-replay clean
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
# Keep the test objects that only chained rules mention.
.SECONDARY: $(TEST_SRCS:tests/%.c=$(BUILD)/obj/tests/%.o)

all: $(LIB_STATIC) $(LIB_SO_FILE) $(LIB_SO_LINKS) $(CLI)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The C engine's disk cache outlives the library that filled it, so its keys
# name the code that wrote the cached source: a checksum of the emitter's
# files. A changed emitter then misses instead of loading what an older one
# compiled (the IR text alone cannot tell them apart).
C_EMITTER_FILES := jit/c/c.c jit/c/c_emit.c jit/c/c_ahead.c jit/c/c_group.h jit/c/c_reduce.c jit/c/c_divide.c \
                   jit/c/c_stream.c jit/c_like.c ir/deps.c ir/lanes.c ir/loop_indep.c ir/semantics.c ir/stream.c \
                   jit/prelude.c
C_EMITTER_ID := $(firstword $(shell cat $(C_EMITTER_FILES) | cksum))
$(BUILD)/obj/jit/c/c.o $(BUILD)/obj/tests/test_engines_cache.o: override CFLAGS += -DUJ_C_EMITTER_ID='"$(C_EMITTER_ID)"'
$(BUILD)/obj/jit/c/c.o $(BUILD)/obj/tests/test_engines_cache.o: $(C_EMITTER_FILES)

# Batched square roots for MIR code: vector instructions need errno out of
# the way (jit/batch_math.c).
$(BUILD)/obj/jit/batch_math.o: override CFLAGS += -O3 -fno-math-errno

# The hand-written CPU convolution backends: their kernels are written with
# GCC vector types and want a*b + c fused into one instruction, which
# -std=c11 turns off (-ffp-contract=off); -O3 unrolls their small fixed
# loops. Instruction sets are chosen at run time inside the files
# (target attributes), not here, so the library stays portable.
CONV_CFLAGS := -ffp-contract=fast $(if $(filter 1,$(DEBUG)),,-O3)
$(BUILD)/obj/backends/conv/%.o: override CFLAGS += $(CONV_CFLAGS)

# The tests' own code is compiled once and run once, and their time goes
# to the library and the kernels they call: -Og builds the test programs
# in half of -O1's time (a third of -O2's) and runs their loops about as
# fast as -O1. Sanitizer builds keep -O1 throughout.
$(BUILD)/obj/tests/%.o: override CFLAGS += $(if $(filter 1,$(DEBUG) $(TSAN)),,-Og)

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(LIB_STATIC_OBJ): $(LIB_OBJS) $(MIR_ARCHIVE)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LD) -r -o $@.all $^
	$(Q)$(OBJCOPY) --wildcard --keep-global-symbol='uj_*' $@.all $@
	@rm -f $@.all

$(LIB_STATIC): $(LIB_STATIC_OBJ)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

# The version script (mk/uopjit.map) exports the uj_* API alone. Outside
# sanitizer builds, whose runtimes are resolved from the executable, every
# reference must resolve at this link (the libraries it needs are named).
$(LIB_SO_FILE): $(LIB_OBJS) mk/uopjit.map
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=mk/uopjit.map \
	  $(if $(SANFLAGS),,-Wl,--no-undefined) -o $@ $(LIB_OBJS) $(LIBS)

$(BUILD)/$(SONAME): $(LIB_SO_FILE)
	$(Q)ln -sf $(notdir $<) $@
$(BUILD)/libuopjit.so: $(BUILD)/$(SONAME)
	$(Q)ln -sf $(notdir $<) $@

$(CLI): $(CLI_OBJS) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(LIB_A) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB_A) $(LIBS)

# tests/test_cuda_host.c runs the CUDA engine's host side on a stand-in for
# the driver (tests/fake_cuda.c), a library with the driver's soname that it
# loads from beside itself.
ifeq ($(HAVE_CUDA),yes)
$(BUILD)/tests/test_cuda_host: $(BUILD)/tests/libfakecuda.so
$(BUILD)/tests/libfakecuda.so: tests/fake_cuda.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) -shared -fPIC -Wl,-soname,libcuda.so.1 -o $@ $<
endif

# Each test binary runs as a target of its own, so that `make -j test` runs
# them side by side: tests/run_test.sh writes its log (BINARY.log) and a
# one-line result (BINARY.result) and prints that line when the binary ends;
# tests/test_summary.sh then prints every failing binary's log in full and
# the total "N passed, N failed, N skipped", and fails if anything did.
# tests/test_install.sh and tests/test_python.sh (the Python package's
# pytest suite), copied next to the binaries, are run the same way.
# In debug builds leak checking is turned on where LeakSanitizer works (it
# does not under ptrace, in some containers).
# Tests keep compiled kernels in a cache of their own, not the user's.
# The fuzz targets' replay of their seed corpus is a sanitizer check (the
# targets are built with clang's ASan and UBSan whatever the build), so it
# is an entry of `make debug`, the sanitizer run, and not of `make test`,
# where building the instrumented library took a tenth of a cold run.
SCRIPT_TESTS := $(BUILD)/tests/test_install $(BUILD)/tests/test_python $(BUILD)/tests/test_docs \
                $(if $(filter 1,$(DEBUG)),$(BUILD)/tests/test_fuzz_replay)
TESTS += $(SCRIPT_TESTS)
# The longest tests run first (a cold run's CPU time, longest first), so
# that a parallel run does not end on one of them running alone while the
# other cores idle; the rest follow in name order.
SLOW_TESTS := test_differential test_python test_optim_half test_math_ops test_grad test_uops \
              test_engines_reduce test_cache_memory test_passes_random test_threads_parse test_docs
SLOW_RESULTS = $(foreach t,$(SLOW_TESTS),$(filter %/$(t).result,$(TESTS:=.result)))
TEST_RESULTS = $(SLOW_RESULTS) $(filter-out $(SLOW_RESULTS),$(TESTS:=.result))
# The binaries are only prerequisites of their results; keep them.
.SECONDARY: $(TESTS)
TEST_ENV := UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            UOPJIT_CACHE_DIR="$(CURDIR)/build/test-cache" \
            UJ_TEST_CC="$(CC)" UJ_TEST_SANFLAGS="$(SANFLAGS)" \
            UJ_TEST_MAKE_ARGS="BUILD=$(BUILD) DEBUG=$(DEBUG) TSAN=$(TSAN)"
LSAN_SETTING := $(BUILD)/tests/lsan_setting

.PHONY: FORCE
FORCE:

$(SCRIPT_TESTS): $(BUILD)/tests/%: tests/%.sh
	@mkdir -p $(dir $@)
	$(Q)cp $< $@
	$(Q)chmod +x $@

# intercept_tls_get_addr=0: NVRTC's libraries use dynamic thread-local
# storage that the sanitizer's tracking of __tls_get_addr records wrongly,
# and LeakSanitizer's scan at exit then crashes ("Tracer caught signal 11")
# instead of checking; the blocks are heap memory found without it.
$(LSAN_SETTING): FORCE
	@mkdir -p $(dir $@)
	@printf 'int main(void){return 0;}\n' > $(BUILD)/lsan_probe.c
	@if $(CC) $(SANFLAGS) -o $(BUILD)/lsan_probe $(BUILD)/lsan_probe.c 2>/dev/null && \
	   ASAN_OPTIONS=detect_leaks=1 $(BUILD)/lsan_probe >/dev/null 2>&1; then \
	  echo detect_leaks=1:intercept_tls_get_addr=0 > $@; \
	else \
	  echo "note: LeakSanitizer unavailable here; leak checks off"; \
	  echo detect_leaks=0 > $@; \
	fi

$(BUILD)/tests/%.result: $(BUILD)/tests/% FORCE | all $(if $(filter 1,$(DEBUG)),$(LSAN_SETTING))
	@$(TEST_ENV) $(if $(filter 1,$(DEBUG)),ASAN_OPTIONS=$$(cat $(LSAN_SETTING))) \
	  sh tests/run_test.sh $< $@

test: $(TEST_RESULTS)
	@sh tests/test_summary.sh $(TEST_RESULTS)

# A BUILD given on the command line is kept (make debug CC=clang
# BUILD=build/clang-debug), so that two compilers never share objects.
debug:
	@$(MAKE) --no-print-directory BUILD=$(if $(filter command line,$(origin BUILD)),$(BUILD),build/debug) DEBUG=1 test

# ---- install -----------------------------------------------------------------------

# make install [PREFIX=/usr/local] [DESTDIR=/staging]: the headers, the
# shared library with its links, libuopjit.a, the CLI and uopjit.pc (from
# mk/uopjit.pc.in). DESTDIR is prepended to every path written but is not
# part of uopjit.pc, which names where the files will be used.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL ?= install
# uopjit.pc names its directories through ${prefix} where they lie under it,
# so that PKG_CONFIG_SYSROOT_DIR and pkg-config --define-prefix work.
PC_DIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# The public headers: uopjit.h, which a user includes, and the parts of the API
# it includes (the op table uopjit_ops.h, the optimizers' uopjit_optim.h).
PUBLIC_HEADERS = include/uopjit.h include/uopjit_ops.h include/uopjit_optim.h

install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 755 $(LIB_SO_FILE) $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_SO_FILE))
	ln -sf $(notdir $(LIB_SO_FILE)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libuopjit.so
	$(INSTALL) -m 644 $(LIB_STATIC) $(DESTDIR)$(LIBDIR)/libuopjit.a
	$(INSTALL) -m 755 $(CLI) $(DESTDIR)$(BINDIR)/uopjit
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call PC_DIR,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call PC_DIR,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
	    mk/uopjit.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/uopjit.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/uopjit.pc

# Removes what install wrote (the directories stay: they may hold others' files).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(notdir $(PUBLIC_HEADERS))) \
	      $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_SO_FILE)) \
	      $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libuopjit.so \
	      $(DESTDIR)$(LIBDIR)/libuopjit.a $(DESTDIR)$(BINDIR)/uopjit $(DESTDIR)$(PKGCONFIGDIR)/uopjit.pc

# ---- tsan --------------------------------------------------------------------------

# The library and the threading tests, built with ThreadSanitizer under
# build/tsan and run by `make test`: the thread pool's own test, the
# tiering test (the library's compile threads), the chains of blocks (rows
# split over the pool through several blocks), the multi-tensor walk split
# over the pool, and every test that starts
# threads of its own (calls pthread_create). A race
# report makes the binary exit non-zero (TSan's status 66), which counts
# as a failure.
THREAD_TEST_SRCS := $(sort tests/test_threads.c tests/test_tier.c tests/test_chains.c tests/test_groups_fast.c tests/test_groups_gather.c tests/test_stream.c $(shell grep -l pthread_create $(TEST_SRCS)))
tsan:
	@TSAN_OPTIONS="second_deadlock_stack=1" \
	  $(MAKE) --no-print-directory BUILD=build/tsan TSAN=1 \
	    TESTS="$(THREAD_TEST_SRCS:tests/%.c=build/tsan/tests/%)" test

# ---- bench -------------------------------------------------------------------------

# bench/ is the code of `uopjit bench` (tools/cli_bench.c), linked into the
# CLI. The workloads are bench/<name>.uj with their `uopjit aot` options in
# bench/<name>.args, read at run time; the AOT kernels are built then too
# (bench/aot.c: `uopjit aot`, then $(CC) -O3 -march=native), since the CLI
# cannot contain its own output. Where the figures depend on the code gcc
# makes, the flags are those of the comparison: the unfused loops, the
# hand-written kernels and the row kernels with -O3 -march=native
# -ffast-math (SIMD as NumPy's ufuncs, see bench/baseline.c), STREAM and the
# traffic-matched copy kernel with -O3 -march=native, the copy loop kept a
# loop rather than turned into memcpy. Those objects are called only by
# `uopjit bench`: the rest of the tool runs on any CPU of the architecture.
BENCH_OBJS := $(filter $(BUILD)/obj/bench/%,$(CLI_OBJS))
BENCH_NATIVE_FLAGS := $(if $(filter 1,$(DEBUG)),,-O3) -march=native

$(BENCH_OBJS): override CFLAGS += -DBENCH_SOURCE_DIR='"$(CURDIR)/bench"'
$(BUILD)/obj/bench/suite.o: override CFLAGS += $(if $(MIR_ARCHIVE),-DBENCH_MIR_LIBRARY='"$(MIR_ARCHIVE)"')
$(BUILD)/obj/bench/baseline.o $(BUILD)/obj/bench/rows_baseline.o $(BUILD)/obj/bench/hand.o: \
  override CFLAGS += $(BENCH_NATIVE_FLAGS) -ffast-math
# (gcc notes, on every build, that passing 64-byte vectors changed ABI in
# 4.6: nothing to act on, these being static functions; -Wno-psabi keeps
# the quiet build quiet. clang has no such note.)
CC_IS_CLANG := $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1))
$(BUILD)/obj/bench/stream.o $(BUILD)/obj/bench/traffic.o: \
  override CFLAGS += $(BENCH_NATIVE_FLAGS) -fno-tree-loop-distribute-patterns \
  -mprefer-vector-width=512 $(if $(CC_IS_CLANG),,-Wno-psabi)

# tests/test_bench_traffic.c checks the bench's copy kernel, linked in.
$(BUILD)/tests/test_bench_traffic: $(BUILD)/obj/tests/test_bench_traffic.o $(BUILD)/obj/bench/traffic.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_A) $(LIBS)

# tests/test_bench_report.c validates the suite's JSON with bench/'s scripts.
$(BUILD)/obj/tests/test_bench_report.o: override CFLAGS += -DBENCH_SOURCE_DIR='"$(CURDIR)/bench"'

# The full suite into build/bench-report, then the convolution backends.
bench: all
	$(CLI) bench --out $(BUILD)/bench-report
	$(CLI) bench --conv

# ---- fuzz --------------------------------------------------------------------------

# libFuzzer targets (tests/fuzz/fuzz_<name>.c, each opening with what it
# attacks) built with clang, ASan and UBSan (float-cast-overflow included,
# every report fatal), against the library compiled the same way (without
# backends/, which no target reaches). `make fuzz` runs each target for
# FUZZ_SECONDS seconds, starting from the committed seed corpus
# tests/fuzz/corpus/<name>/ and its dictionary tests/fuzz/<name>.dict; what
# the runs add to the corpus stays under build/fuzz/corpus/<name>/, and an
# input that crashes, leaks or hangs (FUZZ_TIMEOUT seconds) goes to
# build/fuzz/crashes/<name>/ and stops the run with a non-zero status.
# libFuzzer comes with clang's runtime libraries (Debian: libclang-rt-14-dev).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 20
# One folder whatever BUILD is: the targets' flags do not depend on it, so
# make debug's replay and make fuzz share the instrumented objects.
FUZZ_DIR := build/fuzz
# Every report stops the run.
FUZZ_SANITIZE := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
FUZZ_UBSAN_OPTIONS := halt_on_error=1:print_stacktrace=1
# UJ_VERIFY_PASSES: the IR verifier runs after every pass, as in make debug.
FUZZ_CFLAGS = $(filter-out $(OPTFLAGS),$(CFLAGS)) -O1 -g -fno-omit-frame-pointer $(FUZZ_SANITIZE) -DUJ_VERIFY_PASSES
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(filter-out backends/%,$(LIB_SRCS)))
FUZZ_TARGETS := $(sort $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c))))
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
.SECONDARY: $(FUZZ_LIB_OBJS) $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/tests/fuzz/%.o)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_DIR)/obj/jit/c/c.o: override CFLAGS += -DUJ_C_EMITTER_ID='"$(C_EMITTER_ID)"'
$(FUZZ_DIR)/obj/jit/c/c.o: $(C_EMITTER_FILES)

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(call say,LINK,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_SANITIZE) -fsanitize=fuzzer -o $@ $^ $(LIBS)

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/tests/fuzz/%.d)

fuzz: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  name=$${t#fuzz_}; \
	  mkdir -p $(FUZZ_DIR)/corpus/$$name $(FUZZ_DIR)/crashes/$$name; \
	  echo "== $$t for $(FUZZ_SECONDS) s"; \
	  UBSAN_OPTIONS=$(FUZZ_UBSAN_OPTIONS) $(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1 \
	    -dict=tests/fuzz/$$name.dict -artifact_prefix=$(FUZZ_DIR)/crashes/$$name/ \
	    $(FUZZ_DIR)/corpus/$$name tests/fuzz/corpus/$$name || exit 1; \
	done

# `make fuzz-replay`: each target run once over every input of its committed
# seed corpus (-runs=0), under the same sanitizers; no new inputs. make test
# runs it (tests/test_fuzz_replay.sh) where clang and libFuzzer are there, so
# that a report on a seed fails the tests, not only a later fuzzing run.
fuzz-replay: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  name=$${t#fuzz_}; \
	  echo "== $$t over tests/fuzz/corpus/$$name"; \
	  UBSAN_OPTIONS=$(FUZZ_UBSAN_OPTIONS) $(FUZZ_DIR)/$$t -runs=0 -timeout=$(FUZZ_TIMEOUT) \
	    tests/fuzz/corpus/$$name || exit 1; \
	done

# The demo, then two fused chains through the expression language checked
# against the interpreter in f64, then the quick bench (its summary and
# where its report and plots are come last).
SIGMOID := '1/(1+exp(-(a*x+b)))'
ADAM := 'm = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p - lr*m/(sqrt(v)+eps)'
run: all
	$(CLI) demo
	$(CLI) run --check $(SIGMOID) --scalar a,b
	$(CLI) run --check $(ADAM) --scalar b1,b2,lr,eps
	$(CLI) bench --quick --out $(BUILD)/bench-quick


clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_SRCS:tests/%.c=$(BUILD)/obj/tests/%.d)
