# Thin wrapper: CMake + CTest do the work. `make test` and `make run` install what is missing first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
# Tests run at once by `make test`: twice the cores, since many of those tests wait on servers,
# sockets and child processes (the release suite used 1.7 of 2 cores at -j2: 124 s, 101 s at -j3,
# 95 s at -j4). The sanitizer suites keep the cores busy and stay at JOBS (TSan at -j4: 130 s
# against 125 at -j2, its threaded engine tests 3-4 times as long each).
TEST_JOBS  ?= $(shell echo $$(( $(JOBS) * 2 )))
INVAR      := $(BUILD)/apps/invar/invar
MODEL      ?= models/default.gguf
# Extra configure arguments for every build tree (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
CMAKE_ARGS ?=
CLANG_FORMAT ?= clang-format

# Every C/C++ source of the repository; build trees, generated models and node_modules excluded.
SOURCES = $(shell find . \( -path './build*' -o -path ./out -o -path ./models -o -path ./.git \
  -o -path ./.cache -o -name node_modules \) -prune -o -type f \
  \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) -print | sort)

# A sanitizer report fails the test that triggered it, with a stack trace.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(abspath tests/tsan.supp)

.PHONY: all deps configure build test test-sanitize test-asan test-tsan soak format check-format \
  run bench clean golden

all: build

deps:
	@scripts/install-deps

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Tests keep what `invar serve` caches between starts (the model SHA-256, docs/memory.md) inside
# the build tree, not in the user's ~/.cache.
test: build
	@cd $(BUILD) && XDG_CACHE_HOME=$(abspath $(BUILD))/test-cache ctest --output-on-failure -j $(TEST_JOBS) -LE soak

# AddressSanitizer + UndefinedBehaviorSanitizer over every test (the quantised-model invariance on
# one type per block family, tests/model/CMakeLists.txt), then ThreadSanitizer over the
# tests that run threads: the engine (scheduler included), the server and its HTTP transport
# under hostile clients; each in its own build tree at -O1.
test-sanitize: test-asan test-tsan

test-asan: deps
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release -DINVAR_SANITIZE=address $(CMAKE_ARGS)
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && XDG_CACHE_HOME=$(abspath $(ASAN_BUILD))/test-cache $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -LE soak

# The TSan tree links the release tree's kernels, which TSan does not watch (src/kernels/CMakeLists.txt),
# and leaves `invar bench` out of the binary: none of its tests runs it.
test-tsan: configure
	@cmake --build $(BUILD) -j $(JOBS) --target invar_kernels
	@test -f $(TSAN_BUILD)/CMakeCache.txt || cmake -S . -B $(TSAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release -DINVAR_SANITIZE=thread \
	  -DINVAR_KERNELS_PREBUILT=$(abspath $(BUILD))/src/kernels/libinvar_kernels.a \
	  -DINVAR_BENCH_COMMANDS=OFF $(CMAKE_ARGS)
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target tests-engine tests-server tests-hostile
	@cd $(TSAN_BUILD) && XDG_CACHE_HOME=$(abspath $(TSAN_BUILD))/test-cache $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) \
	  -L 'engine|server|hostile' -LE soak

# Rewrites tests/data/golden/<numerics version>/ from this build's logits: only on purpose, with a
# new kNumericsVersion (tests/model/golden_test.cpp says why).
golden: build
	@cmake --build $(BUILD) -j $(JOBS) --target model_golden
	@cd $(BUILD) && INVAR_GOLDEN_WRITE=1 ./tests/model/model_golden

# The long fuzz / soak runs, which stay out of `make test`.
soak: build
	@cmake --build $(BUILD) -j $(JOBS) --target tests-soak
	@cd $(BUILD) && ctest --output-on-failure -L soak

format:
	@$(CLANG_FORMAT) -i --style=file $(SOURCES)

check-format:
	@$(CLANG_FORMAT) --dry-run -Werror --style=file $(SOURCES) || \
	  { echo "check-format: these files differ from .clang-format; 'make format' rewrites them"; exit 1; }

$(MODEL): | build
	@mkdir -p $(dir $(MODEL))
	$(INVAR) make-model --arch qwen3next --out $(MODEL)

run: build $(MODEL)
	@scripts/run-demo $(INVAR) $(MODEL)

bench: build
	@scripts/run-bench $(INVAR)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
