/* The xsched C API from C: queues, host callbacks and built-in kernels, suspend/resume,
 * levels, launch config, hints, and the status codes of bad input. Compiled and run by
 * `cargo test -p xsched-capi` (tests/c_example.rs); prints one line per check. */
#include "xsched.h"

#include <stdio.h>
#include <time.h>

static int failures = 0;

#define CHECK(call)                                                                      \
    do {                                                                                 \
        XschedStatus s_ = (call);                                                        \
        if (s_ != XSCHED_STATUS_OK) {                                                    \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,          \
                    xsched_status_name(s_), xsched_last_error());                        \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

#define EXPECT(call, want)                                                               \
    do {                                                                                 \
        XschedStatus s_ = (call);                                                        \
        if (s_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__, #call, \
                    xsched_status_name(s_), xsched_status_name(want));                   \
            failures++;                                                                  \
        } else {                                                                         \
            printf("ok   %-58s %s\n", #call, xsched_status_name(s_));                    \
        }                                                                                \
    } while (0)

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static void count(void *user) {
    __atomic_fetch_add((int *)user, 1, __ATOMIC_SEQ_CST);
}

int main(void) {
    XschedRuntime *rt = NULL;
    XschedDevice *dev = NULL;
    XschedQueue *fg = NULL, *bg = NULL;
    CHECK(xsched_runtime_create_with(1, "hpf", &rt));
    CHECK(xsched_device_create_cpu(1, &dev));
    CHECK(xsched_queue_create(rt, dev, &bg));
    CHECK(xsched_queue_create(rt, dev, &fg));
    CHECK(xsched_queue_set_priority(fg, 10));
    CHECK(xsched_queue_set_priority(bg, 0));

    /* Host callbacks run once each, in order; waiting on the last waits for all. */
    int n = 0;
    uint64_t last = 0;
    for (int i = 0; i < 100; i++) CHECK(xsched_queue_submit_callback(fg, count, &n, &last));
    CHECK(xsched_queue_wait(fg, last));
    if (n != 100) { fprintf(stderr, "callbacks ran %d times, expected 100\n", n); failures++; }
    else printf("ok   100 host callbacks ran once each\n");

    /* A non-idempotent kernel suspended and resumed (Level 3: interrupted at tile
     * checkpoints) gives the same result as an uninterrupted run. */
    XschedKernel *interrupted = NULL, *reference = NULL;
    CHECK(xsched_kernel_saxpy(1u << 22, 4096, 0.5f, 7, &interrupted));
    CHECK(xsched_kernel_saxpy(1u << 22, 4096, 0.5f, 7, &reference));
    uint64_t cmd = 0;
    CHECK(xsched_queue_submit_kernel(bg, interrupted, &cmd));
    int rounds = 0;
    XschedQueueState state;
    for (;;) {
        CHECK(xsched_queue_query(bg, &state));
        if (state.completed > cmd) break;
        CHECK(xsched_queue_suspend(bg));
        sleep_us(500);
        CHECK(xsched_queue_resume(bg));
        sleep_us(200);
        rounds++;
    }
    CHECK(xsched_queue_submit_kernel(fg, reference, &cmd));
    CHECK(xsched_queue_wait(fg, cmd));
    double a = 0, b = 0;
    CHECK(xsched_kernel_checksum(interrupted, &a));
    CHECK(xsched_kernel_checksum(reference, &b));
    if (a != b) { fprintf(stderr, "checksums differ: %f vs %f\n", a, b); failures++; }
    else printf("ok   saxpy interrupted %d times equals the uninterrupted run (%.3f)\n", rounds, a);
    CHECK(xsched_kernel_destroy(interrupted));
    CHECK(xsched_kernel_destroy(reference));

    /* Fixed priority: a foreground command does not wait for 100 ms of background work. */
    XschedKernel *long_spin = NULL, *short_spin = NULL;
    CHECK(xsched_kernel_spin(2000, &long_spin));
    CHECK(xsched_kernel_spin(500, &short_spin));
    for (int i = 0; i < 50; i++) CHECK(xsched_queue_submit_kernel(bg, long_spin, NULL));
    sleep_us(10000);
    CHECK(xsched_queue_submit_kernel(fg, short_spin, &cmd));
    CHECK(xsched_queue_wait(fg, cmd));
    CHECK(xsched_queue_query(bg, &state));
    uint64_t cancelled = 0;
    CHECK(xsched_queue_cancel_pending(bg, &cancelled));
    if (cancelled == 0) { fprintf(stderr, "foreground waited for the whole background\n"); failures++; }
    else printf("ok   foreground ran ahead of %llu pending background commands\n",
                (unsigned long long)cancelled);

    /* Cancelled commands report CANCELLED to their waiters. On a queue of an app-scheduled
     * runtime: under a scheduler, a suspend lasts only until its next decision. */
    XschedRuntime *app = NULL;
    XschedQueue *held = NULL;
    CHECK(xsched_runtime_create_with(0, NULL, &app));
    CHECK(xsched_queue_create(app, dev, &held));
    CHECK(xsched_queue_suspend(held));
    CHECK(xsched_queue_submit_kernel(held, short_spin, &cmd));
    CHECK(xsched_queue_cancel_pending(held, NULL));
    EXPECT(xsched_queue_wait(held, cmd), XSCHED_STATUS_CANCELLED);
    CHECK(xsched_queue_resume(held));
    CHECK(xsched_queue_destroy(held));
    CHECK(xsched_runtime_destroy(app));

    /* Bad input gets a status code, never a crash. */
    EXPECT(xsched_queue_set_level(fg, 7), XSCHED_STATUS_INVALID_ARGUMENT);
    EXPECT(xsched_queue_set_launch_config(fg, 2, 4, 0), XSCHED_STATUS_INVALID_CONFIG);
    EXPECT(xsched_queue_set_launch_config(fg, 8, 4, 500), XSCHED_STATUS_OK);
    EXPECT(xsched_queue_set_share(fg, 0), XSCHED_STATUS_INVALID_HINT);
    EXPECT(xsched_queue_set_timeslice_us(fg, 0), XSCHED_STATUS_INVALID_HINT);
    EXPECT(xsched_queue_set_timeslice_us(fg, 1), XSCHED_STATUS_INVALID_HINT); /* < 100 us */
    EXPECT(xsched_queue_set_laxity_us(fg, UINT64_MAX), XSCHED_STATUS_OK);   /* saturates */
    XschedKernel *huge = NULL;
    EXPECT(xsched_kernel_matmul(100000, 1, 1, &huge), XSCHED_STATUS_INVALID_ARGUMENT);
    EXPECT(xsched_kernel_saxpy(UINT32_MAX, 1, 1.0f, 1, &huge), XSCHED_STATUS_INVALID_ARGUMENT);
    if (huge != NULL) { fprintf(stderr, "a refused kernel was created\n"); failures++; }
    EXPECT(xsched_queue_set_level(fg, 2), XSCHED_STATUS_OK);
    EXPECT(xsched_queue_wait(fg, 1000000), XSCHED_STATUS_UNKNOWN_COMMAND);
    EXPECT(xsched_queue_submit_callback(fg, NULL, NULL, NULL), XSCHED_STATUS_NULL_POINTER);
    EXPECT(xsched_queue_suspend(NULL), XSCHED_STATUS_NULL_POINTER);
    EXPECT(xsched_queue_query(fg, NULL), XSCHED_STATUS_NULL_POINTER);
    XschedRuntime *bad = NULL;
    EXPECT(xsched_runtime_create_with(9, NULL, &bad), XSCHED_STATUS_INVALID_ARGUMENT);
    EXPECT(xsched_runtime_create_with(1, "nope", &bad), XSCHED_STATUS_INVALID_ARGUMENT);
    /* Global scheduling with no daemon at the socket: runs unscheduled, never fails. */
    EXPECT(xsched_runtime_create_with(2, NULL, &bad), XSCHED_STATUS_OK);
    CHECK(xsched_runtime_destroy(bad));
    if (xsched_status_name(12345)[0] != 'X') failures++;

    CHECK(xsched_kernel_destroy(long_spin));
    CHECK(xsched_kernel_destroy(short_spin));
    CHECK(xsched_queue_destroy(fg));
    CHECK(xsched_queue_destroy(bg));
    CHECK(xsched_device_destroy(dev));
    CHECK(xsched_runtime_destroy(rt));
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("xsched C API example: all checks passed\n");
    return 0;
}
