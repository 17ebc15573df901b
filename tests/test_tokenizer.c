/* Tokenizer tests. Byte-level BPE ids are checked against HF `tokenizers`
 * built from the same GGUF (tests/tools/tok_reference.py) over >1 MB of the
 * KJV bible (Debian bible-kjv) plus odd and random Unicode strings; SPM ids
 * against sentencepiece itself on a model trained here, and on Gemma 3's
 * 262144-id vocabulary (the second real model, SW_GEMMA_MODEL or
 * models/cache/gemma-3-270m-q4_k_m.gguf from `make model-gemma`; skipped
 * when absent) over the same corpus and strings. Also round trips,
 * the streaming decoder, invalid UTF-8, buffer limits and the chat prompt.
 * Needs the real model (SW_MODEL) and build/venv (tests/deps.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/timing.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"

#define CORPUS_BYTES (1200 * 1000)

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static const char *python(void)
{
	const char *p = getenv("SW_PYTHON");
	return p ? p : "build/venv/bin/python";
}

struct fixture {
	gguf_file *f;
	rt_tokenizer *t;
	char dir[64];
	char *corpus; /* CORPUS_BYTES of bible text, NUL-terminated */
	size_t corpus_n;
};

static struct fixture fx;

/* ---- helpers ------------------------------------------------------------ */

static char *read_all(FILE *in, size_t max, size_t *n)
{
	size_t cap = 1 << 16, len = 0;
	char *b = malloc(cap + 1);
	assert_non_null(b);
	for (;;) {
		if (len == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
			assert_non_null(b);
		}
		size_t want = cap - len;
		if (max && want > max - len)
			want = max - len;
		size_t got = want ? fread(b + len, 1, want, in) : 0;
		len += got;
		if (got == 0 || (max && len >= max))
			break;
	}
	b[len] = '\0';
	*n = len;
	return b;
}

static char *read_path(const char *path, size_t *n)
{
	FILE *in = fopen(path, "rb");
	if (!in)
		fail_msg("cannot open %s", path);
	char *b = read_all(in, 0, n);
	fclose(in);
	return b;
}

static void run_cmd(const char *cmd)
{
	int rc = system(cmd);
	if (rc != 0)
		fail_msg("command failed (%d): %s\n(missing tools? run tests/deps.sh)", rc, cmd);
}

/* Encodes with a buffer that always fits; returns the count. */
static int encode(const rt_tokenizer *t, const char *s, size_t n, bool special, int32_t **ids)
{
	sw_err e = { 0 };
	int cap = (int)n + 8;
	*ids = malloc((size_t)cap * sizeof(**ids));
	assert_non_null(*ids);
	int k = rt_tokenize(t, s, n, false, special, *ids, cap, &e);
	if (k < 0)
		fail_msg("rt_tokenize: %s", e.msg);
	return k;
}

/* Concatenated raw pieces (the non-streaming decode). */
static char *decode(const rt_tokenizer *t, const int32_t *ids, int n, size_t *len)
{
	size_t cap = 64, k = 0;
	char *o = malloc(cap);
	for (int i = 0; i < n; i++) {
		size_t l;
		const char *p = rt_token_piece(t, ids[i], &l);
		assert_non_null(p);
		while (k + l + 1 > cap)
			o = realloc(o, cap *= 2);
		memcpy(o + k, p, l);
		k += l;
	}
	o[k] = '\0';
	*len = k;
	return o;
}

/* What a byte-level round trip gives back: the text less the bytes that
 * have no token in the vocabulary (dropped by the encoder, as HF does). */
static size_t strip_tokenless(const rt_tokenizer *t, const char *s, size_t n, char *o)
{
	static int has[256];
	static bool init;
	size_t k = 0;
	if (!init) {
		for (int32_t i = 0; i < rt_tokenizer_vocab(t); i++) {
			size_t l;
			const char *p = rt_token_piece(t, i, &l);
			if (l == 1 && rt_token_type(t, i) == RT_TT_NORMAL)
				has[(uint8_t)p[0]] = 1;
		}
		init = true;
	}
	for (size_t i = 0; i < n; i++)
		if (has[(uint8_t)s[i]])
			o[k++] = s[i];
	return k;
}

/* Decode through rt_detok, one token at a time. */
static char *decode_stream(const rt_tokenizer *t, const int32_t *ids, int n, size_t *len)
{
	rt_detok d;
	size_t cap = 64, k = 0;
	char *o = malloc(cap);
	char buf[4096];
	rt_detok_init(&d);
	for (int i = 0; i <= n; i++) {
		int m = i < n ? rt_detok_push(&d, t, ids[i], buf, sizeof(buf)) : rt_detok_flush(&d, buf, sizeof(buf));
		assert_true(m >= 0);
		while (k + (size_t)m + 1 > cap)
			o = realloc(o, cap *= 2);
		memcpy(o + k, buf, (size_t)m);
		k += (size_t)m;
	}
	o[k] = '\0';
	*len = k;
	return o;
}

