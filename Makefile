# tensorfs: `make` builds ./tensorfs; `make check` installs what is missing,
# builds, and runs every test; `make demo` installs what the build and the
# demo need, and mounts a small example.

# A plain `make` builds ./tensorfs, whatever rule comes first below (the
# flag stamps' rules, made by $(eval), would otherwise be the default).
.DEFAULT_GOAL := all

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
MANDIR = $(PREFIX)/share/man
COMPLETIONDIR = $(PREFIX)/share/bash-completion/completions

CC ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS ?= -O2 -g
# -Werror only where asked (make check and CI set WERROR=1): a newer
# compiler's new warning must never break a user's build.
WERROR ?=
WARN = -std=c11 -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -Wshadow -Wformat=2 -Wno-format-nonliteral
DEPS_CFLAGS = $(shell $(PKG_CONFIG) --cflags fuse3 json-c libcurl libxxhash libcrypto libpng liblz4 2>/dev/null)
DEPS_LIBS = $(shell $(PKG_CONFIG) --libs fuse3 json-c libcurl libxxhash libcrypto libpng liblz4 2>/dev/null)
# The core without FUSE: unit tests and fuzzers link this.
JSONC_LIBS = $(shell $(PKG_CONFIG) --libs json-c libcurl libxxhash libcrypto libpng liblz4 2>/dev/null)
ALL_CFLAGS = $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -Isrc $(DEPS_CFLAGS) $(CFLAGS)

# src/ by axis: core/ (errors, memory, text, the tensor table, the source
# and format interfaces, the exit codes), compute/ (pure computations:
# decoding, values, statistics, comparisons, pictures, hashes, manifests, the
# safetensors and GGUF writers, Zarr's documents, BLAKE3 and Xet's),
# sources/, formats/, model/ (the model stage), views/ (the tree and the
# plug-ins), fs/ (the file-system core), tools/ (inspect, verify, diff,
# stats, list as library functions), and above them fuse/ (the FUSE glue)
# and cli/ (the command line). docs/architecture.md draws the house.
AXES = core compute sources formats model views fs tools
# The FUSE glue and the command line.
FUSE_SRC = $(sort $(wildcard src/fuse/*.c)) src/cli/daemon.c src/cli/options.c src/cli/main.c
# The rest is the core: sources, formats, the tensor table, the views and
# the tools, with no FUSE in it; unit tests and fuzzers link it. A new
# source, format, view or tool is one more file in its folder and its
# lines in its registry.
CORE_SRC = $(sort $(foreach d,$(AXES),$(wildcard src/$(d)/*.c)))

BUILD = build
CORE_OBJ = $(CORE_SRC:src/%.c=$(BUILD)/%.o)
FUSE_OBJ = $(FUSE_SRC:src/%.c=$(BUILD)/%.o)
ALL_HDRS = $(wildcard src/*/*.h)

# The ASan+UBSan build and the fuzzers' build of the core: objects of
# their own, compiled once each (on every core) and linked into the
# sanitizer binary, its unit tests and each fuzz target.
SAN = build-san
SAN_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_CORE_OBJ = $(CORE_SRC:src/%.c=$(SAN)/%.o)
SAN_FUSE_OBJ = $(FUSE_SRC:src/%.c=$(SAN)/%.o)
FUZZ = build-fuzz
FUZZ_CFLAGS = -std=c11 -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -D_GNU_SOURCE -g -O1 \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Isrc $(DEPS_CFLAGS)
FUZZ_CORE_OBJ = $(CORE_SRC:src/%.c=$(FUZZ)/%.o)
# Every object's header dependencies, written by the compiler (-MMD -MP).
DEPFILES = $(CORE_OBJ:.o=.d) $(FUSE_OBJ:.o=.d) $(UNIT_TESTS:%=$(BUILD)/test_%.d) \
	$(SAN_CORE_OBJ:.o=.d) $(SAN_FUSE_OBJ:.o=.d) $(FUZZ_CORE_OBJ:.o=.d)

# The flags each build was made with: a change (WERROR=1 after a plain
# make) rebuilds its objects.
FLAGS_STAMP = $(BUILD)/.flags $(SAN)/.flags $(FUZZ)/.flags
define flags_rule
$(1)/.flags: FORCE
	@mkdir -p $(1); echo '$(2)' | cmp -s - $$@ || echo '$(2)' > $$@
endef
$(eval $(call flags_rule,$(BUILD),$(ALL_CFLAGS)))
$(eval $(call flags_rule,$(SAN),$(WARN) $(SAN_FLAGS)))
$(eval $(call flags_rule,$(FUZZ),$(FUZZ_CFLAGS)))
FORCE:
# Made by pattern rules but kept: make would delete them as intermediates.
.SECONDARY: $(SAN_CORE_OBJ) $(SAN_FUSE_OBJ) $(FUZZ_CORE_OBJ)

PYTHON = /usr/bin/python3
FUZZ_SECONDS ?= 60
# Seconds per fuzz target in make check (make fuzz runs longer).
CHECK_FUZZ_SECONDS ?= 10
# make check builds on every core.
NPROC := $(shell nproc 2>/dev/null || echo 2)

.PHONY: FORCE bench all deps deps-demo test-tools check unit integration san-check fuzz fuzz-build demo install uninstall clean

all: tensorfs

tensorfs: $(CORE_OBJ) $(FUSE_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(DEPS_LIBS) -lpthread -lm

$(BUILD)/%.o: src/%.c $(BUILD)/.flags
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(SAN)/%.o: src/%.c $(SAN)/.flags
	@mkdir -p $(@D)
	$(CC) $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -Isrc $(DEPS_CFLAGS) $(SAN_FLAGS) -MMD -MP -c -o $@ $<

$(FUZZ)/%.o: src/%.c $(FUZZ)/.flags
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

-include $(DEPFILES)

$(BUILD) $(SAN):
	mkdir -p $@

# ---- tests ----

UNIT_TESTS = format sources fs readahead zarr xet tools cache cache_disk
UNIT_BINS = $(UNIT_TESTS:%=$(BUILD)/test_%)
UNIT_SAN_BINS = $(UNIT_TESTS:%=$(SAN)/test_%)

$(BUILD)/test_%: tests/unit/test_%.c $(CORE_OBJ) $(BUILD)/.flags
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(CORE_OBJ) $(JSONC_LIBS) -lpthread -lm

$(SAN)/tensorfs: $(SAN_CORE_OBJ) $(SAN_FUSE_OBJ)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(DEPS_LIBS) -lpthread -lm

$(SAN)/test_%: tests/unit/test_%.c $(SAN_CORE_OBJ) $(SAN)/.flags
	$(CC) $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE $(DEPS_CFLAGS) $(SAN_FLAGS) -Isrc \
		-o $@ $< $(SAN_CORE_OBJ) $(JSONC_LIBS) -lpthread -lm

FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS = $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_check.h $(FUZZ_CORE_OBJ) $(ALL_HDRS) | $(BUILD)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CORE_OBJ) $(JSONC_LIBS) -lpthread -lm

# Everything make check, make fuzz and make bench need; make demo needs
# only the build toolchain, FUSE and what the demo runs.
deps:
	@scripts/install-deps.sh check

deps-demo:
	@scripts/install-deps.sh demo

# The test tools from the npm registry (make check needs them, make does not).
test-tools: deps
	@scripts/install-test-tools.sh

# ./tensorfs and the unit tests first; the sanitizer build and the
# fuzzers are built by scripts/run-checks.sh while the first run of the
# integration tests (which mostly waits) goes on beside them.
check: test-tools
	$(MAKE) -j$(NPROC) WERROR=1 all $(UNIT_BINS)
	CHECK_FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS) CHECK_UNIT_TESTS="$(UNIT_TESTS)" \
		CHECK_BUILD_REST="$(MAKE) -j$(NPROC) WERROR=1 $(SAN)/tensorfs $(UNIT_SAN_BINS) $(FUZZ_BINS)" \
		scripts/run-checks.sh

