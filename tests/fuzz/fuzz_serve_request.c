/* libFuzzer target for runtime/serve/request.c: arbitrary bytes as both a
 * completion and a chat body. An accepted request must be self-consistent
 * (fields within the bounds the parser promises); a refused one must carry
 * an HTTP status and a message. tests/test_serve_request.c checks the
 * answers themselves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

static void one(const uint8_t *data, size_t size, int kind)
{
	sw_req r;
	sw_req_error e = {0};
	if (sw_req_parse((const char *)data, size, kind, &r, &e) == 0) {
		if (kind == SW_REQ_COMPLETION && !r.prompt)
			abort();
		if (kind == SW_REQ_CHAT && (r.n_msgs < 1 || r.n_msgs > SW_REQ_MAX_MSGS))
			abort();
		for (int i = 0; i < r.n_msgs; i++)
			if (!r.roles[i] || !r.contents[i])
				abort();
		if (r.n_stop < 0 || r.n_stop > SW_REQ_MAX_STOP || (r.max_tokens != -1 && r.max_tokens < 1))
			abort();
		for (int i = 0; i < r.n_stop; i++)
			if (!r.stop[i][0] || strlen(r.stop[i]) > SW_REQ_MAX_STOP_LEN)
				abort();
		if (r.include_usage && !r.stream)
			abort();
	} else if (e.http < 400 || !e.message[0] || !e.type[0]) {
		abort();
	}
	sw_req_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size, SW_REQ_COMPLETION);
	one(data, size, SW_REQ_CHAT);
	return 0;
}
