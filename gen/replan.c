/* An engine re-planned from its spec echo and compared with its directory
 * (replan.h). The echo ($.spec) is turned back into spec text: the same
 * members, the weights at the paths this run binds, a target or drafter
 * built from a shape given by $.shapes, a preset or file tree by the
 * tree the echo records; then gen_spec_parse and gen_plan_build as
 * `build` runs them, the echo's own paths and digests put back, and
 * gen_plan_write_json's output compared with the file member by member. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/timing.h"
#include "formats/engine_files.h"
#include "build.h"
#include "drafter.h"
#include "plan.h"
#include "replan.h"
#include "spec.h"

/* ---- writing JSON back ---------------------------------------------------- */

void gen_put_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		const unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* v as JSON; a number exactly as parsed (an integer literal, else the
 * double in 17 digits). */
void gen_put_value(FILE *f, const json_value *v)
{
	switch (v->type) {
	case JSON_NULL:
		fputs("null", f);
		break;
	case JSON_BOOL:
		fputs(v->boolean ? "true" : "false", f);
		break;
	case JSON_NUMBER:
		if (v->is_int)
			fprintf(f, "%" PRId64, v->integer);
		else
			fprintf(f, "%.17g", v->number);
		break;
	case JSON_STRING:
		gen_put_str(f, v->str, v->str_len);
		break;
	case JSON_ARRAY:
		fputc('[', f);
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				fputs(", ", f);
			gen_put_value(f, v->items[i]);
		}
		fputc(']', f);
		break;
	case JSON_OBJECT:
		fputc('{', f);
		for (size_t i = 0; i < v->n; i++) {
			if (i)
				fputs(", ", f);
			gen_put_str(f, v->members[i].key, v->members[i].key_len);
			fputs(": ", f);
			gen_put_value(f, v->members[i].value);
		}
		fputc('}', f);
		break;
	}
}

/* `"key": value` of o's members named in keys (those present), after sep. */
void gen_put_members(FILE *f, const json_value *o, const char *const *keys, const char *sep)
{
	for (const char *const *k = keys; *k; k++) {
		const json_value *v = json_get(o, *k);
		if (!v)
			continue;
		fprintf(f, "%s\"%s\": ", sep, *k);
		gen_put_value(f, v);
		sep = ", ";
	}
}

/* ---- the spec text from the echo ------------------------------------------ */

typedef struct echo {
	const char *file;          /* DIR/engine.json, for messages */
	const json_value *spec, *shapes;
	const char *tpath, *dpath; /* the weights this run binds ("" for none) */
	char tree_file[64];        /* a preset or file tree, written back; "" for none */
} echo;

/* A model's shape from $.shapes.<role> (the planner's write_cfg) in the
 * spec's shape keys. */
void gen_put_shape(FILE *f, const json_value *cfg)
{
	static const char *const keys[] = {"arch", "n_layers", "dim", "n_heads", "n_kv_heads",
	                                   "head_dim", "ffn_dim", "vocab", "rope_theta", "norm_eps",
	                                   "tied_embd", "sliding_window", "sliding_window_pattern",
	                                   "rope_local_base_freq", "query_pre_attn_scalar", NULL};
	fputc('{', f);
	gen_put_members(f, cfg, keys, "");
	fputc('}', f);
}

static const json_value *echo_obj(const echo *e, const json_value *o, const char *key,
                                  const char *path, sw_err *err)
{
	const json_value *v = NULL;
	if (json_get_object(o, key, path, &v, err)) {
		sw_err_prefix(err, "%s", e->file);
		return NULL;
	}
	return v;
}

/* The spec's "$.draft" from the echo's: the drafter its method names
 * writes its own (gen_drafter.echo_spec); any other method, alone. */
