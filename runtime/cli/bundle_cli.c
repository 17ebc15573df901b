/* `specwright bundle ENGINE_DIR... -o DIR [--with-weights] [--kit KITDIR]`:
 * a folder a bare GPU machine runs (the portable kit from `make portable`,
 * the engines, optionally their weights, bundle.json, launch.tsv), written
 * through core/output.h (an exclusive temporary beside DIR, put in place
 * last; an existing DIR replaced only when it is a whole bundle this
 * program wrote); and `specwright bundle --verify DIR`: the tree against
 * bundle.json, which lists every file (size, SHA-256) and directory: an
 * extra, missing or changed entry is refused. The layout and
 * the launcher's search order are in runtime/cli/README.md. Not the kit's
 * assembly (runtime/cli/bundle/kit.sh) nor the launcher (bundle/run.sh). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <dirent.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "core/digest.h"
#include "core/wparts.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/output.h"
#include "core/sha256.h"
#include "formats/engine_files.h"
#include "engine/manifest.h"
#include "model/block_drafter.h"
#include "model/eagle3.h"

/* 2: bundle.json lists the directories too ("dirs"), and --verify refuses
 * any entry it does not list */
#define BUNDLE_FORMAT 2
#define MAX_ENGINES 64
#define PATH_CAP 1400

typedef struct bfile {
	char path[600];   /* relative to the bundle */
	uint64_t bytes;
	char sha[65];
	int part;         /* 0 kit, 1 engines, 2 weights, 3 bundle's own (launch.tsv) */
} bfile;

typedef struct weights_ref {
	char role[8];       /* target, draft */
	char built[1024];   /* the path engine.json records */
	char file[600];     /* in the bundle (weights/...), "" when referenced */
	char sha[65];       /* of the file (a directory: of its model.safetensors), "" if unreadable */
	uint64_t bytes;
	char digest[32];
	bool dir;           /* a block drafter's or an EAGLE-3 head's directory */
	bool e3;            /* an EAGLE-3 head's (config.json + model.safetensors) */
} weights_ref;

typedef struct bengine {
	char src[PATH_CAP], name[256];
	rt_manifest *man;
	char archs[256];    /* JSON array items: "sm_90", "ptx" */
	weights_ref w[2];
	int n_w;
} bengine;

typedef struct bundle {
	char out[PATH_MAX], tmp[SW_OUT_PATH], kit[PATH_MAX];
	bool with_weights;
	bengine eng[MAX_ENGINES];
	int n_eng;
	bfile *files;
	int n_files, cap_files;
	char glibc[32], level[16];
	/* weights already copied: source realpath -> bundle path */
	char (*wsrc)[PATH_MAX], (*wdst)[600];
	int n_wcopied;
} bundle;

static void usage(FILE *f)
{
	fprintf(f, "usage: specwright bundle ENGINE_DIR [ENGINE_DIR ...] -o DIR [--with-weights] [--kit KITDIR]\n"
	           "       specwright bundle --verify DIR | --verify-listing DIR\n"
	           "  a folder to copy to a GPU machine with a driver and little else: the portable kit\n"
	           "  (bin/, lib/, run, check/; `make portable` builds it into build/portable, the default\n"
	           "  --kit is <this binary's directory>/portable), the engines under DIR/engines/NAME and,\n"
	           "  with --with-weights, their weights under DIR/weights (checked against each engine's\n"
	           "  digest first; without it the engines read the absolute paths they were built from:\n"
	           "  on another machine give DIR/run run ENGINE --weights DIR_OR_FILE).\n"
	           "  DIR/run run [NAME] [options] runs one; DIR/run --probe says what the machine has;\n"
	           "  DIR/run --verify checks the tree against DIR/bundle.json: every file's size and SHA-256,\n"
	           "  every directory, and nothing else there (--verify-listing: names and sizes only, what\n"
	           "  the launcher checks on every start). An existing DIR is replaced only when it is a\n"
	           "  whole bundle (--verify passes); anything else there is refused, never removed.\n");
}

/* ---- files ---------------------------------------------------------------- */

static int mkdirs(const char *path, sw_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) && errno != EEXIST)
				return sw_errf(err, SW_EIO, "%s: cannot create: %s", p, strerror(errno));
			*s = '/';
		}
	if (mkdir(p, 0755) && errno != EEXIST)
		return sw_errf(err, SW_EIO, "%s: cannot create: %s", p, strerror(errno));
	return 0;
}

static int add_file(bundle *b, const char *rel, uint64_t bytes, const char *sha, int part, sw_err *err)
{
	if (b->n_files == b->cap_files) {
		int cap = b->cap_files ? 2 * b->cap_files : 64;
		bfile *f = realloc(b->files, sizeof(*f) * (size_t)cap);
		if (!f)
			return sw_errf(err, SW_ENOMEM, "out of memory");
		b->files = f;
		b->cap_files = cap;
	}
	bfile *f = &b->files[b->n_files++];
	snprintf(f->path, sizeof(f->path), "%s", rel);
	f->bytes = bytes;
	snprintf(f->sha, sizeof(f->sha), "%s", sha);
	f->part = part;
	return 0;
}

/* Copies src to b->tmp/rel (mode: src's permission bits), hashing as it
 * goes, and lists it. */
