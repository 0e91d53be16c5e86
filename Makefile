# Makefile: builds the engine library, the tensord daemon, the client library and tensorctl,
# tests, examples and benchmarks.
# `make` builds everything, `make run` runs tensord in the foreground, `make test` runs the check suite, `make asan` runs it sanitized,
# `make tsan` runs the threads suite under ThreadSanitizer, `make fuzz` the loader fuzz targets
# for a bounded time, `make soak` the daemon soak (bench/soak.c), `make check-aarch64` the engine's
# suites cross-built for ARM64 under qemu-user, `make install PREFIX=...` installs
# the daemon, tensorctl and the client library (shared, with headers and a pkg-config file).

CC      ?= cc
BUILD   ?= build
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
OPT     ?= -O2 -g
CFLAGS  += $(CSTD) $(WARN) $(OPT) -MMD -MP
# The engine, backends and tests see the internals; examples and benches only the public API.
INC     := -Iinclude -Iengine -I.
CFLAGS  += $(shell pkg-config --cflags libcjson 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs libcjson 2>/dev/null || echo -lcjson) -lz -ldl -lpthread -lm
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm -lpthread)

ENGINE_SRC := $(shell find engine backends -name '*.c' | sort)
# The CUDA backend (backends/cuda/) is built against the toolkit's headers (cuda.h,
# cudaTypedefs.h, nvrtc.h; libcuda and NVRTC are opened with dlopen at run time, never linked).
# Without the toolkit it is left out, all but its dialect (plain data: kernels still render).
CUDA_HOME ?= /usr/local/cuda
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
CFLAGS  += -DTSD_HAVE_CUDA
$(BUILD)/backends/cuda/%.o: INC += -isystem $(CUDA_HOME)/include
else
$(info tensord: no CUDA toolkit at $(CUDA_HOME) (no include/cuda.h): the CUDA backend is left out)
ENGINE_SRC := $(filter-out $(filter-out backends/cuda/dialect.c,$(wildcard backends/cuda/*.c)),$(ENGINE_SRC))
endif
# The protocol library sees the public headers only (-Iinclude -Iprotocol), like the daemon.
PROTO_SRC  := $(shell find protocol -name '*.c' | sort)
TEST_SRC   := $(wildcard tests/*.c)
# The serving suites' files (the daemon, the client library, the protocol; suites.h's part S).
# TESTS=engine builds run_tests without them, linked with the engine library alone (nothing of
# nng, libuv or libsystemd): the ARM64 build of check-aarch64.
TEST_SERVING_SRC := $(addprefix tests/,daemon_harness.c test_client.c test_client_live.c test_config.c test_daemon.c \
	test_daemon_bad.c test_daemon_onnx.c test_graph_batch.c test_graph_builder.c test_graph_ops.c test_metrics.c test_protocol.c \
	test_hostile_files.c test_hostile_compile.c test_hostile_mem.c test_hostile_conn.c test_hostile_auth.c test_unix_transport.c test_sp_transport.c \
	test_client_unix.c test_shm.c test_sequence.c test_health.c test_failover.c)
TESTS      ?= all
ifeq ($(TESTS),engine)
TEST_SRC   := $(filter-out $(TEST_SERVING_SRC),$(TEST_SRC))
endif
EXAMPLES   := $(patsubst examples/%/main.c,%,$(wildcard examples/*/main.c))
BENCH_SRC  := $(wildcard bench/*.c)
# The daemon: its objects less main.o are linked into the tests too.
DAEMON_SRC := $(wildcard daemon/*.c)
# The client library (clients/, public headers and protocol/ only) and the tensorctl CLI.
CLIENT_SRC := $(filter-out clients/tensorctl%,$(wildcard clients/*.c))
CTL_SRC    := $(wildcard clients/tensorctl*.c)
NNG_LIBS   := $(shell pkg-config --libs nng 2>/dev/null || echo -lnng)
# tensorctl bench --protocol http: libcurl (--protocol grpc: gRPC's C core, GRPC_LIBS below)
CURL_LIBS  := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)
# The daemon's event loop and systemd notifications (sd_notify).
# The Open Inference Protocol's HTTP/REST frontend: h2o built on libuv (Debian's libh2o-dev), on the daemon's loop.
OIP_HTTP_LIBS := $(shell pkg-config --libs libh2o libuv 2>/dev/null || echo -lh2o -luv)
GRPC_LIBS := $(shell pkg-config --libs grpc 2>/dev/null || echo -lgrpc -lgpr)
DAEMON_LIBS := $(NNG_LIBS) $(shell pkg-config --libs libuv libsystemd 2>/dev/null || echo -luv -lsystemd) $(OIP_HTTP_LIBS)
# The Open Inference Protocol's gRPC frontend: gRPC's C core (Debian's libgrpc-dev), on a thread of its own.
DAEMON_LIBS += $(GRPC_LIBS)

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
# The ONNX importer (engine/onnx) parses with C that protoc-c generates at build time from the
# onnx.proto of Debian's libonnx-dev into $(BUILD)/gen (not committed), linked with libprotobuf-c.
ONNX_PROTO   ?= /usr/include/onnx/onnx.proto
ONNX_GEN_OBJ := $(BUILD)/engine/onnx/gen/onnx.pb-c.o
ENGINE_OBJ   += $(ONNX_GEN_OBJ)
LDLIBS       += $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
PROTO_OBJ  := $(PROTO_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ   := $(TEST_SRC:%.c=$(BUILD)/%.o)
# The Open Inference Protocol's gRPC messages: C that protoc-c generates at build time from the
# project's own protocol/grpc_service.proto into $(BUILD)/gen (not committed), a member of the
# protocol library (the layer below the daemon and the clients: the daemon's gRPC frontend and
# tensorctl bench's gRPC client both use it).
GRPC_PROTO   := protocol/grpc_service.proto
GRPC_GEN_OBJ := $(BUILD)/protocol/gen/grpc_service.pb-c.o
PROTO_OBJ  += $(GRPC_GEN_OBJ)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/daemon/main.o,$(DAEMON_OBJ))
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
CTL_OBJ    := $(CTL_SRC:%.c=$(BUILD)/%.o)
CLIENT_LIB := $(BUILD)/libtensord_client.a
CTL_BIN    := $(BUILD)/bin/tensorctl
DAEMON_BIN := $(BUILD)/bin/tensord
LIB        := $(BUILD)/libtensord.a
PROTO_LIB  := $(BUILD)/libtensord_proto.a
TEST_BIN   := $(BUILD)/tests/run_tests
EXAMPLE_BIN := $(EXAMPLES:%=$(BUILD)/bin/%)
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(BUILD)/bin/bench_%)
DAEMON_BENCHES := daemon_rtt daemon_throughput soak onnx_daemon shm_frame sequence_streams
DAEMON_BENCH_BIN := $(DAEMON_BENCHES:%=$(BUILD)/bin/bench_%)

$(BUILD)/examples/%.o $(BUILD)/bench/%.o: INC := -Iinclude
$(BUILD)/protocol/%.o $(BUILD)/clients/%.o $(BUILD)/daemon/%.o: INC := -Iinclude -Iprotocol

# The client library as a shared object, $(BUILD)/lib/libtensord.so (the Python client loads it
# with ctypes): the client and the protocol codec compiled position-independent plus the engine's
# dtype table (under the client's names, protocol/dtype.c), nothing else of the engine;
# clients/libtensord.map exports tsd_* only.
SO_NAME    := libtensord.so.0
SO_LIB     := $(BUILD)/lib/$(SO_NAME)
SO_LINK    := $(BUILD)/lib/libtensord.so
SO_SRC     := $(CLIENT_SRC) protocol/decode.c protocol/encode.c protocol/json_write.c protocol/status.c protocol/dtype.c protocol/token.c engine/core/dtype.c engine/core/f16.c
SO_OBJ     := $(SO_SRC:%.c=$(BUILD)/pic/%.o)
$(BUILD)/pic/protocol/%.o $(BUILD)/pic/clients/%.o: INC := -Iinclude -Iprotocol

# keep example and bench objects (make would delete them as intermediates)
.SECONDARY:

.PHONY: all test test-nng asan tsan check oip-check oip-san docs-check clean examples bench demo deps train-check conformance layers fuzz live-fuzz run soak install install-check tensorctl-check failover-check deploy-check
all: $(LIB) $(PROTO_LIB) $(CLIENT_LIB) $(SO_LINK) $(DAEMON_BIN) $(CTL_BIN) $(TEST_BIN) $(EXAMPLE_BIN) $(BENCH_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -c $< -o $@

$(BUILD)/gen/onnx%pb-c.c $(BUILD)/gen/onnx%pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(ONNX_GEN_OBJ): $(BUILD)/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/gen/grpc_service%pb-c.c $(BUILD)/gen/grpc_service%pb-c.h: $(GRPC_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen --proto_path=$(dir $(GRPC_PROTO)) $(GRPC_PROTO)

$(GRPC_GEN_OBJ): $(BUILD)/gen/grpc_service.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@
# A build tree from before the messages moved from the daemon into the protocol library: the old
# object (make layers would count it as the daemon's) goes, and so does the archive, which lacks
# them (with .SECONDARY make would not remake a missing member whose source is older than it).
ifneq ($(wildcard $(BUILD)/daemon/gen/grpc_service.pb-c.o),)
$(shell rm -f $(BUILD)/daemon/gen/grpc_service.pb-c.[od] $(PROTO_LIB))
endif

# the objects that include the generated messages' header
GRPC_MSG_OBJ := $(addprefix $(BUILD)/daemon/,oip_grpc.o oip_grpc_req.o oip_grpc_resp.o) $(BUILD)/clients/tensorctl_oip_grpc.o
$(GRPC_MSG_OBJ): INC += -I$(BUILD)/gen
$(GRPC_MSG_OBJ): | $(BUILD)/gen/grpc_service.pb-c.h

ONNX_TEST_OBJ := $(addprefix $(BUILD)/tests/,test_onnx.o test_onnx_ops.o onnx_mb.o test_daemon_onnx.o)
$(BUILD)/engine/onnx/%.o $(ONNX_TEST_OBJ): INC += -I$(BUILD)/gen
$(ONNX_TEST_OBJ): | $(BUILD)/gen/onnx.pb-c.h
$(filter-out $(ONNX_GEN_OBJ),$(filter $(BUILD)/engine/onnx/%,$(ENGINE_OBJ))): | $(BUILD)/gen/onnx.pb-c.h

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC $(INC) -c $< -o $@

$(SO_LIB): $(SO_OBJ) clients/libtensord.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -fPIC -Wl,-soname,$(SO_NAME) -Wl,--version-script=clients/libtensord.map \
		-Wl,--no-undefined -o $@ $(SO_OBJ) $(NNG_LIBS) $(shell pkg-config --libs libcjson 2>/dev/null || echo -lcjson) -lpthread -lm

$(SO_LINK): $(SO_LIB)
	ln -sf $(SO_NAME) $@

$(LIB): $(ENGINE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(PROTO_LIB): $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(CLIENT_LIB): $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The suites' objects differ between TESTS=all and TESTS=engine: $(BUILD)/tests/mode holds the
# mode they were built in, rewritten (so newer than them) only when it changes, so a switch of
# mode in one build directory rebuilds them.
TESTS_MODE := $(BUILD)/tests/mode
$(shell mkdir -p $(BUILD)/tests && { [ "$$(cat $(TESTS_MODE) 2>/dev/null)" = "$(TESTS)" ] || echo "$(TESTS)" > $(TESTS_MODE); })
$(TEST_OBJ): $(TESTS_MODE)

ifeq ($(TESTS),engine)
$(TEST_OBJ): CFLAGS += -DTSD_TESTS_ENGINE_ONLY
$(TEST_BIN): $(TEST_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(CHECK_LIBS) $(LDLIBS)
else
$(TEST_BIN): $(TEST_OBJ) $(DAEMON_LIB_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJ) $(DAEMON_LIB_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(CHECK_LIBS) $(DAEMON_LIBS) $(LDLIBS)
endif

$(CTL_BIN): $(CTL_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CTL_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(NNG_LIBS) $(CURL_LIBS) $(GRPC_LIBS) $(LDLIBS)

$(DAEMON_BIN): $(DAEMON_OBJ) $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(DAEMON_OBJ) $(PROTO_LIB) $(LIB) $(DAEMON_LIBS) $(LDLIBS)

# tensord in the foreground with the shipped config and the example model (examples/models/)
# preloaded: its spec and freshly written weights go to $(BUILD)/run/models. Ctrl-C drains and stops.
RUN_MODELS := $(abspath $(BUILD))/run/models
run: deps
	$(MAKE) all
	@mkdir -p $(RUN_MODELS)
	cp examples/models/mlp.json $(RUN_MODELS)/mlp.json
	$(BUILD)/bin/make_weights $(RUN_MODELS)/mlp.safetensors
	@echo "tensord: starting with the example model 'mlp'; in another shell:"
	@echo "  $(BUILD)/bin/tensorctl status"
	@echo "  $(BUILD)/bin/tensorctl models"
	@echo "  $(BUILD)/bin/tensorctl infer mlp examples/models/mlp_input.json"
	@echo "  $(BUILD)/bin/tensorctl stats"
	$(DAEMON_BIN) --config config/tensord.json --models_dir $(RUN_MODELS) --preload mlp.json

$(BUILD)/bin/%: $(BUILD)/examples/%/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bin/bench_%: $(BUILD)/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The daemon benches talk to tensord through the client library (public headers only); they
# start the tensord of the same build directory, so it is built too.
$(DAEMON_BENCH_BIN): $(BUILD)/bin/bench_%: $(BUILD)/bench/%.o $(CLIENT_LIB) $(PROTO_LIB) $(LIB) | $(DAEMON_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(NNG_LIBS) $(LDLIBS)

# The floor of the Open Inference Protocol's HTTP frontend (bench/compare_oip.sh): h2o on libuv
# answering a fixed body, nothing of tensord linked.
$(BUILD)/bin/bench_oip_floor: $(BUILD)/bench/oip_floor.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(OIP_HTTP_LIBS)

# Issue 27's benchmark (bench/compare_oip.sh, docs/BENCHMARKS.md "Open Inference Protocol"): the
# tiny model against the h2o floor, ppocr-cls and silero-vad over HTTP, gRPC and TSD1 against
# KServe's ModelServer, with one client and load. Needs bench/setup-onnx-peer.sh and
# bench/setup-kserve-peer.sh (PyPI, once); OIP_BENCH=quick for a ~1 minute run.
OIP_BENCH ?= full
.PHONY: oip-bench
oip-bench: $(DAEMON_BIN) $(CTL_BIN) $(SO_LINK) $(BUILD)/bin/make_weights $(BUILD)/bin/bench_oip_floor \
	$(BUILD)/bin/bench_oip_grpc_floor $(BUILD)/bin/bench_onnx_models
	BUILD=$(BUILD) bench/compare_oip.sh $(OIP_BENCH)

# ... and of its gRPC frontend: gRPC's C core answering a fixed message.
$(BUILD)/bin/bench_oip_grpc_floor: $(BUILD)/bench/oip_grpc_floor.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(GRPC_LIBS)

# ONNX's backend node tests (Debian's libonnx-testdata) through the importer, each case in its own
# process (tests/onnx/runner.c): per case PASS / FAIL / UNSUPPORTED, a summary line per suite; a
# case of tests/onnx/passing.txt that no longer passes fails the run (ONNX_DEV=CL runs it on
# OpenCL). `make onnx-baseline` rewrites passing.txt and unsupported.txt (the other cases with
# their reasons) from a full run on the CPU.
ONNX_DATA   ?= /usr/share/libonnx-testdata/data
ONNX_SUITES := $(wildcard $(ONNX_DATA)/node $(ONNX_DATA)/pytorch-converted $(ONNX_DATA)/pytorch-operator $(ONNX_DATA)/simple)
ONNX_RUNNER := $(BUILD)/bin/onnx_node_runner
ONNX_JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
$(ONNX_RUNNER): $(BUILD)/tests/onnx/runner.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)
$(BUILD)/tests/onnx/runner.o: INC := -Iinclude
.PHONY: onnx-check onnx-baseline onnx-light
ONNX_DEV    ?= CPU
onnx-check: $(ONNX_RUNNER)
	$(ONNX_RUNNER) -j $(ONNX_JOBS) -d $(ONNX_DEV) --baseline tests/onnx/passing.txt $(ONNX_SUITES)
# ONNX's light models (the real/ models' graphs with constant weights and stored outputs) come
# only with the onnx wheel from PyPI (bench/setup-onnx-peer.sh puts it in bench/.venv-onnx):
# not part of check, which has no network.
ONNX_LIGHT ?= $(firstword $(wildcard bench/.venv-onnx/lib/python3*/site-packages/onnx/backend/test/data/light))
onnx-light: $(ONNX_RUNNER)
	@[ -n "$(ONNX_LIGHT)" ] || { echo "onnx-light: no light models (run bench/setup-onnx-peer.sh)"; exit 1; }
	$(ONNX_RUNNER) -j $(ONNX_JOBS) -d $(ONNX_DEV) $(ONNX_LIGHT)
