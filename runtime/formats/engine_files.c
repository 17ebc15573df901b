/* See engine_files.h. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/sha256.h"
#include "engine_files.h"

/* Whether name is a plain file name (no directory part, not . or ..). */
static bool plain_name(const char *name, size_t len)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") &&
	       strlen(name) == len;
}

/* dir/name against a record {"bytes": N, "sha256": "64 hex"} at jp of
 * list (a file the engine lists): size checked before reading, so a huge
 * file is refused without being read. A record of an older specwright
 * (FNV-1a) is refused asking for a rebuild: it binds nothing an edit could
 * not recompute in a second, and the runtime reads one format. */
static int check_one(const char *dir, const char *list, const char *jp, const char *name,
                     const json_value *rec, sw_err *err)
{
	const json_value *bytes = json_get(rec, "bytes"), *h = json_get(rec, "sha256");
	char fp[1400], got[65];
	if (json_get(rec, "fnv1a64") && !h)
		return sw_errf(err, SW_EINVAL, "%s: %s: an FNV-1a record (an engine from an older "
		               "specwright, before engine files were bound by sha256): rebuild the engine",
		               list, jp);
	bool hex = h && h->type == JSON_STRING && h->str_len == 64;
	for (size_t i = 0; hex && i < 64; i++)
		hex = (h->str[i] >= '0' && h->str[i] <= '9') || (h->str[i] >= 'a' && h->str[i] <= 'f');
	if (!bytes || bytes->type != JSON_NUMBER || !bytes->is_int || bytes->integer < 0 || !hex)
		return sw_errf(err, SW_EINVAL, "%s: %s: expected {\"bytes\": N, \"sha256\": \"64 "
		               "lower-case hex digits\"}", list, jp);
	snprintf(fp, sizeof(fp), "%.1100s/%.250s", dir, name);
	struct stat st;
	const int fd = sw_open_regular(fp, err);
	if (fd < 0)
		return sw_err_prefix(err, "%s lists %s", list, name);
	const int src = fstat(fd, &st);
	close(fd);
	if (!src && st.st_size != bytes->integer) /* not read at all: it may be huge */
		return sw_errf(err, SW_EINVAL, "%s: %s does not match the build: expected %lld bytes with "
		               "sha256 %s, found %lld bytes (edited or damaged: rebuild the engine)", fp, name,
		               (long long)bytes->integer, h->str, (long long)st.st_size);
	uint64_t n = 0;
	if (sw_sha256_file(fp, got, &n, err))
		return sw_err_prefix(err, "%s lists %s (edited or damaged: rebuild the engine)", list, name);
	if ((int64_t)n != bytes->integer || strcmp(got, h->str))
		return sw_errf(err, SW_EINVAL, "%s: %s does not match the build: expected %lld bytes with "
		               "sha256 %s, found %llu bytes with %s (edited or damaged: rebuild the engine)",
		               fp, name, (long long)bytes->integer, h->str, (unsigned long long)n, got);
	return 0;
}

int rt_engine_sum_check(const char *dir, sw_err *err)
{
	char path[1400], jp[64];
	size_t len = 0;
	snprintf(path, sizeof(path), "%.1100s/" RT_ENGINE_SUM, dir);
	char *text = sw_read_capped(path, SW_CAP_CONFIG, "an engine's integrity record", &len, err);
	if (!text)
		return sw_err_prefix(err, "the engine's integrity record (written by `specwright build`; "
		                     "an engine from an older specwright has none: rebuild it)");
	json_value *root = json_parse(text, len, path, err);
	free(text);
	if (!root)
		return SW_EINVAL;
	int rc = 0;
	const json_value *rec = json_get(root, "engine.json");
	snprintf(jp, sizeof(jp), "$[\"engine.json\"]");
	if (root->type != JSON_OBJECT || root->n != 1 || !rec)
		rc = sw_errf(err, SW_EINVAL, "%s: expected {\"engine.json\": {\"bytes\": N, \"sha256\": "
		             "...}} and nothing else", path);
	else
		rc = check_one(dir, path, jp, "engine.json", rec, err);
	json_free(root);
	return rc;
}

int rt_engine_files_check(const char *dir, sw_err *err)
{
	char path[1400];
	size_t len = 0;
	int rc = rt_engine_sum_check(dir, err); /* engine.json itself first: the list is in it */
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%.1100s/engine.json", dir);
	char *text = sw_read_capped(path, SW_CAP_ENGINE_JSON, "an engine.json", &len, err);
	if (!text)
		return SW_EIO;
	json_value *root = json_parse(text, len, path, err);
	free(text);
	if (!root)
		return SW_EINVAL;
	const json_value *files = json_get(root, "files");
	if (!files) {
		rc = sw_errf(err, SW_EINVAL, "%s: $.files: missing (an engine from an older specwright, or "
		             "not written by `specwright build`): rebuild the engine", path);
		goto out;
	}
	if ((rc = json_as_object(files, "$.files", err)))
		goto out;
	for (size_t i = 0; i < files->n && !rc; i++) {
		const json_member *mb = &files->members[i];
		char jp[400];
		snprintf(jp, sizeof(jp), "$.files[\"%.200s\"]", mb->key);
		if (!plain_name(mb->key, mb->key_len) || !strcmp(mb->key, "engine.json") ||
		    !strcmp(mb->key, RT_ENGINE_SUM)) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s: a file name inside the engine directory expected "
			             "(not engine.json nor " RT_ENGINE_SUM ")", path, jp);
			break;
		}
		rc = check_one(dir, path, jp, mb->key, mb->value, err);
	}
	/* no kernel image the build did not write */
	DIR *d = rc ? NULL : opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)) && !rc)
		if (!strncmp(de->d_name, "kernels.", 8) && !json_get(files, de->d_name))
			rc = sw_errf(err, SW_EINVAL, "%s/%s: not in the engine's file list (%s $.files): the build "
			             "did not write it; remove it or rebuild the engine", dir, de->d_name, path);
	if (d)
		closedir(d);
out:
	json_free(root);
	return rc;
}

int rt_engine_dir_is_built(const char *dir, sw_err *err)
{
	int rc = 0;
	char path[1400], sum[1400];
	size_t len = 0;
	struct stat st;
	snprintf(sum, sizeof(sum), "%.1100s/" RT_ENGINE_SUM, dir);
	if (lstat(sum, &st) || !S_ISREG(st.st_mode))
		return sw_errf(err, SW_EINVAL, "%s: no integrity record (not written by `specwright build`)",
		               sum);
	snprintf(path, sizeof(path), "%.1100s/engine.json", dir);
	char *text = sw_read_capped(path, SW_CAP_ENGINE_JSON, "an engine.json", &len, err);
	json_value *root = text ? json_parse(text, len, path, err) : NULL;
	free(text);
	if (!root)
		return SW_EINVAL;
	const json_value *files = json_get(root, "files");
	if (!files || files->type != JSON_OBJECT) {
		json_free(root);
		return sw_errf(err, SW_EINVAL, "%s: $.files: missing (not written by `specwright build`)", path);
	}
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)) && !rc)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "engine.json") &&
		    strcmp(de->d_name, RT_ENGINE_SUM) && strncmp(de->d_name, "kernels.", 8) &&
		    !json_get(files, de->d_name))
			rc = sw_errf(err, SW_EINVAL, "%s/%s: not a file the build wrote (%s $.files does not "
			             "list it)", dir, de->d_name, path);
	if (!d)
		rc = sw_errf(err, SW_EIO, "%s: cannot list: %s", dir, strerror(errno));
	else
		closedir(d);
	json_free(root);
	return rc;
}