static int put_draft(FILE *f, const echo *e, const json_value *d, sw_err *err)
{
	const char *m;
	if (json_get_string(d, "method", "$.spec.draft", &m, err))
		return sw_err_prefix(err, "%s", e->file);
	const bool shape = json_get(d, "shape") != NULL;
	const json_value *dshape = json_get(e->shapes, "draft");
	if (shape && (!dshape || dshape->type != JSON_OBJECT))
		return sw_errf(err, SW_EINVAL, "%s: $.shapes.draft: expected the draft's shape (the spec "
		               "echo's draft is a shape)", e->file);
	const gen_drafter *dr = gen_drafter_of(gen_draft_kind_of(m));
	const gen_echo_in in = {.d = d, .dshape = shape ? dshape : NULL, .dpath = e->dpath};
	if (dr && dr->echo_spec) {
		dr->echo_spec(&in, f);
	} else {
		fputs("{\"method\": ", f);
		gen_put_str(f, m, strlen(m));
		fputc('}', f);
	}
	return 0;
}

/* A tree that is neither generated ("chain:6") nor reproducible from its
 * name anywhere but the build's directory (a preset of models/trees, a
 * tree file): the tree the echo records ($.shapes.tree: parent, children
 * by rank), written as a tree file of its paths with its name into
 * e->tree_file (a temporary the caller removes). A table that is no tree
 * is refused. */
static int tree_file(echo *e, sw_err *err)
{
	const json_value *t = json_get(e->shapes, "tree");
	const json_value *nm = json_get(t, "name"), *par = json_get(t, "parent"),
	                 *cs = json_get(t, "child_start"), *cl = json_get(t, "child_list");
	const size_t n = par && par->type == JSON_ARRAY ? par->n : 0;
	bool ok = nm && nm->type == JSON_STRING && n >= 1 && n <= RT_TREE_MAX_NODES && cs &&
	          cl && cs->type == JSON_ARRAY && cl->type == JSON_ARRAY && cs->n == n && cl->n == n;
	int parent[RT_TREE_MAX_NODES], rank[RT_TREE_MAX_NODES];
	for (size_t i = 0; ok && i < n; i++) {
		const json_value *p = par->items[i];
		ok = p->type == JSON_NUMBER && p->is_int && p->integer >= (i ? 0 : -1) &&
		     p->integer < (int64_t)i;
		parent[i] = ok ? (int)p->integer : -1;
		rank[i] = -1;
		for (size_t r = 0; ok && i && r < n; r++) {
			const json_value *s = cs->items[parent[i]];
			ok = s->type == JSON_NUMBER && s->is_int && s->integer >= 0 && s->integer < (int64_t)n;
			if (ok && s->integer + (int64_t)r < (int64_t)n) {
				const json_value *c = cl->items[s->integer + (int64_t)r];
				if (c->type == JSON_NUMBER && c->is_int && c->integer == (int64_t)i) {
					rank[i] = (int)r;
					break;
				}
			}
		}
		ok = ok && (!i || rank[i] >= 0);
	}
	if (!ok)
		return sw_errf(err, SW_EINVAL, "%s: $.shapes.tree: expected the tree's name, parents and "
		               "children (the tree `build` planned), found no such tree", e->file);
	const char *tmp = getenv("TMPDIR");
	snprintf(e->tree_file, sizeof(e->tree_file), "%.40s/sw-tree-XXXXXX.json",
	         tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	const int fd = mkstemps(e->tree_file, 5);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		int rc = sw_errf(err, SW_EIO, "%s: a temporary tree file: %s", e->tree_file, strerror(errno));
		e->tree_file[0] = 0;
		return rc;
	}
	fputs("{\"name\": ", f);
	gen_put_str(f, nm->str, nm->str_len);
	fputs(", \"paths\": [", f);
	for (size_t i = 1; i < n; i++) {
		int path[RT_TREE_MAX_NODES], d = 0;
		for (int u = (int)i; u > 0 && d < RT_TREE_MAX_NODES; u = parent[u])
			path[d++] = rank[u];
		fputs(i > 1 ? ", [" : "[", f);
		for (int k = d - 1; k >= 0; k--)
			fprintf(f, "%d%s", path[k], k ? ", " : "");
		fputc(']', f);
	}
	fputs("]}\n", f);
	if (fclose(f))
		return sw_errf(err, SW_EIO, "%s: a temporary tree file: write failed", e->tree_file);
	return 0;
}

