/* The op tests' harness (op_harness.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

const int oh_shapes[] = {1, 31, 33, 111, 260, 576, 4097};
const int oh_n_shapes = (int)(sizeof(oh_shapes) / sizeof(oh_shapes[0]));

void oh_begin(oh_case *c, int op, const char *fmt, ...)
{
	assert_non_null(sw_op_get(op));
	memset(c, 0, sizeof(*c));
	c->op = op;
	int n = snprintf(c->what, sizeof(c->what), "%s ", sw_op_get(op)->name);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->what + n, sizeof(c->what) - (size_t)n, fmt, ap);
	va_end(ap);
	c->p[c->np++] = (gen_param){.name = "NAME", .type = GEN_PARAM_IDENT};
}

void oh_pi(oh_case *c, const char *name, int64_t v)
{
	assert_true(c->np < OH_MAX_PARAMS);
	c->p[c->np++] = (gen_param){.name = name, .type = GEN_PARAM_INT, .i = v};
}

void oh_pf(oh_case *c, const char *name, double v)
{
	assert_true(c->np < OH_MAX_PARAMS);
	c->p[c->np++] = (gen_param){.name = name, .type = GEN_PARAM_FLOAT, .f = v};
}

void *oh_alloc(oh_case *c, const char *name, size_t n, size_t elem)
{
	assert_true(c->n_bufs < OH_MAX_ARGS);
	void *b = emu_alloc(n ? n * elem : 1, name);
	assert_non_null(b);
	return c->bufs[c->n_bufs++] = b;
}

void oh_arg(oh_case *c, void *b)
{
	assert_true(c->n_args < OH_MAX_ARGS);
	c->slot[c->n_args] = b;
	c->argv[c->n_args] = &c->slot[c->n_args];
	c->n_args++;
}

void *oh_buf(oh_case *c, const char *name, size_t n, size_t elem)
{
	void *b = oh_alloc(c, name, n, elem);
	oh_arg(c, b);
	return b;
}

void oh_val(oh_case *c, const void *v, size_t bytes)
{
	assert_true(c->n_args < OH_MAX_ARGS && bytes <= sizeof(c->val[0]));
	c->val[c->n_args] = 0;
	memcpy(&c->val[c->n_args], v, bytes);
	c->argv[c->n_args] = &c->val[c->n_args];
	c->n_args++;
}

void *oh_host(oh_case *c, size_t bytes)
{
	assert_true(c->n_host < OH_MAX_HOST);
	void *h = calloc(1, bytes ? bytes : 1);
	assert_non_null(h);
	return c->host[c->n_host++] = h;
}

void *oh_copy(oh_case *c, const void *buf, size_t bytes)
{
	void *h = oh_host(c, bytes);
	memcpy(h, buf, bytes);
	return h;
}

static kern_out *add_out(oh_case *c, const char *name, kern_dtype type, const void *buf, size_t n,
                         int d0, int d1, int d2)
{
	assert_true(c->n_outs < OH_MAX_OUTS);
	kern_out *o = &c->outs[c->n_outs++];
	*o = (kern_out){.name = name, .type = type, .got = buf, .n = n, .dims = {d0, d1, d2, 0}};
	return o;
}

void oh_expect(oh_case *c, const char *name, kern_dtype type, const void *buf, const void *want,
               size_t n, int d0, int d1, int d2)
{
	add_out(c, name, type, buf, n, d0, d1, d2)->want = want;
}

void oh_expect_close(oh_case *c, const char *name, const float *buf, const double *ref,
                     const double *bound, size_t n, int d0, int d1, int d2)
{
	kern_out *o = add_out(c, name, KERN_F32, buf, n, d0, d1, d2);
	o->ref = ref;
	o->bound = bound;
}

const emu_kernel *oh_load(int op, gen_param *p, int np)
{
	const sw_op_info *o = sw_op_get(op);
	assert_non_null(o);
	return load_kernel_ex(o->tmpl, o->name, p, np, o->philox);
}

void oh_nvrtc_p(int op, gen_param *p, int np)
{
	const sw_op_info *o = sw_op_get(op);
	assert_non_null(o);
	nvrtc_check_ex(o->tmpl, o->name, p, np, o->philox);
}

const emu_kernel *oh_kernel(oh_case *c)
{
	if (!c->k)
		c->k = oh_load(c->op, c->p, c->np);
	return c->k;
}

void oh_launch(oh_case *c, emu_dim3 grid, emu_dim3 block)
{
	const sw_op_info *op = sw_op_get(c->op);
	if (op->n_args >= 0 && c->n_args != op->n_args)
		fail_msg("%s: %d arguments, kernels/ops.def says %d", c->what, c->n_args, op->n_args);
	kern_launch_expect(c->what, oh_kernel(c), grid, block, c->argv, c->outs, c->n_outs);
}

void oh_nvrtc(oh_case *c)
{
	oh_nvrtc_p(c->op, c->p, c->np);
}

void oh_end(oh_case *c)
{
	for (int i = 0; i < c->n_bufs; i++)
		emu_free(c->bufs[i]);
	for (int i = 0; i < c->n_host; i++)
		free(c->host[i]);
	c->n_bufs = c->n_host = c->n_outs = c->n_args = 0;
}
