# Makefile — a thin wrapper over CMake and ctest for the two commands of the
# README (`make demo`, `make test`). The real build lives in CMakeLists.txt.
#
#   make deps    install the missing Debian packages (scripts/install-deps.sh)
#   make build   configure and build ./build (gcc; CUDA parts when nvcc+NCCL exist)
#   make demo    build, start zppd on a temporary socket, run the demo job, stop it
#   make test    build ./build (gcc) and ./build-asan (clang, ASan+UBSan, libFuzzer,
#                no CUDA) and run every ctest test in both
#   make tsan    build ./build-tsan (clang, ThreadSanitizer, no CUDA) and run the
#                tests that do not go through gRPC (see tests/tsan.supp)
#   make clean   remove both build trees
#
# JOBS sets build and ctest parallelism (CI has 2 cores); BUILD and ASAN_BUILD
# name the build trees; CMAKE_ARGS adds configure options to both (e.g.
# CMAKE_ARGS=-DZPP_CUDA=OFF).

JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
CMAKE ?= cmake
CTEST ?= ctest
CMAKE_ARGS ?=

.PHONY: all deps build demo test tsan clean

all: build

deps:
	scripts/install-deps.sh

build: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_C_COMPILER=gcc $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD) -j$(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

test: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_C_COMPILER=gcc $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD) -j$(JOBS)
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_C_COMPILER=clang \
	    -DZPP_SANITIZE=ON -DZPP_FUZZ=ON -DZPP_CUDA=OFF $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_BUILD) -j$(JOBS)
	@rc=0; \
	echo "== ctest $(BUILD)"; \
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j$(JOBS) || rc=1; \
	echo "== ctest $(ASAN_BUILD) (ASan+UBSan)"; \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	    $(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) || rc=1; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED"; else echo "make test: all passed"; fi; \
	exit $$rc

# Debian's gRPC and abseil are not built with ThreadSanitizer, so it cannot
# see their locks: every hand-off through gRPC (the peer service's
# completion queue, its message buffers) reads as a race. The tests that run
# the peer service (test_peer*, test_multinode, test_cluster_tick) are left
# out; the rest (the loop, libuv's worker threads running the host backend's
# collectives, several clients and daemons) run under it.
tsan: deps
	$(CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=clang \
	    -DZPP_TSAN=ON -DZPP_CUDA=OFF $(CMAKE_ARGS)
	$(CMAKE) --build $(TSAN_BUILD) -j$(JOBS)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	    $(CTEST) --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS) \
	    -E 'fuzz|test_peer|test_multinode|test_cluster_tick'

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
