/* `specwright inspect`'s devices, launch counts and calibrated projection
 * (gen/gpu_model.h, gen/inspect.h), and its join with `profile`
 * (tests/gpu/check_util.py), against independent figures: the GPUs' data
 * sheets and the measured H200 copy rate, the launches the runtime
 * itself counts in a host profile, the GEMM cost's closed form from a
 * shape, and the calibration recomputed from the H100 run's log. Runs
 * build/specwright (BUILD overrides the directory) and python3. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gen/gpu_model.h"
#include "gen/inspect.h"
#include "shell_util.h"

static char g_out[1 << 18], g_build[512], g_dir[600];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)

static int setup(void **state)
{
	const char *b = getenv("BUILD");
	snprintf(g_build, sizeof(g_build), "%s", b && *b ? b : "build");
	snprintf(g_dir, sizeof(g_dir), "%s/test_inspect.%d", g_build, (int)getpid());
	return sh("mkdir -p %s", g_dir);
}

static int teardown(void **state)
{
	return sh("rm -rf %s", g_dir);
}

static void must(int rc, const char *what)
{
	if (rc)
		fail_msg("%s: exit %d:\n%s", what, rc, g_out);
}

/* A Llama-shaped n-gram chain:3 engine by shape, L layers, vocabulary V,
 * width D (4 heads of D/4, 2 KV heads, FFN 2D), into g_dir/NAME. */
static void build_ngram(const char *name, int L, int V, int D)
{
	must(sh("printf '%%s' '{\"name\": \"%s\", \"target\": {\"shape\": {\"n_layers\": %d, \"dim\": %d, "
	        "\"n_heads\": 4, \"n_kv_heads\": 2, \"ffn_dim\": %d, \"vocab\": %d}}, \"draft\": {\"method\": "
	        "\"ngram\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": \"greedy\", \"expand\": "
	        "\"topk\"}, \"max_context\": 256, \"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": "
	        "[\"sm_90\"]}' > %s/%s.json && %s/specwright build %s/%s.json -o %s/%s --no-compile 2>&1",
	        name, L, D, 2 * D, V, g_dir, name, g_build, g_dir, name, g_dir, name), "build");
}

/* --gpu: the two devices as their data sheets give them (the H100 SXM:
 * 3.35 TB/s, 989 TFLOP/s dense bf16, 67 fp32, 132 SMs; the H200: 4.3 TB/s
 * measured by a device-to-device copy, issue 37), a device by figures in
 * either unit, and every malformed value refused naming the option, the
 * field, what was expected and what was found. */
static void test_gpu_parse(void **state)
{
	gen_gpu g;
	sw_err err = {0};
	assert_int_equal(gen_gpu_parse("h100", &g, &err), 0);
	assert_string_equal(g.key, "h100");
	assert_true(g.bw == 3.35e12 && g.bf16_flops == 989e12 && g.fp32_flops == 67e12 && g.sms == 132);
	assert_int_equal(gen_gpu_parse("h200", &g, &err), 0);
	assert_string_equal(g.key, "h200");
	assert_true(g.bw == 4.3e12 && g.bf16_flops == 989e12 && g.sms == 132);
	static const char *const same[] = {"4300,989,132", "4300GB/s,989,132", "4.3TB/s,989,132",
	                                   "4.3tb/s,989,132"};
	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++) {
		if (gen_gpu_parse(same[i], &g, &err))
			fail_msg("%s: %s", same[i], err.msg);
		assert_string_equal(g.key, "custom");
		assert_true(fabs(g.bw - 4.3e12) < 1 && g.bf16_flops == 989e12 && g.sms == 132);
		assert_true(fabs(g.fp32_flops - 67e12) < 1e6); /* Hopper's ratio */
	}
	static const struct {
		const char *arg, *field, *found;
	} bad[] = {
		{"4.3,989,132", "BW: expected", "found '4.3'"},       /* 4.3 GB/s: the unit is never guessed */
		{"200000,989,132", "BW: expected", "found '200000'"},
		{"x,989,132", "BW: expected", "found 'x'"},
		{"4300GB,989,132", "BW's unit: expected", "found 'GB'"},
		{"4300,0,132", "TFLOPS: expected", "found '0'"},
		{"4300,989x,132", "TFLOPS: expected", "found '989x'"},
		{"4300,989,13.5", "SMS: expected", "found '13.5'"},
		{"4300,989,0", "SMS: expected", "found '0'"},
		{"4300,989", "the device: expected h100, h200 or BW,TFLOPS,SMS", "found '4300,989'"},
		{"4300,989,132,1", "the device: expected", "found '4300,989,132,1'"},
		{"h300", "the device: expected", "found 'h300'"},
		{"", "the device: expected", "found ''"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		memset(&err, 0, sizeof(err));
		int rc = gen_gpu_parse(bad[i].arg, &g, &err);
		if (rc != SW_EINVAL || !strstr(err.msg, "--gpu ") || !strstr(err.msg, bad[i].field) ||
		    !strstr(err.msg, bad[i].found))
			fail_msg("--gpu '%s': rc %d, '%s'; expected '%s' and '%s'", bad[i].arg, rc, err.msg,
			         bad[i].field, bad[i].found);
	}
}

