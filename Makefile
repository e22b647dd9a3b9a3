# tensorfs: `make` builds ./tensorfs; `make check` installs what is missing,
# builds, and runs every test; `make demo` mounts a small example.

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
MANDIR = $(PREFIX)/share/man
COMPLETIONDIR = $(PREFIX)/share/bash-completion/completions

CC ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS ?= -O2 -g
WARN = -std=c11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral
DEPS_CFLAGS = $(shell $(PKG_CONFIG) --cflags fuse3 json-c libcurl libxxhash libcrypto libpng 2>/dev/null)
DEPS_LIBS = $(shell $(PKG_CONFIG) --libs fuse3 json-c libcurl libxxhash libcrypto libpng 2>/dev/null)
# The core without FUSE: unit tests and fuzzers link this.
JSONC_LIBS = $(shell $(PKG_CONFIG) --libs json-c libcurl libxxhash libcrypto libpng 2>/dev/null)
ALL_CFLAGS = $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -Isrc $(DEPS_CFLAGS) $(CFLAGS)

# src/ by axis: core/ (errors, memory, text, the tensor table, the source
# and format interfaces, the model), sources/, formats/, views/, and above
# them fuse/ (the FUSE glue) and cli/ (the command line).
AXES = core sources formats views
# The FUSE glue and the command line.
FUSE_SRC = $(sort $(wildcard src/fuse/*.c)) src/cli/daemon.c src/cli/options.c src/cli/verify.c src/cli/diff.c src/cli/stats_cmd.c src/cli/main.c
# The rest is the core: sources, formats, the tensor table and the views,
# with no FUSE in it; unit tests and fuzzers link it. A new source, format
# or view is one more file in its folder and one line in its registry.
CORE_SRC = $(sort $(foreach d,$(AXES),$(wildcard src/$(d)/*.c))) src/cli/inspect.c src/cli/manifest.c

BUILD = build
CORE_OBJ = $(CORE_SRC:src/%.c=$(BUILD)/%.o)
FUSE_OBJ = $(FUSE_SRC:src/%.c=$(BUILD)/%.o)
# Every object's header dependencies, written by the compiler (-MMD -MP).
DEPFILES = $(CORE_OBJ:.o=.d) $(FUSE_OBJ:.o=.d) $(UNIT_TESTS:%=$(BUILD)/test_%.d)
# The sanitizer build and the fuzzers compile every source in one command.
ALL_HDRS = $(wildcard src/*/*.h)

SAN = build-san
SAN_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

PYTHON = /usr/bin/python3
FUZZ_SECONDS ?= 60
# Seconds per fuzz target in make check (make fuzz runs longer).
CHECK_FUZZ_SECONDS ?= 10
# make check builds on every core.
NPROC := $(shell nproc 2>/dev/null || echo 2)

.PHONY: bench all deps test-tools check unit integration san-check fuzz fuzz-build demo install uninstall clean

all: tensorfs

tensorfs: $(CORE_OBJ) $(FUSE_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(DEPS_LIBS) -lpthread -lm

$(BUILD)/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

-include $(DEPFILES)

$(BUILD) $(SAN):
	mkdir -p $@

# ---- tests ----

UNIT_TESTS = format sources
UNIT_BINS = $(UNIT_TESTS:%=$(BUILD)/test_%)
UNIT_SAN_BINS = $(UNIT_TESTS:%=$(SAN)/test_%)

$(BUILD)/test_%: tests/unit/test_%.c $(CORE_OBJ) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(CORE_OBJ) $(JSONC_LIBS) -lpthread -lm

$(SAN)/tensorfs: $(CORE_SRC) $(FUSE_SRC) $(ALL_HDRS) | $(SAN)
	$(CC) $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -Isrc $(DEPS_CFLAGS) $(SAN_FLAGS) \
		-o $@ $(CORE_SRC) $(FUSE_SRC) $(DEPS_LIBS) -lpthread -lm

$(SAN)/test_%: tests/unit/test_%.c $(CORE_SRC) $(ALL_HDRS) | $(SAN)
	$(CC) $(WARN) -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE $(DEPS_CFLAGS) $(SAN_FLAGS) -Isrc \
		-o $@ $< $(CORE_SRC) $(JSONC_LIBS) -lpthread -lm

FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS = $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_check.h $(CORE_SRC) $(ALL_HDRS) | $(BUILD)
	clang -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-Isrc $(DEPS_CFLAGS) -o $@ $< $(CORE_SRC) $(JSONC_LIBS) -lpthread -lm

deps:
	@scripts/install-deps.sh

# The test tools from the npm registry (make check needs them, make does not).
test-tools: deps
	@scripts/install-test-tools.sh

check: test-tools
	$(MAKE) -j$(NPROC) all $(UNIT_BINS) $(SAN)/tensorfs $(UNIT_SAN_BINS) $(FUZZ_BINS)
	CHECK_FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS) scripts/run-checks.sh

unit: $(UNIT_BINS)
	for t in $(UNIT_BINS); do $$t || exit 1; done

fuzz-build: $(FUZZ_BINS)

fuzz: deps
	$(MAKE) $(FUZZ_BINS)
	scripts/fuzz.sh $(FUZZ_SECONDS)

demo: deps
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
	rm -rf $(BUILD) $(SAN) tensorfs .pytest_cache tests/__pycache__ tests/integration/__pycache__

# A null FUSE server, the ceiling of any FUSE filesystem here (make bench).
$(BUILD)/nullfs: tests/bench/nullfs.c | $(BUILD)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(DEPS_LIBS) -lpthread

# Not part of check: prints ratios against baselines from the same run.
bench: deps
	$(MAKE) all $(BUILD)/nullfs
	$(PYTHON) scripts/bench.py
