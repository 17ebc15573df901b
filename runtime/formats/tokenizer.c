/* Tokenizer: byte-level BPE (GPT-2 / SmolLM pre-tokenizer, merges by rank)
 * and SentencePiece BPE (merges by score, byte fallback), both from GGUF
 * vocabularies; streaming detokenizer; chatml prompt (Gemma's turns:
 * chat_gemma.c). The pre-tokenizer
 * regex is a hand-written matcher over code points, not a regex engine.
 * Exactness target: HF tokenizers / sentencepiece ids on the same vocab. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/utf8.h"
#include "chat_gemma.h"
#include "unicode_tables.h"

enum { PRE_GPT2 = 0, PRE_SMOLLM = 1 };
enum { CLS_OTHER = 0, CLS_LETTER = 1, CLS_NUMBER = 2, CLS_SPACE = 3 };

struct merge_slot {
	uint64_t key;    /* (left id << 32) | right id; UINT64_MAX = empty */
	int32_t rank;
	int32_t result;
};

#define MAX_EOG 16

struct rt_tokenizer {
	enum rt_tok_kind kind;
	int pre;                   /* PRE_*, BPE only */
	int n_vocab;
	char *text_pool;           /* vocabulary texts, back to back */
	uint32_t *text_off;        /* (n_vocab + 1) */
	char *piece_pool;          /* decoded bytes of each token */
	uint32_t *piece_off;       /* (n_vocab + 1) */
	uint8_t *types;            /* (n_vocab) enum rt_tok_type */
	float *scores;             /* (n_vocab), SPM only */
	int32_t *vhash;            /* text -> id, open addressing, -1 = empty */
	uint32_t vhash_mask;
	struct merge_slot *mhash;  /* BPE: id pair -> rank and result */
	uint32_t mhash_mask;
	int32_t byte_tok[256];     /* BPE: token of byte b; SPM: <0xXX>; -1 if none */
	int32_t *special;          /* ids matchable in text, longest first */
	int n_special;
	uint8_t special_first[32]; /* bitset of the first bytes of specials */
	int32_t bos, eos, unk;
	int32_t eog[MAX_EOG];
	int n_eog;
	bool add_space_prefix;
	bool add_bos;
	bool chatml;
	bool chat_gemma;           /* Gemma's <start_of_turn> turns (chat_gemma.c) */
	bool has_template;         /* the file has a chat template */
	char *chat_system;         /* default system prompt, NULL if none */
};

/* ---- Unicode classes (the UTF-8 codec is core/utf8.h) ---- */