onnx-baseline: $(ONNX_RUNNER)
	$(ONNX_RUNNER) -j $(ONNX_JOBS) --write tests/onnx/passing.txt --unsupported tests/onnx/unsupported.txt $(ONNX_SUITES)
# The node suite of today's onnx (1.23.2, pinned in tests/onnx/setup-venv.sh: a git-ignored venv
# from PyPI): its wheel carries the cases' definitions, scripts/onnx-node-data.py writes their
# data into $(BUILD)/onnx-1.23/node (never committed), the runner runs them against
# tests/onnx/passing-1.23.txt as 1.12's; `make onnx-baseline-1.23` rewrites that and
# unsupported-1.23.txt.
ONNX_123 := $(BUILD)/onnx-1.23/node
.PHONY: onnx-check-1.23 onnx-baseline-1.23 onnx-data-1.23 onnx-optable-check
onnx-data-1.23:
	tests/onnx/setup-venv.sh
	[ -f $(ONNX_123)/.done ] || { tests/onnx/.venv/bin/python -W ignore scripts/onnx-node-data.py $(BUILD)/onnx-1.23 && touch $(ONNX_123)/.done; }
onnx-check-1.23: $(ONNX_RUNNER) onnx-data-1.23
	$(ONNX_RUNNER) -j $(ONNX_JOBS) -d $(ONNX_DEV) --baseline tests/onnx/passing-1.23.txt $(ONNX_123)
	tests/onnx/.venv/bin/python scripts/onnx-optable-check.py engine/onnx/optable.c tests/onnx/optable-lenient.txt