static void show_ids(const char *tag, const int32_t *ids, int n, int at)
{
	int a = at > 4 ? at - 4 : 0, b = at + 6 < n ? at + 6 : n;
	fprintf(stderr, "  %s:", tag);
	for (int i = a; i < b; i++)
		fprintf(stderr, " %s%d", i == at ? "*" : "", ids[i]);
	fprintf(stderr, " (of %d)\n", n);
}

/* Odd inputs: every class the pre-tokenizer distinguishes, at edges. */
static const char *const odd[] = {
	"Hello world", " leading space", "trailing space ", "  two  spaces  ",
	"many          spaces then word", "tabs\tand\t\tnewlines\n\n\nend\n",
	"\r\n\r\nwindows lines\r\n", "  \n  \n", " ", "\n", "a",
	"12345678901234567890", "pi is 3.14159, e is 2.71828", "x1y22z333 4444 55555",
	"don't won't I'm you're we've they'll he'd IT'S 'S 're ''s '",
	"\xc3\xa9t\xc3\xa9 na\xc3\xafve caf\xc3\xa9 \xc3\x91" "and\xc3\xba",                /* Latin-1 */
	"e\xcc\x81 a\xcc\x8a combining marks \xcc\x81 alone",                         /* U+0301 */
	"\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x82",  /* CJK */
	"\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xce\xb3\xce\xb5\xce\xb9\xce\xb1",
	"\xd9\xa3\xd9\xa4 arabic digits \xe0\xa5\xaa hindi \xc2\xbd \xc2\xb2 \xe2\x85\xa7",
	"emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 end",
	"nbsp\xc2\xa0here ideographic\xe3\x80\x80space line\xe2\x80\xa8sep nel\xc2\x85x zwsp\xe2\x80\x8bq",
	"ctrl\x1c\x1d\x01\x7f bytes", "\x0b\x0c vertical",
	"<|im_start|>user\nhi<|im_end|>\n", "a<|im_end|>b<|endoftext|>c",
	"<|im_start|><|im_start|>", "<|im_", "<<|im_end|>>", "< |im_end| >",
	"code: if (x == 1) { return y->z[0]; } // done",
	"URL https://example.com/a?b=c&d=e#f", "$100.00 + 50% = ???",
	"mixed\xe4\xb8\xad\xe6\x96\x87" "English123\xe6\x97\xa5\xe6\x9c\xac",
	"....!!!?" "?" "?---___===", "    def f():\n        return 1\n",
};

/* A random valid UTF-8 string from a pool of awkward pieces. */
static size_t random_text(uint64_t *st, char *o)
{
	static const char *const pool[] = {
		"a", "Z", "q", "the", " ", " ", "  ", "\n", "\t", "\r\n", "0", "7", "42",
		"'", "'s", "'t", "'re", "'ll", "'D", ".", ",", "!?", "-", "_", "(", ")",
		"\xc3\xa9", "\xc3\x9f", "\xcc\x81", "\xe4\xb8\xad", "\xe3\x81\x82", "\xed\x95\x9c",
		"\xd9\xa3", "\xc2\xbd", "\xc2\xb2", "\xe2\x85\xa7", "\xc2\xa0", "\xe3\x80\x80",
		"\xe2\x80\xa8", "\xc2\x85", "\xe2\x80\x8b", "\xf0\x9f\x98\x80", "\xe2\x80\x8d",
		"\xf0\x9f\x8f\xbd", "\x1c", "\x0b", "\xd7\xa9", "\xe0\xb8\x81", "\xe2\x82\xac",
		"<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|", "|>", "<file_sep>",
	};
	size_t k = 0;
	*st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
	int n = 1 + (int)(*st % 40);
	for (int i = 0; i < n; i++) {
		*st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
		const char *p = pool[*st % (sizeof(pool) / sizeof(pool[0]))];
		size_t l = strlen(p);
		memcpy(o + k, p, l);
		k += l;
	}
	o[k] = '\0';
	return k;
}

/* ---- setup -------------------------------------------------------------- */