static int copy_in(bundle *b, const char *src, const char *rel, int part, sw_err *err)
{
	char dst[PATH_MAX + 700], dir[PATH_MAX + 700];
	snprintf(dst, sizeof(dst), "%s/%s", b->tmp, rel);
	snprintf(dir, sizeof(dir), "%s", dst);
	int rc = mkdirs(dirname(dir), err);
	if (rc)
		return rc;
	int in = sw_open_regular(src, err);
	if (in < 0)
		return in;
	struct stat st;
	fstat(in, &st);
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 0777);
	if (out < 0) {
		close(in);
		return sw_errf(err, SW_EIO, "%s: cannot create: %s", dst, strerror(errno));
	}
	static unsigned char buf[1 << 16];
	sw_sha256 s;
	sw_sha256_init(&s);
	for (;;) {
		ssize_t r = read(in, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = sw_errf(err, SW_EIO, "%s: read failed: %s", src, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		sw_sha256_update(&s, buf, (size_t)r);
		for (ssize_t o = 0; o < r;) {
			ssize_t w = write(out, buf + o, (size_t)(r - o));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				rc = sw_errf(err, SW_EIO, "%s: write failed: %s", dst, strerror(errno));
				break;
			}
			o += w;
		}
		if (rc)
			break;
	}
	close(in);
	if (close(out) && !rc)
		rc = sw_errf(err, SW_EIO, "%s: write failed: %s", dst, strerror(errno));
	if (rc)
		return rc;
	char hex[65];
	const uint64_t n = s.bytes;
	sw_sha256_hex(&s, hex);
	return add_file(b, rel, n, hex, part, err);
}

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static json_value *read_json(const char *path, sw_err *err)
{
	size_t len = 0;
	char *text = sw_read_capped(path, SW_CAP_ENGINE_JSON, "an engine.json", &len, err);
	if (!text)
		return NULL;
	json_value *root = json_parse(text, len, path, err);
	free(text);
	return root;
}

/* ---- the kit ---------------------------------------------------------------- */

static int kit_default(char *out, size_t n, sw_err *err)
{
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k <= 0)
		return sw_errf(err, SW_EIO, "/proc/self/exe: cannot read: %s (give --kit KITDIR)", strerror(errno));
	exe[k] = 0;
	snprintf(out, n, "%s/portable", dirname(exe));
	return 0;
}

static int kit_copy(bundle *b, sw_err *err)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/kit.json", b->kit);
	struct stat st;
	if (stat(path, &st))
		return sw_errf(err, SW_EINVAL, "%s: no portable runtime kit there (%s: %s): `make portable` "
		               "builds it into build/portable, or give --kit KITDIR", b->kit, path,
		               strerror(errno));
	json_value *root = read_json(path, err);
	if (!root)
		return SW_EINVAL;
	const char *g = NULL, *l = NULL;
	const json_value *files = NULL;
	int rc = json_get_string(root, "glibc_floor", "$", &g, err);
	if (!rc)
		rc = json_get_string(root, "x86_64_level", "$", &l, err);
	if (!rc)
		rc = json_get_array(root, "files", "$", 1, SIZE_MAX, &files, err);
	if (rc) {
		json_free(root);
		return sw_err_prefix(err, "%s: a portable kit's kit.json", path);
	}
	snprintf(b->glibc, sizeof(b->glibc), "%s", g);
	snprintf(b->level, sizeof(b->level), "%s", l);
	for (size_t i = 0; i < files->n && !rc; i++) {
		const char *rel = NULL;
		char jp[64], src[PATH_MAX + 700];
		snprintf(jp, sizeof(jp), "$.files[%zu]", i);
		if ((rc = json_get_string(files->items[i], "path", jp, &rel, err)))
			break;
		if (rel[0] == '/' || strstr(rel, "..")) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s.path: a path inside the kit expected, found \"%s\"",
			             path, jp, rel);
			break;
		}
		snprintf(src, sizeof(src), "%s/%s", b->kit, rel);
		rc = copy_in(b, src, rel, 0, err);
	}
	if (!rc)
		rc = copy_in(b, path, "kit.json", 0, err);
	json_free(root);
	return rc;
}

/* ---- engines and weights ------------------------------------------------------ */

/* The weights digest of the `tag` (target/draft) buffers of m, read from
 * model (or the block drafter bd, or the EAGLE-3 head e3), as
 * rt_engine_bind uploads them (gen/build.c weights_digest). */
static int manifest_digest(const rt_manifest *m, const char *tag, const rt_model *model,
                           const rt_block_drafter *bd, const rt_eagle3 *e3, char out[32], sw_err *err)
{
	sw_digest d;
	sw_digest_init(&d);
	const size_t tl = strlen(tag);
	for (int i = 0; i < m->n_bufs; i++) {
		const rt_engine_buf *bf = &m->bufs[i];
		if (strcmp(bf->kind, "weight") || strncmp(bf->name, tag, tl) || bf->name[tl] != '.')
			continue;
		const char *field = bf->name + tl + 1;
		const bool layered = rt_manifest_field_layered(field);
		/* a fused buffer (core/wparts.h): each part over the layers */
		const char *parts[SW_WPARTS_MAX];
		int np = sw_wparts(field, parts);
		if (!np) {
			parts[0] = field;
			np = 1;
		}
		for (int p = 0; p < np; p++)
			for (int l = 0; l < (layered ? (int)bf->shape[0] : 1); l++) {
				size_t n = 0;
				const char *f = parts[p];
				const float *x = bd   ? rt_bd_weight(bd, f, layered ? l : -1, &n)
				                 : e3 ? rt_e3_weight(e3, f, &n)
				                      : rt_model_weight(model, f, layered ? l : -1, &n);
				if (!x)
					return sw_errf(err, SW_EINVAL, "no weight %s (layer %d) for the engine's "
					               "buffer %s", f, layered ? l : -1, bf->name);
				sw_digest_weight(&d, f, layered ? l : -1, x, n);
			}
	}
	sw_digest_format(&d, out, 32);
	return 0;
}

