/* Engines verified whole (issue 40). engine.sum stops naive edits of
 * engine.json, but an edit that recomputes it (and $.files) as an attacker
 * would ran with wrong output and exit 0: 32 such edits (GEMM shapes,
 * swapped arguments, kernel constants with their uris renamed, reordered,
 * removed and duplicated ops and phases, a memset, a dtype, a grid) on an
 * engine built with "fuse": false, and 8 on the fused layer of the default
 * engine (its GEMMs' m, k/v and gate/up rows swapped, its kernels'
 * constants, an op moved), are each refused by `run`, naming the first differing JSON path, which the
 * edit itself computes (python, an independent writer); `profile`, `serve`
 * and `bundle` refuse such an engine too. kernels.cu edited and an image
 * for an arch the spec has not are refused. An engine's drafter files (an
 * EAGLE-3 head's config.json and model.safetensors, a draft model's GGUF)
 * changed after build are refused naming the file and both sha256. An
 * engine runs from any directory; weights elsewhere are found with
 * --weights, and their absence says so. A record of an older specwright
 * (FNV-1a) is refused asking for a rebuild. Every example spec re-plans
 * to what build wrote. Runs build/specwright as a subprocess. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "block_util.h"
#include "eagle3_util.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "gen/replan.h"
#include "model/model_gguf.h"
#include "shell_util.h"
#include "testutil.h"

static char g_out[1 << 16];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static char g_dir[300], g_bin[400], g_src[300], g_base[320];
/* the same spec with "fuse": false (a launch an op): the 32 edits name its
 * separate ops (wq, wk, rope_q, kv_store, the casts) */
static char g_unfused[320];

static const char *model(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

/* ---- an attacker's edit: engine.json changed, then every record
 * recomputed in the format the engine has (sha256, or an older build's
 * FNV-1a), so the integrity records alone cannot tell ---- */

static const char PRE[] =
	"import json, sys, hashlib, struct, copy\n"
	"D = sys.argv[1]; p = D + '/engine.json'; d = json.load(open(p))\n"
	"def pi(n): return [i for i, x in enumerate(d['phases']) if x['name'] == n][0]\n"
	"def ops(n): return d['phases'][pi(n)]['ops']\n"
	"def oi(n, o): return [i for i, x in enumerate(ops(n)) if x['name'] == o][0]\n"
	"def op(n, o): return ops(n)[oi(n, o)]\n"
	"def path(n, o): return '$.phases[%d].ops[%d]' % (pi(n), oi(n, o))\n"
	"def ki(u): return [i for i, k in enumerate(d['kernels']) if k['uri'] == u][0]\n"
	"def bi(n): return [i for i, b in enumerate(d['buffers']) if b['name'] == n][0]\n"
	"def fhex(x): return '%08x' % struct.unpack('<I', struct.pack('<f', x))[0]\n"
	"def rename(u, a, b):\n"
	"    nu = u.replace(a, b)\n"
	"    for k in d['kernels']:\n"
	"        if k['uri'] == u: k['uri'] = nu; k['entries'] = [e.replace(u, nu) for e in k['entries']]\n"
	"    for P in d['phases']:\n"
	"        for o in P['ops']:\n"
	"            if o.get('uri') == u:\n"
	"                o['uri'] = nu\n"
	"                if 'entry' in o: o['entry'] = o['entry'].replace(u, nu)\n"
	"    return nu\n"
	"at = None\n";

static const char POST[] =
	"\ndef fnv(b):\n"
	"    h = 14695981039346656037\n"
	"    for c in b: h = ((h ^ c) * 1099511628211) & 0xffffffffffffffff\n"
	"    return '%016x' % h\n"
	"def resum(r, b):\n"
	"    r['bytes'] = len(b)\n"
	"    if 'sha256' in r: r['sha256'] = hashlib.sha256(b).hexdigest()\n"
	"    else: r['fnv1a64'] = fnv(b)\n"
	"for n, r in d.get('files', {}).items(): resum(r, open(D + '/' + n, 'rb').read())\n"
	"t = json.dumps(d, indent=1).encode(); open(p, 'wb').write(t)\n"
	"s = json.load(open(D + '/engine.sum')); resum(s['engine.json'], t)\n"
	"json.dump(s, open(D + '/engine.sum', 'w'))\n"
	"print(at)\n";

/* A copy of base at dir with py applied; *at: the JSON path the edit
 * says differs first. */
static void tamper_from(const char *base, const char *dir, const char *py, char *at, size_t n)
{
	char script[360];
	snprintf(script, sizeof(script), "%s/edit.py", g_dir);
	FILE *f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "%s%s\n%s", PRE, py, POST);
	assert_int_equal(fclose(f), 0);
	if (sh("rm -rf %s && cp -r %s %s && python3 %s %s", dir, base, dir, script, dir))
		fail_msg("the edit failed: %s\n%s", py, g_out);
	snprintf(at, n, "%.*s", (int)strcspn(g_out, "\n"), g_out);
}

static void tamper(const char *dir, const char *py, char *at, size_t n)
{
	tamper_from(g_base, dir, py, at, n);
}

static int run_engine(const char *dir, const char *extra)
{
	return sh("%s run %s --backend host -n 2 -p hi --no-baseline %s 2>&1", g_bin, dir, extra);
}

