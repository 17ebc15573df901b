/* The draft-length controller's host side (ALGORITHMS.txt 12): its cost
 * table at bind and its per-request reset. The decisions themselves are
 * taken on the device (templates/draft_ctrl.cu.tmpl); the public calls are
 * in engine.h (rt_engine_set_ctrl_cost, rt_engine_ctrl_measure). */
#ifndef RT_ENGINE_CTRL_H
#define RT_ENGINE_CTRL_H

#include "engine.h"

/* At the end of rt_engine_bind: checks the controller's buffers and sets
 * its cost table from $.spec.control.cost. Nothing for engines without. */
int rt_engine_ctrl_bind(rt_engine *e, sw_err *err);
/* Before each request: zeroes the controller's per-request words. */
int rt_engine_ctrl_reset(rt_engine *e, sw_err *err);

#endif
