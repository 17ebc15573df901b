/* The drafter's files an engine binds (engine.json $.draft_files, written
 * by gen/build.c write_draft_files): read and shape-checked with the rest
 * of the manifest, and the files at the path a run binds checked against
 * them (manifest.h rt_manifest_draft_files_check). The weights digest
 * ($.spec.draft.digest) covers the floats a drafter uploads; this covers
 * the files themselves: a head's config.json (taps, norm_before_residual)
 * and a dropped d2t/t2d, which change no uploaded float. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "formats/engine_files.h"
#include "manifest.h"

/* Whether name is a file name inside the drafter's directory (no '/', not
 * "..") or "." (the drafter's path itself). */
static bool draft_name_ok(const char *name, size_t len)
{
	return name[0] && strlen(name) == len && len < sizeof(((rt_draft_file *)0)->name) &&
	       !strchr(name, '/') && strcmp(name, "..");
}

static bool has_file(const rt_manifest *m, const char *name)
{
	for (int i = 0; i < m->n_draft_files; i++)
		if (!strcmp(m->draft_files[i].name, name))
			return true;
	return false;
}

int rt_manifest_parse_draft_files(rt_manifest *m, const json_value *root, const char *file,
                                  sw_err *err)
{
	const json_value *df = json_get(root, RT_ENGINE_DRAFT_FILES);
	const bool bound = (m->draft_kind == RT_ENGINE_DRAFT_BLOCK ||
	                    m->draft_kind == RT_ENGINE_DRAFT_EAGLE3 ||
	                    m->draft_kind == RT_ENGINE_DRAFT_MODEL) && m->draft_path[0];
	m->n_draft_files = 0;
	if (!df && !bound)
		return 0;
	if (!df)
		return sw_errf(err, SW_EINVAL, "%s: $." RT_ENGINE_DRAFT_FILES ": missing, but the engine "
		               "binds a drafter's files ($.spec.draft.path \"%s\"): an engine from an older "
		               "specwright, before drafter files were bound by sha256; rebuild the engine",
		               file, m->draft_path);
	if (!bound)
		return sw_errf(err, SW_EINVAL, "%s: $." RT_ENGINE_DRAFT_FILES ": present, but the engine "
		               "binds no drafter's files (its draft is %s)", file,
		               m->draft_path[0] ? "not a model, block drafter or EAGLE-3 head"
		                                : "built from a shape");
	if (df->type != JSON_OBJECT || df->n < 1 || df->n > RT_ENGINE_MAX_DRAFT_FILES)
		return sw_errf(err, SW_EINVAL, "%s: $." RT_ENGINE_DRAFT_FILES ": expected an object of 1 "
		               "to %d file records", file, RT_ENGINE_MAX_DRAFT_FILES);
	for (size_t i = 0; i < df->n; i++) {
		const json_member *mb = &df->members[i];
		char jp[200];
		snprintf(jp, sizeof(jp), "$." RT_ENGINE_DRAFT_FILES "[\"%.120s\"]", mb->key);
		const json_value *b = json_get(mb->value, "bytes"), *h = json_get(mb->value, "sha256");
		bool hex = h && h->type == JSON_STRING && h->str_len == 64;
		for (size_t k = 0; hex && k < 64; k++)
			hex = (h->str[k] >= '0' && h->str[k] <= '9') || (h->str[k] >= 'a' && h->str[k] <= 'f');
		if (!draft_name_ok(mb->key, mb->key_len) || mb->value->type != JSON_OBJECT ||
		    mb->value->n != 2 || !b || b->type != JSON_NUMBER || !b->is_int || b->integer < 0 || !hex)
			return sw_errf(err, SW_EINVAL, "%s: %s: expected a file name in the drafter's "
			               "directory (or \".\", its path) and {\"bytes\": N, \"sha256\": \"64 "
			               "lower-case hex digits\"}", file, jp);
		rt_draft_file *f = &m->draft_files[m->n_draft_files++];
		snprintf(f->name, sizeof(f->name), "%s", mb->key);
		f->bytes = b->integer;
		memcpy(f->sha256, h->str, 65);
	}
	/* what the loaders read must all be bound (an edit may not drop a
	 * record to unbind a file) */
	const char *need = NULL;
	if (m->draft_kind != RT_ENGINE_DRAFT_MODEL && !has_file(m, "config.json"))
		need = "config.json";
	else if ((m->draft_kind == RT_ENGINE_DRAFT_BLOCK ||
	          (m->draft_kind == RT_ENGINE_DRAFT_EAGLE3 && m->target_path[0])) &&
	         !has_file(m, "model.safetensors"))
		need = "model.safetensors"; /* (a head over a target shape may be config.json alone) */
	else if (m->draft_kind == RT_ENGINE_DRAFT_MODEL && !has_file(m, ".") && !has_file(m, "config.json"))
		need = "\".\" (a draft model's file) or config.json (its HF directory)";
	if (need)
		return sw_errf(err, SW_EINVAL, "%s: $." RT_ENGINE_DRAFT_FILES ": no record of %s, which "
		               "the drafter's loader reads", file, need);
	if (has_file(m, ".") && m->n_draft_files != 1)
		return sw_errf(err, SW_EINVAL, "%s: $." RT_ENGINE_DRAFT_FILES ": \".\" (the drafter's "
		               "path is a file) with other records", file);
	return 0;
}

int rt_manifest_draft_files_check(const rt_manifest *m, const char *path, sw_err *err)
{
	struct stat st;
	if (!m->n_draft_files)
		return 0;
	const bool file = has_file(m, ".");
	if (stat(path, &st))
		return sw_errf(err, SW_EIO, "%s: cannot open the drafter the engine binds: %s", path,
		               strerror(errno));
	if (file == !!S_ISDIR(st.st_mode))
		return sw_errf(err, SW_EINVAL, "%s: expected %s (%s/engine.json $." RT_ENGINE_DRAFT_FILES
		               "), found %s", path, file ? "a file" : "a directory", m->dir,
		               file ? "a directory" : "a file");
	for (int i = 0; i < m->n_draft_files; i++) {
		const rt_draft_file *f = &m->draft_files[i];
		char p[1400], hex[65];
		uint64_t n = 0;
		snprintf(p, sizeof(p), file ? "%.1300s" : "%.1200s/%s", path, f->name);
		if (sw_sha256_file(p, hex, &n, err))
			return sw_err_prefix(err, "the drafter the engine binds (%s/engine.json "
			                     "$." RT_ENGINE_DRAFT_FILES ")", m->dir);
		if ((int64_t)n != f->bytes || strcmp(hex, f->sha256))
			return sw_errf(err, SW_EINVAL, "%s: sha256 digest %s (%llu bytes), but %s/engine.json "
			               "$." RT_ENGINE_DRAFT_FILES "[\"%s\"] records %s (%lld bytes): "
			               "not the drafter's file the engine was built with (changed since "
			               "`build`); rebuild the engine, or give the original with --draft-model "
			               "or --weights", p, hex, (unsigned long long)n, m->dir, f->name,
			               f->sha256, (long long)f->bytes);
	}
	return 0;
}