/* The engine's weights against its recorded digests (--with-weights). */
static int check_digests(bengine *e, sw_err *err)
{
	const rt_manifest *m = e->man;
	rt_model *t = rt_model_load(m->target_path, err), *dm = NULL;
	rt_block_drafter *bd = NULL;
	rt_eagle3 *e3 = NULL;
	char got[32];
	int rc = 0;
	if (!t)
		return sw_err_prefix(err, "engine %s: target weights", e->src);
	if ((rc = manifest_digest(m, "target", t, NULL, NULL, got, err)))
		goto out;
	if (strcmp(got, m->target_digest)) {
		rc = sw_errf(err, SW_EINVAL, "engine %s: target weights %s: digest %s, but %s/engine.json "
		             "$.spec.target.digest is %s: not the weights the engine was built for",
		             e->src, m->target_path, got, e->src, m->target_digest);
		goto out;
	}
	if (m->draft_kind == RT_ENGINE_DRAFT_MODEL) {
		if (!(dm = rt_model_load(m->draft_path, err))) {
			rc = sw_err_prefix(err, "engine %s: draft weights", e->src);
			goto out;
		}
		rc = manifest_digest(m, "draft", dm, NULL, NULL, got, err);
	} else if (m->draft_kind == RT_ENGINE_DRAFT_BLOCK) {
		if (!(bd = rt_block_drafter_load(m->draft_path, t, err))) {
			rc = sw_err_prefix(err, "engine %s: block drafter", e->src);
			goto out;
		}
		rc = manifest_digest(m, "draft", NULL, bd, NULL, got, err);
	} else if (m->draft_kind == RT_ENGINE_DRAFT_EAGLE3) {
		if (!(e3 = rt_eagle3_load(m->draft_path, t, err))) {
			rc = sw_err_prefix(err, "engine %s: EAGLE-3 head", e->src);
			goto out;
		}
		rc = manifest_digest(m, "draft", NULL, NULL, e3, got, err);
	}
	if (rc)
		goto out;
	if ((dm || bd || e3) && strcmp(got, m->draft_digest))
		rc = sw_errf(err, SW_EINVAL, "engine %s: draft weights %s: digest %s, but %s/engine.json "
		             "$.spec.draft.digest is %s: not the weights the engine was built for",
		             e->src, m->draft_path, got, e->src, m->draft_digest);
out:
	rt_eagle3_free(e3);
	rt_block_drafter_free(bd);
	rt_model_free(dm);
	rt_model_free(t);
	return rc;
}

/* A name under weights/ for src (a file or a drafter directory): its
 * basename, or engine-basename when another source took that name; the
 * same source twice is copied once. *copied: already in the bundle. */
static int weights_name(bundle *b, const bengine *e, const char *src, char *out, size_t n,
                        bool *copied, sw_err *err)
{
	char real[PATH_MAX], base[PATH_MAX];
	if (!realpath(src, real))
		return sw_errf(err, SW_EIO, "engine %s: weights %s: %s", e->src, src, strerror(errno));
	snprintf(base, sizeof(base), "%s", real);
	const char *bn = basename(base);
	*copied = false;
	for (int i = 0; i < b->n_wcopied; i++)
		if (!strcmp(b->wsrc[i], real)) {
			snprintf(out, n, "%s", b->wdst[i]);
			*copied = true;
			return 0;
		}
	/* built apart from out: out lies in e's own record, and e->name too */
	char name[700];
	snprintf(name, sizeof(name), "weights/%s", bn);
	for (int i = 0; i < b->n_wcopied; i++)
		if (!strcmp(b->wdst[i], name))
			snprintf(name, sizeof(name), "weights/%s-%s", e->name, bn);
	if (strlen(name) >= n)
		return sw_errf(err, SW_EINVAL, "engine %s: weights %s: a name under weights/ longer than %zu bytes",
		               e->src, src, n - 1);
	memcpy(out, name, strlen(name) + 1);
	snprintf(b->wsrc[b->n_wcopied], PATH_MAX, "%s", real);
	snprintf(b->wdst[b->n_wcopied], 600, "%s", out);
	b->n_wcopied++;
	return 0;
}

