/* engine.json's parts checked against each other (kernel constants vs op
 * shapes vs weight shapes vs layer counts vs the phase schedule vs the
 * spec's prefill chunk), after manifest.c has read every field and proved
 * every access inside its buffers. Not a substitute for the integrity
 * record (formats/engine_files.h), which catches any edit; this catches
 * the edits that keep the bounds but change what is computed, when the
 * record was rewritten too. */
#ifndef RT_MANIFEST_CHECK_H
#define RT_MANIFEST_CHECK_H

#include "manifest.h"

/* The whole manifest: 0 or SW_EINVAL naming file and the JSON path. */
int rt_manifest_check_plan(const rt_manifest *e, const char *file, sw_err *err);

#endif