static int setup(void **state)
{
	(void)state;
	char rel[300], abs[PATH_MAX], cwd[PATH_MAX];
	const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
	eu_work_dir(rel, sizeof(rel), "test_engine_verify");
	if (!realpath(rel, abs) || !getcwd(cwd, sizeof(cwd)) || strlen(abs) > 250 || strlen(cwd) > 250 ||
	    strlen(b) > 100)
		return -1;
	memcpy(g_dir, abs, strlen(abs) + 1); /* (lengths checked above) */
	memcpy(g_src, cwd, strlen(cwd) + 1);
	snprintf(g_bin, sizeof(g_bin), b[0] == '/' ? "%.0s%s/specwright" : "%s/%s/specwright", cwd, b);
	snprintf(g_base, sizeof(g_base), "%s/base", g_dir);
	snprintf(g_unfused, sizeof(g_unfused), "%s/unfused", g_dir);
	return sh("%s build models/specs/smollm2-ngram.json -o %s --no-compile 2>&1 && python3 -c \""
	          "import json, os; s = json.load(open('models/specs/smollm2-ngram.json')); "
	          "s['fuse'] = False; s['target']['path'] = os.path.abspath(s['target']['path']); "
	          "json.dump(s, open('%s/unfused.json', 'w'))\" && "
	          "%s build %s/unfused.json -o %s --no-compile 2>&1", g_bin, g_base, g_dir, g_bin,
	          g_dir, g_unfused) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	return sh("rm -rf %s", g_dir);
}

/* The 32 edits, each one that the deployable runtime's own checks
 * (manifest, extents) accept: a kernel constant is changed with its uri and
 * entry renamed to match. */
