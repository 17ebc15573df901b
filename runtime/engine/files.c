/* See files.h. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/json.h"
#include "files.h"

int rt_engine_files_check(const char *dir, sw_err *err)
{
	char path[1400];
	size_t len = 0;
	snprintf(path, sizeof(path), "%.1100s/engine.json", dir);
	char *text = sw_read_input(path, &len, err);
	if (!text)
		return SW_EIO;
	json_value *root = json_parse(text, len, path, err);
	free(text);
	if (!root)
		return SW_EINVAL;
	int rc = 0;
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
		char jp[400], fp[1400];
		const json_value *bytes = json_get(mb->value, "bytes"), *h = json_get(mb->value, "fnv1a64");
		snprintf(jp, sizeof(jp), "$.files[\"%.200s\"]", mb->key);
		if (!mb->key[0] || strchr(mb->key, '/') || !strcmp(mb->key, ".") || !strcmp(mb->key, "..") ||
		    strlen(mb->key) != mb->key_len) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s: a file name inside the engine directory expected", path,
			             jp);
			break;
		}
		if (!bytes || bytes->type != JSON_NUMBER || !bytes->is_int || bytes->integer < 0 || !h ||
		    h->type != JSON_STRING || h->str_len != 16) {
			rc = sw_errf(err, SW_EINVAL, "%s: %s: expected {\"bytes\": N, \"fnv1a64\": \"16 hex digits\"}",
			             path, jp);
			break;
		}
		snprintf(fp, sizeof(fp), "%.1100s/%.250s", dir, mb->key);
		size_t n = 0;
		char *data = sw_read_input(fp, &n, err);
		if (!data) {
			rc = sw_err_prefix(err, "%s lists %s", path, mb->key);
			break;
		}
		char got[17];
		snprintf(got, sizeof(got), "%016" PRIx64, sw_fnv1a64(SW_FNV64_BASIS, data, n));
		free(data);
		if ((int64_t)n != bytes->integer || strcmp(got, h->str))
			rc = sw_errf(err, SW_EINVAL, "%s: %s does not match the build: expected %lld bytes with FNV-1a "
			             "%s, found %zu bytes with %s (edited or damaged: rebuild the engine)", fp, mb->key,
			             (long long)bytes->integer, h->str, n, got);
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
