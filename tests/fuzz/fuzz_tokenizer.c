/* libFuzzer target for runtime/tokenizer.c: tokenizes arbitrary bytes with
 * and without special-token parsing through the real model's byte-level BPE
 * (SW_MODEL, else the small cut in tests/fuzz/data/tok_bpe.gguf) and a small
 * SentencePiece vocabulary (tests/fuzz/data/tok_spm.gguf), decodes back in
 * one go and streaming, and checks the round trips that must hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"

static rt_tokenizer *bpe, *spm;
static int bpe_has_byte[256];

static rt_tokenizer *load(const char *path)
{
	sw_err err = { 0 };
	gguf_file *f = gguf_open(path, &err);
	rt_tokenizer *t = f ? rt_tokenizer_from_gguf(f, &err) : NULL;
	gguf_close(f);
	if (!t) {
		fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
		abort();
	}
	return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *m = getenv("SW_MODEL");
	FILE *probe;

	if (!m)
		m = "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	probe = fopen(m, "rb");
	if (probe)
		fclose(probe);
	else
		m = "tests/fuzz/data/tok_bpe.gguf";
	bpe = load(m);
	spm = load("tests/fuzz/data/tok_spm.gguf");
	for (int32_t i = 0; i < rt_tokenizer_vocab(bpe); i++) {
		size_t l;
		const char *p = rt_token_piece(bpe, i, &l);
		if (l == 1 && rt_token_type(bpe, i) == RT_TT_NORMAL)
			bpe_has_byte[(uint8_t)p[0]] = 1;
	}
	return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n)
{
	uint32_t cp;
	for (size_t i = 0; i < n;) {
		int l = sw_utf8_next(s + i, n - i, &cp);
		if (l <= 0)
			return false;
		i += (size_t)l;
	}
	return true;
}

/* Full decode into out (cap bytes); aborts if it does not fit. */
static size_t decode(const rt_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap)
{
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		size_t l;
		const char *p = rt_token_piece(t, ids[i], &l);
		if (!p || k + l > cap)
			abort();
		memcpy(out + k, p, l);
		k += l;
	}
	return k;
}

static size_t decode_stream(const rt_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap)
{
	rt_detok d;
	char buf[2048];
	size_t k = 0;
	rt_detok_init(&d);
	for (int i = 0; i <= n; i++) {
		int m = i < n ? rt_detok_push(&d, t, ids[i], buf, sizeof(buf)) : rt_detok_flush(&d, buf, sizeof(buf));
		if (m < 0 || k + (size_t)m > cap)
			abort();
		memcpy(out + k, buf, (size_t)m);
		k += (size_t)m;
	}
	return k;
}

static void check(const rt_tokenizer *t, const uint8_t *s, size_t n, bool special, bool is_spm)
{
	sw_err err = { 0 };
	int cap = (int)n + 2;
	int32_t *ids = malloc((size_t)cap * sizeof(*ids));
	size_t dcap = 3 * (n + 8) + 64;
	char *a = malloc(dcap), *b = malloc(dcap), *want = malloc(n + 4);
	bool utf8 = valid_utf8(s, n);
	size_t wn = 0;

	int k = rt_tokenize(t, (const char *)s, n, false, special, ids, cap, &err);
	if (k < 0 || k > cap)
		abort();
	/* a buffer one short must give SW_ERANGE, never a silent cut */
	if (k > 0 && rt_tokenize(t, (const char *)s, n, false, special, ids, k - 1, &err) != SW_ERANGE)
		abort();
	for (int i = 0; i < k; i++)
		if (ids[i] < 0 || ids[i] >= rt_tokenizer_vocab(t))
			abort();

	size_t an = decode(t, ids, k, a, dcap);
	size_t bn = decode_stream(t, ids, k, b, dcap);
	/* streaming equals the full decode whenever the full decode is valid */
	if (valid_utf8((const uint8_t *)a, an) && (an != bn || memcmp(a, b, an)))
		abort();

	if (is_spm) {
		/* byte fallback covers every byte: the text comes back after the
		 * dummy prefix, with any U+2581 in it turned into a space (it is
		 * sentencepiece's own space mark) */
		if (!special && n > 0) {
			want[wn++] = ' ';
			for (size_t i = 0; i < n; i++) {
				if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
					want[wn++] = ' ';
					i += 2;
				} else {
					want[wn++] = (char)s[i];
				}
			}
			if (an != wn || memcmp(a, want, an))
				abort();
		}
	} else if (utf8) {
		for (size_t i = 0; i < n; i++)
			if (bpe_has_byte[s[i]])
				want[wn++] = (char)s[i];
		if (an != wn || memcmp(a, want, an))
			abort();
	}
	free(ids);
	free(a);
	free(b);
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 16)
		return 0;
	check(bpe, data, size, false, false);
	check(bpe, data, size, true, false);
	check(spm, data, size, false, true);
	check(spm, data, size, true, true);
	return 0;
}