static int engine_weights(bundle *b, bengine *e, sw_err *err)
{
	const rt_manifest *m = e->man;
	const bool draft = m->draft_kind == RT_ENGINE_DRAFT_MODEL || m->draft_kind == RT_ENGINE_DRAFT_BLOCK ||
	                   m->draft_kind == RT_ENGINE_DRAFT_EAGLE3;
	int rc;
	if (b->with_weights && !m->target_path[0]) {
		/* a shape-only engine has no weights to carry: it runs for timing
		 * with --random-weights (its draft is a shape too) */
		fprintf(stderr, "bundle: engine %s is built from a shape: no weights to carry (time it "
		        "with `run --random-weights SEED`)\n", e->name);
	} else if (b->with_weights) {
		if (!m->target_digest[0])
			return sw_errf(err, SW_EINVAL, "engine %s: %s/engine.json $.spec.target.digest: missing "
			               "(a weights file without its digest cannot be checked)", e->src, e->src);
		if (draft && (!m->draft_path[0] || !m->draft_digest[0]))
			return sw_errf(err, SW_EINVAL, "engine %s: %s/engine.json $.spec.draft: no weights path "
			               "and digest to bundle (drop --with-weights)", e->src, e->src);
		if ((rc = check_digests(e, err)))
			return rc;
	}
	for (int r = 0; r < (draft ? 2 : 1); r++) {
		weights_ref *w = &e->w[e->n_w++];
		const char *src = r ? m->draft_path : m->target_path;
		snprintf(w->role, sizeof(w->role), "%s", r ? "draft" : "target");
		snprintf(w->built, sizeof(w->built), "%s", src);
		snprintf(w->digest, sizeof(w->digest), "%s", r ? m->draft_digest : m->target_digest);
		w->e3 = r && m->draft_kind == RT_ENGINE_DRAFT_EAGLE3;
		w->dir = w->e3 || (r && m->draft_kind == RT_ENGINE_DRAFT_BLOCK);
		if (!src[0])
			continue;
		if (!b->with_weights || !m->target_path[0]) {
			/* referenced (or a head beside a shape-built target: nothing
			 * to bind it to): its hash when it is readable here, for the
			 * record */
			char p[PATH_MAX + 32];
			snprintf(p, sizeof(p), w->dir ? "%s/model.safetensors" : "%s", src);
			sw_err e2 = {0};
			if (sw_sha256_file(p, w->sha, &w->bytes, &e2))
				w->sha[0] = 0;
			continue;
		}
		bool copied = false;
		if ((rc = weights_name(b, e, src, w->file, sizeof(w->file), &copied, err)))
			return rc;
		if (!w->dir) {
			if (!copied && (rc = copy_in(b, src, w->file, 2, err)))
				return rc;
		} else {
			static const char *const parts[] = {"config.json", "model.safetensors"};
			for (int i = 0; i < 2 && !copied; i++) {
				char s[PATH_MAX + 32], rel[700];
				snprintf(s, sizeof(s), "%s/%s", src, parts[i]);
				snprintf(rel, sizeof(rel), "%s/%s", w->file, parts[i]);
				if ((rc = copy_in(b, s, rel, 2, err)))
					return rc;
			}
		}
		/* the hash bundle.json gives the weights: the listed file's */
		char want[700];
		snprintf(want, sizeof(want), w->dir ? "%s/model.safetensors" : "%s", w->file);
		for (int i = 0; i < b->n_files; i++)
			if (!strcmp(b->files[i].path, want)) {
				snprintf(w->sha, sizeof(w->sha), "%s", b->files[i].sha);
				w->bytes = b->files[i].bytes;
			}
	}
	return 0;
}

static int engine_copy(bundle *b, bengine *e, sw_err *err)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/engine.json", e->src);
	json_value *root = read_json(path, err);
	if (!root)
		return SW_EINVAL;
	const json_value *files = json_get(root, "files");
	int rc = 0;
	char rel[700], src[PATH_MAX + 300];
	int na = 0;
	e->archs[0] = 0;
	/* rt_engine_files_check has checked the list: names inside the directory */
	for (size_t i = 0; files && i < files->n && !rc; i++) {
		const char *k = files->members[i].key;
		int arch;
		char tail[8];
		snprintf(src, sizeof(src), "%s/%s", e->src, k);
		snprintf(rel, sizeof(rel), "engines/%s/%s", e->name, k);
		rc = copy_in(b, src, rel, 1, err);
		size_t al = strlen(e->archs);
		if (sscanf(k, "kernels.sm_%d.%7s", &arch, tail) == 2 && !strcmp(tail, "cubin"))
			snprintf(e->archs + al, sizeof(e->archs) - al, "%s\"sm_%d\"", na++ ? ", " : "", arch);
		else if (!strcmp(k, "kernels.ptx"))
			snprintf(e->archs + al, sizeof(e->archs) - al, "%s\"ptx\"", na++ ? ", " : "");
	}
	json_free(root);
	if (!rc) {
		snprintf(rel, sizeof(rel), "engines/%s/engine.json", e->name);
		rc = copy_in(b, path, rel, 1, err);
	}
	if (!rc) { /* engine.json's own integrity record (rt_engine_sum_check) */
		snprintf(src, sizeof(src), "%s/engine.sum", e->src);
		snprintf(rel, sizeof(rel), "engines/%s/engine.sum", e->name);
		rc = copy_in(b, src, rel, 1, err);
	}
	return rc;
}

static int engine_open(bundle *b, const char *dir, sw_err *err)
{
	if (b->n_eng == MAX_ENGINES)
		return sw_errf(err, SW_EINVAL, "more than %d engines", MAX_ENGINES);
	bengine *e = &b->eng[b->n_eng];
	memset(e, 0, sizeof(*e));
	snprintf(e->src, sizeof(e->src), "%s", dir);
	size_t l = strlen(e->src);
	while (l > 1 && e->src[l - 1] == '/')
		e->src[--l] = 0;
	char tmp[PATH_CAP];
	snprintf(tmp, sizeof(tmp), "%s", e->src);
	snprintf(e->name, sizeof(e->name), "%s", basename(tmp));
	if (!cli_is_engine_dir(e->src))
		return sw_errf(err, SW_EINVAL, "%s: not an engine directory (no engine.json; `specwright "
		               "build SPEC -o DIR` makes one)", e->src);
	if (!(e->man = rt_manifest_load(e->src, err)))
		return SW_EINVAL;
	b->n_eng++;
	if (rt_engine_files_check(e->src, err) || cli_engine_verify(e->man, e->src, NULL, NULL, NULL, err))
		return SW_EINVAL;
	for (int i = 0; i < b->n_eng - 1; i++)
		if (!strcmp(b->eng[i].name, e->name))
			return sw_errf(err, SW_EINVAL, "engines %s and %s: both would be engines/%s in the bundle "
			               "(name them apart)", b->eng[i].src, e->src, e->name);
	return 0;
}

