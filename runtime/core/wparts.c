/* Fused GEMM weights' parts (wparts.h). */
#include <string.h>

#include "wparts.h"

static const struct {
	const char *field;
	int n;
	const char *part[SW_WPARTS_MAX];
} FUSED[] = {
	{"wqkv", 3, {"wq", "wk", "wv"}},
	{"w_gate_up", 2, {"w_gate", "w_up", NULL}},
};

int sw_wparts(const char *field, const char *parts[SW_WPARTS_MAX])
{
	for (size_t i = 0; i < sizeof(FUSED) / sizeof(FUSED[0]); i++)
		if (!strcmp(field, FUSED[i].field)) {
			for (int j = 0; j < SW_WPARTS_MAX; j++)
				parts[j] = FUSED[i].part[j];
			return FUSED[i].n;
		}
	return 0;
}
