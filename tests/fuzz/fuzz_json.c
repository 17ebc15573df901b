/* libFuzzer target for runtime/json.c: parse arbitrary bytes; on success walk
 * the tree through the typed getters and the key checker so their message
 * formatting runs on hostile keys and values too. Finds crashes and leaks,
 * not wrong answers (tests/test_json.c does that). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static void walk(const json_value *v, const char *path, int depth)
{
	static const char *const allowed[] = { "dtype", "shape", "data_offsets", "a", NULL };
	char sub[256];
	sw_err err;
	int64_t i;
	double d;
	const char *s;
	bool b;

	json_as_int(v, path, -5, 5, &i, &err);
	json_as_number(v, path, -1.0, 1e9, &d, &err);
	json_as_string(v, path, &s, &err);
	json_as_bool(v, path, &b, &err);
	json_as_array(v, path, 1, 3, &err);
	if (v->type == JSON_ARRAY) {
		for (size_t k = 0; k < v->n && k < 64; k++)
			walk(v->items[k], json_path_index(sub, sizeof(sub), path, k), depth + 1);
	} else if (v->type == JSON_OBJECT) {
		const json_value *o;
		json_check_keys(v, path, allowed, &err);
		json_get_int(v, "a", path, 0, 10, &i, &err);
		json_get_object(v, "a", path, &o, &err);
		for (size_t k = 0; k < v->n && k < 64; k++) {
			const json_member *m = &v->members[k];
			if (json_get(v, m->key) == NULL && strlen(m->key) == m->key_len)
				abort(); /* every key must be found again */
			walk(m->value, json_path_key(sub, sizeof(sub), path, m->key), depth + 1);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sw_err err;
	json_value *v = json_parse((const char *)data, size, "fuzz", &err);
	if (v) {
		walk(v, "$", 0);
		json_free(v);
	}
	return 0;
}