/* The command: the default device said, every projected line naming its
 * device; a bad --gpu refused with exit 2 before any output. */
static void test_cli(void **state)
{
	build_ngram("cli", 2, 512, 64);
	must(sh("%s/specwright inspect %s/cli", g_build, g_dir), "inspect");
	assert_non_null(strstr(g_out, "projection on h200 (the default; --gpu h100|h200|BW,TFLOPS,SMS)"));
	must(sh("%s/specwright inspect %s/cli --gpu h100 --tau 2", g_build, g_dir), "inspect --gpu h100");
	assert_null(strstr(g_out, "the default"));
	int n = 0;
	for (char *l = g_out, *e; *l; l = e + 1) {
		e = strchr(l, '\n');
		if (!e)
			break;
		*e = 0;
		if (strstr(l, "projected")) {
			n++;
			if (!strstr(l, "h100"))
				fail_msg("a projected line without its device: '%s'", l);
		}
		*e = '\n';
	}
	assert_true(n >= 8); /* the device, 4 phases, launches, iteration, decode, prefill */
	/* stdout alone: nothing printed before the refusal */
	assert_int_equal(sh("%s/specwright inspect %s/cli --gpu 4.3,989,132 2>/dev/null", g_build, g_dir), 2);
	assert_string_equal(g_out, "");
	assert_int_equal(sh("%s/specwright inspect %s/cli --gpu 4.3,989,132 2>&1", g_build, g_dir), 2);
	assert_non_null(strstr(g_out, "--gpu 4.3,989,132: BW: expected"));
	assert_int_equal(sh("%s/specwright inspect %s/cli --gpu 2>&1", g_build, g_dir), 2);
	assert_non_null(strstr(g_out, "--gpu: expected a value"));
}

/* The t us column of an op row ("  NAME exec layers x ...") of a phase. */
static double row_t(const char *text, const char *phase, const char *op)
{
	char key[64];
	snprintf(key, sizeof(key), "\nphase %s (", phase);
	const char *p = strstr(text, key);
	assert_non_null(p);
	snprintf(key, sizeof(key), "\n  %s ", op);
	p = strstr(p, key);
	assert_non_null(p);
	double f[13];
	char s[3][32], u[2][8];
	if (sscanf(p + 1, "%31s %31s %31s %lf %lf %7s %lf %7s %lf %lf %lf %lf %lf", s[0], s[1], s[2],
	           &f[3], &f[4], u[0], &f[5], u[1], &f[7], &f[8], &f[9], &f[10], &f[11]) != 13)
		fail_msg("cannot read the row of %s/%s", phase, op);
	return f[10];
}

/* Launches against the runtime's own count (a host profile, one iteration:
 * launches per phase), per layer as the difference of two depths, the
 * launches' time as their count times the calibrated cost, and the LM
 * head's projection as its closed form on both devices. */
