/* Token embedding lookup: copies table rows. Validates every id before
 * writing anything, so a bad id leaves y untouched (the caller reports the
 * error; a partially written y would hide which row was wrong). */
#include <string.h>

#include "ref.h"

int ref_embedding(float *y, const float *table, const int32_t *tok, int T, int dim, int n_rows)
{
	for (int t = 0; t < T; t++)
		if (tok[t] < 0 || tok[t] >= n_rows)
			return -1;
	for (int t = 0; t < T; t++)
		memcpy(y + (size_t)t * dim, table + (size_t)tok[t] * dim, (size_t)dim * sizeof(*y));
	return 0;
}
