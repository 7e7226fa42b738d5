/* threads.c - the tracer's own threads (see threads.h). */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include "threads.h"

struct start {
    void *(*run)(void *);
    void *arg;
    sem_t running; /* posted by the new thread: `start` may then go */
};

static void *begin(void *argument)
{
    struct start *start = argument;
    void *(*run)(void *) = start->run;
    void *arg = start->arg;
    sem_post(&start->running);
    return run(arg);
}

int thread_start(void *(*run)(void *), void *arg, const char *name)
{
    struct start start;
    start.run = run;
    start.arg = arg;
    sem_init(&start.running, 0, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int error = pthread_create(&thread, &attr, begin, &start);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!error) {
        while (sem_wait(&start.running) < 0 && errno == EINTR)
            ;
        pthread_setname_np(thread, name);
    }
    sem_destroy(&start.running);
    return error;
}
