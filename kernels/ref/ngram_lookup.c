/* Prompt-lookup drafting as one op: the specification of
 * templates/ngram_lookup.cu.tmpl. Proposes what rt_drafter_ngram
 * (runtime/decode/drafter.c) proposes for the same sequence, the rest of the chain's
 * nodes absent (token -1): the verifier never tests them, and a backend
 * that sizes the tree forward to the present nodes (the host) computes
 * only the drafted rows. */
#include <string.h>

#include "ref.h"

int ref_ngram_lookup_info(int32_t *out, int32_t *info, const int32_t *hist, int S, int min_n,
                          int max_n, int n_draft)
{
	int k = 0, len = 0, end = -1;
	for (int n = max_n; n >= min_n && k == 0 && n_draft > 0; n--) {
		if (n >= S)
			continue;
		const int32_t *suf = hist + S - n;
		for (int st = S - n - 1; st >= 0; st--) { /* the most recent occurrence */
			if (memcmp(hist + st, suf, (size_t)n * sizeof(*suf)))
				continue;
			while (k < n_draft && st + n + k < S) {
				out[k] = hist[st + n + k];
				k++;
			}
			len = n;
			end = st + n - 1;
			break; /* st + n <= S - 1, so k >= 1 */
		}
	}
	for (int i = k; i < n_draft; i++)
		out[i] = -1; /* absent: not drafted */
	if (info) {
		info[0] = len;
		info[1] = end;
	}
	return k;
}

int ref_ngram_lookup(int32_t *out, const int32_t *hist, int S, int min_n, int max_n, int n_draft)
{
	return ref_ngram_lookup_info(out, NULL, hist, S, min_n, max_n, n_draft);
}