static void test_closed_form(void **state)
{
	const int V = 32768, D = 256, R = 4; /* verify rows: chain:3 and its root */
	build_ngram("l2", 2, V, D);
	build_ngram("l5", 5, V, D);
	gen_inspect_summary s2, s5;
	sw_err err = {0};
	const gen_inspect_opts h100 = {.gpu = &gen_gpu_h100}, h200 = {.gpu = &gen_gpu_h200};
	char d2[700], d5[700];
	snprintf(d2, sizeof(d2), "%s/l2", g_dir);
	snprintf(d5, sizeof(d5), "%s/l5", g_dir);
	if (gen_inspect_on(d2, &h100, NULL, &s2, &err) || gen_inspect_on(d5, &h100, NULL, &s5, &err))
		fail_msg("%s", err.msg);

	/* the runtime's launches: profile's table, phase by phase */
	must(sh("%s/specwright profile %s -n 1 --backend host --random-weights 1 2>&1 >/dev/null", g_build,
	        d5), "profile");
	int total = 0;
	for (int i = 0; i < s5.n_phases; i++) {
		if (!strcmp(s5.phase[i], "prefill"))
			continue;
		int n = 0;
		char ph[40], op[40];
		int k;
		double us;
		for (const char *l = strchr(g_out, '\n'); l; l = strchr(l + 1, '\n'))
			if (sscanf(l + 1, "%39s %39s %d %lf", ph, op, &k, &us) == 4 && !strcmp(ph, s5.phase[i]))
				n += k;
		if (n != s5.phase_launches[i])
			fail_msg("phase %s: inspect counts %d launches, the runtime %d:\n%s", s5.phase[i],
			         s5.phase_launches[i], n, g_out);
		total += n;
	}
	assert_int_equal(s5.launches, total);
	assert_int_equal(s5.launches, s5.launch_kernels + s5.launch_gemms + s5.launch_memsets);

	/* per layer: three more layers add three layers' launches to the one
	 * target forward of an iteration (verify) */
	int v = 0;
	while (v < s5.n_phases && strcmp(s5.phase[v], "verify"))
		v++;
	assert_true(v < s5.n_phases && s5.phase_per_layer[v] > 0);
	assert_true(s2.phase_per_layer[v] == s5.phase_per_layer[v]);
	assert_true(s5.launches - s2.launches == 3 * s5.phase_per_layer[v]);
	assert_true(fabs(s5.launch_us - s5.launches * 2.77) < 1e-6);
	assert_true(fabs(s5.roofline_us - s5.iter_bytes / 3.35e12 * 1e6) < 1e-6);

	/* the LM head: (R, D) x (V, D)^T -> (R, V) fp32 from 16-bit inputs, one
	 * launch (2.77 us) + its bytes at 85.2% of the bandwidth less 1.60 us,
	 * at least its bytes at the bandwidth */
	const double bytes = (double)R * D * 2 + (double)V * D * 2 + (double)R * V * 4;
	const gen_inspect_opts *dev[2] = {&h100, &h200};
	const double bw[2] = {3.35e12, 4.3e12};
	for (int i = 0; i < 2; i++) {
		FILE *f = fmemopen(g_out, sizeof(g_out), "w");
		assert_non_null(f);
		if (gen_inspect_on(d5, dev[i], f, &s5, &err))
			fail_msg("%s", err.msg);
		fputc(0, f);
		fclose(f);
		const double want = 2.77 + fmax(bytes / bw[i] * 1e6, bytes / (0.852 * bw[i]) * 1e6 - 1.60);
		const double got = row_t(g_out, "verify", "lm_head");
		if (fabs(got - want) > 1e-3)
			fail_msg("verify lm_head on %s: %.3f us projected, closed form %.4f", dev[i]->gpu->key,
			         got, want);
	}
}

/* gen/gpu_model.h's constants are what check_util.py calibrate computes
 * from the H100 run's log (its profile tables and graph-replay times). */
static void test_calibration(void **state)
{
	must(sh("python3 tests/gpu/check_util.py calibrate tests/gpu/results/h100-2026-11-27.log "
	        "tests/gpu/results/h100-2026-11-27.launches"), "calibrate");
	char want[6][96];
	snprintf(want[0], sizeof(want[0]), "floor kernel %.2f us", GEN_CAL_FLOOR_KERNEL_S * 1e6);
	snprintf(want[1], sizeof(want[1]), "floor cublaslt %.2f us", GEN_CAL_FLOOR_GEMM_S * 1e6);
	snprintf(want[2], sizeof(want[2]), "floor memset %.2f us", GEN_CAL_FLOOR_MEMSET_S * 1e6);
	snprintf(want[3], sizeof(want[3]), "launch %.2f us per launch in graph replay",
	         GEN_CAL_LAUNCH_S * 1e6);
	snprintf(want[4], sizeof(want[4]), "gemm efficiency %.1f%% of 3350 GB/s, overlap %.2f us",
	         GEN_CAL_GEMM_EFF * 100, GEN_CAL_GEMM_OVERLAP_S * 1e6);
	snprintf(want[5], sizeof(want[5]), "launch llama3-8b-eagle25-sm90: (25884.1 us per iteration");
	for (int i = 0; i < 6; i++)
		if (!strstr(g_out, want[i]))
			fail_msg("calibrate does not give '%s':\n%s", want[i], g_out);
}

/* The join on an engine with feature taps (a tiny EAGLE-3 head over an
 * 8-layer target, taps at layers 2, 4 and 5's inputs): a host profile and
 * the engine's projection on the H100, checked by tests/gpu/test_check_util.py. */