static const struct {
	const char *what, *py;
} CASES[] = {
	{"LM head GEMM n halved", "o = op('verify', 'lm_head'); o['gemm']['n'] //= 2; "
	 "o['uri'] = o['uri'].replace('_n49152_', '_n24576_'); at = path('verify', 'lm_head') + '.uri'"},
	{"LM head GEMM n - 1", "o = op('verify', 'lm_head'); o['gemm']['n'] -= 1; "
	 "o['uri'] = o['uri'].replace('_n49152_', '_n49151_'); at = path('verify', 'lm_head') + '.uri'"},
	{"prefill GEMM m halved", "o = op('prefill', 'wq'); o['gemm']['m'] //= 2; "
	 "o['uri'] = o['uri'].replace('_m64_', '_m32_'); at = path('prefill', 'wq') + '.uri'"},
	{"verify GEMM m 1", "o = op('verify', 'wq'); o['gemm']['m'] = 1; "
	 "o['uri'] = o['uri'].replace('_m7_', '_m1_'); at = path('verify', 'wq') + '.uri'"},
	{"wk/wv swapped with their names", "v = ops('verify'); a, b = oi('verify', 'wk'), oi('verify', 'wv'); "
	 "v[a], v[b] = v[b], v[a]; at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
	{"k/v outputs swapped", "a, b = op('verify', 'wk'), op('verify', 'wv'); "
	 "a['args'][0], b['args'][0] = b['args'][0], a['args'][0]; at = path('verify', 'wk') + '.args[0].buf'"},
	{"gate/up outputs swapped", "a, b = op('verify', 'w_gate'), op('verify', 'w_up'); "
	 "a['args'][0], b['args'][0] = b['args'][0], a['args'][0]; at = path('verify', 'w_gate') + '.args[0].buf'"},
	{"a GEMM input at another buffer", "o = op('verify', 'wo'); o['args'][1]['buf'] = 'q16'; "
	 "at = path('verify', 'wo') + '.args[1].buf'"},
	{"norm arguments swapped", "o = op('verify', 'attn_norm'); o['args'][1], o['args'][3] = o['args'][3], "
	 "o['args'][1]; at = path('verify', 'attn_norm') + '.args[1].buf'"},
	{"a norm's weight another norm's", "o = op('verify', 'ffn_norm'); o['args'][4]['buf'] = 'target.attn_norm'; "
	 "at = path('verify', 'ffn_norm') + '.args[4].buf'"},
	{"rmsnorm eps 0.1", "k = [k for k in d['kernels'] if k['template'].endswith('rmsnorm_residual.cu.tmpl')][0]; "
	 "i = ki(k['uri']); e = k['params']['EPS']; k['params']['EPS'] = 0.1; "
	 "rename(k['uri'], '_eps' + fhex(e), '_eps' + fhex(0.1)); at = '$.kernels[%d].uri' % i"},
	{"RoPE rot_dim 32", "u = op('verify', 'rope_q')['uri']; i = ki(u); d['kernels'][i]['params']['ROT_DIM'] = 32; "
	 "rename(u, '_rot_dim64_', '_rot_dim32_'); at = '$.kernels[%d].uri' % i"},
	{"RoPE heads the KV count", "q, k = op('verify', 'rope_q'), op('verify', 'rope_k'); "
	 "q['uri'], q['entry'] = k['uri'], k['entry']; at = path('verify', 'rope_q') + '.uri'"},
	{"SwiGLU act parameter", "u = op('verify', 'swiglu')['uri']; i = ki(u); d['kernels'][i]['params']['ACT'] = 1; "
	 "rename(u, '_act0_', '_act1_'); at = '$.kernels[%d].uri' % i"},
	{"a cast's n halved", "u = op('verify', 'ffn_mid_cast')['uri']; i = ki(u); d['kernels'][i]['params']['N'] //= 2; "
	 "rename(u, '_n10752_', '_n5376_'); at = '$.kernels[%d].uri' % i"},
	{"the logits kernel's V too small", "u = op('verify', 'target_probs')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['V'] -= 1000; rename(u, '_v49152_', '_v48152_'); at = '$.kernels[%d].uri' % i"},
	{"RoPE before its GEMM", "v = ops('verify'); a, b = oi('verify', 'wq'), oi('verify', 'rope_q'); "
	 "v.insert(a, v.pop(b)); at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
	{"SwiGLU after down", "v = ops('verify'); a, b = oi('verify', 'swiglu'), oi('verify', 'w_down'); "
	 "v.insert(b, v.pop(a)); at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
	{"KV store after attention", "v = ops('verify'); a, b = oi('verify', 'kv_store'), oi('verify', 'attention_merge'); "
	 "v.insert(b, v.pop(a)); at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
	{"verify before the LM head", "P = d['phases']; a, b = pi('verify'), pi('accept'); P[a], P[b] = P[b], P[a]; "
	 "at = '$.phases[%d].name' % a"},
	{"a RoPE op removed", "v = ops('verify'); a = oi('verify', 'rope_k'); v.pop(a); "
	 "at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
	{"kv_commit removed", "ops('commit').pop(0); at = '$.phases[%d].ops[0]' % pi('commit')"},
	{"a phase duplicated", "P = d['phases']; a = pi('verify'); P.insert(a + 1, copy.deepcopy(P[a])); "
	 "at = '$.phases[%d].name' % (a + 1)"},
	{"a memset halved", "o = op('verify', 'zero_delta'); o['bytes'] //= 2; at = path('verify', 'zero_delta') + '.bytes'"},
	{"fp16 buffers read as bf16", "u = op('verify', 'attention')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['IS_F16'] = 0; rename(u, '_is_f161_', '_is_f160_'); at = '$.kernels[%d].uri' % i"},
	{"a prefill cast's grid one short", "o = op('prefill', 'attn_in_cast'); o['grid'][0] -= 1; "
	 "at = path('prefill', 'attn_in_cast') + '.grid[0]'"},
	{"the embedding of another token buffer", "o = op('verify', 'embedding'); o['args'][2]['buf'] = 'tokens'; "
	 "at = path('verify', 'embedding') + '.args[2].buf'"},
	{"the embedding's scale", "u = op('verify', 'embedding')['uri']; i = ki(u); d['kernels'][i]['params']['SCALE'] = 2; "
	 "rename(u, '_scale3f800000_', '_scale40000000_'); at = '$.kernels[%d].uri' % i"},
	{"the n-gram lookup's longest match", "u = op('draft_ngram', 'ngram_lookup')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['MAX_N'] = 2; rename(u, '_max_n4_', '_max_n2_'); at = '$.kernels[%d].uri' % i"},
	{"tree attention unmasked", "u = op('verify', 'attention')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['MASKED'] = 0; rename(u, '_masked1_', '_masked0_'); at = '$.kernels[%d].uri' % i"},
	{"verify over a smaller vocabulary", "u = op('accept', 'verify')['uri']; i = ki(u); "
	 "d['kernels'][i]['params'].update(V=32768, VQ=32768); u = rename(u, '_v49152_', '_v32768_'); "
	 "rename(u, '_vq49152_', '_vq32768_'); at = '$.kernels[%d].uri' % i"},
	{"a member the plan has not", "d['phases'][0]['gate'] = 1; at = '$.phases[0].gate'"},
};

/* The fused layer's own (the default engine's, issue 37): its GEMMs' rows,
 * the fused kernels' constants, their arguments and order. */
static const struct {
	const char *what, *py;
} FUSED[] = {
	{"q/k/v GEMM m 1", "o = op('verify', 'wqkv'); o['gemm']['m'] = 1; "
	 "o['uri'] = o['uri'].replace('_m7_', '_m1_'); at = path('verify', 'wqkv') + '.uri'"},
	{"prefill gate/up GEMM m halved", "o = op('prefill', 'w_gate_up'); o['gemm']['m'] //= 2; "
	 "o['uri'] = o['uri'].replace('_m64_', '_m32_'); at = path('prefill', 'w_gate_up') + '.uri'"},
	{"k and v rows swapped", "o = op('verify', 'qkv_rope'); o['args'][4], o['args'][5] = "
	 "o['args'][5], o['args'][4]; at = path('verify', 'qkv_rope') + '.args[4].offset'"},
	{"gate and up rows swapped", "o = op('verify', 'swiglu'); o['args'][1], o['args'][2] = "
	 "o['args'][2], o['args'][1]; at = path('verify', 'swiglu') + '.args[1].offset'"},
	{"q/k/v NeoX pairs", "u = op('verify', 'qkv_rope')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['ROPE'] = 2; rename(u, '_rope1_', '_rope2_'); at = '$.kernels[%d].uri' % i"},
	{"SwiGLU rows at FFN", "u = op('verify', 'swiglu')['uri']; i = ki(u); "
	 "d['kernels'][i]['params']['LD'] = 1536; rename(u, '_ld3072_', '_ld1536_'); at = '$.kernels[%d].uri' % i"},
	{"rmsnorm_cast eps 0.1", "k = [k for k in d['kernels'] if k['template'].endswith('rmsnorm_cast.cu.tmpl')][0]; "
	 "i = ki(k['uri']); e = k['params']['EPS']; k['params']['EPS'] = 0.1; "
	 "rename(k['uri'], '_eps' + fhex(e), '_eps' + fhex(0.1)); at = '$.kernels[%d].uri' % i"},
	{"qkv_rope before its GEMM", "v = ops('verify'); a, b = oi('verify', 'wqkv'), oi('verify', 'qkv_rope'); "
	 "v.insert(a, v.pop(b)); at = '$.phases[%d].ops[%d].name' % (pi('verify'), a)"},
};

/* CASES on the unfused engine, then FUSED on the default one */
static void test_tampered_refused(void **state)
{
	(void)state;
	const int nc = (int)(sizeof(CASES) / sizeof(CASES[0]));
	const int n = nc + (int)(sizeof(FUSED) / sizeof(FUSED[0]));
	int bad = 0;
	char dir[360], at[256];
	assert_int_equal(nc, 32);
	if (run_engine(g_base, ""))
		fail_msg("the engine as built: %s", g_out);
	if (run_engine(g_unfused, ""))
		fail_msg("the unfused engine as built: %s", g_out);
	for (int i = 0; i < n; i++) {
		const char *what = i < nc ? CASES[i].what : FUSED[i - nc].what;
		snprintf(dir, sizeof(dir), "%s/t%d", g_dir, i);
		tamper_from(i < nc ? g_unfused : g_base, dir, i < nc ? CASES[i].py : FUSED[i - nc].py, at,
		            sizeof(at));
		const int rc = run_engine(dir, "");
		const bool ok = rc == 1 && strstr(g_out, at) && strstr(g_out, "re-planned from its own $.spec");
		print_message("  %-38s %s: exit %d, %.200s\n", what, ok ? "refused" : "NOT REFUSED", rc,
		              rc == 1 ? strstr(g_out, "$.") ? strstr(g_out, "$.") : g_out : "(ran)");
		if (!ok)
			print_message("    expected exit 1 naming %s; output:\n%s\n", at, g_out);
		bad += !ok;
	}
	if (bad)
		fail_msg("%d of %d edits that recompute engine.sum were not refused naming their path", bad, n);
}

/* profile, serve and bundle open engines through the same check. */
static void test_other_commands(void **state)
{
	(void)state;
	char dir[360], at[256], out[360];
	snprintf(dir, sizeof(dir), "%s/cmd", g_dir);
	tamper_from(g_unfused, dir, CASES[0].py, at, sizeof(at));
	int rc = sh("%s profile %s --backend host -n 2 -p hi 2>&1", g_bin, dir);
	if (rc != 1 || !strstr(g_out, at))
		fail_msg("profile: exit %d, expected 1 naming %s:\n%s", rc, at, g_out);
	rc = sh("timeout 60 %s serve %s --port 0 --backend host 2>&1", g_bin, dir);
	if (rc != 1 || !strstr(g_out, at))
		fail_msg("serve: exit %d, expected 1 naming %s:\n%s", rc, at, g_out);
	snprintf(out, sizeof(out), "%s/bundle-out", g_dir);
	rc = sh("%s bundle %s -o %s 2>&1", g_bin, dir, out);
	if (rc != 1 || !strstr(g_out, at))
		fail_msg("bundle: exit %d, expected 1 naming %s:\n%s", rc, at, g_out);
	struct stat st;
	assert_int_not_equal(stat(out, &st), 0);
	print_message("  profile, serve and bundle refuse it naming %s\n", at);
}

/* kernels.cu (host-emulate compiles it) edited, and a kernel image for an
 * arch the spec does not have, each listed with a recomputed record. */
static void test_kernel_files(void **state)
{
	(void)state;
	char dir[360], at[256];
	snprintf(dir, sizeof(dir), "%s/kcu", g_dir);
	tamper(dir, "open(D + '/kernels.cu', 'a').write('int injected;\\n')", at, sizeof(at));
	int rc = run_engine(dir, "");
	if (rc != 1 || !strstr(g_out, "kernels.cu: line") || !strstr(g_out, "int injected;"))
		fail_msg("an edited kernels.cu: exit %d:\n%s", rc, g_out);
	print_message("  %.200s", strstr(g_out, "kernels.cu"));
	snprintf(dir, sizeof(dir), "%s/img", g_dir);
	tamper(dir, "open(D + '/kernels.sm_75.cubin', 'wb').write(b'x' * 64); "
	       "d['files']['kernels.sm_75.cubin'] = dict(d['files']['kernels.cu'])", at, sizeof(at));
	rc = run_engine(dir, "");
	if (rc != 1 || !strstr(g_out, "$.files[\"kernels.sm_75.cubin\"]"))
		fail_msg("an image for sm_75 (not in $.spec.archs): exit %d:\n%s", rc, g_out);
	print_message("  %.200s", strstr(g_out, "$.files"));
}

/* An engine of an older specwright (its records FNV-1a) is refused, asking
 * for a rebuild: its record binds nothing an edit could not recompute. */
static void test_old_record_refused(void **state)
{
	(void)state;
	char dir[360], at[256];
	snprintf(dir, sizeof(dir), "%s/old", g_dir);
	tamper(dir, "s = json.load(open(D + '/engine.sum')); r = s['engine.json']; r.pop('sha256', None); "
	       "r['fnv1a64'] = '0' * 16; json.dump(s, open(D + '/engine.sum', 'w')); "
	       "[r.pop('sha256', None) or r.__setitem__('fnv1a64', '0' * 16) for r in d['files'].values()]",
	       at, sizeof(at));
	const int rc = run_engine(dir, "");
	if (rc != 1 || !strstr(g_out, "FNV-1a") || !strstr(g_out, "rebuild the engine"))
		fail_msg("an FNV-1a record: exit %d:\n%s", rc, g_out);
	print_message("  %.200s", strstr(g_out, "engine.sum"));
}

/* An engine records its weights' absolute paths: it runs from any
 * directory. Weights moved elsewhere: the refusal says --weights, and
 * --weights DIR or FILE finds them; other weights there are refused. */
static void test_weights_found(void **state)
{
	(void)state;
	char eng[360], w1[360], w2[360], abs_model[PATH_MAX], spec[420];
	/* built here from a spec that names the model relative to here */
	if (run_engine(g_base, "") || sh("cd %s && %s run %s --backend host -n 2 -p hi --no-baseline 2>&1",
	                                 g_dir, g_bin, g_base))
		fail_msg("run from %s: %s", g_dir, g_out);
	print_message("  run from %s: exit 0\n", g_dir);

	/* weights at a path that goes away: a link to the model under w1 */
	if (!realpath(model(), abs_model))
		fail_msg("%s: not found", model());
	snprintf(w1, sizeof(w1), "%s/w1", g_dir);
	snprintf(w2, sizeof(w2), "%s/w2", g_dir);
	snprintf(eng, sizeof(eng), "%s/moved", g_dir);
	snprintf(spec, sizeof(spec), "%s/moved.json", g_dir);
	const char *base = strrchr(abs_model, '/') + 1;
	if (sh("mkdir -p %s && ln -sf %s %s/%s && sed 's|\"path\": \"[^\"]*\"|\"path\": \"w1/%s\"|' "
	       "models/specs/smollm2-ngram.json > %s", w1, abs_model, w1, base, base, spec) ||
	    sh("cd %s && SW_SRC_DIR=%s %s build %s -o %s --no-compile 2>&1", g_dir, g_src, g_bin, spec, eng))
		fail_msg("%s", g_out);
	assert_int_equal(sh("mv %s %s", w1, w2), 0);
	int rc = run_engine(eng, "");
	if (rc != 1 || !strstr(g_out, "--weights") || !strstr(g_out, w1))
		fail_msg("weights gone: exit %d:\n%s", rc, g_out);
	print_message("  weights gone: %.160s...\n", strstr(g_out, "engine "));
	char opt[800];
	snprintf(opt, sizeof(opt), "--weights %s", w2);
	if (run_engine(eng, opt))
		fail_msg("--weights DIR: %s", g_out);
	snprintf(opt, sizeof(opt), "--weights %s/%s", w2, base);
	if (run_engine(eng, opt))
		fail_msg("--weights FILE: %s", g_out);
	print_message("  --weights %s and --weights its file: exit 0\n", w2);
	/* other weights under the name: the tiny model */
	char tiny[360];
	snprintf(tiny, sizeof(tiny), "%s/w3", g_dir);
	assert_int_equal(sh("mkdir -p %s", tiny), 0);
	snprintf(tiny, sizeof(tiny), "%s/w3/%s", g_dir, base);
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, 7);
	sw_err err = {0};
	assert_non_null(m);
	assert_int_equal(rt_llama_save_gguf(m, tiny, GGML_T_F32, &err), 0);
	rt_model_free(m);
	snprintf(opt, sizeof(opt), "--weights %s/w3", g_dir);
	rc = run_engine(eng, opt);
	if (rc != 1 || !strstr(g_out, tiny))
		fail_msg("other weights under --weights: exit %d:\n%s", rc, g_out);
	print_message("  other weights: %.200s\n", strstr(g_out, "$."));
}

/* --weights is an engine run's: on a model file, or beside
 * --random-weights (which reads no weights), it is refused, not ignored. */
static void test_weights_option_refused(void **state)
{
	(void)state;
	int rc = sh("%s run %s --weights /tmp -p hi 2>&1", g_bin, model());
	if (rc != 2 || !strstr(g_out, "--weights DIR_OR_FILE applies to"))
		fail_msg("--weights on a model file: exit %d:\n%s", rc, g_out);
	rc = sh("%s run %s --random-weights 1 --weights /tmp -P 4 2>&1", g_bin, g_base);
	if (rc != 2 || !strstr(g_out, "--weights with --random-weights"))
		fail_msg("--weights with --random-weights: exit %d:\n%s", rc, g_out);
	rc = sh("%s run %s --weights %s/nonesuch -p hi 2>&1", g_bin, g_base, g_dir);
	if (rc != 1 || !strstr(g_out, "nonesuch: cannot open"))
		fail_msg("--weights at nothing: exit %d:\n%s", rc, g_out);
}

/* The tiny model (5 layers: room to move a head's taps) with a tokenizer:
 * ids 0..93 '!'..'~', 94 the space, the rest two-character pieces. */
static rt_model *tiny5(const char *path)
{
	sw_err err = {0};
	char store[EU_TINY_VOCAB][8], raw[400];
	const char *toks[EU_TINY_VOCAB];
	for (int i = 0; i < EU_TINY_VOCAB; i++) {
		if (i < 94)
			snprintf(store[i], sizeof(store[i]), "%c", 33 + i);
		else if (i == 94)
			snprintf(store[i], sizeof(store[i]), "\xc4\xa0");
		else
			snprintf(store[i], sizeof(store[i]), "\xc4\xa0%c", 'a' + i - 95);
		toks[i] = store[i];
	}
	snprintf(raw, sizeof(raw), "%s.raw", path);
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 5, 4, 2, 384, 11);
	assert_non_null(m);
	if (rt_llama_save_gguf(m, raw, GGML_T_F32, &err) ||
	    tu_gguf_revocab(raw, path, EU_TINY_VOCAB, toks, EU_TINY_VOCAB, "gpt2", &err))
		fail_msg("%s: %s", path, err.msg);
	unlink(raw);
	rt_model_free(m);
	sw_err e2 = {0};
	rt_model *back = rt_model_load(path, &e2);
	if (!back)
		fail_msg("%s: %s", path, e2.msg);
	return back;
}

/* `specwright build` of spec text into dir (no compile), the spec written
 * beside it. */
static void build_spec(const char *spec, const char *dir)
{
	char sp[400];
	snprintf(sp, sizeof(sp), "%s.json", dir);
	FILE *f = fopen(sp, "w");
	assert_non_null(f);
	fputs(spec, f);
	assert_int_equal(fclose(f), 0);
	if (sh("%s build %s -o %s --no-compile 2>&1", g_bin, sp, dir))
		fail_msg("build %s: %s", sp, g_out);
}

static void sha256sum(const char *path, char out[65])
{
	if (sh("sha256sum %s", path))
		fail_msg("sha256sum %s: %s", path, g_out);
	snprintf(out, 65, "%.64s", g_out);
}

/* The drafter's files changed after build, as the issue found them used
 * without a word: an EAGLE-3 head's taps and norm_before_residual in
 * config.json, its t2d dropped from model.safetensors; a draft model's
 * GGUF with bytes appended (its weights, and so their digest, the same).
 * Each refused naming the file, the digest the engine
 * recorded (sha256sum's before the change) and the one found (after). */
static void test_drafter_files_bound(void **state)
{
	(void)state;
	char tpath[360], head[360], eng[360], spec[4096], file[420];
	char before[65], after[65];
	int bad = 0;
	snprintf(tpath, sizeof(tpath), "%s/tiny5.gguf", g_dir);
	snprintf(head, sizeof(head), "%s/head", g_dir);
	snprintf(eng, sizeof(eng), "%s/e3", g_dir);
	rt_model *m = tiny5(tpath);
	te3_opts o = te3_default(m);
	o.draft_vocab = 60;
	o.ffn = 192;
	assert_int_equal(sh("mkdir -p %s", head), 0);
	assert_int_equal(te3_write(head, m, &o, 5), 0);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"tiny-e3\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"eagle3\", \"path\": \"%s\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": \"greedy\", "
	         "\"expand\": \"topk\"}, \"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"]}", tpath, head);
	build_spec(spec, eng);
	const char *cmd = "--ids '1 2 3 4 5 6 7 8'";
	if (sh("%s run %s --backend host -n 4 --no-baseline %s 2>&1", g_bin, eng, cmd))
		fail_msg("the EAGLE-3 engine as built: %s", g_out);
	static const struct {
		const char *what, *file, *change;
	} E[] = {
		{"the head's taps", "config.json",
		 "python3 -c \"import json; p = '%s'; c = json.load(open(p)); "
		 "c['eagle_config']['eagle_aux_hidden_state_layer_ids'] = [0, 1, 4]; json.dump(c, open(p, 'w'))\""},
		{"norm_before_residual", "config.json",
		 "python3 -c \"import json; p = '%s'; c = json.load(open(p)); "
		 "c['norm_before_residual'] = not c.get('norm_before_residual', False); json.dump(c, open(p, 'w'))\""},
		{"t2d dropped", "model.safetensors", NULL},
	};
	for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++) {
		snprintf(file, sizeof(file), "%s/%s", head, E[i].file);
		assert_int_equal(sh("cp %s %s.keep", file, file), 0);
		sha256sum(file, before);
		if (E[i].change) {
			assert_int_equal(sh(E[i].change, file), 0);
		} else {
			te3_opts o2 = o;
			o2.skip_tensor = "t2d";
			assert_int_equal(te3_write(head, m, &o2, 5), 0); /* config.json as it was */
		}
		sha256sum(file, after);
		assert_string_not_equal(before, after);
		const int rc = sh("%s run %s --backend host -n 4 --no-baseline %s 2>&1", g_bin, eng, cmd);
		const bool ok = rc == 1 && strstr(g_out, file) && strstr(g_out, before) && strstr(g_out, after);
		print_message("  %-22s %s: exit %d, %.220s\n", E[i].what, ok ? "refused" : "NOT REFUSED", rc,
		              rc ? g_out : "(ran)");
		bad += !ok;
		assert_int_equal(sh("mv %s.keep %s", file, file), 0);
	}
	if (sh("%s run %s --backend host -n 4 --no-baseline %s 2>&1", g_bin, eng, cmd))
		fail_msg("the head restored: %s", g_out);

	/* a draft model's file */
	char dpath[360], deng[360];
	snprintf(dpath, sizeof(dpath), "%s/draft.gguf", g_dir);
	snprintf(deng, sizeof(deng), "%s/dm", g_dir);
	assert_int_equal(sh("cp %s %s", tpath, dpath), 0);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"tiny-dm\", \"target\": {\"path\": \"%s\"}, \"draft\": \"model:%s\", "
	         "\"tree\": \"chain:3\", \"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": [\"sm_80\"]}",
	         tpath, dpath);
	build_spec(spec, deng);
	if (sh("%s run %s --backend host -n 4 --no-baseline %s 2>&1", g_bin, deng, cmd))
		fail_msg("the draft-model engine as built: %s", g_out);
	/* the same weights (their digest the build's), bytes appended */
	sha256sum(dpath, before);
	assert_int_equal(sh("printf 'appended' >> %s", dpath), 0);
	sha256sum(dpath, after);
	assert_string_not_equal(before, after);
	const int rc = sh("%s run %s --backend host -n 4 --no-baseline %s 2>&1", g_bin, deng, cmd);
	const bool ok = rc == 1 && strstr(g_out, dpath) && strstr(g_out, before) && strstr(g_out, after);
	print_message("  %-22s %s: exit %d, %.220s\n", "a draft model's file", ok ? "refused" : "NOT REFUSED",
	              rc, g_out);
	bad += !ok;
	rt_model_free(m);
	if (bad)
		fail_msg("%d drafter files changed after build were not refused naming the file and both "
		         "sha256", bad);
}

