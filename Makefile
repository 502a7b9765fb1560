# Thin wrapper: CMake + CTest do the work. `make test` and `make run` install what is missing first.
BUILD    ?= build
JOBS     ?= $(shell nproc)
INVAR    := $(BUILD)/apps/invar/invar
MODEL    ?= models/default.gguf

.PHONY: all deps configure build test run bench fuzz clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE soak

$(MODEL): | build
	@mkdir -p $(dir $(MODEL))
	$(INVAR) make-model --arch qwen3next --out $(MODEL)

run: build $(MODEL)
	@scripts/run-demo $(INVAR) $(MODEL)

bench: build
	@scripts/run-bench $(INVAR)

# Long fuzz / soak runs stay out of `make test`.
soak: build
	@cd $(BUILD) && ctest --output-on-failure -L soak

clean:
	rm -rf $(BUILD)
