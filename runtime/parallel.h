/* parallel.h — a parallel for over CPU threads, for host work that is embarrassingly parallel
 * (C references of big shapes). */
#ifndef TAILOR_PARALLEL_H
#define TAILOR_PARALLEL_H

/* Calls fn(user, i) for every i in [0, n), on up to one thread per CPU (fewer when n is small);
 * returns when all are done. fn must be thread-safe for distinct i. Falls back to a plain loop
 * when threads cannot be started. Never fails. */
void tailor_parallel_for(int n, void (*fn)(void *user, int i), void *user);

#endif
