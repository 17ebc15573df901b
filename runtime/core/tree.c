/* The static draft-tree builder: a list of paths of child ranks becomes a
 * BFS-numbered tree with parents, ordered children, contiguous levels and
 * ancestor masks. Also the generated forms (chain, kary, branch, batch),
 * presets and tree files. It does not choose trees (no acceptance-rate
 * search) and knows nothing of tokens or devices. */
#include "core/fileio.h"
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"

#define MAX_PATHS (RT_TREE_MAX_NODES - 1) /* the root is never listed */
#define MAX_RANK (RT_TREE_MAX_NODES - 2)  /* contiguous ranks of <= MAX_PATHS siblings */
#define TREE_FILE_MAX (1 << 20)            /* a 255-path file is a few KB */
#define PATH_TEXT 192                      /* "[0, 5, 1]" buffers; longer paths end in "..." */
#define MAX_PRESETS 64                     /* listed in "unknown spec" messages */

static const char forms_text[] =
	"chain:K, kary:K:D, branch:b1,b2,..., batch:M:L, PATH.json or a preset name";

/* "[0, 5, 1]": the form users write paths in, so messages can be searched
 * for in their files. */
static const char *fmt_path(char *out, size_t n, const int *p, int len)
{
	size_t k = 0;

	out[k++] = '[';
	for (int i = 0; i < len; i++) {
		char num[32];
		int l = snprintf(num, sizeof(num), "%s%d", i ? ", " : "", p[i]);
		/* keep room for ", ...]" and the terminator */
		if (k + (size_t)l + 7 > n) {
			memcpy(out + k, ", ...", 5);
			k += 5;
			break;
		}
		memcpy(out + k, num, (size_t)l);
		k += (size_t)l;
	}
	out[k++] = ']';
	out[k] = '\0';
	return out;
}

/* Shorter paths first, then lexicographic: exactly BFS order, because a
 * level sorted this way is ordered by parent (the prefix, sorted one level up)
 * and then by rank (the last element). */