static int setup(void **state)
{
	sw_err e = { 0 };
	FILE *p;

	if (access(model_path(), R_OK) != 0) {
		fprintf(stderr, "test_tokenizer: model %s missing (run models/fetch.sh)\n", model_path());
		return -1;
	}
	fx.f = gguf_open(model_path(), &e);
	if (!fx.f) {
		fprintf(stderr, "test_tokenizer: %s\n", e.msg);
		return -1;
	}
	fx.t = rt_tokenizer_from_gguf(fx.f, &e);
	if (!fx.t) {
		fprintf(stderr, "test_tokenizer: %s\n", e.msg);
		return -1;
	}
	strcpy(fx.dir, "/tmp/sw_tok_XXXXXX");
	if (!mkdtemp(fx.dir))
		return -1;
	p = popen("bible gen1:1-rev22:21 2>/dev/null", "r");
	if (p) {
		fx.corpus = read_all(p, CORPUS_BYTES, &fx.corpus_n);
		pclose(p);
	}
	if (!fx.corpus || fx.corpus_n < CORPUS_BYTES) {
		fprintf(stderr, "test_tokenizer: no corpus from `bible` (Debian bible-kjv; run tests/deps.sh)\n");
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	rt_tokenizer_free(fx.t);
	gguf_close(fx.f);
	free(fx.corpus);
	if (fx.dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", fx.dir);
		if (system(cmd)) { /* best effort */ }
	}
	return 0;
}

/* ---- byte-level BPE against HF ------------------------------------------ */

struct recs {
	char **s;
	size_t *n;
	int count;
	size_t bytes;
};

static void recs_add(struct recs *r, const char *s, size_t n)
{
	r->s = realloc(r->s, (size_t)(r->count + 1) * sizeof(*r->s));
	r->n = realloc(r->n, (size_t)(r->count + 1) * sizeof(*r->n));
	r->s[r->count] = malloc(n + 1);
	memcpy(r->s[r->count], s, n);
	r->s[r->count][n] = '\0';
	r->n[r->count] = n;
	r->bytes += n;
	r->count++;
}

static void recs_free(struct recs *r)
{
	for (int i = 0; i < r->count; i++)
		free(r->s[i]);
	free(r->s);
	free(r->n);
}

/* Corpus split into chunks of ~20 lines, then odd and random strings. */
static void build_records(struct recs *r, int n_random)
{
	const char *c = fx.corpus, *end = fx.corpus + fx.corpus_n;
	char buf[1024];
	uint64_t st = 0x9E3779B97F4A7C15ull;

	while (c < end) {
		const char *e = c;
		for (int l = 0; l < 20 && e < end; l++) {
			const char *nl = memchr(e, '\n', (size_t)(end - e));
			e = nl ? nl + 1 : end;
		}
		recs_add(r, c, (size_t)(e - c));
		c = e;
	}
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		recs_add(r, odd[i], strlen(odd[i]));
	for (int i = 0; i < n_random; i++) {
		size_t n = random_text(&st, buf);
		recs_add(r, buf, n);
	}
}

static void write_records(const struct recs *r, const char *path)
{
	FILE *o = fopen(path, "wb");
	assert_non_null(o);
	for (int i = 0; i < r->count; i++) {
		fwrite(r->s[i], 1, r->n[i], o);
		fputc('\0', o);
	}
	fclose(o);
}

/* Parses "id id id\n" at *p; returns the count. */
static int parse_ids(char **p, int32_t *ids, int cap)
{
	int n = 0;
	char *s = *p;
	while (*s && *s != '\n') {
		char *e;
		long v = strtol(s, &e, 10);
		if (e == s)
			break;
		if (n < cap)
			ids[n] = (int32_t)v;
		n++;
		s = e;
		while (*s == ' ')
			s++;
	}
	if (*s == '\n')
		s++;
	*p = s;
	return n;
}

static void test_bpe_matches_hf(void **state)
{
	struct recs r = { 0 };
	char in[128], out[128], cmd[512];
	size_t reflen;
	int mism = 0, toks = 0;
	int32_t *ref = malloc(sizeof(*ref) * 200000);

	build_records(&r, 3000);
	snprintf(in, sizeof(in), "%s/bpe.in", fx.dir);
	snprintf(out, sizeof(out), "%s/bpe.out", fx.dir);
	write_records(&r, in);
	snprintf(cmd, sizeof(cmd), "%s tests/tools/tok_reference.py bpe '%s' %s %s",
		 python(), model_path(), in, out);
	run_cmd(cmd);
	char *txt = read_path(out, &reflen), *p = txt;

	for (int i = 0; i < r.count; i++) {
		for (int sp = 1; sp >= 0; sp--) {
			char tag = *p;
			assert_true(tag == (sp ? 'S' : 'N'));
			p += 2;
			int nref = parse_ids(&p, ref, 200000);
			int32_t *ids;
			int n = encode(fx.t, r.s[i], r.n[i], sp, &ids);
			toks += n;
			int at = 0;
			while (at < n && at < nref && ids[at] == ref[at])
				at++;
			if ((at < n || at < nref) && mism++ < 3) {
				fprintf(stderr, "mismatch, record %d (parse_special %d), token %d, text: \"%.200s\"\n",
					i, sp, at, r.s[i]);
				show_ids("ours", ids, n, at);
				show_ids("hf  ", ref, nref, at);
			}
			free(ids);
		}
	}
	fprintf(stderr, "bpe vs HF tokenizers: %d records, %.2f MB, %d tokens (x2 special modes), %d mismatches\n",
		r.count, r.bytes / 1e6, toks / 2, mism);
	assert_int_equal(mism, 0);
	free(txt);
	free(ref);
	recs_free(&r);
}

static void test_bpe_roundtrip_and_speed(void **state)
{
	struct recs r = { 0 };
	int32_t *ids;
	size_t len;

	double t0 = sw_now_s();
	int n = encode(fx.t, fx.corpus, fx.corpus_n, false, &ids);
	double s = sw_now_s() - t0;
	fprintf(stderr, "bpe encode: %.2f MB in %.3f s (%.1f MB/s), %d tokens\n",
		fx.corpus_n / 1e6, s, fx.corpus_n / 1e6 / s, n);
	char *d = decode(fx.t, ids, n, &len);
	assert_int_equal(len, fx.corpus_n);
	assert_memory_equal(d, fx.corpus, len);
	free(d);
	d = decode_stream(fx.t, ids, n, &len);
	assert_int_equal(len, fx.corpus_n);
	assert_memory_equal(d, fx.corpus, len);
	free(d);
	free(ids);

	build_records(&r, 2000);
	for (int i = 0; i < r.count; i++) {
		for (int sp = 0; sp < 2; sp++) {
			char *want = malloc(r.n[i] + 1);
			size_t wn = strip_tokenless(fx.t, r.s[i], r.n[i], want);
			n = encode(fx.t, r.s[i], r.n[i], sp, &ids);
			d = decode(fx.t, ids, n, &len);
			if (len != wn || memcmp(d, want, len))
				fail_msg("round trip (parse_special %d) of \"%s\" gave \"%s\"", sp, r.s[i], d);
			free(d);
			d = decode_stream(fx.t, ids, n, &len);
			if (len != wn || memcmp(d, want, len))
				fail_msg("streaming decode of \"%s\" gave \"%s\"", r.s[i], d);
			free(d);
			free(want);
			free(ids);
		}
	}
	recs_free(&r);
}

static void test_special_tokens(void **state)
{
	const rt_tokenizer *t = fx.t;
	int32_t ids[64];
	sw_err e = { 0 };
	const char *s = "<|im_start|>user\nhi<|im_end|>";

	assert_int_equal(rt_tokenizer_vocab(t), 49152);
	assert_int_equal(rt_tokenizer_kind(t), RT_TOK_BPE);
	assert_int_equal(rt_token_bos(t), 1);
	assert_int_equal(rt_token_eos(t), 2);
	assert_int_equal(rt_token_find(t, "<|im_start|>", 12), 1);
	assert_int_equal(rt_token_find(t, "<|im_end|>", 10), 2);
	assert_int_equal(rt_token_find(t, "no such token", 13), -1);
	assert_true(rt_token_is_eog(t, 2));
	assert_true(rt_token_is_eog(t, 0));  /* <|endoftext|> */
	assert_false(rt_token_is_eog(t, 1));
	assert_false(rt_token_is_eog(t, 100));
	assert_int_equal(rt_token_type(t, 1), RT_TT_CONTROL);
	assert_int_equal(rt_token_type(t, 100), RT_TT_NORMAL);
	assert_int_equal(rt_token_type(t, 49152), 0);
	assert_null(rt_token_piece(t, -1, &(size_t){ 0 }));
	assert_null(rt_token_piece(t, 49152, &(size_t){ 0 }));

	int n = rt_tokenize(t, s, strlen(s), false, true, ids, 64, &e);
	assert_true(n > 3);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[n - 1], 2);
	int m = rt_tokenize(t, s, strlen(s), false, false, ids, 64, &e);
	assert_true(m > n);
	for (int i = 0; i < m; i++)
		assert_true(ids[i] > 16);
	/* add_bos puts bos first even where the model does not ask for it */
	n = rt_tokenize(t, "hi", 2, true, false, ids, 64, &e);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 1);
}

