/* The device-resident state of a running engine: the layout shared by the
 * planner (gen/plan.c sizes the buffer), the bookkeeping kernels
 * (templates/step.cu.tmpl, kernels/ref/step.c) and the executor
 * (runtime/engine.c). Everything one iteration needs lives here, so the
 * captured graph replays with no host input; the host reads the header and
 * the output ring once per iteration.
 *
 * Buffer "state": int32[RT_ST_WORDS + ring], the ring of emitted tokens right
 * after the header so one download covers both. */
#ifndef RT_ENGINE_STATE_H
#define RT_ENGINE_STATE_H

enum rt_state_word {
	RT_ST_TLEN = 0,  /* target KV cache length (committed tokens) */
	RT_ST_DLEN = 1,  /* draft KV cache length */
	RT_ST_ROOT = 2,  /* next root: the last emitted token, not yet in any cache */
	RT_ST_LAST = 3,  /* the last committed token (position TLEN-1), -1 if none */
	RT_ST_NOUT = 4,  /* tokens emitted so far (ring writes) */
	RT_ST_MAXNEW = 5, /* emit at most this many tokens */
	RT_ST_EOS = 6,   /* end-of-generation id, -1 for none */
	RT_ST_STOP = 7,  /* 0 running, else enum rt_stop */
	RT_ST_ITER = 8,  /* iterations completed (not the Philox counter: buffer iter) */
	RT_ST_DRAFTED = 9, /* tokens the draft-length controller let this iteration draft
	                    * (templates/draft_ctrl.cu.tmpl); 0 in engines without one */
	RT_ST_HLEN = 10, /* an EAGLE-3 head's cache length (gen/drafter_eagle3.c): its committed
	                  * rows, TLEN - 1 between iterations (row i pairs the features at i
	                  * with the token at i + 1); no other engine reads it */
	RT_ST_HROW = 11, /* the node of the last accepted token (iter_end: accept_path[n - 1]),
	                  * the row of its fused features an EAGLE-3 head's next root row reads;
	                  * after prefill, that row of the last chunk (the host writes it) */
	RT_ST_HEAD = 12, /* 1 when this iteration's chain came from the EAGLE-3 head of an
	                  * engine that looks for an n-gram match first (draft_pick), 0 when
	                  * from the lookup; no other engine writes it */
	RT_ST_WORDS = 16, /* header size; the ring follows */
};

enum rt_stop {
	RT_STOP_NONE = 0,
	RT_STOP_EOS = 1,    /* the EOS token was emitted (and is in the ring) */
	RT_STOP_MAXNEW = 2, /* NOUT reached MAXNEW */
	RT_STOP_CTX = 3,    /* the next iteration would not fit in MAX_CTX */
};

/* Buffer "sampling": int32[RT_SP_WORDS], the per-request sampling values the
 * captured graph reads (run-time parameters: no rebuild, no recapture). The
 * host writes it with one upload before each request's prefill, never inside
 * a capture. Two blocks of three words in logits_process's layout
 * (templates/logits_process.cu.tmpl takes a pointer to one block): the
 * target's p and the draft's q; then the Philox seed the verify and
 * tree_expand kernels key their draws with. Floats are stored as their bits. */
enum rt_samp_word {
	RT_SP_TEMP = 0,     /* target temperature (f32 bits); <= 0: greedy, one-hot argmax */
	RT_SP_TOP_K = 1,    /* target top-k; <= 0 or >= V: off */
	RT_SP_TOP_P = 2,    /* target top-p (f32 bits); >= 1: off */
	RT_SP_DRAFT = 3,    /* the draft's block: temperature, top-k 0, top-p 1 */
	RT_SP_SEED_LO = 6,  /* Philox seed, low 32 bits */
	RT_SP_SEED_HI = 7,  /* high 32 bits */
	RT_SP_WORDS = 8,
};

/* Buffer "ctrl": int32[RT_CTRL_STATS + 2 * classes * depth (+ 2 * levels + 1
 * with a head)], the draft-length controller's per-request state
 * (templates/draft_ctrl.cu.tmpl, kernels/ref/draft_ctrl.c), zeroed by the
 * host before each request's prefill, so a request's decisions depend on
 * nothing that ran before it. Per class c (the drafter's signal: n-gram
 * match length - MIN_N, capped) two rows of depth words, Q16 fixed point,
 * decayed by each update: T (depth j tried: drafted, j - 1 accepted) then A
 * (depth j accepted). An engine that falls back on an EAGLE-3 head of
 * `levels` draft levels (gen/drafter_eagle3.c, HEAD > 0) has one more class
 * after them, the head's: T and A rows of `levels` words, then its probe
 * interval (one word, 0 meaning PROBE). Buffer "ctrl_cost": int32[depth + 1
 * (+ levels)], Q16: the cost of an iteration that drafts k tokens by the
 * lookup over one that drafts none (65536), then of one whose head drafts
 * k = 1 .. levels (its levels and the verify of 1 + k rows), written by the
 * host at bind (measured, or the spec's table). */
enum rt_ctrl_word {
	RT_CTRL_PREV_NOUT = 0,  /* RT_ST_NOUT when the last decision was taken */
	RT_CTRL_PREV_K = 1,     /* tokens that iteration drafted */
	RT_CTRL_PREV_CLASS = 2, /* its class, -1: no match (nothing to learn) */
	RT_CTRL_IDLE = 3,       /* matched iterations since the last draft (probing) */
	RT_CTRL_GAP = 4,        /* the probe interval now (0: PROBE; doubles while drafts fail) */
	RT_CTRL_PREV_TOK = 5,   /* 1 + the first proposed token of an iteration that drafted
	                         * none with a match, else 0: checked against the token the
	                         * target emitted (RT_ST_ROOT): a quarter of an outcome at
	                         * depth 1 */
	RT_CTRL_HEAD_K = 6,     /* levels the head drafts this iteration (0: none), read by
	                         * draft_pick; the next iteration's outcome is the head's */
	RT_CTRL_HEAD_IDLE = 7,  /* iterations with no lookup draft since the head last drafted */
	RT_CTRL_STATS = 8,      /* T and A rows per class */
};

#endif