/* ---- the tree ------------------------------------------------------------------ */

/* One entry of a bundle's tree: a file, a directory, or anything else
 * (a link, a FIFO: a bundle holds none). */
typedef struct bentry {
	char path[600];
	char type; /* 'f', 'd', 'o' */
	uint64_t bytes;
} bentry;

typedef struct blist {
	bentry *e;
	int n, cap;
} blist;

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const bentry *)a)->path, ((const bentry *)b)->path);
}

static int blist_push(blist *l, const char *path, char type, uint64_t bytes, sw_err *err)
{
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 128;
		bentry *e = realloc(l->e, sizeof(*e) * (size_t)cap);
		if (!e)
			return sw_errf(err, SW_ENOMEM, "out of memory");
		l->e = e;
		l->cap = cap;
	}
	bentry *e = &l->e[l->n++];
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->type = type;
	e->bytes = bytes;
	return 0;
}

/* Every entry under root (relative paths; never through a link), sorted. */
static int walk(const char *root, const char *rel, int depth, blist *l, sw_err *err)
{
	char p[PATH_MAX + 700];
	snprintf(p, sizeof(p), "%s%s%s", root, rel[0] ? "/" : "", rel);
	if (depth > 16)
		return sw_errf(err, SW_EINVAL, "%s: nested more than 16 directories deep: not a bundle's tree", p);
	DIR *d = opendir(p);
	if (!d)
		return sw_errf(err, SW_EIO, "%s: cannot read: %s", p, strerror(errno));
	struct dirent *de;
	int rc = 0;
	while (!rc && (de = readdir(d))) {
		char r[700], q[PATH_MAX + 1400];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(r, sizeof(r), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >= (int)sizeof(r)) {
			rc = sw_errf(err, SW_EINVAL, "%s/%s: a path longer than a bundle holds", p, de->d_name);
			break;
		}
		snprintf(q, sizeof(q), "%s/%s", root, r);
		if (lstat(q, &st)) {
			rc = sw_errf(err, SW_EIO, "%s: %s", q, strerror(errno));
			break;
		}
		const char t = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : 'o';
		rc = blist_push(l, r, t, (uint64_t)st.st_size, err);
		if (!rc && t == 'd')
			rc = walk(root, r, depth + 1, l, err);
	}
	closedir(d);
	if (!rc && !rel[0])
		qsort(l->e, (size_t)l->n, sizeof(*l->e), entry_cmp);
	return rc;
}

/* ---- bundle.json -------------------------------------------------------------- */

static int file_cmp(const void *a, const void *b)
{
	return strcmp(((const bfile *)a)->path, ((const bfile *)b)->path);
}

/* A FILE written inside the temporary, every write checked at the close. */
static int close_checked(FILE *f, const char *path, sw_err *err)
{
	int bad = ferror(f) != 0;
	int e = errno;
	if (fflush(f) || fsync(fileno(f)))
		bad = 1, e = errno;
	if (fclose(f) && !bad)
		bad = 1, e = errno;
	return bad ? sw_errf(err, SW_EIO, "%s: write failed: %s", path, strerror(e ? e : EIO)) : 0;
}

static int write_launch(bundle *b, sw_err *err)
{
	char path[SW_OUT_PATH + 64];
	snprintf(path, sizeof(path), "%s/launch.tsv", b->tmp);
	FILE *f = fopen(path, "wx");
	if (!f)
		return sw_errf(err, SW_EIO, "%s: cannot create: %s", path, strerror(errno));
	for (int i = 0; i < b->n_eng; i++) {
		const bengine *e = &b->eng[i];
		fprintf(f, "%s", e->name);
		for (int r = 0; r < 2; r++) {
			const weights_ref *w = r < e->n_w ? &e->w[r] : NULL;
			if (!w || !w->built[0])
				fprintf(f, "\t");
			else if (w->file[0])
				fprintf(f, "\t@%s", w->file);
			else
				fprintf(f, "\t%s", w->built);
		}
		fprintf(f, "\n");
	}
	int rc = close_checked(f, path, err);
	char hex[65];
	uint64_t n;
	if (!rc)
		rc = sw_sha256_file(path, hex, &n, err);
	return rc ? rc : add_file(b, "launch.tsv", n, hex, 3, err);
}