static void test_edges(void **state)
{
	const rt_tokenizer *t = fx.t;
	int32_t ids[256];
	sw_err e = { 0 };
	/* invalid UTF-8 of every kind: lone continuation, overlong, surrogate,
	 * > U+10FFFF, truncated at the end, 0xFF */
	static const char bad[] = "\x80 a\xc0\xaf b\xed\xa0\x80 c\xf4\x90\x80\x80 d\xff\xfe e\xe2\x82";
	size_t len;

	assert_int_equal(rt_tokenize(t, "", 0, false, true, ids, 0, &e), 0);
	assert_int_equal(rt_tokenize(t, "", 0, false, true, NULL, 0, &e), 0);
	int n = rt_tokenize(t, bad, sizeof(bad) - 1, false, false, ids, 256, &e);
	assert_true(n > 0);
	char *d = decode(t, ids, n, &len), want[sizeof(bad)];
	size_t wn = strip_tokenless(t, bad, sizeof(bad) - 1, want);
	assert_true(wn < sizeof(bad) - 1); /* 0xC0 and 0xFF have no token */
	assert_int_equal(len, wn);
	assert_memory_equal(d, want, len);
	free(d);

	/* too small: SW_ERANGE with the count, the first cap ids written */
	const char *s = "The quick brown fox jumps over the lazy dog";
	int full = rt_tokenize(t, s, strlen(s), false, false, ids, 256, &e);
	assert_int_equal(full, 9);
	int32_t few[4] = { -7, -7, -7, -7 };
	memset(&e, 0, sizeof(e));
	assert_int_equal(rt_tokenize(t, s, strlen(s), false, false, few, 3, &e), SW_ERANGE);
	assert_int_equal(e.code, SW_ERANGE);
	assert_non_null(strstr(e.msg, "needs 9 tokens"));
	assert_memory_equal(few, ids, 3 * sizeof(*few));
	assert_int_equal(few[3], -7);
	assert_int_equal(rt_tokenize(t, s, strlen(s), false, false, NULL, 0, &e), SW_ERANGE);
}