static bool in_ranges(const uint32_t (*r)[2], int n, uint32_t cp)
{
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (cp < r[mid][0])
			hi = mid - 1;
		else if (cp > r[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static int cp_class(uint32_t cp)
{
	if (cp < 0x80) {
		if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
			return CLS_LETTER;
		if (cp >= '0' && cp <= '9')
			return CLS_NUMBER;
		if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
			return CLS_SPACE;
		return CLS_OTHER;
	}
	if (in_ranges(uni_letter_ranges, uni_letter_ranges_n, cp))
		return CLS_LETTER;
	if (in_ranges(uni_number_ranges, uni_number_ranges_n, cp))
		return CLS_NUMBER;
	if (in_ranges(uni_space_ranges, uni_space_ranges_n, cp))
		return CLS_SPACE;
	return CLS_OTHER;
}

/* One unit of text at s[i..end): a valid UTF-8 sequence, or a single byte
 * when invalid or cut short (those count as "other" characters). */
static size_t unit_at(const uint8_t *s, size_t end, size_t i, int *cls)
{
	uint32_t cp;
	int l = sw_utf8_next(s + i, end - i, &cp);
	if (l <= 0) {
		*cls = CLS_OTHER;
		return 1;
	}
	*cls = cp_class(cp);
	return (size_t)l;
}

/* ---- hashing ---- */

static uint32_t hash_pair(uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
}

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t c = 16;
	while (c < n)
		c <<= 1;
	return c;
}

static const char *tok_text(const rt_tokenizer *t, int32_t id, size_t *len)
{
	*len = t->text_off[id + 1] - t->text_off[id];
	return t->text_pool + t->text_off[id];
}

int32_t rt_token_find(const rt_tokenizer *t, const char *text, size_t n)
{
	uint32_t h = sw_fnv1a32(text, n) & t->vhash_mask;
	for (;; h = (h + 1) & t->vhash_mask) {
		int32_t id = t->vhash[h];
		size_t l;
		if (id < 0)
			return -1;
		const char *s = tok_text(t, id, &l);
		if (l == n && memcmp(s, text, n) == 0)
			return id;
	}
}

static const struct merge_slot *merge_find(const rt_tokenizer *t, int32_t a, int32_t b)
{
	uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
	uint32_t h = hash_pair(key) & t->mhash_mask;
	for (;; h = (h + 1) & t->mhash_mask) {
		const struct merge_slot *m = &t->mhash[h];
		if (m->key == key)
			return m;
		if (m->key == UINT64_MAX)
			return NULL;
	}
}

/* ---- GPT-2 byte <-> unicode table ---- */

/* bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other
 * 68 bytes to U+0100.. in byte order, so every byte is a visible character. */
static bool byte_is_direct(int b)
{
	return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static void byte_unicode_tables(uint32_t b2u[256], int16_t u2b[324])
{
	int n = 0;
	for (int i = 0; i < 324; i++)
		u2b[i] = -1;
	for (int b = 0; b < 256; b++) {
		b2u[b] = byte_is_direct(b) ? (uint32_t)b : 256u + (uint32_t)n++;
		u2b[b2u[b]] = (int16_t)b;
	}
}

/* ---- construction ---- */

static bool is_special_type(int ty)
{
	return ty == RT_TT_CONTROL || ty == RT_TT_USER_DEFINED || ty == RT_TT_UNKNOWN;
}

/* Decoded bytes of token id into o (room for its text length: decoding
 * never grows a token). */
static size_t piece_decode(const rt_tokenizer *t, int32_t id, const int16_t u2b[324], char *o)
{
	size_t n, k = 0;
	const char *s = tok_text(t, id, &n);
	int ty = t->types[id];

	if (is_special_type(ty)) {
		memcpy(o, s, n);
		return n;
	}
	if (t->kind == RT_TOK_SPM) {
		unsigned v;
		if (ty == RT_TT_BYTE && n == 6 && sscanf(s, "<0x%2X>", &v) == 1) {
			o[0] = (char)v;
			return 1;
		}
		for (size_t i = 0; i < n; i++) {
			if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
				o[k++] = ' ';
				i += 2;
			} else {
				o[k++] = s[i];
			}
		}
		return k;
	}
	/* byte-level: every character stands for one byte; a character outside
	 * the table (a malformed vocabulary) is kept as it is */
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int l = sw_utf8_next((const uint8_t *)s + i, n - i, &cp);
		if (l > 0 && cp < 324 && u2b[cp] >= 0) {
			o[k++] = (char)u2b[cp];
			i += (size_t)l;
		} else {
			size_t m = l > 0 ? (size_t)l : 1;
			memcpy(o + k, s + i, m);
			k += m;
			i += m;
		}
	}
	return k;
}

static int cmp_special_len(const void *a, const void *b, void *tv)
{
	const rt_tokenizer *t = tv;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	size_t lx = t->text_off[x + 1] - t->text_off[x];
	size_t ly = t->text_off[y + 1] - t->text_off[y];
	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void eog_add(rt_tokenizer *t, int32_t id)
{
	if (id < 0 || id >= t->n_vocab || t->n_eog == MAX_EOG)
		return;
	for (int i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return;
	t->eog[t->n_eog++] = id;
}

/* Finds the default system prompt in a chatml template: the text after
 * "<|im_start|>system" and a newline (real or written as \n) up to
 * "<|im_end|>". Templates that build it from a variable give none. */
static int chat_template_parse(rt_tokenizer *t, const char *tpl, size_t n, sw_err *err)
{
	static const char start[] = "<|im_start|>system";
	static const char end[] = "<|im_end|>";
	const char *p, *q;
	size_t i;

	t->chatml = memmem(tpl, n, "<|im_start|>", 12) != NULL;
	t->chat_gemma = !t->chatml && memmem(tpl, n, "<start_of_turn>", 15) != NULL;
	p = memmem(tpl, n, start, sizeof(start) - 1);
	if (!p)
		return 0;
	p += sizeof(start) - 1;
	if (p < tpl + n && *p == '\n')
		p++;
	else if (p + 1 < tpl + n && p[0] == '\\' && p[1] == 'n')
		p += 2;
	else
		return 0;
	q = memmem(p, (size_t)(tpl + n - p), end, sizeof(end) - 1);
	if (!q || memchr(p, '\'', (size_t)(q - p)) || memchr(p, '{', (size_t)(q - p)))
		return 0;
	t->chat_system = malloc((size_t)(q - p) + 1);
	if (!t->chat_system)
		return sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
	for (i = 0; p < q; p++)
		t->chat_system[i++] = *p;
	t->chat_system[i] = '\0';
	return 0;
}

static int build_merges(rt_tokenizer *t, const rt_tok_desc *d, sw_err *err)
{
	t->mhash_mask = pow2_at_least((uint64_t)d->n_merges * 2 + 1) - 1;
	t->mhash = malloc(((size_t)t->mhash_mask + 1) * sizeof(*t->mhash));
	if (!t->mhash)
		return sw_errf(err, SW_ENOMEM, "tokenizer: out of memory for %d merges", d->n_merges);
	for (uint32_t i = 0; i <= t->mhash_mask; i++)
		t->mhash[i].key = UINT64_MAX;

	for (int r = 0; r < d->n_merges; r++) {
		const char *m = d->merges[r];
		size_t n = d->merge_lens[r];
		/* split at the first space after the first byte: a left part is
		 * never empty, and byte-level texts hold no spaces */
		const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
		if (!sp)
			return sw_errf(err, SW_EINVAL, "tokenizer.ggml.merges[%d]: \"%.*s\" has no space separating two tokens",
				       r, (int)(n > 64 ? 64 : n), m);
		size_t la = (size_t)(sp - m), lb = n - la - 1;
		int32_t a = rt_token_find(t, m, la);
		int32_t b = rt_token_find(t, sp + 1, lb);
		if (a < 0 || b < 0)
			continue; /* HF refuses such files; llama.cpp skips the merge */
		char buf[512];
		if (la + lb > sizeof(buf))
			continue;
		memcpy(buf, m, la);
		memcpy(buf + la, sp + 1, lb);
		int32_t res = rt_token_find(t, buf, la + lb);
		if (res < 0)
			continue;
		uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
		uint32_t h = hash_pair(key) & t->mhash_mask;
		while (t->mhash[h].key != UINT64_MAX && t->mhash[h].key != key)
			h = (h + 1) & t->mhash_mask;
		if (t->mhash[h].key == key)
			continue; /* a duplicate merge: the first (lowest) rank wins */
		t->mhash[h].key = key;
		t->mhash[h].rank = r;
		t->mhash[h].result = res;
	}
	return 0;
}

rt_tokenizer *rt_tokenizer_new(const rt_tok_desc *d, sw_err *err)
{
	rt_tokenizer *t;
	uint32_t b2u[256];
	int16_t u2b[324];
	uint64_t total = 0;
	int rc;

	if (d->kind != RT_TOK_BPE && d->kind != RT_TOK_SPM) {
		sw_errf(err, SW_ENOTSUP, "tokenizer: unknown kind %d", (int)d->kind);
		return NULL;
	}
	if (d->n_vocab <= 0 || d->n_vocab > (1 << 24)) {
		sw_errf(err, SW_EINVAL, "tokenizer.ggml.tokens: %d tokens, expected 1..%d", d->n_vocab, 1 << 24);
		return NULL;
	}
	if (d->kind == RT_TOK_SPM && !d->scores) {
		sw_errf(err, SW_EINVAL, "tokenizer.ggml.scores: required by a SentencePiece (llama) vocabulary");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
		return NULL;
	}
	t->kind = d->kind;
	t->n_vocab = d->n_vocab;
	t->add_space_prefix = d->add_space_prefix;
	t->add_bos = d->add_bos;
	t->pre = PRE_GPT2;
	if (d->kind == RT_TOK_BPE && d->pre) {
		if (strcmp(d->pre, "smollm") == 0)
			t->pre = PRE_SMOLLM;
		else if (strcmp(d->pre, "gpt2") != 0 && strcmp(d->pre, "default") != 0) {
			sw_errf(err, SW_ENOTSUP, "tokenizer.ggml.pre = \"%s\": unsupported pre-tokenizer (supported: smollm, gpt2, default)", d->pre);
			goto out_free;
		}
	}

	for (int i = 0; i < d->n_vocab; i++)
		total += d->token_lens[i];
	if (total > UINT32_MAX / 2) {
		sw_errf(err, SW_EINVAL, "tokenizer.ggml.tokens: %llu bytes of text, too large", (unsigned long long)total);
		goto out_free;
	}
	t->text_pool = malloc(total + 1);
	t->piece_pool = malloc(total + 1);
	t->text_off = malloc(((size_t)d->n_vocab + 1) * sizeof(*t->text_off));
	t->piece_off = malloc(((size_t)d->n_vocab + 1) * sizeof(*t->piece_off));
	t->types = malloc((size_t)d->n_vocab * sizeof(*t->types));
	t->vhash_mask = pow2_at_least((uint64_t)d->n_vocab * 2 + 1) - 1;
	t->vhash = malloc(((size_t)t->vhash_mask + 1) * sizeof(*t->vhash));
	if (!t->text_pool || !t->piece_pool || !t->text_off || !t->piece_off || !t->types || !t->vhash) {
		sw_errf(err, SW_ENOMEM, "tokenizer: out of memory for %d tokens", d->n_vocab);
		goto out_free;
	}
	if (d->scores) {
		t->scores = malloc((size_t)d->n_vocab * sizeof(*t->scores));
		if (!t->scores) {
			sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
			goto out_free;
		}
		memcpy(t->scores, d->scores, (size_t)d->n_vocab * sizeof(*t->scores));
	}
	memset(t->vhash, 0xFF, ((size_t)t->vhash_mask + 1) * sizeof(*t->vhash));
	total = 0;
	for (int i = 0; i < d->n_vocab; i++) {
		int ty = d->types ? d->types[i] : RT_TT_NORMAL;
		t->types[i] = (ty >= RT_TT_NORMAL && ty <= RT_TT_BYTE) ? (uint8_t)ty : RT_TT_NORMAL;
		t->text_off[i] = (uint32_t)total;
		memcpy(t->text_pool + total, d->tokens[i], d->token_lens[i]);
		total += d->token_lens[i];
	}
	t->text_off[d->n_vocab] = (uint32_t)total;
	/* a text present twice maps to its first id */
	for (int i = 0; i < d->n_vocab; i++) {
		size_t l;
		const char *s = tok_text(t, i, &l);
		if (rt_token_find(t, s, l) >= 0)
			continue;
		uint32_t h = sw_fnv1a32(s, l) & t->vhash_mask;
		while (t->vhash[h] >= 0)
			h = (h + 1) & t->vhash_mask;
		t->vhash[h] = i;
	}

	byte_unicode_tables(b2u, u2b);
	total = 0;
	for (int i = 0; i < d->n_vocab; i++) {
		t->piece_off[i] = (uint32_t)total;
		total += piece_decode(t, i, u2b, t->piece_pool + total);
	}
	t->piece_off[d->n_vocab] = (uint32_t)total;

	for (int b = 0; b < 256; b++) {
		char buf[8];
		size_t l;
		if (t->kind == RT_TOK_BPE) {
			l = sw_utf8_put(b2u[b], buf);
		} else {
			l = (size_t)snprintf(buf, sizeof(buf), "<0x%02X>", b);
		}
		t->byte_tok[b] = rt_token_find(t, buf, l);
	}

	if (t->kind == RT_TOK_BPE) {
		if (d->n_merges < 0 || (d->n_merges > 0 && !d->merges)) {
			sw_errf(err, SW_EINVAL, "tokenizer.ggml.merges: missing");
			goto out_free;
		}
		rc = build_merges(t, d, err);
		if (rc)
			goto out_free;
	}

	t->special = malloc((size_t)d->n_vocab * sizeof(*t->special));
	if (!t->special) {
		sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
		goto out_free;
	}
	for (int i = 0; i < d->n_vocab; i++) {
		if (is_special_type(t->types[i]) && t->text_off[i + 1] > t->text_off[i]) {
			t->special[t->n_special++] = i;
			uint8_t c = (uint8_t)t->text_pool[t->text_off[i]];
			t->special_first[c >> 3] |= (uint8_t)(1u << (c & 7));
		}
	}
	qsort_r(t->special, (size_t)t->n_special, sizeof(*t->special), cmp_special_len, t);

	t->bos = d->bos >= 0 && d->bos < d->n_vocab ? d->bos : -1;
	t->eos = d->eos >= 0 && d->eos < d->n_vocab ? d->eos : -1;
	t->unk = d->unk >= 0 && d->unk < d->n_vocab ? d->unk : -1;
	eog_add(t, t->eos);
	eog_add(t, d->eot);
	{
		static const char *const marks[] = {
			"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>",
			"<end_of_turn>", "<|end|>", "</s>", "<|EOT|>",
		};
		for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
			int32_t id = rt_token_find(t, marks[i], strlen(marks[i]));
			if (id >= 0 && t->types[id] != RT_TT_NORMAL)
				eog_add(t, id);
		}
	}
	if (d->chat_template) {
		t->has_template = true;
		rc = chat_template_parse(t, d->chat_template, d->chat_template_len, err);
		if (rc)
			goto out_free;
	} else {
		/* no template: chatml when the vocabulary has its markers; never
		 * Gemma's turns (a base Gemma file carries <start_of_turn> in its
		 * vocabulary without being trained on it: its template is what marks
		 * an instruction-tuned file) */
		t->chatml = rt_token_find(t, "<|im_start|>", 12) >= 0;
	}
	return t;

out_free:
	rt_tokenizer_free(t);
	return NULL;
}

void rt_tokenizer_free(rt_tokenizer *t)
{
	if (!t)
		return;
	free(t->text_pool);
	free(t->text_off);
	free(t->piece_pool);
	free(t->piece_off);
	free(t->types);
	free(t->scores);
	free(t->vhash);
	free(t->mhash);
	free(t->special);
	free(t->chat_system);
	free(t);
}

/* ---- GGUF ---- */

static int get_str_array(const gguf_file *f, const char *key, bool required, const char ***strs,
			 size_t **lens, uint64_t *n, sw_err *err)
{
	uint32_t et;
	int rc = gguf_get_arr(f, key, &et, n, err);
	if (rc == SW_ENOENT_KEY && !required) {
		*n = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (et != GGUF_VT_STRING)
		return sw_errf(err, SW_EINVAL, "%s: expected an array of strings, found element type %u", key, et);
	if (*n > (1u << 24))
		return sw_errf(err, SW_EINVAL, "%s: %llu entries, at most %u supported", key,
			       (unsigned long long)*n, 1u << 24);
	const gguf_kv *kv = gguf_find(f, key);
	*strs = malloc((*n ? *n : 1) * sizeof(**strs));
	*lens = malloc((*n ? *n : 1) * sizeof(**lens));
	if (!*strs || !*lens)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", key);
	for (uint64_t i = 0; i < *n; i++) {
		gguf_str s = gguf_arr_str(f, kv, i);
		(*strs)[i] = s.p ? s.p : "";
		(*lens)[i] = s.p ? (size_t)s.n : 0;
	}
	return 0;
}

static int get_id(const gguf_file *f, const char *key, int32_t *out, sw_err *err)
{
	uint32_t v;
	int rc = gguf_get_u32(f, key, &v, err);
	if (rc == SW_ENOENT_KEY) {
		*out = -1;
		return 0;
	}
	if (rc)
		return rc;
	*out = v > INT32_MAX ? -1 : (int32_t)v;
	return 0;
}

/* The vocabulary of the model the file holds: the rows of tensor
 * token_embd.weight, else the key <general.architecture>.vocab_size; 0
 * for a file with neither (a tokenizer alone). what: where it came from. */
static uint64_t file_vocab(const gguf_file *f, char *what, size_t n)
{
	const gguf_tensor *te = gguf_tensor_find(f, "token_embd.weight");
	if (te && te->n_dims >= 2) {
		snprintf(what, n, "the rows of tensor token_embd.weight");
		return te->ne[1];
	}
	gguf_str arch;
	uint32_t v;
	sw_err ignore;
	char key[96];
	if (gguf_get_str(f, "general.architecture", &arch, &ignore) || arch.n > 64)
		return 0;
	snprintf(key, sizeof(key), "%.*s.vocab_size", (int)arch.n, arch.p);
	if (gguf_get_u32(f, key, &v, &ignore))
		return 0;
	snprintf(what, n, "metadata key %s", key);
	return v;
}

rt_tokenizer *rt_tokenizer_from_gguf(const gguf_file *f, sw_err *err)
{
	rt_tok_desc d = {0};
	rt_tokenizer *t = NULL;
	const char **tokens = NULL, **merges = NULL;
	size_t *token_lens = NULL, *merge_lens = NULL;
	int32_t *types = NULL;
	float *scores = NULL;
	uint64_t n_tok = 0, n_merges = 0, n;
	uint32_t et;
	gguf_str model, pre, tpl;
	char prebuf[64];
	bool b;
	int rc;

	rc = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
	if (rc) {
		if (rc == SW_ENOENT_KEY)
			sw_errf(err, SW_EINVAL, "%s: no tokenizer.ggml.model: the file carries no tokenizer", f->path);
		goto out;
	}
	if (model.n == 4 && memcmp(model.p, "gpt2", 4) == 0) {
		d.kind = RT_TOK_BPE;
	} else if (model.n == 5 && memcmp(model.p, "llama", 5) == 0) {
		d.kind = RT_TOK_SPM;
	} else {
		rc = sw_errf(err, SW_ENOTSUP, "%s: tokenizer.ggml.model = \"%.*s\" is not supported (supported: gpt2, llama)",
			     f->path, (int)(model.n > 64 ? 64 : model.n), model.p);
		goto out;
	}
	rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err);
	if (rc == 0) {
		if (pre.n >= sizeof(prebuf)) {
			rc = sw_errf(err, SW_ENOTSUP, "%s: tokenizer.ggml.pre = \"%.*s...\" is not supported",
				     f->path, 32, pre.p);
			goto out;
		}
		memcpy(prebuf, pre.p, pre.n);
		prebuf[pre.n] = '\0';
		d.pre = prebuf;
	} else if (rc != SW_ENOENT_KEY) {
		goto out;
	}

	rc = get_str_array(f, "tokenizer.ggml.tokens", true, &tokens, &token_lens, &n_tok, err);
	if (rc)
		goto out;
	/* every id the model can emit has a text: a shorter table would leave
	 * the ids past it undecodable, found only when one is drawn */
	char vwhat[128];
	const uint64_t fv = file_vocab(f, vwhat, sizeof(vwhat));
	if (n_tok < fv) {
		rc = sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.tokens: expected %llu tokens (the model's "
		             "vocabulary, %s), found %llu: ids %llu..%llu would have no text", f->path,
		             (unsigned long long)fv, vwhat, (unsigned long long)n_tok,
		             (unsigned long long)n_tok, (unsigned long long)fv - 1);
		goto out;
	}
	d.n_vocab = (int)n_tok;
	d.tokens = tokens;
	d.token_lens = token_lens;

	rc = gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &n, err);
	if (rc == 0) {
		if ((et != GGUF_VT_INT32 && et != GGUF_VT_UINT32) || n != n_tok) {
			rc = sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.token_type: expected %llu int32, found %llu of type %u",
				     f->path, (unsigned long long)n_tok, (unsigned long long)n, et);
			goto out;
		}
		types = malloc((n ? n : 1) * sizeof(*types));
		if (!types) {
			rc = sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
			goto out;
		}
		memcpy(types, gguf_arr_data(gguf_find(f, "tokenizer.ggml.token_type")), n * sizeof(*types));
		d.types = types;
	} else if (rc != SW_ENOENT_KEY) {
		goto out;
	}

	rc = gguf_get_arr(f, "tokenizer.ggml.scores", &et, &n, err);
	if (rc == 0) {
		if (et != GGUF_VT_FLOAT32 || n != n_tok) {
			rc = sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.scores: expected %llu float32, found %llu of type %u",
				     f->path, (unsigned long long)n_tok, (unsigned long long)n, et);
			goto out;
		}
		scores = malloc((n ? n : 1) * sizeof(*scores));
		if (!scores) {
			rc = sw_errf(err, SW_ENOMEM, "tokenizer: out of memory");
			goto out;
		}
		memcpy(scores, gguf_arr_data(gguf_find(f, "tokenizer.ggml.scores")), n * sizeof(*scores));
		d.scores = scores;
	} else if (rc != SW_ENOENT_KEY) {
		goto out;
	}

	if (d.kind == RT_TOK_BPE) {
		rc = get_str_array(f, "tokenizer.ggml.merges", true, &merges, &merge_lens, &n_merges, err);
		if (rc)
			goto out;
		d.n_merges = (int)n_merges;
		d.merges = merges;
		d.merge_lens = merge_lens;
	}

	if ((rc = get_id(f, "tokenizer.ggml.bos_token_id", &d.bos, err)) ||
	    (rc = get_id(f, "tokenizer.ggml.eos_token_id", &d.eos, err)) ||
	    (rc = get_id(f, "tokenizer.ggml.unknown_token_id", &d.unk, err)) ||
	    (rc = get_id(f, "tokenizer.ggml.eot_token_id", &d.eot, err)))
		goto out;

	d.add_space_prefix = d.kind == RT_TOK_SPM;
	rc = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b, err);
	if (rc == 0)
		d.add_space_prefix = b;
	else if (rc != SW_ENOENT_KEY)
		goto out;
	/* llama.cpp's default when the key is absent: SPM yes, BPE no */
	d.add_bos = d.kind == RT_TOK_SPM;
	rc = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b, err);
	if (rc == 0)
		d.add_bos = b;
	else if (rc != SW_ENOENT_KEY)
		goto out;

	rc = gguf_get_str(f, "tokenizer.chat_template", &tpl, err);
	if (rc == 0) {
		d.chat_template = tpl.p;
		d.chat_template_len = (size_t)tpl.n;
	} else if (rc != SW_ENOENT_KEY) {
		goto out;
	}
	rc = 0;

	t = rt_tokenizer_new(&d, err);
	if (!t)
		sw_err_prefix(err, "%s", f->path);