/* Every example spec whose weights are here builds (no compile) and
 * re-plans to exactly what build wrote: the check refuses nothing build
 * makes. The time of each re-plan is printed. Every spec under
 * models/specs/ is in one of the two lists (a new spec left out of both
 * fails the test), the second naming the ones whose files a fresh clone
 * lacks here and why. */
static void test_examples_replan(void **state)
{
	(void)state;
	static const char *const specs[] = {
		"smollm2-ngram", "smollm2-ngram-gguf", "smollm2-ngram-q8_0", "smollm2-ngram-q8_0-a8",
		"smollm2-eagle25", "smollm2-block-chain", "smollm2-block-tree", "gemma3-4b-ngram",
		"llama3-8b-block", "llama3-8b-eagle25", "llama2-7b-eagle25", "qwen2-0.5b-eagle25",
		"qwen3-8b-eagle25", "qwen3-8b-ngram", "gpu/llama3-8b-block-sm90",
		"gpu/llama3-8b-eagle25-sm90", "gpu/llama3-8b-eagle3-sm90",
		"gpu/llama3-8b-eagle3-chain4-sm90", "gpu/qwen3-8b-ngram-sm90", "gpu/gemma3-4b-ngram-sm90",
		"gpu/tiny/tiny-gemma3", "gpu/tiny/tiny-llama-fp16", "gpu/tiny/tiny-qwen3-tree",
	};
	static const char *const absent[] = {
		/* build/gpu/smollm2-2l.gguf: made by `make gpu-model`, re-planned
		 * whole by the bundle (tests/test_gpu_check.c) */
		"gpu/smollm2-2l-adaptive", "gpu/smollm2-2l-eagle25", "gpu/smollm2-2l-ngram",
		"gpu/smollm2-2l-ngram-gguf", "gpu/smollm2-2l-sequoia63-rrsw",
		/* the GPU-trained EAGLE-3 head (models/drafters/README.md) */
		"smollm2-eagle3-gguf", "smollm2-eagle3-ngram-gguf",
	};
	const size_t n_specs = sizeof(specs) / sizeof(specs[0]), n_absent = sizeof(absent) / sizeof(absent[0]);
	assert_int_equal(sh("cd models/specs && find . -name '*.json' -not -path './trees/*' "
	                    "-not -path './heads/*' -not -path '*/heads/*' | sed 's|^\\./||; s|\\.json$||' | sort"), 0);
	int unlisted = 0;
	for (char *l = g_out; *l;) {
		const size_t n = strcspn(l, "\n");
		bool found = false;
		for (size_t i = 0; i < n_specs + n_absent && !found; i++) {
			const char *s = i < n_specs ? specs[i] : absent[i - n_specs];
			found = strlen(s) == n && !strncmp(s, l, n);
		}
		if (n && !found) {
			print_message("  models/specs/%.*s.json: in neither list\n", (int)n, l);
			unlisted++;
		}
		l += n + (l[n] == '\n');
	}
	if (unlisted)
		fail_msg("%d spec(s) under models/specs/ neither re-planned here nor listed as absent", unlisted);
	for (size_t i = 0; i < n_specs; i++) {
		char dir[420];
		snprintf(dir, sizeof(dir), "%s/ex%zu", g_dir, i);
		if (sh("%s build models/specs/%s.json -o %s --no-compile 2>&1", g_bin, specs[i], dir))
			fail_msg("build %s: %s", specs[i], g_out);
		sw_err err = {0};
		gen_replan_stats st;
		if (gen_engine_replan_check(dir, NULL, &st, &err))
			fail_msg("%s: %s", specs[i], err.msg);
		assert_true(st.source_checked);
		print_message("  %-28s re-planned equal in %.1f ms (kernels.cu too)\n", specs[i], 1e3 * st.seconds);
	}
}