/* The spec text `build` would have read: $.spec's members in order. */
static int spec_text(echo *e, char **out, size_t *len, sw_err *err)
{
	FILE *f = open_memstream(out, len);
	int rc = 0;
	if (!f)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	fputs("{", f);
	bool control = false;
	for (size_t i = 0; i < e->spec->n && !rc; i++) {
		const char *k = e->spec->members[i].key;
		const json_value *v = e->spec->members[i].value;
		fprintf(f, "%s\n", i ? "," : "");
		gen_put_str(f, k, e->spec->members[i].key_len);
		fputs(": ", f);
		control |= !strcmp(k, "control");
		if (!strcmp(k, "target") && v->type == JSON_OBJECT) {
			if (json_get(v, "shape")) {
				const json_value *t = json_get(e->shapes, "target");
				if (!t || t->type != JSON_OBJECT) {
					rc = sw_errf(err, SW_EINVAL, "%s: $.shapes.target: expected the target's "
					             "shape (the spec echo's target is a shape)", e->file);
					break;
				}
				fputs("{\"shape\": ", f);
				gen_put_shape(f, t);
				fputc('}', f);
			} else {
				fputs("{\"path\": ", f);
				gen_put_str(f, e->tpath, strlen(e->tpath));
				fputc('}', f);
			}
		} else if (!strcmp(k, "draft") && v->type == JSON_OBJECT) {
			rc = put_draft(f, e, v, err);
		} else if (!strcmp(k, "tree") && e->tree_file[0]) {
			gen_put_str(f, e->tree_file, strlen(e->tree_file));
		} else if (!strcmp(k, "roofline") && v->type == JSON_OBJECT) {
			/* "tau": null is the echo's "not given" */
			static const char *const rk[] = {"context", NULL};
			const json_value *tau = json_get(v, "tau");
			fputc('{', f);
			gen_put_members(f, v, rk, "");
			if (tau && tau->type != JSON_NULL) {
				fputs(json_get(v, "context") ? ", \"tau\": " : "\"tau\": ", f);
				gen_put_value(f, tau);
			}
			fputc('}', f);
		} else {
			gen_put_value(f, v);
		}
	}
	/* the echo leaves the controller out when it is off (the default of
	 * every drafter but the n-gram lookup's) */
	if (!control)
		fputs(",\n\"control\": {\"mode\": \"off\"}", f);
	fputs("\n}\n", f);
	if (fclose(f) || !*out) {
		free(*out);
		*out = NULL;
		return rc ? rc : sw_errf(err, SW_ENOMEM, "out of memory");
	}
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- the comparison -------------------------------------------------------- */

typedef struct cmp {
	char path[512];
	char want[200], got[200];
} cmp;

static void describe(const json_value *v, char *out, size_t n)
{
	if (!v) {
		snprintf(out, n, "nothing (no such member)");
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		snprintf(out, n, "null");
		break;
	case JSON_BOOL:
		snprintf(out, n, "%s", v->boolean ? "true" : "false");
		break;
	case JSON_NUMBER:
		if (v->is_int)
			snprintf(out, n, "%" PRId64, v->integer);
		else
			snprintf(out, n, "%.9g", v->number);
		break;
	case JSON_STRING:
		snprintf(out, n, "\"%.120s%s\"", v->str, v->str_len > 120 ? "..." : "");
		break;
	case JSON_ARRAY:
		snprintf(out, n, "an array of %zu items", v->n);
		break;
	case JSON_OBJECT:
		snprintf(out, n, "an object of %zu members", v->n);
		break;
	}
}

/* Two long strings (kernel uris) shown from a little before where they
 * part, so the message shows the difference. */
static void describe_str(const json_value *v, size_t from, char *out, size_t n)
{
	const size_t len = v->str_len - from;
	snprintf(out, n, "\"%s%.100s%s\"", from ? "..." : "", v->str + from, len > 100 ? "..." : "");
}

static bool differ(cmp *c, const char *path, const json_value *want, const json_value *got)
{
	snprintf(c->path, sizeof(c->path), "%s", path);
	describe(want, c->want, sizeof(c->want));
	describe(got, c->got, sizeof(c->got));
	if (want && got && want->type == JSON_STRING && got->type == JSON_STRING) {
		size_t k = 0;
		while (k < want->str_len && k < got->str_len && want->str[k] == got->str[k])
			k++;
		const size_t from = k > 40 ? k - 40 : 0;
		describe_str(want, from, c->want, sizeof(c->want));
		describe_str(got, from, c->got, sizeof(c->got));
	}
	return false;
}

/* Whether got (the file) equals want (the re-plan), else the first
 * difference in want's document order into c. top: the root, whose
 * build-added members (formats/engine_files.h) are not the plan's. */
static bool same(const json_value *want, const json_value *got, const char *path, bool top, cmp *c)
{
	char sub[512];
	if (want->type != got->type)
		return differ(c, path, want, got);
	switch (want->type) {
	case JSON_NULL:
		return true;
	case JSON_BOOL:
		return want->boolean == got->boolean || differ(c, path, want, got);
	case JSON_NUMBER:
		return (want->is_int == got->is_int &&
		        (want->is_int ? want->integer == got->integer : want->number == got->number)) ||
		       differ(c, path, want, got);
	case JSON_STRING:
		return (want->str_len == got->str_len && !memcmp(want->str, got->str, want->str_len)) ||
		       differ(c, path, want, got);
	case JSON_ARRAY:
		for (size_t i = 0; i < want->n && i < got->n; i++)
			if (!same(want->items[i], got->items[i], json_path_index(sub, sizeof(sub), path, i),
			           false, c))
				return false;
		if (want->n != got->n) {
			const size_t i = want->n < got->n ? want->n : got->n;
			json_path_index(sub, sizeof(sub), path, i);
			differ(c, sub, i < want->n ? want->items[i] : NULL, i < got->n ? got->items[i] : NULL);
			snprintf(i < want->n ? c->got : c->want, sizeof(c->got), "no item %zu (%zu items)", i,
			         i < want->n ? got->n : want->n);
			return false;
		}
		return true;
	case JSON_OBJECT:
		for (size_t i = 0; i < want->n; i++) {
			const json_member *m = &want->members[i];
			json_path_key(sub, sizeof(sub), path, m->key);
			const json_value *g = json_get(got, m->key);
			if (!g)
				return differ(c, sub, m->value, NULL);
			if (!same(m->value, g, sub, false, c))
				return false;
		}
		for (size_t i = 0; i < got->n; i++) {
			const char *k = got->members[i].key;
			if (json_get(want, k) || (top && (!strcmp(k, RT_ENGINE_TOOLKIT) ||
			                                  !strcmp(k, RT_ENGINE_DRAFT_FILES) ||
			                                  !strcmp(k, RT_ENGINE_FILES))))
				continue;
			differ(c, json_path_key(sub, sizeof(sub), path, k), NULL, got->members[i].value);
			snprintf(c->want, sizeof(c->want), "no such member");
			return false;
		}
		return true;
	}
	return true;
}

/* $.files names only what build writes for the spec: kernels.cu, and with
 * a compile resources.json, kernels.ptx and a cubin per arch of $.spec.archs
 * (an image for another arch would be loaded on such a GPU). */
static int files_check(const char *file, const json_value *files, const gen_spec *s, sw_err *err)
{
	if (!files || files->type != JSON_OBJECT || !json_get(files, "kernels.cu"))
		return sw_errf(err, SW_EINVAL, "%s: $.files: expected the build's file list, with "
		               "kernels.cu", file);
	for (size_t i = 0; i < files->n; i++) {
		const char *k = files->members[i].key;
		bool ok = !strcmp(k, "kernels.cu") || !strcmp(k, "resources.json") ||
		          !strcmp(k, "kernels.ptx");
		for (int a = 0; a < s->n_archs && !ok; a++) {
			char want[64];
			snprintf(want, sizeof(want), "kernels.%s.cubin", s->archs[a]);
			ok = !strcmp(k, want);
		}
		if (!ok)
			return sw_errf(err, SW_EINVAL, "%s: $.files[\"%.80s\"]: not a file `build` writes for "
			               "this engine (kernels.cu, resources.json, kernels.ptx, and "
			               "kernels.<arch>.cubin for $.spec.archs): rebuild the engine", file, k);
	}
	return 0;
}

/* ---- kernels.cu -------------------------------------------------------------- */

static bool is_src_tree(const char *d)
{
	char p[1200];
	struct stat st;
	snprintf(p, sizeof(p), "%.1000s/templates", d);
	if (stat(p, &st) || !S_ISDIR(st.st_mode))
		return false;
	snprintf(p, sizeof(p), "%.1000s/kernels/philox.h", d);
	return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* The source tree kernels.cu is rendered from: the given one, $SW_SRC_DIR,
 * the current directory, or the one above the running binary
 * (build/specwright in a checkout); false when none is present (a bundle
 * on a machine without the sources, where nothing compiles kernels.cu). */
static bool find_src(const char *given, char *out, size_t n)
{
	const char *env = getenv("SW_SRC_DIR");
	const char *cand[] = {given, env, "."};
	for (size_t i = 0; i < sizeof(cand) / sizeof(*cand); i++)
		if (cand[i] && *cand[i] && strlen(cand[i]) < n && is_src_tree(cand[i])) {
			memcpy(out, cand[i], strlen(cand[i]) + 1);
			return true;
		}
	char exe[PATH_MAX];
	const ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l <= 0)
		return false;
	exe[l] = 0;
	for (int up = 0; up < 2; up++) {
		char *sl = strrchr(exe, '/');
		if (!sl)
			return false;
		*sl = 0;
	}
	if (!exe[0] || strlen(exe) >= n || !is_src_tree(exe))
		return false;
	memcpy(out, exe, strlen(exe) + 1);
	return true;
}

static int source_check(const char *dir, const gen_plan *p, const char *src, sw_err *err)
{
	char path[1200], *want = NULL;
	size_t wl = 0, gl = 0;
	int rc = gen_build_render(p, src, &want, &wl, err);
	if (rc)
		return sw_err_prefix(err, "%s/kernels.cu: rendering the plan's kernels to compare", dir);
	snprintf(path, sizeof(path), "%.1100s/kernels.cu", dir);
	char *got = sw_read_capped(path, SW_CAP_SOURCE, "an engine's kernels.cu", &gl, err);
	if (!got) {
		free(want);
		return err->code ? err->code : SW_EIO;
	}
	if (wl != gl || memcmp(want, got, wl)) {
		size_t i = 0, line = 1, ls = 0;
		for (; i < wl && i < gl && want[i] == got[i]; i++)
			if (want[i] == '\n') {
				line++;
				ls = i + 1;
			}
		const size_t we = ls + strcspn(want + ls, "\n"), ge = ls + strcspn(got + ls, "\n");
		rc = sw_errf(err, SW_EINVAL, "%s: line %zu is not what the engine's plan renders (from "
		             "%s/templates): expected \"%.*s\", found \"%.*s\" (edited after build?): "
		             "rebuild the engine", path, line, src, (int)(we - ls > 100 ? 100 : we - ls),
		             ls < wl ? want + ls : "", (int)(ge - ls > 100 ? 100 : ge - ls),
		             ls < gl ? got + ls : "");
	}
	free(want);
	free(got);
	return rc;
}

/* ---- the check ----------------------------------------------------------------- */

static const char *echo_str(const json_value *o, const char *key)
{
	const json_value *v = json_get(o, key);
	return v && v->type == JSON_STRING ? v->str : NULL;
}

int gen_engine_replan_check(const char *dir, const gen_replan_opts *o, gen_replan_stats *st,
                            sw_err *err)
{
	const gen_replan_opts none = {0};
	gen_replan_stats local;
	char file[1100], *text = NULL, *stext = NULL, *ptext = NULL;
	size_t len = 0, slen = 0, plen = 0;
	json_value *disk = NULL, *fresh = NULL;
	gen_spec *sp = NULL;
	gen_plan plan;
	bool planned = false;
	echo e = {.file = file};
	int rc;
	const double t0 = sw_now_s();
	if (!o)
		o = &none;
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	snprintf(file, sizeof(file), "%.1080s/engine.json", dir);
	if (!(text = sw_read_capped(file, SW_CAP_ENGINE_JSON, "an engine.json", &len, err)))
		return err->code ? err->code : SW_EIO;
	if (!(disk = json_parse(text, len, file, err))) {
		rc = SW_EINVAL;
		goto out;
	}
	if (!(e.spec = echo_obj(&e, disk, "spec", "$", err)) ||
	    !(e.shapes = echo_obj(&e, disk, "shapes", "$", err))) {
		rc = SW_EINVAL;
		goto out;
	}
	const json_value *et = json_get(e.spec, "target"), *ed = json_get(e.spec, "draft");
	const char *tpath = echo_str(et, "path"), *dpath = echo_str(ed, "path");
	e.tpath = o->target_path ? o->target_path : tpath ? tpath : "";
	e.dpath = o->draft_path ? o->draft_path : dpath ? dpath : "";
	const char *tree = echo_str(e.spec, "tree");
	const size_t tl = tree ? strlen(tree) : 0;
	if (tree && (!strchr(tree, ':') || (tl > 5 && !strcmp(tree + tl - 5, ".json"))))
		if ((rc = tree_file(&e, err))) /* not generated: a preset or a file */
			goto out;
	if ((rc = spec_text(&e, &stext, &slen, err)))
		goto out;
	if (!(sp = malloc(sizeof(*sp)))) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out;
	}
	char doc[1200];
	snprintf(doc, sizeof(doc), "%s $.spec", file);
	if ((rc = gen_spec_parse(stext, slen, doc, NULL, sp, err))) {
		sw_err_prefix(err, "%s: the engine cannot be re-planned from its spec echo", dir);
		goto out;
	}
	/* the echo's own words back: the paths it recorded (this run may bind a
	 * copy), the method and tree as written */
	if (tpath && !sp->target.from_shape)
		snprintf(sp->target.path, sizeof(sp->target.path), "%s", tpath);
	if (dpath && !sp->draft.from_shape)
		snprintf(sp->draft.path, sizeof(sp->draft.path), "%s", dpath);
	if (echo_str(ed, "method"))
		snprintf(sp->draft_method, sizeof(sp->draft_method), "%s", echo_str(ed, "method"));
	if (tree)
		snprintf(sp->tree_spec, sizeof(sp->tree_spec), "%s", tree);
	if ((rc = gen_plan_build(sp, &plan, err))) {
		sw_err_prefix(err, "%s: the engine cannot be re-planned from its spec echo", dir);
		goto out;
	}
	planned = true;
	/* the weights digests: the build's record, which bind checks against
	 * the weights themselves */
	if (echo_str(et, "digest"))
		snprintf(plan.target_digest, sizeof(plan.target_digest), "%s", echo_str(et, "digest"));
	if (echo_str(ed, "digest"))
		snprintf(plan.draft_digest, sizeof(plan.draft_digest), "%s", echo_str(ed, "digest"));
	FILE *f = open_memstream(&ptext, &plen);
	rc = f ? gen_plan_write_json(&plan, f) : SW_ENOMEM;
	if ((f && fclose(f)) || rc || !ptext) {
		rc = sw_errf(err, SW_ENOMEM, "%s: the re-planned engine.json: out of memory", dir);
		goto out;
	}
	if (!(fresh = json_parse(ptext, plen, "the re-planned engine.json", err))) {
		rc = SW_EINVAL;
		goto out;
	}
	cmp c;
	/* weights other than the recorded ones: named, a difference may be theirs */
	const bool other = !sp->target.from_shape && tpath && strcmp(e.tpath, tpath);
	if (!same(fresh, disk, "$", true, &c)) {
		rc = sw_errf(err, SW_EINVAL, "%s: %s: expected %s (the engine re-planned from its own "
		             "$.spec%s%s), found %s: engine.json is not what `specwright build` makes of its "
		             "spec (edited after build?); rebuild the engine", file, c.path, c.want,
		             other ? " over the target weights " : "", other ? e.tpath : "", c.got);
		goto out;
	}
	if ((rc = files_check(file, json_get(disk, RT_ENGINE_FILES), sp, err)))
		goto out;
	if (find_src(o->src_dir, st->src_dir, sizeof(st->src_dir))) {
		if ((rc = source_check(dir, &plan, st->src_dir, err)))
			goto out;
		st->source_checked = true;
	}
	rc = 0;
out:
	if (e.tree_file[0])
		unlink(e.tree_file);
	if (planned)
		gen_plan_free(&plan);
	json_free(fresh);
	json_free(disk);
	free(ptext);
	free(stext);
	free(text);
	free(sp);
	st->seconds = sw_now_s() - t0;
	return rc;
}
