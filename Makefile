# specwright build. Knobs are ?= so the environment or the command line wins.
# `make run` and `make test` each install what they need first (see README).

SHELL     := /bin/bash
CC        ?= cc
CLANG     ?= clang
OPT       ?= -O2
CFLAGS    ?= $(OPT) -g -march=native
WARN      ?= -Wall -Wextra -Werror -Wno-unused-parameter
BUILD     ?= build
BLAS_LIBS ?= -lopenblas
CUDA_HOME ?= /usr/local/cuda
MODEL_DIR ?= models/cache
MODEL     ?= $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT    ?= Write a short story about an old lighthouse keeper and the night the lamp went out.
RUN_ARGS  ?= -n 160
ENGINE_SPEC ?= models/specs/smollm2-ngram.json
ENGINE_DIR  ?= $(BUILD)/engines/$(basename $(notdir $(ENGINE_SPEC)))
BACKEND   ?= auto
HOST_RUN_ARGS ?= --draft ngram --gamma 6 -n 160
FUZZ_SECONDS ?= 60
TEST_FILTER  ?=

INCLUDES   = -I. -Iruntime
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(CFLAGS) $(WARN) $(INCLUDES)
LDLIBS     = $(BLAS_LIBS) -lm -lpthread -ldl
HTTP_LIBS  = -lmicrohttpd   # runtime/serve only: the deployable runtime does not link it