static void test_join_taps(void **state)
{
	must(sh("mkdir -p %s/head && printf '%%s' '{\"architectures\": [\"LlamaForCausalLMEagle3\"], "
	        "\"model_type\": \"llama\", \"hidden_act\": \"silu\", \"hidden_size\": 64, "
	        "\"intermediate_size\": 128, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
	        "\"num_hidden_layers\": 1, \"vocab_size\": 512, \"draft_vocab_size\": 128, "
	        "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"max_position_embeddings\": 2048, "
	        "\"tie_word_embeddings\": false, \"torch_dtype\": \"float16\"}' > %s/head/config.json",
	        g_dir, g_dir), "head");
	must(sh("printf '%%s' '{\"name\": \"tiny-eagle3\", \"target\": {\"shape\": {\"n_layers\": 8, "
	        "\"dim\": 64, \"n_heads\": 4, \"n_kv_heads\": 2, \"ffn_dim\": 128, \"vocab\": 512}}, "
	        "\"draft\": {\"method\": \"eagle3\", \"path\": \"%s/head\"}, \"tree\": \"chain:3\", "
	        "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, \"max_context\": 256, "
	        "\"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": [\"sm_90\"]}' > %s/e3.json && "
	        "%s/specwright build %s/e3.json -o %s/e3 --no-compile 2>&1", g_dir, g_dir, g_build, g_dir,
	        g_dir), "build");
	must(sh("%s/specwright profile %s/e3 -n 2 --backend host --random-weights 1 >/dev/null "
	        "2>%s/e3.profile && %s/specwright inspect %s/e3 --gpu h100 > %s/e3.inspect", g_build,
	        g_dir, g_dir, g_build, g_dir, g_dir), "profile, inspect");
	must(sh("python3 tests/gpu/test_check_util.py %s/e3.profile %s/e3.inspect 8 3 512 64 4 %.2f %.3f "
	        "%.2f 2>&1", g_dir, g_dir, GEN_CAL_LAUNCH_S * 1e6, GEN_CAL_GEMM_EFF,
	        GEN_CAL_GEMM_OVERLAP_S * 1e6), "test_check_util.py");
	print_message("  %s", g_out);
}

/* gen/gpu_model.h's GEMM terms in closed form: cuBLASLt never streams
 * faster than the bandwidth (wk/wv's 8.4 MB at 2.50 us on the H100, where
 * the fit alone says 1.34), the fit where it is slower (117 MB); gemv16's
 * stated assumptions: 90% of the bandwidth less the same overlap once the
 * grid holds 4 blocks an SM (a grid of one block an SM a quarter of it),
 * N K (M (1 + 1/R) + 1) instructions at 70% of the fp32 issue rate. */
static void test_gemm_model(void **state)
{
	(void)state;
	const gen_gpu *h = &gen_gpu_h100;
	const double wk = 1024.0 * 4096 * 2, ffn = 14336.0 * 4096 * 2;
	assert_true(fabs(gen_gpu_gemm_s(h, wk, 0) - wk / 3.35e12) < 1e-12);
	assert_true(fabs(gen_gpu_gemm_s(h, ffn, 0) - (ffn / (0.852 * 3.35e12) - 1.60e-6)) < 1e-12);
	assert_true(fabs(gen_gpu_gemm_s(h, wk, 1e15) - 1e15 / 989e12) < 1e-12);
	double tm, tc;
	const double t = gen_gpu_gemv16_s(h, ffn, 1, 14336, 4096, 2, 4 * 132, &tm, &tc);
	assert_true(fabs(tm - (ffn / (0.90 * 3.35e12) - 1.60e-6)) < 1e-12);
	assert_true(fabs(tc - 14336.0 * 4096 * 2.5 / (67e12 / 2 * 0.70)) < 1e-12);
	assert_true(t == tm);
	gen_gpu_gemv16_s(h, ffn, 1, 14336, 4096, 2, 132, &tm, NULL);
	assert_true(fabs(tm - (ffn / (0.90 * 3.35e12 * 0.25) - 1.60e-6)) < 1e-12);
	assert_true(fabs(gen_gpu_gemv16_s(h, wk, 1, 1024, 4096, 2, 1024, NULL, NULL) - wk / 3.35e12) <
	            1e-12);
	const double t16 = gen_gpu_gemv16_s(h, ffn, 16, 14336, 4096, 2, 4 * 132, &tm, &tc);
	assert_true(fabs(t16 - 14336.0 * 4096 * 25 / (67e12 / 2 * 0.70)) < 1e-12 && t16 == tc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_parse),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_closed_form),
		cmocka_unit_test(test_gemm_model),
		cmocka_unit_test(test_calibration),
		cmocka_unit_test(test_join_taps),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