# The op table against the schemas of the same onnx (scripts/onnx-optable-check.py: a row taking an
# attribute its opsets do not define, beyond tests/onnx/optable-lenient.txt, fails); part of
# onnx-check-1.23.
onnx-optable-check: onnx-data-1.23
	tests/onnx/.venv/bin/python scripts/onnx-optable-check.py engine/onnx/optable.c tests/onnx/optable-lenient.txt
onnx-baseline-1.23: $(ONNX_RUNNER) onnx-data-1.23
	$(ONNX_RUNNER) -j $(ONNX_JOBS) --write tests/onnx/passing-1.23.txt --unsupported tests/onnx/unsupported-1.23.txt $(ONNX_123)

examples: $(EXAMPLE_BIN)
bench: $(BENCH_BIN)

# CK_FORK=yes: each test in its own process, so one crash cannot hide the others.
test: $(TEST_BIN) $(DAEMON_BIN)
	CK_FORK=yes $(TEST_BIN)

# The daemon and client suites again with their clients on nng's ipc:// (make test runs them on
# unix://; the daemon listens on both either way, tests/daemon_harness.h). hostileconn tests
# nng clients (always on ipc:), unixtransport and clientunix the unix transport's, sptransport the SP framing.
NNG_SUITES := daemon daemononnx clientlive
test-nng: $(TEST_BIN) $(DAEMON_BIN)
	for s in $(NNG_SUITES); do TSD_TEST_TRANSPORT=nng CK_FORK=yes CK_RUN_SUITE=$$s $(TEST_BIN) || exit 1; done

