/* Command-line plumbing shared by the subcommands: option parsing with clear
 * errors, loading target/draft/tokenizer from the options, and printing
 * stats. The subcommands themselves live in main.c and bench.c. */
#ifndef RT_CLI_H
#define RT_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/block_drafter.h"
#include "model/eagle3.h"
#include "model/ctx.h"
#include "decode/chain.h"
#include "engine/engine.h"
#include "formats/tokenizer.h"

typedef struct cli_opts {
	const char *model;     /* positional */
	const char *prompt;
	const char *prompt_file;
	const char *tokenizer; /* GGUF to take the tokenizer from (default: the model) */
	const char *draft;     /* none | layerskip:N | model:PATH | ngram[:MIN:MAX] | block:DIR[,steps=S] | eagle3:DIR */
	const char *dump;      /* eval: output file */
	int gamma;
	float temperature;
	int top_k;
	float top_p;
	uint64_t seed;
	int max_new;
	int chat;              /* -1: default for the command */
	int ctx;
	bool json;
	bool baseline;
	int n_prompts;         /* bench */
	float lossy_eps;       /* run: --lossy-eps, the biased relaxation */
	const char *corpus;    /* bench */
	const char *prompt_set; /* bench: prompts a line, verbatim, after a header line */
	bool n_prompts_given;  /* bench: --prompts was given */
	const char *drafters;  /* bench: ';'-separated rows SPEC[|gamma=G][|tree=TREE] (block-drafter table) */
	const char *output;    /* derive-draft: -o FILE */
	const char *layers;    /* derive-draft: layer list as in layerskip: */
	const char *wtype;     /* derive-draft: f32 f16 bf16 q8_0 q4_0 q4_1 */
	const char *embd_type; /* derive-draft: the embedding's (and untied head's) type */
	bool random_weights;   /* run/profile ENGINE_DIR: --random-weights SEED (timing only) */
	uint64_t random_seed;
	int prompt_len;        /* run/profile ENGINE_DIR --random-weights: -P N synthetic prompt ids */
	const char *dump_logits; /* run ENGINE_DIR --random-weights: --dump-logits FILE (random_cli.c) */
	const char *tree;      /* run: tree spec (preset, file, chain:K, kary:K:D, ...) */
	const char *verify;    /* run: tree verification method */
	const char *expand;    /* run: tree expansion rule */
	const char *adaptive;  /* run: SpecDec++ stop rule h[:min:max] */
	const char *acc_head;  /* run: acceptance head (safetensors); absent: q(Y) proxy */
	int n_tokens;          /* train-head: labelled positions */
	const char *backend;   /* run ENGINE_DIR: auto | host | host-emulate | cuda */
	const char *model_override; /* run ENGINE_DIR: --model (else engine.json's target path) */
	const char *draft_model; /* run ENGINE_DIR: --draft-model for a "model" draft */
	const char *weights;   /* run|profile|bench ENGINE_DIR: --weights DIR_OR_FILE, where the
	                        * engine's weights are (cli_engine_weights_find) */
	bool eager;            /* run ENGINE_DIR: op by op, no graph */
	const char *ids;       /* --ids "1 17 42": the prompt as token ids (no tokenizer, no template) */
	bool target_only;      /* run ENGINE_DIR: --target-only, no drafting (one target row a token) */
	int rows;              /* profile ENGINE_DIR: --rows N, the verify forward replayed at N rows */
	const char *given[64]; /* the options as typed, in order (engine runs refuse the
	                        * ones an engine fixes at build time) */
	int n_given;
} cli_opts;

/* The first of names[] (NULL-terminated) the user typed, or NULL. */
const char *cli_given(const cli_opts *o, const char *const *names);

/* An engine's sampling for this run (its defaults, -t/--top-k/--top-p over
 * them, checked) and the refusal of options an engine fixes at build time
 * (engine_cli.c). */
int cli_engine_sampling(const rt_engine *e, const cli_opts *o, const char *dir,
                        rt_engine_sampling *s, sw_err *err);
int cli_engine_refuse_fixed(const rt_manifest *m, const cli_opts *o, const char *dir, sw_err *err);
/* `run|profile ENGINE_DIR --random-weights SEED` (random_cli.c): timing only,
 * no model, no tokenizer, no text. */
int cli_engine_random(cli_opts *o, bool profile);