out:
	/* a required key that is absent is a malformed file, not a default */
	if (rc == SW_ENOENT_KEY && err)
		err->code = SW_EINVAL;
	free(tokens);
	free(token_lens);
	free(merges);
	free(merge_lens);
	free(types);
	free(scores);
	return t;
}

/* ---- queries ---- */

int rt_tokenizer_vocab(const rt_tokenizer *t) { return t->n_vocab; }
enum rt_tok_kind rt_tokenizer_kind(const rt_tokenizer *t) { return t->kind; }
bool rt_tokenizer_add_bos(const rt_tokenizer *t) { return t->add_bos && t->bos >= 0; }
int32_t rt_token_bos(const rt_tokenizer *t) { return t->bos; }
int32_t rt_token_eos(const rt_tokenizer *t) { return t->eos; }

int rt_token_type(const rt_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab ? t->types[id] : 0;
}

bool rt_token_is_eog(const rt_tokenizer *t, int32_t id)
{
	for (int i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return true;
	return false;
}

const char *rt_token_piece(const rt_tokenizer *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n_vocab)
		return NULL;
	*len = t->piece_off[id + 1] - t->piece_off[id];
	return t->piece_pool + t->piece_off[id];
}

const char *rt_token_text(const rt_tokenizer *t, int32_t id, size_t *len)
{
	if (id < 0 || id >= t->n_vocab)
		return NULL;
	return tok_text(t, id, len);
}

