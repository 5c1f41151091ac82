# fxcpp: `make demo` and `make test` do all the set-up on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all setup configure build demo test bench goldens install docs clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: setup $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the command line: no tests or benchmarks are built first.
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target fxcpp_cli
	$(BUILD)/fxcpp demo

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	/usr/bin/python3 scripts/bench_table.py --build $(BUILD)

# Regenerates the Python torch.fx goldens the differential tests compare with.
goldens: setup
	for g in python/goldens/*_goldens.py; do /usr/bin/python3 $$g || exit 1; done

# The README's drawing screenshot, $(BUILD)/docs/graph.png: resnet18's graph page
# (fxcpp draw) in headless Chromium, checked by python/draw_browser_test.py.
docs: configure
	cmake --build $(BUILD) --target fxcpp_cli
	[ -f $(BUILD)/models/resnet18.pt ] || /usr/bin/python3 python/export_models.py --out $(BUILD)/models resnet18
	/usr/bin/python3 python/draw_browser_test.py --fxcpp $(BUILD)/fxcpp --model $(BUILD)/models/resnet18.pt \
	  --input $(BUILD)/models/resnet18.input.pt --out $(BUILD)/draw --screenshot docs/graph.png

clean:
	rm -rf $(BUILD)