static int path_cmp(const int *a, int la, const int *b, int lb)
{
	if (la != lb)
		return la < lb ? -1 : 1;
	for (int i = 0; i < la; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* The builder proper. On failure *bad is the input index of the offending
 * path (-1 when no single path is to blame) and the message has no prefix:
 * callers say where the paths came from. t must be zeroed. */
static int build(const int *const *paths, const int *lens, int n_paths, rt_tree *t,
		 sw_err *err, int *bad)
{
	int order[MAX_PATHS]; /* order[k] = input index of node k + 1 */
	char a[PATH_TEXT], b[PATH_TEXT];
	int n;

	*bad = -1;
	if (n_paths <= 0)
		return sw_errf(err, SW_EINVAL,
			       "empty tree: expected at least 1 path besides the root, found none");
	if (n_paths > MAX_PATHS)
		return sw_errf(err, SW_ERANGE,
			       "too many nodes: %d paths make %d nodes with the root, expected at most %d (RT_TREE_MAX_NODES)",
			       n_paths, n_paths + 1, RT_TREE_MAX_NODES);
	for (int i = 0; i < n_paths; i++) {
		*bad = i;
		if (lens[i] > 0 && !paths[i])
			return sw_errf(err, SW_EINVAL, "entry %d: %d ranks but no array (NULL)", i,
				       lens[i]);
		if (lens[i] <= 0)
			return sw_errf(err, SW_EINVAL,
				       "path [] (entry %d) is empty: the root is implicit, expected at least 1 rank",
				       i);
		if (lens[i] > RT_TREE_MAX_DEPTH)
			return sw_errf(err, SW_ERANGE,
				       "path %s is too deep: depth %d, expected at most %d (RT_TREE_MAX_DEPTH)",
				       fmt_path(a, sizeof(a), paths[i], lens[i]), lens[i], RT_TREE_MAX_DEPTH);
		for (int j = 0; j < lens[i]; j++)
			if (paths[i][j] < 0)
				return sw_errf(err, SW_EINVAL,
					       "path %s has a negative rank %d: expected ranks >= 0",
					       fmt_path(a, sizeof(a), paths[i], lens[i]), paths[i][j]);
	}
	*bad = -1;

	/* Insertion sort: at most 255 paths, and qsort has no context pointer. */
	for (int i = 0; i < n_paths; i++) {
		int j = i;
		while (j > 0 && path_cmp(paths[order[j - 1]], lens[order[j - 1]], paths[i], lens[i]) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	for (int k = 1; k < n_paths; k++) {
		int p = order[k - 1], q = order[k];
		if (path_cmp(paths[p], lens[p], paths[q], lens[q]) == 0) {
			int lo = p < q ? p : q, hi = p < q ? q : p;
			*bad = hi;
			return sw_errf(err, SW_EINVAL, "path %s is listed twice (entries %d and %d)",
				       fmt_path(a, sizeof(a), paths[q], lens[q]), lo, hi);
		}
	}

	n = n_paths + 1;
	t->n = n;
	t->parent[0] = -1;
	/* Parents: the prefix is one level up; a linear scan of that level is
	 * cheap at these sizes and reports the first missing prefix in BFS
	 * order, whatever order the paths were listed in. */
	{
		/* level cur_len starts at cur_lo; the one above is [prev_lo, prev_hi) */
		int prev_lo = 0, prev_hi = 1, cur_lo = 1, cur_len = 1;
		for (int v = 1; v < n; v++) {
			const int *pv = paths[order[v - 1]];
			int lv = lens[order[v - 1]];
			int u = -1;

			if (lv != cur_len) {
				/* a skipped level leaves no candidate parents */
				prev_lo = lv == cur_len + 1 ? cur_lo : v;
				prev_hi = v;
				cur_lo = v;
				cur_len = lv;
			}
			if (lv == 1)
				u = 0;
			for (int w = prev_lo; w < prev_hi && u < 0; w++)
				if (path_cmp(paths[order[w - 1]], lv - 1, pv, lv - 1) == 0)
					u = w;
			if (u < 0) {
				*bad = order[v - 1];
				return sw_errf(err, SW_EINVAL, "path %s needs its prefix %s, which is not listed",
					       fmt_path(a, sizeof(a), pv, lv), fmt_path(b, sizeof(b), pv, lv - 1));
			}
			t->parent[v] = u;
			t->depth[v] = lv;
			t->rank[v] = pv[lv - 1];
		}
	}

	/* Sibling ranks must run 0, 1, 2, ...: verification and expansion index
	 * children by rank, so a gap would leave a slot with no node. Siblings
	 * are consecutive here and sorted by rank. */
	for (int v = 1; v < n; v++) {
		int expect = (v > 1 && t->parent[v - 1] == t->parent[v]) ? t->rank[v - 1] + 1 : 0;
		if (t->rank[v] == expect)
			continue;
		*bad = order[v - 1];
		fmt_path(a, sizeof(a), paths[order[v - 1]], lens[order[v - 1]]);
		if (expect == 0)
			return sw_errf(err, SW_EINVAL,
				       "path %s has rank %d but no sibling has rank 0 (sibling ranks must run 0, 1, 2, ... without gaps)",
				       a, t->rank[v]);
		return sw_errf(err, SW_EINVAL,
			       "path %s has rank %d but its siblings stop at rank %d (sibling ranks must run 0, 1, 2, ... without gaps)",
			       a, t->rank[v], expect - 1);
	}

	for (int v = 1; v < n; v++) {
		t->n_children[t->parent[v]]++;
		if (t->depth[v] > t->depth_max)
			t->depth_max = t->depth[v];
	}
	for (int u = 0, c = 0; u < n; u++) {
		t->child_start[u] = c;
		c += t->n_children[u];
	}
	for (int v = 1; v < n; v++)
		t->child_list[t->child_start[t->parent[v]] + t->rank[v]] = v;
	/* level_start[d] = nodes shallower than d; entries past depth_max + 1
	 * are n as well, so any d <= RT_TREE_MAX_DEPTH gives an empty range. */
	for (int d = 0; d < RT_TREE_MAX_DEPTH + 2; d++) {
		int c = 0;
		while (c < n && t->depth[c] < d)
			c++;
		t->level_start[d] = c;
	}
	t->words = (n + 63) / 64;
	for (int i = 0; i < n; i++)
		for (int j = i; j >= 0; j = t->parent[j])
			t->mask[(size_t)i * t->words + j / 64] |= (uint64_t)1 << (j % 64);
	return 0;
}

static void set_name(rt_tree *t, const char *name, size_t len)
{
	if (len >= sizeof(t->name))
		len = sizeof(t->name) - 1;
	memcpy(t->name, name, len);
	t->name[len] = '\0';
}

int rt_tree_from_paths(const int *const *paths, const int *lens, int n_paths, const char *name,
			rt_tree *t, sw_err *err)
{
	sw_err local;
	int bad, rc;

	if (!err)
		err = &local;
	memset(t, 0, sizeof(*t));
	rc = build(paths, lens, n_paths, t, err, &bad);
	if (rc) {
		memset(t, 0, sizeof(*t));
		sw_err_prefix(err, "tree %s", name ? name : "(unnamed)");
		return rc;
	}
	if (name)
		set_name(t, name, strlen(name));
	return 0;
}

/* ---- generated forms ---------------------------------------------------- */

/* A generated tree is a fanout per level: fan[d] children for every node at
 * depth d. chain, kary, branch and batch are all of this kind, so one
 * generator (and the one builder) serves them. Node count (root excluded),
 * saturating at MAX_PATHS + 1 so callers can compare without overflow. */
static long fanout_nodes(const int *fan, int D, long *exact)
{
	long level = 1, total = 0;
	int over = 0;

	for (int d = 0; d < D; d++) {
		level *= fan[d];
		if (level > 1000000000L) {
			over = 1;
			break;
		}
		total += level;
		if (total > 1000000000L) {
			over = 1;
			break;
		}
	}
	*exact = over ? -1 : total;
	return over || total > MAX_PATHS ? MAX_PATHS + 1 : total;
}

static int from_fanout(const int *fan, int D, const char *spec, rt_tree *t, sw_err *err)
{
	long exact, total = fanout_nodes(fan, D, &exact);
	int *buf = NULL, *lens = NULL;
	const int **ptrs = NULL;
	int rc, n = 0, lvl_lo = 0, lvl_hi = 0;

	if (total > MAX_PATHS) {
		if (exact < 0)
			return sw_errf(err, SW_ERANGE,
				       "tree spec \"%s\": too many nodes: over 10^9, expected at most %d besides the root (RT_TREE_MAX_NODES %d)",
				       spec, MAX_PATHS, RT_TREE_MAX_NODES);
		return sw_errf(err, SW_ERANGE,
			       "tree spec \"%s\": too many nodes: %ld besides the root, expected at most %d (RT_TREE_MAX_NODES %d)",
			       spec, exact, MAX_PATHS, RT_TREE_MAX_NODES);
	}
	buf = calloc((size_t)total * (size_t)D, sizeof(*buf));
	lens = calloc((size_t)total, sizeof(*lens));
	ptrs = calloc((size_t)total, sizeof(*ptrs));
	if (!buf || !lens || !ptrs) {
		rc = sw_errf(err, SW_ENOMEM, "tree spec \"%s\": out of memory", spec);
		goto out_free;
	}
	/* Level by level: each path of level d - 1 (or the root) extended by
	 * every rank below fan[d]. */
	for (int d = 0; d < D; d++) {
		int parents = d == 0 ? 1 : lvl_hi - lvl_lo;
		lvl_lo = lvl_hi;
		for (int p = 0; p < parents; p++) {
			for (int r = 0; r < fan[d]; r++) {
				int *dst = buf + (size_t)n * D;
				if (d > 0)
					memcpy(dst, buf + (size_t)(lvl_lo - parents + p) * D,
					       (size_t)d * sizeof(*dst));
				dst[d] = r;
				lens[n] = d + 1;
				ptrs[n] = dst;
				n++;
			}
		}
		lvl_hi = n;
	}
	rc = rt_tree_from_paths(ptrs, lens, n, spec, t, err);
out_free:
	free(ptrs);
	free(lens);
	free(buf);
	return rc;
}

/* One integer field of a spec: digits only (no sign, no spaces), in
 * [lo, hi]. *s advances past the digits. */
static int spec_int(const char *spec, const char **s, const char *field, int lo, int hi,
		    const char *why, int *out, sw_err *err)
{
	const char *p = *s;
	long v = 0;
	int nd = 0;

	while (*p >= '0' && *p <= '9') {
		if (v < 1000000000L)
			v = v * 10 + (*p - '0');
		p++;
		nd++;
	}
	if (nd == 0 || v < lo || v > hi) {
		const char *end = *s;
		while (*end && *end != ':' && *end != ',')
			end++;
		if (end == *s)
			return sw_errf(err, SW_EINVAL,
				       "tree spec \"%s\": %s: expected an integer in [%d, %d]%s, found nothing",
				       spec, field, lo, hi, why);
		return sw_errf(err, nd ? SW_ERANGE : SW_EINVAL,
			       "tree spec \"%s\": %s: expected an integer in [%d, %d]%s, found \"%.*s\"",
			       spec, field, lo, hi, why, (int)(end - *s), *s);
	}
	*s = p;
	*out = (int)v;
	return 0;
}

/* After a field: the separator sep (or the end when sep is 0). */
static int spec_expect(const char *spec, const char *s, char sep, const char *after, sw_err *err)
{
	if (*s == sep)
		return 0;
	if (sep)
		return sw_errf(err, SW_EINVAL, "tree spec \"%s\": expected '%c' after %s, found %s%s%s",
			       spec, sep, after, *s ? "\"" : "", *s ? s : "the end", *s ? "\"" : "");
	return sw_errf(err, SW_EINVAL, "tree spec \"%s\": expected the end after %s, found \"%s\"", spec,
		       after, s);
}

static int parse_generated(const char *spec, rt_tree *t, sw_err *err)
{
	int fan[RT_TREE_MAX_DEPTH];
	const char *s;
	int rc, a, b, D = 0;

	if (!strncmp(spec, "chain:", 6)) {
		s = spec + 6;
		if ((rc = spec_int(spec, &s, "K (chain length)", 1, RT_TREE_MAX_DEPTH,
				   " (RT_TREE_MAX_DEPTH)", &a, err)) ||
		    (rc = spec_expect(spec, s, 0, "K", err)))
			return rc;
		for (D = 0; D < a; D++)
			fan[D] = 1;
	} else if (!strncmp(spec, "kary:", 5)) {
		s = spec + 5;
		if ((rc = spec_int(spec, &s, "K (children per node)", 1, MAX_PATHS, "", &a, err)) ||
		    (rc = spec_expect(spec, s++, ':', "K", err)) ||
		    (rc = spec_int(spec, &s, "D (depth)", 1, RT_TREE_MAX_DEPTH,
				   " (RT_TREE_MAX_DEPTH)", &b, err)) ||
		    (rc = spec_expect(spec, s, 0, "D", err)))
			return rc;
		for (D = 0; D < b; D++)
			fan[D] = a;
	} else if (!strncmp(spec, "branch:", 7)) {
		s = spec + 7;
		for (;;) {
			char field[48];
			if (D == RT_TREE_MAX_DEPTH)
				return sw_errf(err, SW_ERANGE,
					       "tree spec \"%s\": too deep: more than %d levels, expected at most %d (RT_TREE_MAX_DEPTH)",
					       spec, RT_TREE_MAX_DEPTH, RT_TREE_MAX_DEPTH);
			snprintf(field, sizeof(field), "b%d (children per node at depth %d)", D + 1, D);
			if ((rc = spec_int(spec, &s, field, 1, MAX_PATHS, "", &fan[D], err)))
				return rc;
			D++;
			if (*s == '\0')
				break;
			snprintf(field, sizeof(field), "b%d", D);
			if ((rc = spec_expect(spec, s++, ',', field, err)))
				return rc;
		}
	} else if (!strncmp(spec, "batch:", 6)) {
		s = spec + 6;
		if ((rc = spec_int(spec, &s, "M (branches)", 1, MAX_PATHS, "", &a, err)) ||
		    (rc = spec_expect(spec, s++, ':', "M", err)) ||
		    (rc = spec_int(spec, &s, "L (nodes per branch)", 1, RT_TREE_MAX_DEPTH,
				   " (RT_TREE_MAX_DEPTH)", &b, err)) ||
		    (rc = spec_expect(spec, s, 0, "L", err)))
			return rc;
		/* the root has M children; every branch continues as a chain */
		fan[0] = a;
		for (D = 1; D < b; D++)
			fan[D] = 1;
	} else {
		return 1; /* not a generated form */
	}
	return from_fanout(fan, D, spec, t, err);
}

/* ---- files and presets -------------------------------------------------- */

int rt_tree_from_json_text(const char *text, size_t n, const char *name, rt_tree *t,
			    sw_err *err)
{
	static const char *const keys[] = { "name", "source", "paths", NULL };
	sw_err local;
	json_value *root = NULL;
	const json_value *arr, *v;
	const int **ptrs = NULL;
	int *lens = NULL, *buf = NULL;
	size_t total = 0, off = 0;
	char jp[64], jq[80];
	const char *tname, *str;
	int rc, bad;

	if (!err)
		err = &local;
	if (!name)
		name = "(tree file)";
	memset(t, 0, sizeof(*t));
	root = json_parse(text, n, name, err);
	if (!root)
		return err->code ? err->code : SW_EINVAL;
	if ((rc = json_as_object(root, "$", err)) || (rc = json_check_keys(root, "$", keys, err)) ||
	    (rc = json_get_array(root, "paths", "$", 1, MAX_PATHS, &arr, err)))
		goto out_free;
	if ((v = json_get(root, "source")) && (rc = json_as_string(v, "$.source", &str, err)))
		goto out_free;
	if ((v = json_get(root, "name"))) {
		if ((rc = json_as_string(v, "$.name", &str, err)))
			goto out_free;
		if (v->str_len == 0 || v->str_len >= sizeof(t->name) || strlen(v->str) != v->str_len) {
			rc = sw_errf(err, SW_EINVAL,
				     "%s:%d:%d: $.name: expected 1 to %zu bytes without NUL, found %zu bytes",
				     name, v->line, v->col, sizeof(t->name) - 1, v->str_len);
			goto out_free;
		}
	}
	for (size_t i = 0; i < arr->n; i++) {
		json_path_index(jp, sizeof(jp), "$.paths", i);
		if ((rc = json_as_array(arr->items[i], jp, 1, RT_TREE_MAX_DEPTH, err)))
			goto out_free;
		total += arr->items[i]->n;
	}
	ptrs = calloc(arr->n, sizeof(*ptrs));
	lens = calloc(arr->n, sizeof(*lens));
	buf = calloc(total, sizeof(*buf));
	if (!ptrs || !lens || !buf) {
		rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
		goto out_free;
	}
	for (size_t i = 0; i < arr->n; i++) {
		const json_value *p = arr->items[i];
		json_path_index(jp, sizeof(jp), "$.paths", i);
		ptrs[i] = buf + off;
		lens[i] = (int)p->n;
		for (size_t j = 0; j < p->n; j++) {
			int64_t r;
			json_path_index(jq, sizeof(jq), jp, j);
			if ((rc = json_as_int(p->items[j], jq, 0, MAX_RANK, &r, err)))
				goto out_free;
			buf[off++] = (int)r;
		}
	}
	rc = build(ptrs, lens, (int)arr->n, t, err, &bad);
	if (rc) {
		memset(t, 0, sizeof(*t));
		if (bad >= 0) {
			v = arr->items[bad];
			sw_err_prefix(err, "%s:%d:%d: $.paths[%d]", name, v->line, v->col, bad);
		} else {
			sw_err_prefix(err, "%s:%d:%d: $.paths", name, arr->line, arr->col);
		}
		goto out_free;
	}
	if ((v = json_get(root, "name"))) {
		set_name(t, v->str, v->str_len);
	} else {
		/* the file name without its folder and ".json" */
		size_t len;
		tname = strrchr(name, '/');
		tname = tname ? tname + 1 : name;
		len = strlen(tname);
		if (len > 5 && !strcmp(tname + len - 5, ".json"))
			len -= 5;
		set_name(t, tname, len);
	}
out_free:
	free(buf);
	free(lens);
	free(ptrs);
	json_free(root);
	return rc;
}

/* A regular file only: a FIFO or device named *.json must not block or
 * stream forever. */
static int read_tree_file(const char *path, char **out, size_t *len, sw_err *err)
{
	*out = sw_read_capped(path, TREE_FILE_MAX, "a tree file", len, err);
	return *out ? 0 : sw_err_prefix(err, "cannot open tree file");
}

static int load_tree_file(const char *path, rt_tree *t, sw_err *err)
{
	char *text;
	size_t len = 0;
	int rc = read_tree_file(path, &text, &len, err);

	if (rc)
		return rc;
	rc = rt_tree_from_json_text(text, len, path, t, err);
	free(text);
	return rc;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "unknown" with every accepted form and the presets found in dir, sorted
 * so the message does not depend on directory order. */
static int unknown_spec(const char *spec, const char *dir, sw_err *err)
{
	char *names[MAX_PRESETS];
	char list[512];
	size_t k = 0;
	int np = 0;
	DIR *d = opendir(dir);
	struct dirent *e;

	list[0] = '\0';
	while (d && (e = readdir(d)) && np < MAX_PRESETS) {
		size_t l = strlen(e->d_name);
		if (l > 5 && !strcmp(e->d_name + l - 5, ".json") && e->d_name[0] != '.')
			if ((names[np] = strndup(e->d_name, l - 5)))
				np++;
	}
	if (d)
		closedir(d);
	qsort(names, (size_t)np, sizeof(names[0]), str_cmp);
	for (int i = 0; i < np; i++) {
		size_t l = strlen(names[i]);
		if (k + l + 8 < sizeof(list)) {
			if (i)
				list[k++] = ',', list[k++] = ' ';
			memcpy(list + k, names[i], l);
			k += l;
			list[k] = '\0';
		} else if (k + 4 < sizeof(list)) {
			memcpy(list + k, ", ...", 6);
			k = sizeof(list);
		}
		free(names[i]);
	}
	return sw_errf(err, SW_EINVAL,
		       "unknown tree spec \"%s\": expected %s; presets in %s: %s", spec, forms_text, dir,
		       np ? list : "(none found)");
}

int rt_tree_parse(const char *spec, const char *trees_dir, rt_tree *t, sw_err *err)
{
	sw_err local;
	size_t len;
	int rc;

	if (!err)
		err = &local;
	memset(t, 0, sizeof(*t));
	if (!trees_dir)
		trees_dir = "models/trees";
	if (!spec || !*spec)
		return sw_errf(err, SW_EINVAL, "empty tree spec: expected %s", forms_text);
	len = strlen(spec);
	if (len > 5 && !strcmp(spec + len - 5, ".json"))
		return load_tree_file(spec, t, err);
	rc = parse_generated(spec, t, err);
	if (rc <= 0)
		return rc;

	/* A preset: a plain name, so a spec can never reach outside trees_dir. */
	if (len > 64 || strspn(spec, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
		return unknown_spec(spec, trees_dir, err);
	{
		char path[4096];
		struct stat st;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s.json", trees_dir, spec) >= sizeof(path))
			return sw_errf(err, SW_ERANGE, "tree preset %s: folder name %s is too long", spec,
				       trees_dir);
		if (stat(path, &st))
			return unknown_spec(spec, trees_dir, err);
		return load_tree_file(path, t, err);
	}
}

void rt_tree_table(const rt_tree *t, int32_t *tb)
{
	int n = t->n;
	for (int u = 0; u < n; u++) {
		tb[u] = t->parent[u];
		tb[n + u] = t->n_children[u];
		tb[2 * n + u] = t->child_start[u];
		tb[3 * n + u] = t->child_list[u];
		tb[4 * n + u] = t->depth[u];
	}
}