/* ---- encoding ---- */

/* Scratch of one rt_tokenize call, grown to the longest word seen. */
struct work {
	int32_t *out;
	int cap, n;          /* n counts every token, also those past cap */
	size_t wcap;
	int32_t *sym;        /* (wcap) token id of a symbol, -1 once merged away */
	int32_t *prev, *next;/* (wcap) symbol list */
	uint32_t *len;       /* (wcap) SPM: symbol length in bytes */
	struct qent *heap;   /* (3 * wcap) */
	int nheap;
	char *norm;          /* SPM: normalized text */
	size_t norm_cap;
};

struct qent {
	float score;     /* SPM: higher first; BPE: -rank */
	int32_t pos;     /* left symbol; ties: leftmost first */
	int32_t a, b;    /* BPE: the pair's ids; SPM: right symbol and merged length */
};

static void emit(struct work *w, int32_t id)
{
	if (w->n < w->cap)
		w->out[w->n] = id;
	w->n++;
}

static int work_reserve(struct work *w, size_t n)
{
	if (n <= w->wcap)
		return 0;
	size_t c = w->wcap ? w->wcap : 64;
	while (c < n)
		c *= 2;
	free(w->sym);
	free(w->prev);
	free(w->next);
	free(w->len);
	free(w->heap);
	w->sym = malloc(c * sizeof(*w->sym));
	w->prev = malloc(c * sizeof(*w->prev));
	w->next = malloc(c * sizeof(*w->next));
	w->len = malloc(c * sizeof(*w->len));
	w->heap = malloc(3 * c * sizeof(*w->heap));
	w->wcap = c;
	if (!w->sym || !w->prev || !w->next || !w->len || !w->heap) {
		w->wcap = 0;
		return SW_ENOMEM;
	}
	return 0;
}