static int write_json(bundle *b, uint64_t part_bytes[4], sw_err *err)
{
	char path[SW_OUT_PATH + 64], ts[32];
	blist tree = {0};
	int rc;
	snprintf(path, sizeof(path), "%s/bundle.json", b->tmp);
	const time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	qsort(b->files, (size_t)b->n_files, sizeof(*b->files), file_cmp);
	/* the directories, from the tree itself (every file in it listed) */
	if ((rc = walk(b->tmp, "", 0, &tree, err)))
		goto out;
	uint64_t total = 0;
	for (int i = 0; i < b->n_files; i++) {
		part_bytes[b->files[i].part] += b->files[i].bytes;
		total += b->files[i].bytes;
	}
	FILE *f = fopen(path, "wx");
	if (!f) {
		rc = sw_errf(err, SW_EIO, "%s: cannot create: %s", path, strerror(errno));
		goto out;
	}
	fprintf(f, "{\n  \"specwright_bundle\": %d,\n  \"created\": \"%s\",\n  \"created_unix\": %lld,\n",
	        BUNDLE_FORMAT, ts, (long long)now);
	fprintf(f, "  \"kit\": {\"glibc_floor\": ");
	jstr(f, b->glibc);
	fprintf(f, ", \"x86_64_level\": ");
	jstr(f, b->level);
	fprintf(f, ", \"bytes\": %" PRIu64 "},\n  \"with_weights\": %s,\n  \"engines\": [\n", part_bytes[0],
	        b->with_weights ? "true" : "false");
	for (int i = 0; i < b->n_eng; i++) {
		const bengine *e = &b->eng[i];
		fprintf(f, "    {\"name\": ");
		jstr(f, e->name);
		fprintf(f, ", \"dir\": \"engines/");
		fprintf(f, "%s\", \"spec_name\": ", e->name); /* a basename: no quote or backslash checked below */
		jstr(f, e->man->name);
		fprintf(f, ", \"archs\": [%s], \"min_driver\": %d, \"nvrtc\": ", e->archs, e->man->min_driver);
		jstr(f, e->man->nvrtc_version);
		fprintf(f, ",\n     \"weights\": [");
		for (int r = 0; r < e->n_w; r++) {
			const weights_ref *w = &e->w[r];
			fprintf(f, "%s\n       {\"role\": \"%s\", \"kind\": \"%s\", \"built_from\": ", r ? "," : "",
			        w->role, w->e3 ? "eagle3_head_dir" : w->dir ? "block_drafter_dir" : "file");
			jstr(f, w->built);
			fprintf(f, ", \"file\": ");
			if (w->file[0])
				jstr(f, w->file);
			else
				fprintf(f, "null");
			fprintf(f, ", \"bytes\": %" PRIu64 ", \"sha256\": ", w->bytes);
			if (w->sha[0])
				jstr(f, w->sha);
			else
				fprintf(f, "null");
			fprintf(f, ", \"digest\": ");
			jstr(f, w->digest);
			fprintf(f, "}");
		}
		fprintf(f, "]}%s\n", i + 1 < b->n_eng ? "," : "");
	}
	/* one entry a line, "path" first: the launcher reads bin/ and lib/ from
	 * these lines with sed before it runs anything in them */
	fprintf(f, "  ],\n  \"files\": [\n");
	for (int i = 0; i < b->n_files; i++) {
		fprintf(f, "    {\"path\": ");
		jstr(f, b->files[i].path);
		fprintf(f, ", \"bytes\": %" PRIu64 ", \"sha256\": \"%s\"}%s\n", b->files[i].bytes,
		        b->files[i].sha, i + 1 < b->n_files ? "," : "");
	}
	fprintf(f, "  ],\n  \"dirs\": [");
	int nd = 0;
	for (int i = 0; i < tree.n; i++)
		if (tree.e[i].type == 'd') {
			fprintf(f, "%s\n    ", nd++ ? "," : "");
			jstr(f, tree.e[i].path);
		}
	fprintf(f, "\n  ],\n  \"bytes\": {\"kit\": %" PRIu64 ", \"engines\": %" PRIu64 ", \"weights\": %" PRIu64
	        ", \"total\": %" PRIu64 "}\n}\n", part_bytes[0], part_bytes[1], part_bytes[2], total);
	rc = close_checked(f, path, err);
out:
	free(tree.e);
	return rc;
}

/* ---- a bundle, whole ------------------------------------------------------------ */

/* dir's tree against its bundle.json: every file listed (size; with
 * digests, SHA-256), every directory listed, nothing else there. Each
 * problem goes to report (when not NULL); the first is err's message.
 * Returns the number of problems (0: whole), or a negative error when
 * bundle.json cannot be read. *n_files: the files listed. */