/* --ids' text "1 17 42" or "1,17,42" (cli.c): with ids NULL, the count of
 * ids, else ids filled; each must lie in [0, vocab). The count, or a
 * negative error naming the offending id or text. */
int cli_parse_ids(const char *s, int vocab, int32_t *ids, sw_err *err);

/* `specwright run ENGINE_DIR` and `specwright profile ENGINE_DIR`
 * (engine_cli.c); o->model is the engine directory. */
int cli_engine_run(cli_opts *o);
int cli_engine_profile(cli_opts *o);
/* bench helpers (bench.c): n prompts of 200-600 bytes cut from a corpus at
 * line boundaries (malloc'ed; returns the count), and the median (sorts v). */
int cli_cut_prompts(const char *text, size_t len, int n, char **out);
/* The bench's prompts (bench.c): with --prompt-set FILE, its lines after the
 * first (a header naming the set), verbatim and in order, the first
 * --prompts N of them (all without --prompts; fewer lines than N is an
 * error); else cli_cut_prompts over --corpus (the fortunes by default).
 * *used names the source. Returns the count (>= 1) with *out malloc'ed, or
 * a negative code with err set. */
int cli_bench_prompts(const cli_opts *o, char ***out, const char **used, sw_err *err);
double cli_median(double *v, int n);
/* `specwright serve ENGINE_DIR ...` (serve_cli.c): the OpenAI-compatible
 * HTTP server; parses its own options from argv[2..). */
int cli_serve(int argc, char **argv);
/* `specwright bundle ENGINE_DIR... -o DIR` and `bundle --verify DIR`
 * (bundle_cli.c): parses its own options from argv[2..). */
int cli_bundle(int argc, char **argv);
/* `specwright bench ENGINE_DIR` (engine_cli.c). */
int cli_engine_bench(cli_opts *o);
/* The draft-length controller's cost table and decisions (ctrl_report.c);
 * trace (n_trace entries) may be NULL. Nothing for an engine without one. */
void cli_ctrl_report(FILE *f, const rt_engine *e, const rt_engine_stats *st, const int8_t *trace,
                     int n_trace, bool json);
/* SW_CTRL_TRACE set (not "0"): print each iteration's decision. */
bool cli_ctrl_trace_on(void);

/* The engine's weight source over a loaded Llama model (engine_cli.c): w
 * points into m, which must outlive it. role ("target", "draft") names it in
 * messages. */
int cli_engine_weights(rt_engine_weights *w, const rt_model *m, const char *role, sw_err *err);
/* The weight source of a block drafter's own tensors (mask_embd, fc,
 * fc_norm, its layers, out_norm, inv_freq), its shape the engine's draft
 * shape (the target's width, vocabulary and tied head, the drafter's
 * layers, heads, norm epsilon and RoPE base). bd must outlive w. */
int cli_block_weights(rt_engine_weights *w, const rt_block_drafter *bd, const rt_model *target,
                      sw_err *err);
/* The weight source of an EAGLE-3 head (rt_e3_weight: the engine's draft.*
 * buffers), its shape the head's one layer. h must outlive w. */
int cli_eagle3_weights(rt_engine_weights *w, const struct rt_eagle3 *h, sw_err *err);
/* rt_engine_bind of an EAGLE-3 engine: the target and the loaded head. */
int cli_engine_bind_eagle3(rt_engine *e, rt_dev *dev, const rt_model *target,
                           const struct rt_eagle3 *h, uint64_t seed, sw_err *err);
/* rt_engine_bind with loaded models (draft NULL unless the engine drafts
 * with a separate model). */
int cli_engine_bind(rt_engine *e, rt_dev *dev, const rt_model *target, const rt_model *draft,
                    uint64_t seed, sw_err *err);
/* The same for a block-drafter engine. */
int cli_engine_bind_block(rt_engine *e, rt_dev *dev, const rt_model *target,
                          const rt_block_drafter *bd, uint64_t seed, sw_err *err);

/* Whether an output path cannot be written (a device, FIFO or directory
 * there: core/output.h) or names one of o's input files; then it prints
 * the refusal, naming both, and returns true: an output never replaces an
 * input, and the place is checked before the command does its work. */
bool cli_output_clashes(const cli_opts *o, const char *path, const char *opt);