static void work_free(struct work *w)
{
	free(w->sym);
	free(w->prev);
	free(w->next);
	free(w->len);
	free(w->heap);
	free(w->norm);
}

static bool qent_before(const struct qent *x, const struct qent *y)
{
	if (x->score != y->score)
		return x->score > y->score;
	return x->pos < y->pos;
}

static void heap_push(struct work *w, struct qent e)
{
	int i = w->nheap++;
	while (i > 0) {
		int p = (i - 1) / 2;
		if (!qent_before(&e, &w->heap[p]))
			break;
		w->heap[i] = w->heap[p];
		i = p;
	}
	w->heap[i] = e;
}

static struct qent heap_pop(struct work *w)
{
	struct qent top = w->heap[0], last = w->heap[--w->nheap];
	int i = 0, n = w->nheap;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && qent_before(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!qent_before(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n > 0)
		w->heap[i] = last;
	return top;
}

static void bpe_try_pair(const rt_tokenizer *t, struct work *w, int32_t l)
{
	if (l < 0 || w->next[l] < 0)
		return;
	int32_t a = w->sym[l], b = w->sym[w->next[l]];
	const struct merge_slot *m = merge_find(t, a, b);
	if (!m)
		return;
	heap_push(w, (struct qent){ .score = -(float)m->rank, .pos = l, .a = a, .b = b });
}

/* Applies merges by rank (lowest first, leftmost among equals) to one
 * pre-tokenized word, as HF's BPE does; no dropout, no cache. */
static int bpe_word(const rt_tokenizer *t, struct work *w, const uint8_t *s, size_t n)
{
	int32_t cnt = 0;
	if (work_reserve(w, n))
		return SW_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int32_t id = t->byte_tok[s[i]];
		/* A byte with no token (SmolLM2 lacks 21, e.g. 0x04, 0xC0, 0xFF)
		 * is dropped, as HF's BPE does without an unk token. Not unk:
		 * here that is <|endoftext|>, which would end the prompt. */
		if (id < 0)
			continue;
		w->sym[cnt] = id;
		w->prev[cnt] = cnt - 1;
		w->next[cnt] = cnt + 1;
		cnt++;
	}
	if (cnt == 0)
		return 0;
	w->next[cnt - 1] = -1;
	w->nheap = 0;
	for (int32_t i = 0; i + 1 < cnt; i++)
		bpe_try_pair(t, w, i);
	while (w->nheap > 0) {
		struct qent e = heap_pop(w);
		int32_t l = e.pos, r = w->next[l];
		/* stale entry: a neighbour was merged since it was queued */
		if (w->sym[l] != e.a || r < 0 || w->sym[r] != e.b)
			continue;
		w->sym[l] = merge_find(t, e.a, e.b)->result;
		w->next[l] = w->next[r];
		if (w->next[r] >= 0)
			w->prev[w->next[r]] = l;
		w->sym[r] = -1;
		bpe_try_pair(t, w, w->prev[l]);
		bpe_try_pair(t, w, l);
	}
	for (int32_t i = 0; i >= 0; i = w->next[i])
		emit(w, w->sym[i]);
	return 0;
}