/* Token whose piece is the single byte b. */
static int32_t byte_token(const rt_tokenizer *t, uint8_t b)
{
	for (int32_t i = 0; i < rt_tokenizer_vocab(t); i++) {
		size_t l;
		const char *p = rt_token_piece(t, i, &l);
		if (l == 1 && (uint8_t)p[0] == b)
			return i;
	}
	fail_msg("no token for byte 0x%02x", b);
	return -1;
}

static void test_detok_stream(void **state)
{
	const rt_tokenizer *t = fx.t;
	rt_detok d;
	char o[64];
	int32_t e2 = byte_token(t, 0xE2), x82 = byte_token(t, 0x82), xac = byte_token(t, 0xAC);
	int32_t x80 = byte_token(t, 0x80), c3 = byte_token(t, 0xC3), A = byte_token(t, 'A');
	int32_t f0 = byte_token(t, 0xF0), x9f = byte_token(t, 0x9F);

	rt_detok_init(&d);
	assert_int_equal(rt_detok_push(&d, t, e2, o, sizeof(o)), 0);   /* held back */
	assert_int_equal(rt_detok_push(&d, t, x82, o, sizeof(o)), 0);
	assert_int_equal(rt_detok_push(&d, t, xac, o, sizeof(o)), 3);
	assert_memory_equal(o, "\xe2\x82\xac", 3);                     /* euro sign */
	assert_int_equal(rt_detok_push(&d, t, x80, o, sizeof(o)), 3);
	assert_memory_equal(o, "\xef\xbf\xbd", 3);                     /* lone continuation */
	assert_int_equal(rt_detok_push(&d, t, c3, o, sizeof(o)), 0);
	assert_int_equal(rt_detok_push(&d, t, A, o, sizeof(o)), 4);    /* cut short, then A */
	assert_memory_equal(o, "\xef\xbf\xbd" "A", 4);
	assert_int_equal(rt_detok_push(&d, t, f0, o, sizeof(o)), 0);
	assert_int_equal(rt_detok_push(&d, t, x9f, o, sizeof(o)), 0);
	assert_int_equal(rt_detok_flush(&d, o, sizeof(o)), 3);        /* one U+FFFD for the subpart */
	assert_memory_equal(o, "\xef\xbf\xbd", 3);
	assert_int_equal(rt_detok_flush(&d, o, sizeof(o)), 0);
	/* E0 80: 80 cannot follow E0, so two replacement characters */
	assert_int_equal(rt_detok_push(&d, t, byte_token(t, 0xE0), o, sizeof(o)), 0);
	assert_int_equal(rt_detok_push(&d, t, x80, o, sizeof(o)), 6);
	assert_int_equal(rt_detok_push(&d, t, -1, o, sizeof(o)), SW_EINVAL);
	assert_int_equal(rt_detok_push(&d, t, A, o, 2), SW_ERANGE);

	/* pieces that end mid-character: emoji split across byte tokens */
	int32_t ids[] = { A, f0, x9f, byte_token(t, 0x98), byte_token(t, 0x80), A };
	size_t len;
	char *s = decode_stream(t, ids, 6, &len);
	assert_int_equal(len, 6);
	assert_memory_equal(s, "A\xf0\x9f\x98\x80" "A", 6);
	free(s);
}

static void test_chat_format(void **state)
{
	char out[512];
	sw_err e = { 0 };
	const char *want = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
			   "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
	int n = rt_chat_format(fx.t, "What is 2+2?", out, sizeof(out), &e);
	assert_int_equal(n, (int)strlen(want));
	assert_string_equal(out, want);
	assert_int_equal(rt_chat_format(fx.t, "What is 2+2?", out, 20, &e), SW_ERANGE);
}

