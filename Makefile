# Makefile — a thin driver over CMake. `make demo` and `make test` work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DTAILOR_WERROR=ON
endif

.PHONY: all deps configure build demo test test-gpu asan clean

all: build

deps:
	@bash scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/tailor

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-gpu: build
	@cd $(BUILD) && ctest --output-on-failure -L gpu

asan:
	@$(MAKE) BUILD=build-asan CMAKE_FLAGS="$(CMAKE_FLAGS) -DTAILOR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" test

clean:
	rm -rf $(BUILD) build-asan