/* The GPT-2 pattern, leftmost-first like the regex engines:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Returns the end of the match starting at s[i] (i < end). */
static size_t gpt2_match(const uint8_t *s, size_t i, size_t end)
{
	size_t j = i, l, last;
	int k, kk, units;

	if (s[i] == '\'' && i + 1 < end) {
		uint8_t c1 = s[i + 1], c2 = i + 2 < end ? s[i + 2] : 0;
		if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
			return i + 2;
		if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
			return i + 3;
	}
	l = unit_at(s, end, i, &k);
	if (s[i] == ' ' && i + 1 < end) {
		unit_at(s, end, i + 1, &kk);
		if (kk != CLS_SPACE) {
			j = i + 1;
			k = kk;
		}
	}
	if (k != CLS_SPACE) {
		while (j < end) {
			l = unit_at(s, end, j, &kk);
			if (kk != k)
				break;
			j += l;
		}
		return j;
	}
	/* \s+(?!\S): a whitespace run followed by non-space gives back its last
	 * character (which then prefixes the next word), unless it is the only
	 * one, where \s+ takes it */
	units = 0;
	last = i;
	while (j < end) {
		l = unit_at(s, end, j, &kk);
		if (kk != CLS_SPACE)
			break;
		last = j;
		j += l;
		units++;
	}
	if (j == end || units == 1)
		return j;
	return last;
}

static int bpe_fragment(const rt_tokenizer *t, struct work *w, const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t seg = n;
		int k, rc;
		if (t->pre == PRE_SMOLLM) {
			/* Digits(individual_digits): each \p{N} alone, then the
			 * regex on the text between them */
			size_t l = unit_at(s, n, i, &k);
			if (k == CLS_NUMBER) {
				rc = bpe_word(t, w, s + i, l);
				if (rc)
					return rc;
				i += l;
				continue;
			}
			for (seg = i; seg < n; seg += l) {
				l = unit_at(s, n, seg, &k);
				if (k == CLS_NUMBER)
					break;
			}
		}
		while (i < seg) {
			size_t e = gpt2_match(s, i, seg);
			rc = bpe_word(t, w, s + i, e - i);
			if (rc)
				return rc;
			i = e;
		}
	}
	return 0;
}