/* The weights an engine binds in one run (engine_cli.c). */
typedef struct cli_weights {
	char target[4096]; /* the target's file or HF directory; "" for a target built from a
	                    * shape without --model */
	char draft[4096];  /* a draft model's file, a block drafter's or EAGLE-3 head's
	                    * directory; "" for an engine without one */
} cli_weights;

/* Where the engine's weights are for this run: --model / --draft-model as
 * given; else under --weights DIR by the name the build recorded (DIR/NAME,
 * or DIR/ENGINE-NAME as a bundle names a clash), --weights FILE being the
 * target's; else the absolute paths the build recorded ($.spec.*.path).
 * Each must exist: an error names the path and says to give --weights. */
int cli_engine_weights_find(const rt_manifest *m, const char *dir, const cli_opts *o,
                            cli_weights *w, sw_err *err);
/* An engine directory verified whole before anything of it is bound
 * (issue 40): the drafter's files against their sha256 ($.draft_files),
 * then engine.json against the engine re-planned from its spec echo and
 * kernels.cu against its rendered source (gen/replan.h). w: the weights
 * this run binds (NULL: the recorded paths). *ms (may be NULL) gets the
 * re-plan's wall-clock milliseconds, *src whether kernels.cu was compared. */
int cli_engine_verify(const rt_manifest *m, const char *dir, const cli_weights *w, double *ms,
                      bool *src, sw_err *err);

/* Whether path is an engine directory (holds engine.json). */
bool cli_is_engine_dir(const char *path);

/* Parses argv[first..argc); returns 0 or prints the error and returns 2. */
int cli_parse(int argc, char **argv, int first, const char *cmd, cli_opts *o);

typedef struct cli_session {
	rt_model *target;
	rt_model *draft_model;  /* owned: separate model or layer-skip view */
	rt_tokenizer *tok;
	rt_drafter *drafter;    /* NULL: target only */
	struct rt_block_drafter *block; /* owned: a block drafter's weights (--draft block:DIR) */
	struct rt_eagle3 *eagle3; /* owned: an EAGLE-3 head (--draft eagle3:DIR) */
	rt_ctx *tctx;
} cli_session;

int cli_session_open(cli_session *s, const cli_opts *o, sw_err *err);
void cli_session_close(cli_session *s);
/* Drafter from a --draft string (NULL for "none"). */
int cli_make_drafter(cli_session *s, const char *spec, int max_ctx, rt_drafter **out, sw_err *err);
/* The prompt text: -p TEXT, or -f FILE ("-" for standard input; only a
 * regular file, never blocking on a FIFO); a NUL byte is refused, not cut.
 * malloc'ed, or NULL with err set. */
char *cli_read_prompt(const cli_opts *o, sw_err *err);
/* Prompt text -> ids (chat template applied when asked). */
int cli_encode_prompt(const cli_session *s, const char *text, bool chat, int32_t *ids, int cap, sw_err *err);
/* The prompt's token ids from the options: --ids as given (each checked against
 * the model's vocabulary; no chat template), else -p/-f text encoded (with the
 * chat template when chat). *ids is malloc'ed; returns the count or a negative
 * error. */
int cli_prompt_tokens(const cli_opts *o, const cli_session *s, bool chat, int32_t **ids, sw_err *err);
void cli_print_stats(FILE *f, const char *label, const rt_stats *st, int gamma, bool json);
bool cli_is_eog(const void *tok, int32_t id);
/* --tree/--expand/--verify into a tree config (tcfg->tree must point to
 * storage); needs a draft model (layerskip: or model:). Defaults pair the
 * rule and method exactly: sample+rrs, sample-wor+rrsw, topk+onehot,
 * spechub+spechub. */
struct rt_tree_cfg;
int cli_tree_setup(const cli_opts *o, cli_session *s, struct rt_tree_cfg *tcfg, sw_err *err);
void cli_print_tree_stats(FILE *f, const rt_stats *st, bool json);

/* SpecDec++ (acchead_cli.c): --adaptive/--acc-head onto the session's
 * drafter (sets cfg->gamma to the bound's max; *head is the caller's to
 * free), its time-model line, and the train-head command. */
struct rt_acchead;
int cli_adaptive_setup(const cli_opts *o, cli_session *s, rt_gen_cfg *cfg, struct rt_acchead **head, sw_err *err);
void cli_print_time_model(FILE *f, const rt_stats *st, bool json);
int cli_train_head(const cli_opts *o);

#endif
