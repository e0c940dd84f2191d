# The two commands in the README: `make demo` and `make test`.
# Both install the Debian packages they need first (scripts/install-deps).

JOBS ?= $(shell nproc)

.PHONY: deps build test demo bench clean format

deps:
	scripts/install-deps

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

# Two builds: the sanitized test build, and the release flags with the tests
# marked RELEASE (what users run); one ctest run covers both.
test: deps
	cmake --preset test-release
	cmake --build --preset test-release -j $(JOBS)
	cmake --preset test
	cmake --build --preset test -j $(JOBS)
	ctest --preset test

demo: build
	./build/release/anxin demo

bench: deps
	cmake --preset bench
	cmake --build --preset bench -j $(JOBS)
	bench/run-all build/bench

format:
	find src include tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf build