static int32_t spm_lookup(const rt_tokenizer *t, const char *s, size_t n)
{
	int32_t id = rt_token_find(t, s, n);
	/* sentencepiece merges only into normal, user-defined and unused pieces */
	if (id >= 0 && (t->types[id] == RT_TT_NORMAL || t->types[id] == RT_TT_USER_DEFINED ||
			t->types[id] == RT_TT_UNUSED))
		return id;
	return -1;
}

static void spm_try_pair(const rt_tokenizer *t, struct work *w, int32_t l)
{
	if (l < 0 || w->next[l] < 0)
		return;
	int32_t r = w->next[l];
	uint32_t len = w->len[l] + w->len[r];
	int32_t id = spm_lookup(t, w->norm + w->sym[l], len);
	if (id < 0)
		return;
	heap_push(w, (struct qent){ .score = t->scores[id], .pos = l, .a = r, .b = (int32_t)len });
}

/* SentencePiece BPE: symbols are characters of the normalized text (spaces
 * as U+2581), merged by the score of the merged piece, highest first; what
 * is left outside the vocabulary falls back to <0xXX> byte tokens. Symbol i
 * starts at byte sym[i] of w->norm and is len[i] bytes long. */
static int spm_fragment(const rt_tokenizer *t, struct work *w, const uint8_t *s, size_t n, bool prefix)
{
	size_t nn = 0, need = 3 * (n + 1);
	int32_t cnt = 0;

	if (need > w->norm_cap) {
		free(w->norm);
		w->norm = malloc(need);
		w->norm_cap = w->norm ? need : 0;
		if (!w->norm)
			return SW_ENOMEM;
	}
	if (prefix)
		memcpy(w->norm + nn, "\xE2\x96\x81", 3), nn += 3;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == ' ')
			memcpy(w->norm + nn, "\xE2\x96\x81", 3), nn += 3;
		else
			w->norm[nn++] = (char)s[i];
	}
	if (work_reserve(w, nn))
		return SW_ENOMEM;
	for (size_t i = 0; i < nn;) {
		uint32_t cp;
		int l = sw_utf8_next((const uint8_t *)w->norm + i, nn - i, &cp);
		size_t ul = l > 0 ? (size_t)l : 1;
		w->sym[cnt] = (int32_t)i;
		w->len[cnt] = (uint32_t)ul;
		w->prev[cnt] = cnt - 1;
		w->next[cnt] = cnt + 1;
		cnt++;
		i += ul;
	}
	if (cnt == 0)
		return 0;
	w->next[cnt - 1] = -1;
	w->nheap = 0;
	for (int32_t i = 0; i + 1 < cnt; i++)
		spm_try_pair(t, w, i);
	while (w->nheap > 0) {
		struct qent e = heap_pop(w);
		int32_t l = e.pos, r = e.a;
		if (w->len[l] == 0 || w->next[l] != r || w->len[l] + w->len[r] != (uint32_t)e.b)
			continue;
		w->len[l] += w->len[r];
		w->len[r] = 0;
		w->next[l] = w->next[r];
		if (w->next[r] >= 0)
			w->prev[w->next[r]] = l;
		spm_try_pair(t, w, w->prev[l]);
		spm_try_pair(t, w, l);
	}
	for (int32_t i = 0; i >= 0; i = w->next[i]) {
		const char *p = w->norm + w->sym[i];
		int32_t id = spm_lookup(t, p, w->len[i]);
		if (id >= 0) {
			emit(w, id);
			continue;
		}
		for (uint32_t k = 0; k < w->len[i]; k++) {
			int32_t b = t->byte_tok[(uint8_t)p[k]];
			emit(w, b >= 0 ? b : t->unk);
		}
	}
	return 0;
}

static int encode_fragment(const rt_tokenizer *t, struct work *w, const uint8_t *s, size_t n, bool at_start)
{
	if (t->kind == RT_TOK_BPE)
		return n ? bpe_fragment(t, w, s, n) : 0;
	/* sentencepiece adds its dummy prefix once, to the text's start, and
	 * encodes empty text as nothing */
	if (n == 0)
		return 0;
	return spm_fragment(t, w, s, n, at_start && t->add_space_prefix);
}

/* Longest special token matching at s[i], or -1. */
static int32_t special_at(const rt_tokenizer *t, const uint8_t *s, size_t i, size_t n, bool parse_special)
{
	if (!(t->special_first[s[i] >> 3] & (1u << (s[i] & 7))))
		return -1;
	for (int k = 0; k < t->n_special; k++) {
		int32_t id = t->special[k];
		size_t l;
		const char *p = tok_text(t, id, &l);
		if (l <= n - i && memcmp(p, s + i, l) == 0 &&
		    (parse_special || t->types[id] == RT_TT_USER_DEFINED))
			return id;
	}
	return -1;
}

int rt_tokenize(const rt_tokenizer *t, const char *text, size_t n, bool add_bos,
		bool parse_special, int32_t *out, int cap, sw_err *err)
{
	struct work w = { .out = out, .cap = out ? cap : 0 };
	const uint8_t *s = (const uint8_t *)text;
	size_t i = 0, start = 0;
	int rc = 0;

	if (add_bos && t->bos >= 0)
		emit(&w, t->bos);
	while (i < n) {
		int32_t id = t->n_special ? special_at(t, s, i, n, parse_special) : -1;
		if (id < 0) {
			i++;
			continue;
		}
		rc = encode_fragment(t, &w, s + start, i - start, start == 0);
		if (rc)
			goto out;
		emit(&w, id);
		i += t->text_off[id + 1] - t->text_off[id];
		start = i;
	}
	rc = encode_fragment(t, &w, s + start, n - start, start == 0);
	if (rc)
		goto out;
	if (w.n > INT32_MAX / 2) {
		rc = sw_errf(err, SW_ERANGE, "tokenize: %d tokens, too many", w.n);
		goto out;
	}
	rc = w.n;
	if (w.n > cap)
		rc = sw_errf(err, SW_ERANGE, "tokenize: text of %zu bytes needs %d tokens, buffer holds %d", n, w.n, cap);
out:
	if (rc == SW_ENOMEM)
		sw_errf(err, SW_ENOMEM, "tokenize: out of memory for a word of a %zu-byte text", n);
	work_free(&w);
	return rc;
}