LIB_SRC  := $(sort $(wildcard runtime/*/*.c kernels/*.c kernels/ref/*.c gen/*.c gen/*/*.c))
LIB_SRC  := $(filter-out runtime/cli/main.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# The deployable runtime: an engine directory plus this archive runs, with
# no generator, model loaders, host decoder or NVRTC (tests/test_deploy.c
# links a program against it alone and checks its symbols).
RT_DIRS  := runtime/core runtime/formats runtime/device runtime/engine kernels kernels/ref
RT_SRC   := $(sort $(foreach d,$(RT_DIRS),$(wildcard $(d)/*.c)))
RT_OBJ   := $(RT_SRC:%.c=$(BUILD)/obj/%.o)
DEPLOY_BIN := $(BUILD)/deploy/sw_tiny_run
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_UTIL_SRC := $(wildcard tests/util/*.c)
TEST_UTIL_OBJ := $(TEST_UTIL_SRC:%.c=$(BUILD)/obj/%.o)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

.PHONY: all test test-build run run-host bench fuzz fuzz-build asan clean deps model check-reference serve serve-load drafters
all: $(BUILD)/specwright $(BUILD)/libspecwright_rt.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libspecwright.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libspecwright_rt.a: $(RT_OBJ)
	@rm -f $@
	ar rcs $@ $^

# linked against the runtime archive alone (plus system libraries)
$(DEPLOY_BIN): $(BUILD)/obj/tests/deploy/sw_tiny_run.o $(BUILD)/libspecwright_rt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/specwright: $(BUILD)/obj/runtime/cli/main.o $(BUILD)/libspecwright.a
	$(CC) $(CFLAGS) -o $@ $^ $(HTTP_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -Itests/util -o $@ $< $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a -lcmocka $(HTTP_LIBS) $(LDLIBS)

# the test helpers' objects are kept (make would delete them as intermediates)
.SECONDARY: $(TEST_UTIL_OBJ) $(BUILD)/obj/tests/deploy/sw_tiny_run.o

# test_deploy runs the tiny program
$(BUILD)/tests/test_deploy: $(DEPLOY_BIN)

test-build: $(BUILD)/specwright $(TEST_BIN) $(DEPLOY_BIN)

# The whole suite: installs dependencies and the model, builds, runs every
# tests/test_* binary (each a CMocka runner), then prints one summary line.
test: deps model
	$(MAKE) test-build
	@if [ "$(FUZZ_SMOKE_SECONDS)" != 0 ]; then $(MAKE) --no-print-directory fuzz-build; fi
	@SW_MODEL=$(MODEL) BUILD=$(BUILD) TEST_FILTER="$(TEST_FILTER)" FUZZ_SMOKE_SECONDS=$(FUZZ_SMOKE_SECONDS) \
	  tests/run_all.sh $(TEST_BIN) $(if $(filter-out 0,$(FUZZ_SMOKE_SECONDS)),$(FUZZ_BIN))

deps:
	@tests/deps.sh

model:
	@models/fetch.sh $(MODEL_DIR)

# The main job: build the engine (plan, kernels, NVRTC; cached) and run it
# on the best backend present: cuda with a driver and GPU, else host.
run: deps model $(BUILD)/specwright
	$(BUILD)/specwright build $(ENGINE_SPEC) -o $(ENGINE_DIR)
	$(BUILD)/specwright run $(ENGINE_DIR) --backend $(BACKEND) $(RUN_ARGS) -p '$(PROMPT)'

# The host reference decoder (no engine): any drafter, tree or option.
run-host: deps model $(BUILD)/specwright
	$(BUILD)/specwright run $(MODEL) $(HOST_RUN_ARGS) -p '$(PROMPT)'

BENCH_ARGS ?= -n 64
bench: deps model $(BUILD)/specwright
	@echo "bench: host reference decoders, then the engine $(ENGINE_SPEC) on backend $(BACKEND)"
	@mkdir -p $(BUILD)
	@bible gen1:1-rev22:21 > $(BUILD)/bench_corpus.txt
	$(BUILD)/specwright bench $(MODEL) --corpus $(BUILD)/bench_corpus.txt $(BENCH_ARGS)
	$(BUILD)/specwright build $(ENGINE_SPEC) -o $(ENGINE_DIR)
	$(BUILD)/specwright bench $(ENGINE_DIR) --backend $(BACKEND) --corpus $(BUILD)/bench_corpus.txt $(BENCH_ARGS)

# The OpenAI-compatible server over the main job's engine (Ctrl-C stops it).
SERVE_ARGS ?= --port 8080
serve: deps model $(BUILD)/specwright
	$(BUILD)/specwright build $(ENGINE_SPEC) -o $(ENGINE_DIR)
	$(BUILD)/specwright serve $(ENGINE_DIR) $(SERVE_ARGS)

# The serving load test at full size (the suite runs 24 requests): the openai
# client, curl, then LOAD_REQUESTS requests from 4 clients through nginx to two
# servers, one killed mid-load; prints TTFT p50/p99 and tokens/s.
LOAD_REQUESTS ?= 200
serve-load: deps model $(BUILD)/specwright
	$(BUILD)/specwright build $(ENGINE_SPEC) -o $(ENGINE_DIR)
	$(BUILD)/venv/bin/python tests/serve/clients.py --specwright $(BUILD)/specwright --engine $(ENGINE_DIR) \
	  --model $(MODEL) --requests $(LOAD_REQUESTS) --clients 4 --servers 2

# Trains the block drafters in models/drafters/ from the target (PyTorch on the
# CPU, about an hour; installs python3-torch when missing). CI never runs it.
drafters: deps model
	models/drafters/train/make_drafters.sh

# Independent check of the forward pass against llama.cpp (built from the
# llama-cpp-python sdist); slow, so outside the suite.
check-reference: deps model $(BUILD)/specwright
	tests/reference/check.sh $(BUILD)/specwright $(MODEL)

# libFuzzer targets over the file readers, the tokenizer, the engine manifest
# and the server's request parser. The instrumented library is built once
# (clang, ASan + UBSan, no recovery: a UBSan finding fails the run) and every
# target links it. `make fuzz` runs each for FUZZ_SECONDS and grows the
# corpora in tests/fuzz/corpus/; `make test` runs each for FUZZ_SMOKE_SECONDS
# on those corpora and seeds (new inputs go to a scratch directory).
FUZZ_FLAGS  = -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all $(INCLUDES) -Itests/util
FUZZ_OBJ   := $(LIB_SRC:%.c=$(BUILD)/fuzz-obj/%.o)
FUZZ_SMOKE_SECONDS ?= 10
$(BUILD)/fuzz-obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(BUILD)/libspecwright_fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libspecwright_fuzz.a
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libspecwright_fuzz.a $(HTTP_LIBS) $(LDLIBS)
fuzz-build: deps
	@echo "fuzz: building the instrumented library once ($(words $(FUZZ_OBJ)) files, clang -O1 ASan+UBSan)"
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
fuzz: fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p tests/fuzz/corpus/$$n $(BUILD)/fuzz-artifacts; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -artifact_prefix=$(BUILD)/fuzz-artifacts/$$n- \
	    tests/fuzz/corpus/$$n tests/fuzz/seeds/$$n 2>&1 | tail -n 3; \
	  [ $${PIPESTATUS[0]} -eq 0 ] || exit 1; done

asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build-asan OPT=-O1 FUZZ_SMOKE_SECONDS=0 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

clean:
	rm -rf $(BUILD) build-asan

-include $(LIB_OBJ:.o=.d) $(TEST_UTIL_OBJ:.o=.d) $(BUILD)/obj/tests/deploy/sw_tiny_run.d $(FUZZ_OBJ:.o=.d)
