// ThreadSanitizer and librdkafka: Debian's librdkafka uses glibc's C11 threads (`thrd_create`,
// `thrd_join`, `mtx_*`, `cnd_*`, `call_once`), which this toolchain's TSan does not intercept.
// TSan then has no state for librdkafka's threads and crashes (SEGV in its allocator) at their
// first malloc, and would not see librdkafka's locks. In TSan builds of every program that links
// the Kafka layer (the test bundle, push-worker, dispatch, …) these definitions interpose the C11
// calls librdkafka imports and forward them to the pthread calls TSan does intercept (glibc
// implements C11 threads on the same pthread objects, so the types are layout-compatible). Other
// builds do not contain them.
#include "CThreadsTSanShim.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#include <pthread.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct callpush_thrd_start {
    thrd_start_t func;
    void *arg;
};

static void *callpush_thrd_trampoline(void *raw) {
    struct callpush_thrd_start start = *(struct callpush_thrd_start *)raw;
    free(raw);
    return (void *)(intptr_t)start.func(start.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg) {
    struct callpush_thrd_start *start = malloc(sizeof *start);
    if (!start) return thrd_nomem;
    start->func = func;
    start->arg = arg;
    int err = pthread_create((pthread_t *)thr, NULL, callpush_thrd_trampoline, start);
    if (err) {
        free(start);
        return err == EAGAIN ? thrd_nomem : thrd_error;
    }
    return thrd_success;
}

int thrd_join(thrd_t thr, int *res) {
    void *value = NULL;
    if (pthread_join((pthread_t)thr, &value) != 0) return thrd_error;
    if (res) *res = (int)(intptr_t)value;
    return thrd_success;
}

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    int err = pthread_mutex_init((pthread_mutex_t *)mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    return err ? thrd_error : thrd_success;
}

int mtx_lock(mtx_t *mutex) { return pthread_mutex_lock((pthread_mutex_t *)mutex) ? thrd_error : thrd_success; }
int mtx_unlock(mtx_t *mutex) { return pthread_mutex_unlock((pthread_mutex_t *)mutex) ? thrd_error : thrd_success; }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *cond) { return pthread_cond_init((pthread_cond_t *)cond, NULL) ? thrd_error : thrd_success; }
int cnd_signal(cnd_t *cond) { return pthread_cond_signal((pthread_cond_t *)cond) ? thrd_error : thrd_success; }
int cnd_broadcast(cnd_t *cond) { return pthread_cond_broadcast((pthread_cond_t *)cond) ? thrd_error : thrd_success; }
int cnd_wait(cnd_t *cond, mtx_t *mutex) {
    return pthread_cond_wait((pthread_cond_t *)cond, (pthread_mutex_t *)mutex) ? thrd_error : thrd_success;
}
int cnd_timedwait(cnd_t *restrict cond, mtx_t *restrict mutex, const struct timespec *restrict until) {
    int err = pthread_cond_timedwait((pthread_cond_t *)cond, (pthread_mutex_t *)mutex, until);
    return err == 0 ? thrd_success : err == ETIMEDOUT ? thrd_timedout : thrd_error;
}
void cnd_destroy(cnd_t *cond) { pthread_cond_destroy((pthread_cond_t *)cond); }

void call_once(once_flag *flag, void (*func)(void)) { pthread_once((pthread_once_t *)flag, func); }
#endif
#endif

int callpush_tsan_thrd_shim_present(void) { return 1; }