/* Gemma 3's chat turns (runtime/formats/chat_gemma.c) from a tiny
 * SentencePiece vocabulary whose chat_template is the gemma-3 instruct
 * files' Jinja text: the strings below are that template's rendering with
 * add_generation_prompt (bos_token, the system message folded into the
 * first user turn with "\n\n", contents trimmed, assistant -> model),
 * written out by hand from it; the prompt tokenized with special tokens
 * parsed gives <bos> and the turn markers as their ids; roles that do not
 * alternate are refused as the template raises, naming the message. */
static const char GEMMA_TEMPLATE[] =
	"{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- set first_user_prefix = "
	"messages[0]['content'] + '\\n\\n' -%}\n    {%- set loop_messages = messages[1:] -%}\n{%- else "
	"-%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- "
	"endif -%}\n{%- for message in loop_messages -%}\n    {%- if (message['role'] == 'user') != "
	"(loop.index0 % 2 == 0) -%}\n        {{ raise_exception(\"Conversation roles must alternate "
	"user/assistant/user/assistant/...\") }}\n    {%- endif -%}\n    {%- if (message['role'] == "
	"'assistant') -%}\n        {%- set role = \"model\" -%}\n    {%- else -%}\n        {%- set role = "
	"message['role'] -%}\n    {%- endif -%}\n    {{ '<start_of_turn>' + role + '\\n' + "
	"(first_user_prefix if loop.first else \"\") }}\n    {{ message['content'] | trim }}\n    {{ "
	"'<end_of_turn>\\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n    "
	"{{'<start_of_turn>model\\n'}}\n{%- endif -%}\n";

static void test_chat_gemma(void **state)
{
	(void)state;
	enum { NB = 256, NS = 5 };
	static const char *const special[NS] = {"<unk>", "<bos>", "<eos>", "<start_of_turn>",
	                                        "<end_of_turn>"};
	const char *toks[NS + NB];
	size_t lens[NS + NB];
	int32_t types[NS + NB];
	float scores[NS + NB];
	char bytes[NB][8];
	for (int i = 0; i < NS; i++) {
		toks[i] = special[i];
		lens[i] = strlen(special[i]);
		types[i] = i ? RT_TT_CONTROL : RT_TT_UNKNOWN;
		scores[i] = 0;
	}
	for (int b = 0; b < NB; b++) {
		snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
		toks[NS + b] = bytes[b];
		lens[NS + b] = strlen(bytes[b]);
		types[NS + b] = RT_TT_BYTE;
		scores[NS + b] = 0;
	}
	sw_err e = { 0 };
	rt_tok_desc d = {
		.kind = RT_TOK_SPM, .n_vocab = NS + NB, .tokens = toks, .token_lens = lens,
		.types = types, .scores = scores, .bos = 1, .eos = 2, .unk = 0, .eot = 4,
		.add_bos = true, .chat_template = GEMMA_TEMPLATE,
		.chat_template_len = sizeof(GEMMA_TEMPLATE) - 1,
	};
	rt_tokenizer *t = rt_tokenizer_new(&d, &e);
	if (!t)
		fail_msg("%s", e.msg);
	char out[512];
	assert_int_equal(rt_chat_format(t, "  Hi there\n", out, sizeof(out), &e),
	                 (int)strlen("<bos><start_of_turn>user\nHi there<end_of_turn>\n"
	                             "<start_of_turn>model\n"));
	assert_string_equal(out, "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
	const char *roles[] = {"system", "user", "assistant", "user"};
	const char *cont[] = {"Be brief.", "What is 2+2? ", "4", "\tAnd 3+3?"};
	assert_true(rt_chat_format_msgs(t, roles, cont, 4, out, sizeof(out), &e) > 0);
	assert_string_equal(out, "<bos><start_of_turn>user\nBe brief.\n\nWhat is 2+2?<end_of_turn>\n"
	                         "<start_of_turn>model\n4<end_of_turn>\n"
	                         "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n");
	/* the markers are their ids, the text between them byte tokens */
	int32_t ids[256];
	int n = rt_tokenize(t, out, strlen(out), false, true, ids, 256, &e);
	assert_true(n > 8);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 3);
	int turns = 0, ends = 0;
	for (int i = 0; i < n; i++) {
		turns += ids[i] == 3;
		ends += ids[i] == 4;
	}
	assert_int_equal(turns, 4);
	assert_int_equal(ends, 3);
	/* roles the template refuses: two users, an assistant first */
	const char *bad1[] = {"user", "user"}, *bad2[] = {"system", "assistant"};
	assert_int_equal(rt_chat_format_msgs(t, bad1, cont + 1, 2, out, sizeof(out), &e), SW_EINVAL);
	assert_non_null(strstr(e.msg, "message 1"));
	assert_non_null(strstr(e.msg, "alternating"));
	assert_int_equal(rt_chat_format_msgs(t, bad2, cont, 2, out, sizeof(out), &e), SW_EINVAL);
	assert_non_null(strstr(e.msg, "\"assistant\""));
	assert_non_null(strstr(e.msg, "expected \"user\""));
	assert_int_equal(rt_chat_format(t, "Hi", out, 20, &e), SW_ERANGE);
	assert_true(rt_tokenizer_has_chat(t));
	rt_tokenizer_free(t);
	/* the same vocabulary without a template (a base Gemma file: the markers
	 * are in its vocabulary, it was not trained on them): no chat; the CLI's
	 * default is plain text and --chat is refused, saying why */
	d.chat_template = NULL;
	d.chat_template_len = 0;
	if (!(t = rt_tokenizer_new(&d, &e)))
		fail_msg("%s", e.msg);
	assert_false(rt_tokenizer_has_chat(t));
	assert_int_equal(rt_chat_format(t, "Hi", out, sizeof(out), &e), SW_ENOTSUP);
	assert_non_null(strstr(e.msg, "no chat template"));
	assert_non_null(strstr(e.msg, "--no-chat"));
	rt_tokenizer_free(t);
}