static int bundle_check(const char *dir, bool digests, FILE *report, size_t *n_files, sw_err *err)
{
	char path[PATH_MAX + 32];
	blist listed = {0}, tree = {0};
	int bad = 0, rc;
	int64_t fmt = 0;
	const json_value *files = NULL, *dirs = NULL;
	snprintf(path, sizeof(path), "%s/bundle.json", dir);
	json_value *root = read_json(path, err);
	if (!root)
		return SW_EINVAL;
	if ((rc = json_get_int(root, "specwright_bundle", "$", 1, INT32_MAX, &fmt, err)))
		goto out;
	if (fmt != BUNDLE_FORMAT && fmt != 1) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.specwright_bundle: format 1 or %d expected, found %lld (a newer "
		             "specwright's): check it with that specwright", path, BUNDLE_FORMAT, (long long)fmt);
		goto out;
	}
	if ((rc = json_get_array(root, "files", "$", 1, SIZE_MAX, &files, err)) ||
	    (fmt > 1 && (rc = json_get_array(root, "dirs", "$", 0, SIZE_MAX, &dirs, err))))
		goto out;
	static const json_value no_dirs = {.type = JSON_ARRAY};
	if (!dirs) /* format 1 listed files only: its directories are theirs */
		dirs = &no_dirs;
	*n_files = files->n;
	for (size_t i = 0; i < files->n + dirs->n && !rc; i++) {
		const bool isdir = i >= files->n;
		const json_value *it = isdir ? dirs->items[i - files->n] : files->items[i];
		const char *rel = NULL;
		int64_t bytes = 0;
		char jp[64];
		if (isdir) {
			snprintf(jp, sizeof(jp), "$.dirs[%zu]", i - files->n);
			if (it->type != JSON_STRING) {
				rc = sw_errf(err, SW_EINVAL, "%s: %s: a string expected", path, jp);
				break;
			}
			rel = it->str;
		} else {
			snprintf(jp, sizeof(jp), "$.files[%zu]", i);
			if ((rc = json_get_string(it, "path", jp, &rel, err)) ||
			    (rc = json_get_int(it, "bytes", jp, 0, INT64_MAX, &bytes, err))) {
				sw_err_prefix(err, "%s", path);
				break;
			}
		}
		if (!rel[0] || rel[0] == '/' || strstr(rel, "..") || !strcmp(rel, "bundle.json")) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s: a path inside the bundle expected, found \"%s\"", path,
			             jp, rel);
			break;
		}
		rc = blist_push(&listed, rel, isdir ? 'd' : 'f', (uint64_t)bytes, err);
	}
	if (rc)
		goto out;
	if (dirs == &no_dirs) {
		const int nf = listed.n;
		for (int i = 0; i < nf && !rc; i++) {
			char d[600];
			snprintf(d, sizeof(d), "%s", listed.e[i].path);
			for (char *sl = strrchr(d, '/'); sl && !rc; sl = strrchr(d, '/')) {
				*sl = 0;
				bool have = false;
				for (int k = nf; k < listed.n && !have; k++)
					have = !strcmp(listed.e[k].path, d);
				if (!have)
					rc = blist_push(&listed, d, 'd', 0, err);
			}
		}
		if (rc)
			goto out;
	}
	qsort(listed.e, (size_t)listed.n, sizeof(*listed.e), entry_cmp);
	for (int i = 1; i < listed.n; i++)
		if (!strcmp(listed.e[i].path, listed.e[i - 1].path)) {
			rc = sw_errf(err, SW_EINVAL, "%s: \"%s\" listed twice", path, listed.e[i].path);
			goto out;
		}
	if ((rc = walk(dir, "", 0, &tree, err)))
		goto out;
	/* a merge of the two sorted lists */
	int i = 0, j = 0;
	while (i < listed.n || j < tree.n) {
		const bentry *L = i < listed.n ? &listed.e[i] : NULL, *T = j < tree.n ? &tree.e[j] : NULL;
		if (T && !strcmp(T->path, "bundle.json")) {
			j++;
			continue;
		}
		const int c = !L ? 1 : !T ? -1 : strcmp(L->path, T->path);
		char msg[10240] = "";
		if (c < 0) {
			snprintf(msg, sizeof(msg), "%s/%s: listed in bundle.json as a %s, missing", dir, L->path,
			         L->type == 'd' ? "directory" : "file");
			i++;
		} else if (c > 0) {
			snprintf(msg, sizeof(msg), "%s/%s: %s not listed in bundle.json (added after the bundle was made)",
			         dir, T->path, T->type == 'd' ? "a directory" : T->type == 'f' ? "a file" :
			         "an entry that is neither a file nor a directory,");
			j++;
		} else {
			if (L->type != T->type) {
				snprintf(msg, sizeof(msg), "%s/%s: listed as a %s, found %s", dir, L->path,
				         L->type == 'd' ? "directory" : "file",
				         T->type == 'd' ? "a directory" : T->type == 'f' ? "a file" : "something else");
			} else if (L->type == 'f') {
				const json_value *it = NULL;
				const char *sha = NULL;
				int64_t want = 0;
				char fp[PATH_MAX + 700], hex[65], jp[64];
				/* find its $.files entry again (its bytes and sha256) */
				for (size_t k = 0; k < files->n && !it; k++) {
					const json_value *pv = json_get(files->items[k], "path");
					if (pv && pv->type == JSON_STRING && !strcmp(pv->str, L->path)) {
						it = files->items[k];
						snprintf(jp, sizeof(jp), "$.files[%zu]", k);
					}
				}
				json_get_int(it, "bytes", jp, 0, INT64_MAX, &want, err);
				snprintf(fp, sizeof(fp), "%s/%s", dir, L->path);
				uint64_t n = T->bytes;
				sw_err e2 = {0};
				if ((uint64_t)want != T->bytes) {
					snprintf(msg, sizeof(msg), "%s: expected %lld bytes (%s %s), found %llu: edited or "
					         "damaged", fp, (long long)want, path, jp, (unsigned long long)T->bytes);
				} else if (digests && json_get_string(it, "sha256", jp, &sha, &e2)) {
					snprintf(msg, sizeof(msg), "%s: %s", path, e2.msg);
				} else if (digests && sw_sha256_file(fp, hex, &n, &e2)) {
					snprintf(msg, sizeof(msg), "%s", e2.msg);
				} else if (digests && strcmp(hex, sha)) {
					snprintf(msg, sizeof(msg), "%s: expected sha256 %s (%s %s), found %s: edited or "
					         "damaged", fp, sha, path, jp, hex);
				}
			}
			i++, j++;
		}
		if (msg[0]) {
			if (!bad++)
				sw_errf(err, SW_EINVAL, "%s", msg);
			if (report)
				fprintf(report, "specwright bundle --verify: %s\n", msg);
		}
	}
	rc = bad;
out:
	free(listed.e);
	free(tree.e);
	json_free(root);
	return rc;
}

/* An existing -o is replaced only when it is a whole bundle, every file's
 * digest its own (core/output.h asks before and after the swap). */
static int bundle_owned(const char *dir, void *ctx, sw_err *err)
{
	size_t n = 0;
	(void)ctx;
	return bundle_check(dir, true, NULL, &n, err) ? SW_EINVAL : 0;
}

