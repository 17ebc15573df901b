/* {{NAME}} substitution with typed constants and specialisation keys
 * (render.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "render.h"

typedef struct sbuf {
	char *p;
	size_t n, cap;
} sbuf;

static int sb_put(sbuf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return SW_ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

static int is_ident(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return 0;
	return 1;
}

/* The literal for one parameter; refuses what has no exact literal. */
static int format_param(const gen_param *p, char *buf, size_t n, const char *tmpl_name, sw_err *err)
{
	switch (p->type) {
	case GEN_PARAM_INT:
		if (p->i >= INT32_MIN && p->i <= INT32_MAX)
			snprintf(buf, n, p->i < 0 ? "(%lld)" : "%lld", p->i);
		else
			snprintf(buf, n, p->i < 0 ? "(%lldLL)" : "%lldLL", p->i);
		return 0;
	case GEN_PARAM_FLOAT:
		if (!isfinite(p->f))
			return sw_errf(err, SW_EINVAL, "%s: float parameter %s is %g; only finite values "
			               "have a literal", tmpl_name, p->name, (double)p->f);
		/* %a of the exact float value: round-trips in C and C++17. */
		snprintf(buf, n, signbit(p->f) ? "(%af)" : "%af", (double)p->f);
		return 0;
	case GEN_PARAM_IDENT:
		if (!p->s || !is_ident(p->s, strlen(p->s)))
			return sw_errf(err, SW_EINVAL, "%s: parameter %s = '%s' is not a C identifier",
			               tmpl_name, p->name, p->s ? p->s : "(null)");
		if (strlen(p->s) >= n) /* never cut a kernel name short */
			return sw_errf(err, SW_EINVAL, "%s: parameter %s is an identifier of %zu characters, at most %zu are supported",
			               tmpl_name, p->name, strlen(p->s), n - 1);
		snprintf(buf, n, "%s", p->s);
		return 0;
	}
	return sw_errf(err, SW_EINVAL, "%s: parameter %s has no type", tmpl_name, p->name);
}

int gen_render(const char *tmpl, const char *tmpl_name, const gen_param *p, int n, char **out,
               sw_err *err)
{
	sbuf b = {0};
	int rc = 0, line = 1;
	int *used = calloc((size_t)(n > 0 ? n : 1), sizeof(*used));
	char lit[512]; /* one literal: numbers need < 40, identifiers (URIs) more */

	*out = NULL;
	if (!used)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", tmpl_name);
	for (int i = 0; i < n; i++) {
		if (!p[i].name || !is_ident(p[i].name, strlen(p[i].name))) {
			rc = sw_errf(err, SW_EINVAL, "%s: parameter %d has no valid name", tmpl_name, i);
			goto out_free;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(p[i].name, p[j].name)) {
				rc = sw_errf(err, SW_EINVAL, "%s: parameter %s given twice", tmpl_name,
				             p[i].name);
				goto out_free;
			}
	}
	snprintf(lit, sizeof(lit), "/* generated from %.40s", tmpl_name);
	if ((rc = sb_put(&b, lit, strlen(lit))) ||
	    (rc = sb_put(&b, " by gen/render.c; do not edit */\n", 33)))
		goto out_nomem;
	for (const char *s = tmpl; *s;) {
		const char *o = strstr(s, "{{");
		const char *seg_end = o ? o : s + strlen(s);
		for (const char *q = s; q < seg_end; q++)
			line += *q == '\n';
		if ((rc = sb_put(&b, s, (size_t)(seg_end - s))))
			goto out_nomem;
		if (!o)
			break;
		const char *c = strstr(o + 2, "}}"), *nl = strchr(o + 2, '\n');
		if (!c || (nl && nl < c)) {
			rc = sw_errf(err, SW_EINVAL, "%s:%d: unterminated placeholder '{{' (no '}}' on the "
			             "same line)", tmpl_name, line);
			goto out_free;
		}
		const char *nm = o + 2;
		size_t nlen = (size_t)(c - nm);
		if (!is_ident(nm, nlen)) {
			rc = sw_errf(err, SW_EINVAL, "%s:%d: malformed placeholder '{{%.*s}}' (want "
			             "{{IDENTIFIER}})", tmpl_name, line, (int)(nlen > 40 ? 40 : nlen), nm);
			goto out_free;
		}
		int k = -1;
		for (int i = 0; i < n; i++)
			if (strlen(p[i].name) == nlen && !memcmp(p[i].name, nm, nlen))
				k = i;
		if (k < 0) {
			rc = sw_errf(err, SW_EINVAL, "%s:%d: placeholder {{%.*s}} has no value in the "
			             "parameter table", tmpl_name, line, (int)nlen, nm);
			goto out_free;
		}
		if ((rc = format_param(&p[k], lit, sizeof(lit), tmpl_name, err)))
			goto out_free;
		used[k] = 1;
		if ((rc = sb_put(&b, lit, strlen(lit))))
			goto out_nomem;
		s = c + 2;
	}
	for (int i = 0; i < n; i++)
		if (!used[i]) {
			rc = sw_errf(err, SW_EINVAL, "%s: parameter %s is never used by the template "
			             "(a typo on either side?)", tmpl_name, p[i].name);
			goto out_free;
		}
	free(used);
	*out = b.p;
	return 0;
out_nomem:
	rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", tmpl_name);
out_free:
	free(used);
	free(b.p);
	return rc;
}

int gen_render_file(const char *path, const gen_param *p, int n, char **out, sw_err *err)
{
	char *t = sw_read_file(path, SW_CAP_SOURCE, NULL);
	const char *base = strrchr(path, '/');

	*out = NULL;
	if (!t)
		return sw_errf(err, SW_EIO, "%s: cannot read template: %s", path, strerror(errno));
	/* Messages name templates/<file>, as in the repository. */
	char name[256];
	snprintf(name, sizeof(name), "templates/%s", base ? base + 1 : path);
	int rc = gen_render(t, name, p, n, out, err);
	free(t);
	return rc;
}

int gen_key(char *buf, size_t n, const char *op, const gen_param *p, int np)
{
	size_t k = (size_t)snprintf(buf, n, "%s", op);

	for (int i = 0; i < np && k < n; i++) {
		char v[48];
		if (!strcmp(p[i].name, "NAME") ||
		    (p[i].type == GEN_PARAM_INT && p[i].key_omit_zero && p[i].i == 0))
			continue;
		if (p[i].type == GEN_PARAM_INT) {
			snprintf(v, sizeof(v), "%s%lld", p[i].i < 0 ? "m" : "",
			         p[i].i < 0 ? -p[i].i : p[i].i);
		} else if (p[i].type == GEN_PARAM_FLOAT) {
			uint32_t u;
			memcpy(&u, &p[i].f, sizeof(u));
			snprintf(v, sizeof(v), "%08x", u);
		} else {
			k += (size_t)snprintf(buf + k, n - k, "_%s", p[i].s ? p[i].s : "");
			continue;
		}
		k += (size_t)snprintf(buf + k, n - k, "_");
		for (const char *c = p[i].name; *c && k + 1 < n; c++)
			buf[k++] = (char)tolower((unsigned char)*c);
		if (k < n)
			buf[k] = 0;
		k += (size_t)snprintf(buf + k, n - k, "%s", v);
	}
	return k < n ? 0 : SW_ERANGE;
}