/* ---- decoding ---- */

void rt_detok_init(rt_detok *d)
{
	memset(d, 0, sizeof(*d));
}

static size_t put_fffd(char *o)
{
	memcpy(o, "\xEF\xBF\xBD", 3);
	return 3;
}

int rt_detok_push(rt_detok *d, const rt_tokenizer *t, int32_t id, char *out, size_t cap)
{
	size_t plen, k = 0, i = 0, n;
	const char *p = rt_token_piece(t, id, &plen);
	uint8_t buf[4];
	int np = d->npend;

	if (!p)
		return SW_EINVAL;
	if (cap < RT_DETOK_MAX_OUT(plen))
		return SW_ERANGE;
	/* first finish (or fail) the pending sequence with the piece's head */
	while (np > 0) {
		uint32_t cp;
		size_t take = plen - i < (size_t)(4 - np) ? plen - i : (size_t)(4 - np);
		memcpy(buf, d->pend, (size_t)np);
		memcpy(buf + np, p + i, take);
		int l = sw_utf8_next(buf, (size_t)np + take, &cp);
		if (l == 0) { /* still incomplete: the whole piece joins it */
			memcpy(d->pend + np, p + i, take);
			d->npend = np + (int)take;
			return (int)k;
		}
		if (l > 0) {
			memcpy(out + k, buf, (size_t)l);
			k += (size_t)l;
			i += (size_t)l - (size_t)np;
			np = 0;
		} else {
			/* maximal invalid subpart of -l bytes, all of them pending
			 * ones or reaching into the piece */
			size_t bad = (size_t)-l;
			k += put_fffd(out + k);
			if (bad >= (size_t)np) {
				i += bad - (size_t)np;
				np = 0;
			} else {
				memmove(d->pend, d->pend + bad, (size_t)np - bad);
				np -= (int)bad;
			}
		}
	}
	d->npend = 0;
	n = plen;
	while (i < n) {
		uint32_t cp;
		int l = sw_utf8_next((const uint8_t *)p + i, n - i, &cp);
		if (l > 0) {
			memcpy(out + k, p + i, (size_t)l);
			k += (size_t)l;
			i += (size_t)l;
		} else if (l == 0) {
			memcpy(d->pend, p + i, n - i);
			d->npend = (int)(n - i);
			break;
		} else {
			k += put_fffd(out + k);
			i += (size_t)-l;
		}
	}
	return (int)k;
}

int rt_detok_flush(rt_detok *d, char *out, size_t cap)
{
	int had = d->npend;
	d->npend = 0;
	if (!had)
		return 0;
	if (cap < 3)
		return SW_ERANGE;
	/* a valid prefix cut short is one maximal subpart: one U+FFFD */
	return (int)put_fffd(out);
}

/* ---- chat ---- */

bool rt_tokenizer_has_chat(const rt_tokenizer *t)
{
	return t->chatml || t->chat_gemma;
}

int rt_chat_format(const rt_tokenizer *t, const char *user_msg, char *out, size_t cap, sw_err *err)
{
	const char *role = "user";
	return rt_chat_format_msgs(t, &role, &user_msg, 1, out, cap, err);
}

int rt_chat_format_msgs(const rt_tokenizer *t, const char *const *roles, const char *const *contents, int n_msgs,
                        char *out, size_t cap, sw_err *err)
{
	if (!t->chatml && t->chat_gemma) {
		char bos[64] = "";
		size_t bl = 0;
		const char *bt = t->bos >= 0 ? rt_token_text(t, t->bos, &bl) : NULL;
		if (bt && bl < sizeof(bos)) {
			memcpy(bos, bt, bl);
			bos[bl] = '\0';
		}
		return rt_chat_gemma(bos, roles, contents, n_msgs, out, cap, err);
	}
	if (!t->chatml && !t->has_template)
		return sw_errf(err, SW_ENOTSUP, "chat: the model has no chat template (no "
		               "tokenizer.chat_template, no chatml markers in its vocabulary): a base "
		               "model takes the prompt as plain text (--no-chat)");
	if (!t->chatml)
		return sw_errf(err, SW_ENOTSUP, "chat: the model's chat template is neither chatml "
		               "(<|im_start|>) nor Gemma's (<start_of_turn>); only those are supported");
	size_t n = 0;
	int w;
	/* the template's default system turn unless the conversation brings its own */
	if (t->chat_system && !(n_msgs > 0 && strcmp(roles[0], "system") == 0)) {
		w = snprintf(out, cap, "<|im_start|>system\n%s<|im_end|>\n", t->chat_system);
		if (w < 0 || (size_t)w >= cap)
			goto too_long;
		n = (size_t)w;
	}
	for (int i = 0; i < n_msgs; i++) {
		w = snprintf(out + n, cap - n, "<|im_start|>%s\n%s<|im_end|>\n", roles[i], contents[i]);
		if (w < 0 || (size_t)w >= cap - n)
			goto too_long;
		n += (size_t)w;
	}
	w = snprintf(out + n, cap - n, "<|im_start|>assistant\n");
	if (w < 0 || (size_t)w >= cap - n)
		goto too_long;
	return (int)(n + (size_t)w);
too_long:
	return sw_errf(err, SW_ERANGE, "chat: the formatted prompt does not fit %zu bytes", cap);
}
