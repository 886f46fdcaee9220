# logstore - hand-written GNU make with pkg-config.
#
#   make            release build: build/logstore
#   make run        install missing packages, build, serve on 127.0.0.1:8080 with ./data
#   make test       install missing packages, build with ASan+UBSan, run every suite;
#                   the last line is "N passed, N failed"
#   make bench      benchmarks (tests/bench), figures printed, never pass/fail
#   make check-layers   engine/ must not reach api/ or service/, nor HTTP or JSON
#   make tsan       build with ThreadSanitizer in build/tsan, run the suites there;
#                   fails on any data race report (not part of `make test`)
#
# `test` and `run` re-enter make after `deps` so pkg-config is evaluated once the
# packages exist.

SHELL := /bin/bash
CC ?= cc
BUILD := build

PKGS_RUNTIME := libmicrohttpd jansson libcrypto zlib libzstd liblz4 snappy
PKGS_TEST := libcurl cmocka

pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pc_libs = $(shell pkg-config --libs $(1) 2>/dev/null)

WARN := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wformat=2 -Wvla
BASE_CFLAGS := $(WARN) -pthread -Iengine -Iapi -Iservice -MMD -MP
REL_CFLAGS := -O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong
REL_LDFLAGS := -Wl,-z,relro,-z,now
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
             -DLOGSTORE_TEST_BUILD

RUNTIME_CFLAGS := $(call pc_cflags,$(PKGS_RUNTIME))
RUNTIME_LIBS := $(call pc_libs,$(PKGS_RUNTIME)) -lpthread
TEST_CFLAGS := $(call pc_cflags,$(PKGS_TEST))
TEST_LIBS := $(call pc_libs,$(PKGS_TEST))

