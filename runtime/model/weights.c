/* Releasing model weights: every array of an rt_weights lives in its one
 * arena, so freeing is one call. Loading lives in the loaders
 * (model_gguf.c, the safetensors loader). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

void rt_weights_free(rt_weights *w)
{
	if (!w)
		return;
	free(w->arena);
	memset(w, 0, sizeof(*w));
}
