# Thin wrapper over CMake. `make run` and `make test` install missing packages first.
# CMAKE_ARGS goes to every configure (CI: -DTANDEM_WERROR=ON); `ctest -L unit|model|slow`
# selects by label (tests/labels.cmake).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
MODEL ?= ../shared/models/aidreams260K/model.gguf
PROMPT ?= The dream
FORMAT_DIRS = src tests fuzz bench include
CLANG_FORMAT ?= clang-format-14

.PHONY: setup configure build run test bench asan tsan fuzz format check-format clean

setup:
	@scripts/setup

configure:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: setup build
	@if [ ! -f "$(MODEL)" ]; then \
	  echo "make run: demo model $(MODEL) not found; get ../shared or run: make run MODEL=/path/to/model.gguf"; exit 1; fi
	$(BUILD)/tandem run -m $(MODEL) -p "$(PROMPT)" -n 96 --temp 0

test: setup build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: setup build
	@if [ -x bench/run ]; then bench/run; else echo "make bench: no benchmarks yet"; fi

# The sanitizer builds carry line tables only (-g1: file:line in every report, at a fraction
# of full debug info's compile time) and leave out the benchmark programs and the CUDA backend
# (nvcc compiles it once per CI run, in `make test`'s build; the sanitizers do not see device code).
SANITIZER_BUILD_ARGS = -DTANDEM_BENCHMARKS=OFF -DTANDEM_CUDA=OFF

# AddressSanitizer + UBSan build of everything, tests run under it, except `slow` and the
# `levels` reruns: those run the same code above the kernel table at each lower CPU level, and
# each level's kernels are checked under ASan by test_kernels (every level the CPU has). The
# reruns were a third of the ASan run (the scalar level's up to 50 s a test).
asan: setup
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DTANDEM_SANITIZE=ON \
	  $(SANITIZER_BUILD_ARGS) $(CMAKE_ARGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -LE '^(slow|levels)$$'

# ThreadSanitizer: the thread pool, KV and server tests (the server tests start the TSan-built
# `tandem serve`, which reports into the same log: its I/O threads, worker pool and engine
# thread, and the forward pass's thread pool, under concurrent requests), once each (no
# `levels` rerun: the threads do the same at every CPU level), not `slow`. The engine's own
# tests (one thread driving it) were two of the run's five minutes and found nothing the
# server tests do not reach. -O1: TSan's instrumentation makes -O2 compile slowly (the AVX2
# attention kernels: 82 s at -O2 -g1, 53 s at -O1 -g1). tests/tsan.supp says why each
# suppression is there. Not the `mpi` tests (tandem serve --workers/--pipeline under mpirun):
# OpenMPI's shared-memory transport is not instrumented, and TSan cannot see its ordering.
TSAN_TESTS = test_base test_kv test_server
tsan: setup
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	  -DTANDEM_TSAN=ON $(SANITIZER_BUILD_ARGS) $(CMAKE_ARGS) >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target tandem $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" \
	  ctest --output-on-failure -j $(JOBS) -L '^(base|kv|server)$$' -LE '^(levels|slow|mpi)$$'

# libFuzzer targets (clang), each run briefly; -O1 with line tables, as libFuzzer's docs build
# (the fuzz phase with 5 s a target: 14.8 CPU-minutes at -O2 -g, 10.9 at -O1 -g1, on 2 cores).
fuzz: setup
	@CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
	  -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@for target in build-fuzz/fuzz_*; do \
	  [ -x "$$target" ] || continue; echo "fuzz: $$target"; \
	  mkdir -p build-fuzz/corpus-$$(basename $$target); \
	  $$target -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048 build-fuzz/corpus-$$(basename $$target) fuzz/seeds/$$(basename $$target) || exit 1; \
	done

# clang-format (.clang-format) over the C++ sources: `format` rewrites them in place,
# `check-format` lists the files it would change and fails if there are any.
FORMAT_FILES = $(shell git ls-files -- $(addsuffix /*.cpp,$(FORMAT_DIRS)) $(addsuffix /*.h,$(FORMAT_DIRS)) \
                 $(addsuffix /*.cu,$(FORMAT_DIRS)))
format:
	@$(CLANG_FORMAT) -i $(FORMAT_FILES)

check-format:
	@bad=$$(for f in $(FORMAT_FILES); do $(CLANG_FORMAT) "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "$$bad"; \
	  echo "check-format: $$(echo "$$bad" | wc -l) file(s) differ from .clang-format (make format rewrites them)"; exit 1; fi

clean:
	rm -rf build build-asan build-tsan build-fuzz
