/* The host backend's native mode: one plain-C implementation per op of an
 * engine (per row of kernels/ops.def, so per template), each a thin adapter
 * that reads the op's resolved arguments and the kernel's template constants
 * and calls the op's specification in kernels/ref. A registry table indexed
 * by the op list, not a switch. GEMMs and memsets are not here (dev_host.c
 * does them). */
#ifndef RT_HOST_OPS_H
#define RT_HOST_OPS_H

#include <stdbool.h>

#include "device.h"
#include "core/err.h"

/* Whether op (a RT_OP_KERNEL record) has a native implementation. */
bool rt_host_native_supports(const rt_op *op);
/* Runs it on host memory (argval pointers are host addresses). */
int rt_host_native_run(const rt_op *op, sw_err *err);
/* The implementation rt_host_native_run would call for op, NULL without
 * one: dev_host.c keeps it in the op's fn at load_kernels, so a launch
 * calls it without the registry's name lookup. */
typedef int (*rt_host_native_fn)(const rt_op *op, sw_err *err);
rt_host_native_fn rt_host_native_find(const rt_op *op);
/* An integer template constant of op's kernel, or def when absent. */
long long rt_op_param_i(const rt_op *op, const char *name, long long def);
double rt_op_param_f(const rt_op *op, const char *name, double def);

#endif