# make unit: every unit test; make unit T=fs: build/test_fs alone; make
# unit T=fs C=reads: its one case (docs/testing.md).
UNIT_RUN = $(if $(T),$(T:%=$(BUILD)/test_%),$(UNIT_BINS))
unit: $(UNIT_RUN)
	for t in $(UNIT_RUN); do $$t $(C) || exit 1; done

fuzz-build: $(FUZZ_BINS)

fuzz: deps
	$(MAKE) $(FUZZ_BINS)
	scripts/fuzz.sh $(FUZZ_SECONDS)

demo: deps-demo
	$(MAKE) all
	scripts/demo.sh

install: tensorfs
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(COMPLETIONDIR)
	install -m 0755 tensorfs $(DESTDIR)$(BINDIR)/tensorfs
	install -m 0644 docs/tensorfs.1 $(DESTDIR)$(MANDIR)/man1/tensorfs.1
	install -m 0644 docs/tensorfs.bash $(DESTDIR)$(COMPLETIONDIR)/tensorfs

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tensorfs $(DESTDIR)$(MANDIR)/man1/tensorfs.1 $(DESTDIR)$(COMPLETIONDIR)/tensorfs

clean:
	rm -rf $(BUILD) $(SAN) $(FUZZ) tensorfs .pytest_cache tests/__pycache__ tests/integration/__pycache__ tests/lib/__pycache__ scripts/__pycache__

# A null FUSE server, the ceiling of any FUSE filesystem here (make bench).
$(BUILD)/nullfs: tests/bench/nullfs.c | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(DEPS_LIBS) -lpthread

# What verifying Xet costs: BLAKE3, the Merkle hash and chunk decoding in
# MB/s on this machine (build/xetspeed [DATA_MIB [RUNS]]).
$(BUILD)/xetspeed: tests/bench/xetspeed.c $(CORE_OBJ) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(CORE_OBJ) $(JSONC_LIBS) -lpthread -lm

# Not part of check: prints ratios against baselines from the same run.
bench: deps
	$(MAKE) all $(BUILD)/nullfs
	$(PYTHON) scripts/bench.py