# The same suite under AddressSanitizer, LeakSanitizer and UBSan, in one process (leaks are
# checked at its exit), bounded to 40 minutes so that a hang fails the run instead of holding CI.
asan:
	$(MAKE) -j2 BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDFLAGS="-fsanitize=address,undefined" build-asan/tests/run_tests build-asan/bin/tensord
	CK_FORK=no ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
		UBSAN_OPTIONS=print_stacktrace=1 timeout -k 30 2400 build-asan/tests/run_tests

# The threads suite (contexts on several threads, the shared worker pool), the daemon's
# integration suites (a TSan-built tensord: loop, executor and nng threads) and the client
# library's live suite (threads sharing a client, asynchronous callbacks) and its unix:// suite
# (the reader role handed between threads, the background reader) under ThreadSanitizer.
# No suppressions: a report is a bug (the daemon harness fails a test whose daemon printed one).
# halt_on_error makes the first report fail its test. CK_FORK=yes: each test in a process of its
# own with its timeout (3x under TSan), so a test stuck in nng 1.5's close (see dh_raw_close in
# tests/daemon_harness.h) fails alone instead of holding the run.
TSAN_RUN = CK_FORK=yes CK_TIMEOUT_MULTIPLIER=3 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/run_tests
tsan:
	$(MAKE) -j2 BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" build-tsan/tests/run_tests build-tsan/bin/tensord
	CK_RUN_SUITE=threads $(TSAN_RUN)
	CK_RUN_SUITE=daemon $(TSAN_RUN)
	CK_RUN_SUITE=daemononnx $(TSAN_RUN)
	CK_RUN_SUITE=clientlive $(TSAN_RUN)
	CK_RUN_SUITE=clientunix $(TSAN_RUN)
	CK_RUN_SUITE=hostilecompile $(TSAN_RUN)
	CK_RUN_SUITE=unixtransport $(TSAN_RUN)
	CK_RUN_SUITE=sptransport $(TSAN_RUN)
	CK_RUN_SUITE=shm $(TSAN_RUN)
	CK_RUN_SUITE=sequence $(TSAN_RUN)
	CK_RUN_SUITE=failover $(TSAN_RUN)
	CK_RUN_SUITE=health $(TSAN_RUN)