/* Spec forms the examples do not cover, over the tiny model (each built by
 * `specwright build`, then re-planned): an EAGLE-3 head on a preset tree,
 * with an n-gram lookup in front, levels and a cost table; a block
 * drafter; a tree file; a layer-skip draft over a vocabulary prefix;
 * SpecDec++; sampled verification with sampling defaults. */
static void test_spec_forms_replan(void **state)
{
	(void)state;
	char tpath[360], head[360], blk[360], tree[360], spec[4096], dir[420];
	snprintf(tpath, sizeof(tpath), "%s/forms.gguf", g_dir);
	snprintf(head, sizeof(head), "%s/forms-head", g_dir);
	snprintf(blk, sizeof(blk), "%s/forms-block", g_dir);
	snprintf(tree, sizeof(tree), "%s/forms-tree.json", g_dir);
	rt_model *m = tiny5(tpath);
	te3_opts o = te3_default(m);
	o.draft_vocab = 60;
	o.ffn = 192;
	tbu_opts bo = tbu_default(m);
	assert_int_equal(sh("mkdir -p %s %s", head, blk), 0);
	assert_int_equal(te3_write(head, m, &o, 5), 0);
	assert_int_equal(tbu_write(blk, m, &bo, 9), 0);
	FILE *f = fopen(tree, "w");
	assert_non_null(f);
	fputs("{\"name\": \"forms3\", \"paths\": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}\n", f);
	assert_int_equal(fclose(f), 0);
	static const struct {
		const char *what, *draft, *tree, *verify, *extra;
	} F[] = {
		{"EAGLE-3 head, preset tree", "{\"method\": \"eagle3\", \"path\": \"%s\"}", "eagle25",
		 "{\"method\": \"greedy\", \"expand\": \"topk\"}", ""},
		{"EAGLE-3 behind n-grams", "{\"method\": \"eagle3\", \"path\": \"%s\", \"ngram\": \"1:3\", "
		 "\"levels\": 2}", "chain:4", "{\"method\": \"greedy\", \"expand\": \"topk\"}",
		 ", \"control\": {\"cost\": [1, 1.1, 1.2, 1.3, 1.4, 1.05, 1.125]}"},
		{"block drafter", "{\"method\": \"block\", \"path\": \"%s\", \"steps\": 2}", "chain:3",
		 "{\"method\": \"rrs\", \"expand\": \"sample\"}",
		 ", \"sampling\": {\"temperature\": 0.7, \"top_k\": 20, \"top_p\": 0.9}"},
		{"tree file, layer-skip @V", "\"layerskip:0-2@64\"", "%s", "{\"method\": \"rrsw\", \"expand\": "
		 "\"sample-wor\"}", ", \"sampling\": {\"temperature\": 0.8}"},
		{"SpecDec++", "\"layerskip:1\"", "chain:4", "{\"method\": \"greedy\", \"expand\": \"topk\"}",
		 ", \"adaptive\": {\"h\": 0.3, \"min\": 1, \"max\": 4}, \"roofline\": {\"tau\": 2.5}"},
	};
	for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++) {
		char draft[600], tr[400];
		snprintf(draft, sizeof(draft), F[i].draft, i == 2 ? blk : head);
		snprintf(tr, sizeof(tr), F[i].tree, tree);
		snprintf(spec, sizeof(spec), "{\"name\": \"forms%zu\", \"target\": {\"path\": \"%s\"}, "
		         "\"draft\": %s, \"tree\": \"%s\", \"verify\": %s, \"max_context\": 192, "
		         "\"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": [\"sm_80\"]%s}", i, tpath, draft,
		         tr, F[i].verify, F[i].extra);
		snprintf(dir, sizeof(dir), "%s/forms%zu", g_dir, i);
		build_spec(spec, dir);
		sw_err err = {0};
		gen_replan_stats st;
		if (gen_engine_replan_check(dir, NULL, &st, &err))
			fail_msg("%s: %s", F[i].what, err.msg);
		print_message("  %-28s re-planned equal in %.1f ms\n", F[i].what, 1e3 * st.seconds);
	}
	rt_model_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tampered_refused),
		cmocka_unit_test(test_other_commands),
		cmocka_unit_test(test_kernel_files),
		cmocka_unit_test(test_old_record_refused),
		cmocka_unit_test(test_weights_found),
		cmocka_unit_test(test_weights_option_refused),
		cmocka_unit_test(test_drafter_files_bound),
		cmocka_unit_test(test_examples_replan),
		cmocka_unit_test(test_spec_forms_replan),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
