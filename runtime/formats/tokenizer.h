/* Tokenizer built from GGUF metadata: byte-level BPE (tokenizer.ggml.model
 * "gpt2", merges by rank, GPT-2/SmolLM pre-tokenizer regex hand-written over
 * code points) and SentencePiece-style BPE ("llama", merges by score, byte
 * fallback), plus a streaming UTF-8-safe detokenizer and the chat template.
 * Not a general regex engine or a Jinja interpreter. */
#ifndef RT_TOKENIZER_H
#define RT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gguf.h"

enum rt_tok_kind {
	RT_TOK_BPE = 1, /* byte-level BPE, "gpt2" */
	RT_TOK_SPM = 2, /* SentencePiece BPE with byte fallback, "llama" */
};

/* GGUF tokenizer.ggml.token_type values */
enum rt_tok_type {
	RT_TT_NORMAL = 1, RT_TT_UNKNOWN = 2, RT_TT_CONTROL = 3,
	RT_TT_USER_DEFINED = 4, RT_TT_UNUSED = 5, RT_TT_BYTE = 6,
};

typedef struct rt_tokenizer rt_tokenizer;

/* Everything a tokenizer is built from, as plain arrays (what the GGUF keys
 * hold); rt_tokenizer_from_gguf fills one. All of it is copied. */
typedef struct rt_tok_desc {
	enum rt_tok_kind kind;
	const char *pre;          /* BPE pre-tokenizer: "smollm", "gpt2", "default"; NULL = "default" */
	int n_vocab;
	const char *const *tokens;/* (n_vocab) vocabulary texts, not NUL-terminated */
	const size_t *token_lens; /* (n_vocab) */
	const int32_t *types;     /* (n_vocab) enum rt_tok_type, or NULL: all normal */
	const float *scores;      /* (n_vocab) SPM merge scores; NULL for BPE */
	int n_merges;             /* BPE: "left right" strings, rank = index */
	const char *const *merges;
	const size_t *merge_lens;
	int32_t bos, eos, unk, eot; /* -1 when absent */
	bool add_space_prefix;
	bool add_bos;              /* a plain prompt starts with bos (tokenizer.ggml.add_bos_token) */
	const char *chat_template; /* NULL when absent */
	size_t chat_template_len;
} rt_tok_desc;

rt_tokenizer *rt_tokenizer_new(const rt_tok_desc *d, sw_err *err);

/* Reads tokenizer.ggml.* from f. The result copies what it needs: f may be
 * closed afterwards. NULL with a message on malformed or unsupported data
 * (unknown model or pre-tokenizer names the key and the value), and for a
 * token table shorter than the vocabulary of the model f holds (the rows
 * of token_embd.weight, else <arch>.vocab_size). */
rt_tokenizer *rt_tokenizer_from_gguf(const gguf_file *f, sw_err *err);
void rt_tokenizer_free(rt_tokenizer *t);

/* Encodes n bytes of text (any bytes: invalid UTF-8 is tokenized byte by
 * byte, never rejected). parse_special: control tokens written in the text
 * (<|im_start|>) become their ids; user-defined tokens always do. Returns the
 * token count; if it exceeds cap, returns SW_ERANGE with the needed count in
 * the message and out holds the first cap ids (never a silent truncation).
 * out may be NULL when cap is 0. */
int rt_tokenize(const rt_tokenizer *t, const char *text, size_t n, bool add_bos,
		bool parse_special, int32_t *out, int cap, sw_err *err);

/* The raw bytes of a token: byte-level decoded for BPE, U+2581 -> ' ' and
 * <0xXX> -> the byte for SPM, the literal text for control tokens. NULL for
 * an id outside the vocabulary. Not NUL-terminated; valid while t lives. */
const char *rt_token_piece(const rt_tokenizer *t, int32_t id, size_t *len);
/* The token's text as stored in the vocabulary (e.g. "Ġthe"). */
const char *rt_token_text(const rt_tokenizer *t, int32_t id, size_t *len);

int rt_tokenizer_vocab(const rt_tokenizer *t);
enum rt_tok_kind rt_tokenizer_kind(const rt_tokenizer *t);
/* A prompt given as text starts with bos (the file's add_bos_token: Gemma
 * yes, SmolLM2 no); false when the model has no bos. */
bool rt_tokenizer_add_bos(const rt_tokenizer *t);
int32_t rt_token_bos(const rt_tokenizer *t); /* -1 when the model has none */
int32_t rt_token_eos(const rt_tokenizer *t);
int rt_token_type(const rt_tokenizer *t, int32_t id); /* enum rt_tok_type, 0 if out of range */
/* End of generation: eos, eot, and the usual end markers (<|im_end|>,
 * <|endoftext|>, <|eot_id|>, <end_of_turn>, </s>) present in the vocabulary. */
bool rt_token_is_eog(const rt_tokenizer *t, int32_t id);
/* Exact lookup of a token by its vocabulary text; -1 if absent. */
int32_t rt_token_find(const rt_tokenizer *t, const char *text, size_t n);

/* Streaming decoder: turns ids into printable bytes one token at a time,
 * holding back an incomplete UTF-8 sequence until its last byte arrives.
 * Invalid sequences come out as U+FFFD (one per maximal invalid subpart, as
 * Python's errors="replace"). Zero-initialise or rt_detok_init. */
typedef struct rt_detok {
	uint8_t pend[4]; /* bytes of an incomplete, so far valid, sequence */
	int npend;
} rt_detok;

#define RT_DETOK_MAX_OUT(piece_len) (3 * ((piece_len) + 4))
void rt_detok_init(rt_detok *d);
/* Writes the bytes now safe to print; returns their count, SW_EINVAL for an
 * id outside the vocabulary, SW_ERANGE if cap < RT_DETOK_MAX_OUT(piece
 * length) (nothing consumed then). */
int rt_detok_push(rt_detok *d, const rt_tokenizer *t, int32_t id, char *out, size_t cap);
/* Emits what is still pending (as U+FFFD: a sequence cut short). cap >= 3. */
int rt_detok_flush(rt_detok *d, char *out, size_t cap);

/* The model's chat prompt for one user message (chatml with the default
 * system prompt read from tokenizer.chat_template, or Gemma's turns when
 * the template (or, without one, the vocabulary) has <start_of_turn>:
 * chat_gemma.h), NUL-terminated. Returns its length, SW_ERANGE if cap is
 * too small, SW_ENOTSUP for a template that is neither, SW_EINVAL for
 * roles Gemma's template refuses. */
int rt_chat_format(const rt_tokenizer *t, const char *user_msg, char *out, size_t cap, sw_err *err);
/* Whether rt_chat_format can format for this model: a chatml or Gemma
 * template in the file (chatml also from its markers in the vocabulary).
 * The CLI's default chat mode (neither --chat nor --no-chat) is this. */
bool rt_tokenizer_has_chat(const rt_tokenizer *t);
/* The same for a whole conversation: roles[i] ("system", "user",
 * "assistant") and contents[i], then the assistant's opening. The template's
 * default system turn comes first unless roles[0] is "system". */
int rt_chat_format_msgs(const rt_tokenizer *t, const char *const *roles, const char *const *contents, int n_msgs,
                        char *out, size_t cap, sw_err *err);

#endif