# libFuzzer targets for the file loaders and the protocol (tests/fuzz/), which take untrusted input: the engine
# built with clang under ASan and UBSan into build-fuzz, each target run FUZZ_SECONDS from the
# committed seed corpus (new inputs go to build-fuzz/corpus/). Any crash, leak, sanitizer report
# or failed check in a target fails the run; the input is kept as build-fuzz/crash-<target>-*.
FUZZ_SECONDS ?= 30
FUZZ_TARGETS := safetensors idx request graph onnx
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(PROTO_LIB) $(LIB) $(LDLIBS)

fuzz:
	$(MAKE) -j2 BUILD=build-fuzz CC=clang OPT="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link" \
		LDFLAGS="$(FUZZ_SAN)" $(FUZZ_TARGETS:%=build-fuzz/fuzz/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p build-fuzz/corpus/$$t || exit 1; \
		dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
		extra=; [ $$t = onnx ] && [ -d $(ONNX_DATA)/simple ] && extra=$(ONNX_DATA)/simple; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		UBSAN_OPTIONS=print_stacktrace=1 build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 $$dict \
			-artifact_prefix=build-fuzz/crash-$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t $$extra \
			2>build-fuzz/fuzz-$$t.log || { tail -60 build-fuzz/fuzz-$$t.log; \
			echo "fuzz: $$t FAILED (log: build-fuzz/fuzz-$$t.log)"; exit 1; }; \
		grep -E '^stat::number_of_executed_units|^Done' build-fuzz/fuzz-$$t.log; \
	done

# Every test: the layering check, the plain suite (with cudacompile: NVRTC compiles every kernel
# the conformance suites make for CUDA; SKIPPED without NVRTC), the sanitized ones, the loader fuzzers, short
# training runs, then the backend conformance run (CPU, OpenCL and CUDA; an absent backend is reported
# SKIPPED), ..., ONNX's backend node tests against tests/onnx/passing.txt, and the engine's suites
# cross-built for ARM64 under qemu (check-aarch64). The README's test command.
# Each step in order, timed: its seconds are printed and kept in $(BUILD)/check-times.txt.
CHECK_STEPS := layers docs-check test test-nng asan live-fuzz tsan fuzz train-check conformance soak install-check python-test \
	tensorctl-check onnx-check onnx-check-1.23 oip-check oip-san failover-check deploy-check check-aarch64
check:
	@mkdir -p $(BUILD); : >$(BUILD)/check-times.txt; t0=$$(date +%s); \
	for t in $(CHECK_STEPS); do s=$$(date +%s); $(MAKE) --no-print-directory $$t || exit 1; \
		echo "check: $$t took $$(( $$(date +%s) - s )) s" | tee -a $(BUILD)/check-times.txt; done; \
	echo "check: all $(words $(CHECK_STEPS)) steps took $$(( $$(date +%s) - t0 )) s" | tee -a $(BUILD)/check-times.txt

# docs/USAGE.md's configuration table is tensord --help's (scripts/config-table.py --write regenerates it).
docs-check: $(DAEMON_BIN)
	python3 scripts/config-table.py $(DAEMON_BIN) --check docs/USAGE.md

# The Open Inference Protocol with clients nobody here wrote: Triton's tritonclient (pinned, from
# PyPI into the git-ignored tests/oip/.venv) over HTTP and gRPC against a live tensord, every
# output equal to TSD1's, bad requests answered with their status; then wrk's HTTP/1.1 load.
oip-check: $(DAEMON_BIN) $(SO_LINK) $(BUILD)/bin/make_weights
	tests/oip/setup-venv.sh
	$(PY_TEST_ENV) tests/oip/.venv/bin/python -m unittest discover -s tests/oip -p 'test_*.py' -v
	tests/oip/wrk.sh $(BUILD)
# The same suites against the ASan and the TSan daemon (make check built both already): the HTTP
# frontend's hand-over of answers from the executor to the loop, h2o's memory, the SIGBUS guard,
# the gRPC frontend's completion-queue thread (tests/tsan.supp: what TSan cannot see inside gRPC).
oip-san: $(SO_LINK)
	$(MAKE) -j2 BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDFLAGS="-fsanitize=address,undefined" build-asan/bin/tensord build-asan/bin/make_weights
	$(MAKE) -j2 BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" build-tsan/bin/tensord build-tsan/bin/make_weights
	tests/oip/setup-venv.sh
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
		UBSAN_OPTIONS=print_stacktrace=1 TENSORD_BIN=$(abspath build-asan/bin/tensord) TENSORD_LIB=$(abspath $(BUILD)/lib/libtensord.so) \
		tests/oip/.venv/bin/python -m unittest discover -s tests/oip -p 'test_*.py'
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$(CURDIR)/tests/tsan.supp" TENSORD_BIN=$(abspath build-tsan/bin/tensord) TENSORD_LIB=$(abspath $(BUILD)/lib/libtensord.so) \
		tests/oip/.venv/bin/python -m unittest discover -s tests/oip -p 'test_*.py'

# The daemon soak (bench/soak.c): SOAK_REQUESTS (default 1,000,000) mixed requests from several
# clients against one tensord; fails on any unexpected reply status or on daemon RSS growth
# between the first 100,000 requests and the end beyond 2% (~130 KiB of ~6.5 MB: a leak of one
# byte per request would add ~900 KiB).
soak: $(BUILD)/bin/bench_soak $(DAEMON_BIN)
	$(BUILD)/bin/bench_soak

# The live protocol fuzzer (tests/fuzz/live_fuzz.c): mutations of valid requests of every verb
# from several connections against a running tensord of the same build, health checked every
# second, RSS sampled, SIGTERM at the end; any lost, undecodable or "internal" reply, a hang, a
# crash or a sanitizer report fails it. make check runs it for LIVE_FUZZ_SECONDS on the ASan
# build (after make asan built it); by hand: make live-fuzz LIVE_FUZZ_SECONDS=1800
# LIVE_FUZZ_PLATEAU_PCT=2. allocator_may_return_null: a malloc too large for the machine returns
# NULL as glibc's does (the daemon must answer out_of_memory), instead of ASan aborting.
LIVE_FUZZ_SECONDS ?= 60
$(BUILD)/bin/live_fuzz: $(BUILD)/tests/fuzz/live_fuzz.o $(CLIENT_LIB) $(PROTO_LIB) $(LIB) | $(DAEMON_BIN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(NNG_LIBS) $(LDLIBS)
# The failure test (tests/failover.sh): three replicas as an endpoint list and behind HAProxy,
# 20 clients, one replica killed, one sent SIGTERM, one restarted; a drain behind HAProxy; REST
# through it. ~1 min.
$(BUILD)/bin/failover_load: $(BUILD)/tests/failover/failover_load.o $(CLIENT_LIB) $(PROTO_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(CLIENT_LIB) $(PROTO_LIB) $(LIB) $(NNG_LIBS) $(LDLIBS)
failover-check: $(BUILD)/bin/failover_load $(DAEMON_BIN) $(BUILD)/bin/make_weights
	BUILD=$(BUILD) tests/failover.sh
# The deployment files (deploy/check.sh): Kubernetes manifests against 1.29's schemas (PyPI's
# kubernetes-validate in the git-ignored deploy/.venv), the ConfigMap's config, HAProxy's config,
# the systemd template.
deploy-check: $(DAEMON_BIN)
	BUILD=$(BUILD) deploy/check.sh

live-fuzz:
	$(MAKE) -j2 BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDFLAGS="-fsanitize=address,undefined" build-asan/bin/live_fuzz build-asan/bin/tensord
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
		UBSAN_OPTIONS=print_stacktrace=1 LIVE_FUZZ_SECONDS=$(LIVE_FUZZ_SECONDS) timeout -k 30 $$(( $(LIVE_FUZZ_SECONDS) + 300 )) build-asan/bin/live_fuzz

# tensorctl against a live tensord: every subcommand, replay's order and resumption, .npy round
# trips, bench's CSV and SVG, exit codes (tests/tensorctl.sh; ~20 s).
tensorctl-check: $(CTL_BIN) $(DAEMON_BIN)
	tests/tensorctl.sh $(BUILD)
	TSD_TEST_TRANSPORT=nng tests/tensorctl.sh $(BUILD)

# Dependencies point one way (docs/ARCHITECTURE.md, "Layers"): the objects' symbols, every file's
# include lines (headers too) and the types they name, and no circle between daemon/ files; the
# self-test first plants one of each and must see it caught.
layers: all
	python3 tests/layers.py $(BUILD) --self-test

# The op-level suites and the examples on every backend this machine has (tests/conformance.sh).
conformance: all
	BUILD=$(BUILD) tests/conformance.sh

# The ARM64 check: the engine (less CUDA: CUDA_HOME=none), run_tests with the engine's suites
# (TESTS=engine) and the examples tests/aarch64.sh runs, cross-built into build-aarch64 by Debian's
# aarch64-linux-gnu-gcc against dpkg multiarch's arm64 libraries (pkg-config reads their .pc
# files; scripts/install-deps.sh installs them), then run under qemu-aarch64 with kernels built
# by the same cross compiler: the conformance suites, f16 and the examples (tests/aarch64.sh).
AARCH64_CC    ?= aarch64-linux-gnu-gcc
AARCH64_BUILD ?= build-aarch64
AARCH64_BINS  := devices fusion xor matmul_demo
.PHONY: aarch64 check-aarch64
aarch64:
	PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig PKG_CONFIG_PATH= \
		$(MAKE) -j2 BUILD=$(AARCH64_BUILD) CC=$(AARCH64_CC) CUDA_HOME=none TESTS=engine \
		$(AARCH64_BUILD)/tests/run_tests $(AARCH64_BINS:%=$(AARCH64_BUILD)/bin/%)
check-aarch64: aarch64
	BUILD=$(AARCH64_BUILD) CC=$(AARCH64_CC) tests/aarch64.sh

# Training regressions: XOR must learn, a short Fashion-MNIST run must beat 70% test accuracy.
train-check: $(BUILD)/bin/xor $(BUILD)/bin/fashion_mnist $(BUILD)/bin/quick
	$(BUILD)/bin/quick
	$(BUILD)/bin/xor
	$(BUILD)/bin/fashion_mnist --steps 40 --batch 128 --min-accuracy 0.70

# ---- Python client (clients/python/) ----

# The Python client's tests (clients/python/tests, unittest) against this build's tensord and
# libtensord.so: once as they come (the numpy tests run when $(PYTHON) has numpy), once with numpy
# hidden (TENSORD_NO_NUMPY=1). Debian's python3 by default: python3-numpy is one of its packages.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
PY_TEST_ENV = TENSORD_BIN=$(abspath $(DAEMON_BIN)) TENSORD_LIB=$(abspath $(BUILD)/lib/libtensord.so)
.PHONY: python-test
python-test: $(DAEMON_BIN) $(SO_LINK)
	$(PY_TEST_ENV) $(PYTHON) -m unittest discover -s clients/python/tests -v
	$(PY_TEST_ENV) TENSORD_NO_NUMPY=1 $(PYTHON) -m unittest discover -s clients/python/tests
	$(PY_TEST_ENV) TSD_TEST_TRANSPORT=nng $(PYTHON) -m unittest discover -s clients/python/tests

# Install what is missing (apt); demo also builds everything and runs the fusion example (the
# README's first command is `make run`, which starts the daemon).
deps:
	bash scripts/install-deps.sh

demo: deps
	$(MAKE) all
	$(BUILD)/bin/fusion 256

# Installs the daemon, tensorctl, the shared client library, its headers and tensord.pc under
# $(DESTDIR)$(PREFIX).
PREFIX  ?= /usr/local
LIBDIR  := $(PREFIX)/lib
INCDIR  := $(PREFIX)/include
# The client's headers and what they include, nothing of the engine.
INSTALL_HEADERS := client.h graph.h verbs.h protocol.h dtype.h tsd_errors.def
install: $(SO_LINK) $(DAEMON_BIN) $(CTL_BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/tensord
	install -m 755 $(DAEMON_BIN) $(CTL_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(SO_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libtensord.so
	install -m 644 $(INSTALL_HEADERS:%=include/tensord/%) $(DESTDIR)$(INCDIR)/tensord/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
		clients/tensord.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tensord.pc

# Installs into a temporary prefix, builds tests/install/check.c against it with nothing but
# `pkg-config --cflags --libs tensord`, and runs it against the installed tensord.
INSTALL_CHECK := $(abspath $(BUILD))/install-check
install-check:
	rm -rf $(INSTALL_CHECK)
	$(MAKE) install PREFIX=$(INSTALL_CHECK)/usr
	PKG_CONFIG_PATH=$(INSTALL_CHECK)/usr/lib/pkgconfig INSTALL_CHECK=$(INSTALL_CHECK) CC="$(CC)" \
		sh tests/install/check.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz build-aarch64

# the robot-brain example: its programs and robot-demo, robot-check, robot-replay
include examples/robot/robot.mk

-include $(ENGINE_OBJ:.o=.d) $(PROTO_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(CLIENT_OBJ:.o=.d) $(CTL_OBJ:.o=.d) $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%.d) $(SO_OBJ:.o=.d)