static void test_unknown_pre(void **state)
{
	const char *toks[] = { "a", "b" };
	size_t lens[] = { 1, 1 };
	sw_err e = { 0 };
	rt_tok_desc d = {
		.kind = RT_TOK_BPE, .pre = "qwen9", .n_vocab = 2, .tokens = toks,
		.token_lens = lens, .bos = -1, .eos = -1, .unk = -1, .eot = -1,
	};
	assert_null(rt_tokenizer_new(&d, &e));
	assert_int_equal(e.code, SW_ENOTSUP);
	assert_non_null(strstr(e.msg, "tokenizer.ggml.pre"));
	assert_non_null(strstr(e.msg, "qwen9"));
}

/* ---- SentencePiece ------------------------------------------------------ */

static void test_spm_matches_sentencepiece(void **state)
{
	char train[128], in[128], out[128], gg[160], cmd[640];
	struct recs r = { 0 };
	sw_err e = { 0 };
	size_t reflen;
	int mism = 0, toks = 0, bytefb = 0;
	int32_t ref[4096];
	uint64_t st = 12345;
	char buf[1024];

	/* train on the first 400 KB, check on lines after it */
	snprintf(train, sizeof(train), "%s/spm_train.txt", fx.dir);
	FILE *o = fopen(train, "wb");
	assert_non_null(o);
	fwrite(fx.corpus, 1, 400000, o);
	fclose(o);
	const char *c = fx.corpus + 400000, *end = fx.corpus + fx.corpus_n;
	c = memchr(c, '\n', (size_t)(end - c)) + 1;
	for (int i = 0; i < 4000 && c < end; i++) {
		const char *nl = memchr(c, '\n', (size_t)(end - c));
		size_t n = nl ? (size_t)(nl - c) : (size_t)(end - c);
		recs_add(&r, c, n);
		c += n + 1;
	}
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		recs_add(&r, odd[i], strlen(odd[i]));
	for (int i = 0; i < 500; i++) {
		size_t n = random_text(&st, buf);
		recs_add(&r, buf, n);
	}
	snprintf(in, sizeof(in), "%s/spm.in", fx.dir);
	snprintf(out, sizeof(out), "%s/spm.out", fx.dir);
	write_records(&r, in);
	snprintf(cmd, sizeof(cmd), "%s tests/tools/tok_reference.py spm %s %s %s %s",
		 python(), train, fx.dir, in, out);
	run_cmd(cmd);

	snprintf(gg, sizeof(gg), "%s/spm.gguf", fx.dir);
	gguf_file *f = gguf_open(gg, &e);
	if (!f)
		fail_msg("%s", e.msg);
	rt_tokenizer *t = rt_tokenizer_from_gguf(f, &e);
	if (!t)
		fail_msg("%s", e.msg);
	assert_int_equal(rt_tokenizer_kind(t), RT_TOK_SPM);
	assert_int_equal(rt_tokenizer_vocab(t), 2000);

	char *txt = read_path(out, &reflen), *p = txt;
	for (int i = 0; i < r.count; i++) {
		int nref = parse_ids(&p, ref, 4096);
		int32_t *ids;
		int n = encode(t, r.s[i], r.n[i], false, &ids);
		toks += n;
		for (int k = 0; k < n; k++)
			bytefb += rt_token_type(t, ids[k]) == RT_TT_BYTE;
		int at = 0;
		while (at < n && at < nref && ids[at] == ref[at])
			at++;
		if ((at < n || at < nref) && mism++ < 3) {
			fprintf(stderr, "spm mismatch, record %d, token %d, text: \"%.200s\"\n", i, at, r.s[i]);
			show_ids("ours", ids, n, at);
			show_ids("spm ", ref, nref, at);
		}
		free(ids);
	}
	fprintf(stderr, "spm vs sentencepiece: %d records, %.2f MB, %d tokens (%d byte fallback), %d mismatches\n",
		r.count, r.bytes / 1e6, toks, bytefb, mism);
	assert_int_equal(mism, 0);
	assert_true(bytefb > 100);

	/* pieces: the dummy prefix decodes to a space, byte tokens to bytes */
	int32_t *ids;
	size_t len;
	int n = encode(t, "caf\xc3\xa9 and", 9, false, &ids);
	char *d = decode(t, ids, n, &len);
	assert_string_equal(d, " caf\xc3\xa9 and");
	free(d);
	free(ids);

	free(txt);
	recs_free(&r);
	rt_tokenizer_free(t);
	gguf_close(f);
}

