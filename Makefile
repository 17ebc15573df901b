# specwright build. Knobs are ?= so the environment or the command line wins.
# `make run` and `make test` each install what they need first (see README).

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
PROMPT    ?= Here is a sentence: "The old lighthouse keeper climbed the stairs every night to light the lamp." Repeat it, then explain why a lighthouse needs a keeper.
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

LIB_SRC  := $(sort $(wildcard runtime/*/*.c kernels/*.c kernels/ref/*.c gen/*.c gen/*/*.c))
LIB_SRC  := $(filter-out runtime/cli/main.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_UTIL_SRC := $(wildcard tests/util/*.c)
TEST_UTIL_OBJ := $(TEST_UTIL_SRC:%.c=$(BUILD)/obj/%.o)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

.PHONY: all test test-build run run-host bench fuzz asan clean deps model check-reference drafters
all: $(BUILD)/specwright

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libspecwright.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/specwright: $(BUILD)/obj/runtime/cli/main.o $(BUILD)/libspecwright.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -Itests/util -o $@ $< $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a -lcmocka $(LDLIBS)

# the test helpers' objects are kept (make would delete them as intermediates)
.SECONDARY: $(TEST_UTIL_OBJ)

test-build: $(BUILD)/specwright $(TEST_BIN)

# The whole suite: installs dependencies and the model, builds, runs every
# tests/test_* binary (each a CMocka runner), then prints one summary line.
test: deps model
	$(MAKE) test-build
	@SW_MODEL=$(MODEL) BUILD=$(BUILD) TEST_FILTER="$(TEST_FILTER)" tests/run_all.sh $(TEST_BIN)

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

# Trains the block drafters in models/drafters/ from the target (PyTorch on the
# CPU, about an hour; installs python3-torch when missing). CI never runs it.
drafters: deps model
	models/drafters/train/make_drafters.sh

# Independent check of the forward pass against llama.cpp (built from the
# llama-cpp-python sdist); slow, so outside the suite.
check-reference: deps model $(BUILD)/specwright
	tests/reference/check.sh $(BUILD)/specwright $(MODEL)

# libFuzzer targets over the file readers and the tokenizer, FUZZ_SECONDS each.
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined $(INCLUDES) -Itests/util
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< $(LIB_SRC) $(LDLIBS)
fuzz: deps $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p tests/fuzz/corpus/$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 tests/fuzz/corpus/$$n tests/fuzz/seeds/$$n 2>&1 | tail -n 3 || exit 1; done

asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build-asan OPT=-O1 CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" test

clean:
	rm -rf $(BUILD) build-asan

-include $(LIB_OBJ:.o=.d)
