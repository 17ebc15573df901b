/* Template renderer: replaces {{NAME}} placeholders in a kernel template with
 * typed constants (ints, floats, identifiers) and nothing else; templates hold
 * no logic in placeholders. Also the specialisation key (one pure function of
 * all parameters, filename-safe, used as the kernel name). Compiling what it
 * renders is gen/jit/'s: NVRTC (nvrtc.h), the emulator (emu_build.h). */
#ifndef GEN_RENDER_H
#define GEN_RENDER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

typedef enum gen_param_type {
	GEN_PARAM_INT,   /* printed in decimal (LL suffix outside int32), negatives in parens */
	GEN_PARAM_FLOAT, /* an fp32 value, printed exactly as a hex literal with f suffix */
	GEN_PARAM_IDENT, /* a C identifier: [A-Za-z_][A-Za-z0-9_]* */
} gen_param_type;

typedef struct gen_param {
	const char *name; /* placeholder name, {{name}} in the template */
	gen_param_type type;
	long long i;
	float f;
	const char *s;
	/* an INT parameter whose 0 is its template's default: at 0 it is left
	 * out of the key (gen_key), so a parameter added to a template keeps
	 * the keys of the kernels built before it (tree attention's WINDOW) */
	bool key_omit_zero;
} gen_param;

/* Renders tmpl into *out (malloc'ed, NUL-terminated; caller frees), first
 * line "generated from <tmpl_name>...". Fails with SW_EINVAL, naming the
 * template, line and placeholder, when the template uses a name the table
 * lacks, the table has a name the template never uses, a name appears twice
 * in the table, a placeholder is malformed or unterminated, an identifier is
 * not one, or a float is not finite. */
int gen_render(const char *tmpl, const char *tmpl_name, const gen_param *p, int n, char **out,
               sw_err *err);
/* The same, reading the template from a file. */
int gen_render_file(const char *path, const gen_param *p, int n, char **out, sw_err *err);

/* Specialisation key: op, then for each parameter in order "_<name><value>"
 * (name lower-cased; ints in decimal, "m" for a minus sign; floats as their
 * 8 hex bit digits; identifiers as themselves, without the name). Parameters
 * named "NAME" are skipped (that is where the key goes), and so are INT
 * parameters of value 0 with key_omit_zero. Returns 0, or
 * SW_ERANGE if it does not fit in n bytes. */
int gen_key(char *buf, size_t n, const char *op, const gen_param *p, int np);

#endif