ENGINE_SRC := $(wildcard engine/*.c)
API_SRC := $(wildcard api/*.c)
SERVICE_SRC := $(filter-out service/main.c,$(wildcard service/*.c))
GEN_SRC := $(BUILD)/gen/api_web_assets.c
LIB_SRC := $(ENGINE_SRC) $(API_SRC) $(SERVICE_SRC) $(GEN_SRC)

REL_OBJ := $(LIB_SRC:%.c=$(BUILD)/rel/%.o)
SAN_OBJ := $(LIB_SRC:%.c=$(BUILD)/san/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/san/tests/unit/%)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/san/tests/integration/%)
INTEG_HARNESS := $(BUILD)/san/tests/integration/harness.o
TEST_SUPPORT := $(BUILD)/san/tests/unit/support.o

.PHONY: all run test deps build-tests bench clean check-layers fuzz tsan build-tsan
.SECONDARY:

all: $(BUILD)/logstore

# ---- dependencies --------------------------------------------------------
# Debian package for each pkg-config module we need.
DEB_libmicrohttpd := libmicrohttpd-dev
DEB_jansson := libjansson-dev
DEB_libcrypto := libssl-dev
DEB_libcurl := libcurl4-openssl-dev
DEB_cmocka := libcmocka-dev

deps:
	@missing=""; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	for m in $(PKGS_RUNTIME) $(PKGS_TEST); do \
	  pkg-config --exists $$m 2>/dev/null || case $$m in \
	    libmicrohttpd) missing="$$missing $(DEB_libmicrohttpd)";; \
	    jansson) missing="$$missing $(DEB_jansson)";; \
	    libcrypto) missing="$$missing $(DEB_libcrypto)";; \
	    libcurl) missing="$$missing $(DEB_libcurl)";; \
	    cmocka) missing="$$missing $(DEB_cmocka)";; \
	    zlib) missing="$$missing zlib1g-dev";; \
	    libzstd) missing="$$missing libzstd-dev";; \
	    liblz4) missing="$$missing liblz4-dev";; \
	    snappy) missing="$$missing libsnappy-dev";; \
	  esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# ---- generated sources -----------------------------------------------------
$(BUILD)/gen/api_web_assets.c: api/web/dashboard.html api/web/embed.sh
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	@api/web/embed.sh $< api_web_dashboard > $@

# ---- release build -------------------------------------------------------
$(BUILD)/rel/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) $(RUNTIME_CFLAGS) -c $< -o $@

$(BUILD)/logstore: $(REL_OBJ) $(BUILD)/rel/service/main.o
	@echo "  LD      $@"
	@$(CC) $(REL_CFLAGS) $(REL_LDFLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)

run: deps
	@$(MAKE) --no-print-directory $(BUILD)/logstore
	mkdir -p data
	exec ./$(BUILD)/logstore --set log.dirs=./data --set listeners=http://127.0.0.1:8080

# ---- sanitizer build and tests -------------------------------------------
$(BUILD)/san/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC san  $<"
	@$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(RUNTIME_CFLAGS) $(TEST_CFLAGS) -Itests/unit -Itests/integration -c $< -o $@

$(BUILD)/san/logstore: $(SAN_OBJ) $(BUILD)/san/service/main.o
	@echo "  LD san  $@"
	@$(CC) $(SAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)

$(BUILD)/san/tests/unit/%: $(BUILD)/san/tests/unit/%.o $(TEST_SUPPORT) $(SAN_OBJ)
	@echo "  LD san  $@"
	@$(CC) $(SAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

$(BUILD)/san/tests/integration/%: $(BUILD)/san/tests/integration/%.o $(INTEG_HARNESS) $(TEST_SUPPORT) $(SAN_OBJ)
	@echo "  LD san  $@"
	@$(CC) $(SAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

# Fuzz targets: tests/fuzz/fuzz_<name>.c with corpus tests/fuzz/corpus/<name>/.
# `make test` replays each corpus through replay_main.c under the sanitizer
# build; `make fuzz` runs real libFuzzer (clang) for FUZZ_SECONDS each.
# fuzz_config's input is a settings file, whose errors the loader prints by
# design: its stderr is closed (-close_fd_mask=2) so the fuzzer's own lines
# stay readable; crashes are still saved as artifacts.  fuzz_startup runs with
# a 300 MB malloc limit: nothing read at startup needs more, and a size taken
# from a damaged file (a checkpoint's count, a batch length) shows up there
# long before the default 2 GB.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/san/tests/fuzz/test_fuzz_%)
FUZZ_SECONDS ?= 60

$(BUILD)/san/tests/fuzz/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c tests/fuzz/fuzz_support.h $(SAN_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD san  $@"
	@$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(RUNTIME_CFLAGS) -Wno-missing-prototypes \
		-DFUZZ_CORPUS='"tests/fuzz/corpus/$*"' -o $@ $< tests/fuzz/replay_main.c $(SAN_OBJ) $(RUNTIME_LIBS)

# libFuzzer builds compile everything with clang in their own tree.
FUZZ_CC ?= clang
# -fno-sanitize-recover=all as in the replay build: otherwise UBSan only prints
# and libFuzzer never saves the input that triggered undefined behaviour.
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
              -DLOGSTORE_TEST_BUILD
FUZZ_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzz/%.o)

$(BUILD)/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC fuzz $<"
	@$(FUZZ_CC) $(BASE_CFLAGS) $(FUZZ_FLAGS) $(RUNTIME_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_support.h $(FUZZ_OBJ)
	@echo "  LD fuzz $@"
	@$(FUZZ_CC) $(BASE_CFLAGS) -Wno-missing-prototypes -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-DLOGSTORE_TEST_BUILD $(RUNTIME_CFLAGS) -o $@ $< $(FUZZ_OBJ) $(RUNTIME_LIBS)

fuzz: deps
	@# libFuzzer reads -max_total_time=0 as "no limit": one target would run for ever.
	@case "$(FUZZ_SECONDS)" in ''|*[!0-9]*|0*) echo "FUZZ_SECONDS must be a whole number of seconds above 0, not '$(FUZZ_SECONDS)'"; exit 2;; esac
	@command -v $(FUZZ_CC) >/dev/null || (apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null)
	@$(MAKE) --no-print-directory $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
	@for n in $(FUZZ_NAMES); do \
		echo "== fuzz_$$n for $(FUZZ_SECONDS) s"; mkdir -p $(BUILD)/fuzz/corpus-$$n; \
		extra=; [ $$n = config ] && extra=-close_fd_mask=2; \
		[ $$n = startup ] && extra=-malloc_limit_mb=300; \
		$(BUILD)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$extra \
			$(BUILD)/fuzz/corpus-$$n tests/fuzz/corpus/$$n || exit 1; \
	done

CRASH_SRC := $(wildcard tests/crash/test_*.c)
CRASH_BIN := $(CRASH_SRC:tests/crash/%.c=$(BUILD)/san/tests/crash/%)

$(BUILD)/san/tests/crash/%: $(BUILD)/san/tests/crash/%.o $(INTEG_HARNESS) $(TEST_SUPPORT) $(SAN_OBJ)
	@echo "  LD san  $@"
	@$(CC) $(SAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

build-tests: $(BUILD)/san/logstore $(BUILD)/logstore $(UNIT_BIN) $(INTEG_BIN) $(CRASH_BIN) $(FUZZ_REPLAY_BIN)

# tests/unit/test_index_fs.c fills small btrfs and XFS file systems of its
# own (it skips where it cannot mount them: not root, no loop devices).
test: deps
	@command -v mkfs.btrfs >/dev/null 2>&1 && command -v mkfs.xfs >/dev/null 2>&1 || \
	  { export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && \
	    apt-get install -y -qq --no-install-recommends btrfs-progs xfsprogs >/dev/null; } || \
	  echo "btrfs-progs and xfsprogs could not be installed: their index tests will skip"
	@$(MAKE) --no-print-directory build-tests
	@$(MAKE) --no-print-directory check-layers
	@tests/run_all.sh $(BUILD)/san

# ---- ThreadSanitizer build and tests ---------------------------------------
# The same sources and suites as build/san, compiled with -fsanitize=thread in
# a tree of their own so the ASan objects `make test` uses are never touched.
# Every process (test binaries and the servers they start) writes its reports
# to build/tsan/tsan-reports; tsan fails when that directory is not empty, so
# a race inside a server that a test never notices still counts.  Known
# library-internal reports are suppressed in tests/tsan.supp, one reason each.
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer -DLOGSTORE_TEST_BUILD
# GCC's value ranges differ under -fsanitize=thread: it loses that a copy from
# a [32][16] buffer into a [MAXR][16] one fits (tests/crash/faults_fixture.h)
# and -Wformat-truncation fails a build the other two trees pass.
TSAN_CFLAGS := $(TSAN_FLAGS) -Wno-format-truncation
TSAN_OBJ := $(LIB_SRC:%.c=$(BUILD)/tsan/%.o)
TSAN_UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tsan/tests/unit/%)
TSAN_INTEG_BIN := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tsan/tests/integration/%)
TSAN_CRASH_BIN := $(CRASH_SRC:tests/crash/%.c=$(BUILD)/tsan/tests/crash/%)
TSAN_SUPPORT := $(BUILD)/tsan/tests/unit/support.o
TSAN_HARNESS := $(BUILD)/tsan/tests/integration/harness.o
# Each kill -9 restart of test_crash_loop takes seconds under TSan; ten still
# cover every thread (appenders, group commit, cleaner, scheduler) many times.
TSAN_CRASH_ITERATIONS ?= 10

$(BUILD)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC tsan $<"
	@$(CC) $(BASE_CFLAGS) $(TSAN_CFLAGS) $(RUNTIME_CFLAGS) $(TEST_CFLAGS) -Itests/unit -Itests/integration -c $< -o $@

$(BUILD)/tsan/logstore: $(TSAN_OBJ) $(BUILD)/tsan/service/main.o
	@echo "  LD tsan $@"
	@$(CC) $(TSAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS)

$(BUILD)/tsan/tests/unit/%: $(BUILD)/tsan/tests/unit/%.o $(TSAN_SUPPORT) $(TSAN_OBJ)
	@echo "  LD tsan $@"
	@$(CC) $(TSAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

$(BUILD)/tsan/tests/integration/%: $(BUILD)/tsan/tests/integration/%.o $(TSAN_HARNESS) $(TSAN_SUPPORT) $(TSAN_OBJ)
	@echo "  LD tsan $@"
	@$(CC) $(TSAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

$(BUILD)/tsan/tests/crash/%: $(BUILD)/tsan/tests/crash/%.o $(TSAN_HARNESS) $(TSAN_SUPPORT) $(TSAN_OBJ)
	@echo "  LD tsan $@"
	@$(CC) $(TSAN_FLAGS) -pthread -o $@ $^ $(RUNTIME_LIBS) $(TEST_LIBS)

build-tsan: $(BUILD)/tsan/logstore $(TSAN_UNIT_BIN) $(TSAN_INTEG_BIN) $(TSAN_CRASH_BIN)

# The shell-script suites (tests/scripts) check the release and ASan binaries
# and the packaging, not threads: RUN_ALL_SCRIPTS=0 leaves them out.  The fuzz
# replays are single-threaded and are not built here.
tsan: deps
	@$(MAKE) --no-print-directory build-tsan
	@rm -rf $(BUILD)/tsan/tsan-reports && mkdir -p $(BUILD)/tsan/tsan-reports
	@export TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 \
	  log_path=$(CURDIR)/$(BUILD)/tsan/tsan-reports/report $(TSAN_OPTIONS)"; \
	  export CRASH_ITERATIONS=$${CRASH_ITERATIONS:-$(TSAN_CRASH_ITERATIONS)}; \
	  RUN_ALL_SCRIPTS=0 tests/run_all.sh $(BUILD)/tsan; rc=$$?; \
	  reports=$$(ls $(BUILD)/tsan/tsan-reports); \
	  if [ -n "$$reports" ]; then \
	    echo "ThreadSanitizer reports (in $(BUILD)/tsan/tsan-reports):"; \
	    grep -hE '^(WARNING|SUMMARY): ThreadSanitizer' $(BUILD)/tsan/tsan-reports/* | sort | uniq -c; \
	    exit 1; \
	  fi; \
	  exit $$rc

# ---- benchmarks ------------------------------------------------------------
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/rel/tests/bench/%)

$(BUILD)/rel/tests/bench/%: tests/bench/%.c tests/bench/bench_util.h $(REL_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(BASE_CFLAGS) $(REL_CFLAGS) $(RUNTIME_CFLAGS) $(BENCH_CFLAGS) -o $@ $< $(REL_OBJ) $(RUNTIME_LIBS) $(BENCH_LIBS)

# The long-poll latency client drives its pollers with libcurl's multi interface.
$(BUILD)/rel/tests/bench/bench_tail_latency: BENCH_CFLAGS = $(TEST_CFLAGS)
$(BUILD)/rel/tests/bench/bench_tail_latency: BENCH_LIBS = $(TEST_LIBS)

bench: deps
	@$(MAKE) --no-print-directory $(BUILD)/logstore $(BENCH_BIN)
	@tests/bench/run.sh

# ---- layering ------------------------------------------------------------
check-layers:
	@bad=$$(grep -lE '#include *[<"](microhttpd|jansson|curl/)|#include *"(api|svc)_' engine/*.c engine/*.h || true); \
	if [ -n "$$bad" ]; then echo "engine/ must not include HTTP, JSON or upper layers: $$bad"; exit 1; fi; \
	bad=$$(grep -lE '#include *"svc_' api/*.c api/*.h 2>/dev/null || true); \
	if [ -n "$$bad" ]; then echo "api/ must not include service/: $$bad"; exit 1; fi; \
	bad=$$(grep -lE '\b(open|pread|pwrite|fopen|unlink|rename|opendir|mmap)\(' api/*.c 2>/dev/null || true); \
	if [ -n "$$bad" ]; then echo "api/ must not do file I/O: $$bad"; exit 1; fi; \
	if ls $(BUILD)/san/engine/*.o >/dev/null 2>&1; then \
	  syms=$$(nm -u $(BUILD)/san/engine/*.o | grep -E ' (MHD_|json_|curl_|api_|svc_)' || true); \
	  if [ -n "$$syms" ]; then echo "engine objects reference upper layers:"; echo "$$syms"; exit 1; fi; \
	fi; \
	echo "layers ok"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