/* Gemma 3's tokenizer (SentencePiece BPE, 262144 ids, byte fallback, no
 * dummy prefix) against sentencepiece itself on a ModelProto of the GGUF's
 * own vocabulary (tests/tools/tok_reference.py spm-gguf), over the corpus,
 * the odd strings and 3000 random ones (special tokens not parsed:
 * sentencepiece reads "<bos>" as text too); then decoding gives the text
 * back byte for byte. */
static void test_gemma_matches_sentencepiece(void **state)
{
	(void)state;
	const char *gp = getenv("SW_GEMMA_MODEL");
	if (!gp)
		gp = "models/cache/gemma-3-270m-q4_k_m.gguf";
	if (access(gp, R_OK)) {
		printf("  %s absent (make model-gemma): the Gemma 3 tokenizer check is skipped\n", gp);
		skip();
	}
	sw_err e = { 0 };
	gguf_file *f = gguf_open(gp, &e);
	if (!f)
		fail_msg("%s", e.msg);
	rt_tokenizer *t = rt_tokenizer_from_gguf(f, &e);
	if (!t)
		fail_msg("%s", e.msg);
	assert_int_equal(rt_tokenizer_vocab(t), 262144);
	assert_int_equal(rt_tokenizer_kind(t), RT_TOK_SPM);
	struct recs r = { 0 };
	char in[128], out[128], cmd[768];
	size_t reflen;
	int mism = 0, toks = 0;
	int32_t *ref = malloc(sizeof(*ref) * 400000);
	build_records(&r, 3000);
	snprintf(in, sizeof(in), "%s/gemma.in", fx.dir);
	snprintf(out, sizeof(out), "%s/gemma.out", fx.dir);
	write_records(&r, in);
	snprintf(cmd, sizeof(cmd), "%s tests/tools/tok_reference.py spm-gguf '%s' %s %s", python(), gp, in, out);
	double t0 = sw_now_s();
	run_cmd(cmd);
	double tref = sw_now_s() - t0;
	char *txt = read_path(out, &reflen), *p = txt;
	t0 = sw_now_s();
	for (int i = 0; i < r.count; i++) {
		int nref = parse_ids(&p, ref, 400000);
		int32_t *ids;
		int n = encode(t, r.s[i], r.n[i], false, &ids);
		toks += n;
		int at = 0;
		while (at < n && at < nref && ids[at] == ref[at])
			at++;
		if ((at < n || at < nref) && mism++ < 3) {
			fprintf(stderr, "gemma mismatch, record %d, token %d, text: \"%.200s\"\n", i, at, r.s[i]);
			show_ids("ours", ids, n, at);
			show_ids("spm ", ref, nref, at);
		}
		size_t len;
		char *d = decode(t, ids, n, &len);
		if (len != r.n[i] || memcmp(d, r.s[i], len))
			fail_msg("gemma: record %d does not decode back to its text", i);
		free(d);
		free(ids);
	}
	double tours = sw_now_s() - t0;
	printf("  gemma vs sentencepiece: %d records, %.2f MB, %d tokens, %d mismatches (ours %.1f s, "
	       "sentencepiece with its setup %.1f s)\n", r.count, r.bytes / 1e6, toks, mism, tours, tref);
	assert_int_equal(mism, 0);
	free(txt);
	free(ref);
	recs_free(&r);
	rt_tokenizer_free(t);
	gguf_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bpe_matches_hf),
		cmocka_unit_test(test_bpe_roundtrip_and_speed),
		cmocka_unit_test(test_special_tokens),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_detok_stream),
		cmocka_unit_test(test_chat_format),
		cmocka_unit_test(test_chat_gemma),
		cmocka_unit_test(test_unknown_pre),
		cmocka_unit_test(test_spm_matches_sentencepiece),
		cmocka_unit_test(test_gemma_matches_sentencepiece),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
