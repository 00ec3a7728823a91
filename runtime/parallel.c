/* parallel.c — tailor_parallel_for over pthreads. */
#include "parallel.h"

#include <pthread.h>
#include <unistd.h>

typedef struct pf_job {
    int n;
    int next;
    pthread_mutex_t lock;
    void (*fn)(void *user, int i);
    void *user;
} pf_job;

static void *pf_worker(void *arg)
{
    pf_job *job = arg;
    for (;;) {
        pthread_mutex_lock(&job->lock);
        int i = job->next < job->n ? job->next++ : -1;
        pthread_mutex_unlock(&job->lock);
        if (i < 0)
            return NULL;
        job->fn(job->user, i);
    }
}

void tailor_parallel_for(int n, void (*fn)(void *user, int i), void *user)
{
    enum { MAX_THREADS = 64 };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > 0 ? (int)(cpus < MAX_THREADS ? cpus : MAX_THREADS) : 1;
    if (threads > n)
        threads = n;
    pf_job job = {.n = n, .fn = fn, .user = user};
    pthread_mutex_init(&job.lock, NULL);
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < threads; t++) /* the calling thread is one of them */
        if (pthread_create(&tid[started], NULL, pf_worker, &job) == 0)
            started++;
    pf_worker(&job);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&job.lock);
}