static int bundle_make(bundle *b, sw_err *err)
{
	sw_outdir od;
	int rc = sw_outdir_begin(&od, b->out, "a bundle", bundle_owned, NULL, err);
	if (rc)
		return rc;
	snprintf(b->tmp, sizeof(b->tmp), "%s", od.tmp);
	uint64_t part[4] = {0};
	if ((rc = kit_copy(b, err)))
		goto out_abort;
	for (int i = 0; i < b->n_eng && !rc; i++)
		if (!(rc = engine_copy(b, &b->eng[i], err)))
			rc = engine_weights(b, &b->eng[i], err);
	if (rc || (rc = write_launch(b, err)) || (rc = write_json(b, part, err)))
		goto out_abort;
	if ((rc = sw_outdir_commit(&od, err)))
		return rc;
	uint64_t total = part[0] + part[1] + part[2] + part[3];
	fprintf(stderr, "bundle %s: %d engine%s (", b->out, b->n_eng, b->n_eng == 1 ? "" : "s");
	for (int i = 0; i < b->n_eng; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", b->eng[i].name);
	fprintf(stderr, "), %d files and bundle.json, %.2f MiB: kit %.2f MiB (glibc >= %s, x86-64-%s), engines %.2f MiB, "
	        "weights %.2f MiB%s\n", b->n_files, total / 1048576.0, part[0] / 1048576.0, b->glibc,
	        b->level, part[1] / 1048576.0, part[2] / 1048576.0,
	        b->with_weights ? "" : " (referenced by the paths the engines were built from)");
	fprintf(stderr, "bundle %s: run it with %s/run run [ENGINE] -p TEXT; %s/run --probe first on a new machine\n",
	        b->out, b->out, b->out);
	return 0;
out_abort:
	sw_outdir_abort(&od);
	return rc;
}

/* ---- --verify ---------------------------------------------------------------- */

/* digests false: --verify-listing, the launcher's check on every start
 * (names, types and sizes: cheap; the full digests with --verify) */
static int bundle_verify(const char *dir, bool digests)
{
	sw_err err = {0};
	size_t n = 0;
	const char *cmd = digests ? "--verify" : "--verify-listing";
	int bad = bundle_check(dir, digests, stderr, &n, &err);
	if (bad < 0) {
		fprintf(stderr, "specwright bundle %s: %s\n", cmd, err.msg);
		return 1;
	}
	if (bad)
		fprintf(stderr, "specwright bundle %s: %s: %d problem%s against the %zu files bundle.json lists\n",
		        cmd, dir, bad, bad == 1 ? "" : "s", n);
	else if (digests)
		fprintf(stderr, "specwright bundle --verify: %s: all %zu files match bundle.json, and nothing else "
		        "is there\n", dir, n);
	return bad ? 1 : 0;
}

int cli_bundle(int argc, char **argv)
{
	bundle *b = calloc(1, sizeof(*b));
	const char *out = NULL, *kit = NULL, *dirs[MAX_ENGINES];
	int nd = 0, rc = 1;
	sw_err err = {0};
	if (!b) {
		fprintf(stderr, "specwright bundle: out of memory\n");
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(b);
			return 0;
		} else if ((!strcmp(a, "--verify") || !strcmp(a, "--verify-listing")) && v && argc == 4) {
			free(b);
			return bundle_verify(v, !strcmp(a, "--verify"));
		} else if (!strcmp(a, "-o") && v) {
			out = v, i++;
		} else if (!strcmp(a, "--kit") && v) {
			kit = v, i++;
		} else if (!strcmp(a, "--with-weights")) {
			b->with_weights = true;
		} else if (a[0] != '-' && nd < MAX_ENGINES) {
			dirs[nd++] = a;
		} else {
			fprintf(stderr, "specwright bundle: unknown or incomplete option \"%s\"%s\n", a,
			        !strcmp(a, "--verify") ? " (--verify DIR takes nothing else)" : "");
			usage(stderr);
			free(b);
			return 2;
		}
	}
	if (!out || !nd) {
		fprintf(stderr, "specwright bundle: %s\n", !nd ? "expected at least one ENGINE_DIR"
		                                              : "expected -o DIR");
		usage(stderr);
		free(b);
		return 2;
	}
	snprintf(b->out, sizeof(b->out), "%s", out);
	size_t l = strlen(b->out);
	while (l > 1 && b->out[l - 1] == '/')
		b->out[--l] = 0;
	if (kit)
		snprintf(b->kit, sizeof(b->kit), "%s", kit);
	else if (kit_default(b->kit, sizeof(b->kit), &err))
		goto out_err;
	b->wsrc = calloc(2 * MAX_ENGINES, sizeof(*b->wsrc));
	b->wdst = calloc(2 * MAX_ENGINES, sizeof(*b->wdst));
	if (!b->wsrc || !b->wdst) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	for (int i = 0; i < nd; i++)
		if (engine_open(b, dirs[i], &err))
			goto out_err;
	if (strchr(out, '\t') || strchr(out, '\n')) {
		sw_errf(&err, SW_EINVAL, "-o: a directory name without tabs or newlines expected");
		goto out_err;
	}
	for (int i = 0; i < b->n_eng; i++)
		if (strpbrk(b->eng[i].name, "\"\\\t\n")) {
			sw_errf(&err, SW_EINVAL, "engine %s: its directory name has a quote, backslash, tab or "
			        "newline: rename it", b->eng[i].src);
			goto out_err;
		}
	if (bundle_make(b, &err))
		goto out_err;
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright bundle: error: %s\n", err.msg);
out:
	for (int i = 0; i < b->n_eng; i++)
		rt_manifest_free(b->eng[i].man);
	free(b->files);
	free(b->wsrc);
	free(b->wdst);
	free(b);
	return rc;
}
