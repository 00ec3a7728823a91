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

/* 1 when o checks every survivor: verify_all, or check_only (which then stops). */
int tune_checks_all(const tailor_tune_options *o);

/* 1 when a cached winner answers a target: not forced, not filtered (--where: the winner may lie
 * outside the filter), not checking every survivor. tailor_tune and the ahead planner agree. */
int tune_uses_cache(const tailor_tune_options *o);

/* The target tuning compiles for: the rehearsed profile's arch as PTX, else the live GPU's as
 * a cubin. */
void tune_arch(const tailor_device_info *live, const tailor_device_info *rehearse, int *sm,
               int *ptx);

/* 1 when TAILOR_NO_COMPILE forbids compiling. */
int tune_no_compile(void);

#endif
