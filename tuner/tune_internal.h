/* tune_internal.h — what tune.c shares with ahead.c: the candidates a tuning run picks, so that
 * compiling ahead makes exactly the instantiations tailor_tune will ask for. */
#ifndef TAILOR_TUNE_INTERNAL_H
#define TAILOR_TUNE_INTERNAL_H

#include "plan.h"
#include "tuner.h"

/* The plan entries tailor_tune tries, in order: the survivors, shuffled by o->seed and cut to
 * o->trials for the random strategy (not under verify_all). idx has room for
 * tailor_plan_survivors(plan); returns how many. */
int tune_pick(const tailor_plan *plan, const tailor_tune_options *o, int *idx);

/* The target tuning compiles for: the rehearsed profile's arch as PTX, else the live GPU's as
 * a cubin. */
void tune_arch(const tailor_device_info *live, const tailor_device_info *rehearse, int *sm,
               int *ptx);

/* 1 when TAILOR_NO_COMPILE forbids compiling. */
int tune_no_compile(void);

#endif
