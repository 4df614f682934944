/* xsched C API. Generated from crates/capi by cbindgen; do not edit. */

#ifndef XSCHED_H
#define XSCHED_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// The most f32 values one built-in kernel may hold (2^27: 512 MiB). A larger request is
// refused with `XSCHED_STATUS_INVALID_ARGUMENT` rather than attempted: a failed allocation
// would abort the host program.
#define XSCHED_KERNEL_MAX_FLOATS (1 << 27)

// What every C API call returns.
typedef enum XschedStatus {
  // Success.
  XSCHED_STATUS_OK = 0,
  // A required pointer argument was NULL.
  XSCHED_STATUS_NULL_POINTER = 1,
  // An argument is out of range (a level outside 1..3, an unknown scheduler mode, ...).
  XSCHED_STATUS_INVALID_ARGUMENT = 2,
  // A launch config broke `threshold >= batch >= 1`.
  XSCHED_STATUS_INVALID_CONFIG = 3,
  // The backend does not offer the requested level.
  XSCHED_STATUS_UNSUPPORTED_LEVEL = 4,
  // A hint value makes no sense (zero share, zero time slice).
  XSCHED_STATUS_INVALID_HINT = 5,
  // The operation needs a running queue (resume it first).
  XSCHED_STATUS_SUSPENDED = 6,
  // The queue is closed.
  XSCHED_STATUS_CLOSED = 7,
  // The command failed (its kernel or callback panicked, or the device shut down).
  XSCHED_STATUS_COMMAND_FAILED = 8,
  // The command was cancelled before launch.
  XSCHED_STATUS_CANCELLED = 9,
  // An `XSCHED_*` environment variable holds an unusable value.
  XSCHED_STATUS_ENVIRONMENT = 10,
  // A command id that was never submitted to this queue.
  XSCHED_STATUS_UNKNOWN_COMMAND = 11,
  // An internal error (a caught panic); the message says more.
  XSCHED_STATUS_PANIC = 12,
  // Any other failure; the message says more.
  XSCHED_STATUS_INTERNAL = 13,
} XschedStatus;

// A device queues are created on (the built-in CPU device).
typedef struct XschedDevice XschedDevice;

// A built-in kernel; submit it any number of times, read its result after waiting.
typedef struct XschedKernel XschedKernel;

// A preemptible queue in front of one hardware queue of a device.
typedef struct XschedQueue XschedQueue;

// A runtime: creates queues and, in local mode, runs the scheduler thread.
typedef struct XschedRuntime XschedRuntime;

// A host function run as a command, with the user pointer given at submission. It runs on a
// device worker thread, so `user` must be usable from another thread.
typedef void (*XschedCallback)(void *user);

// A snapshot of a queue.
typedef struct XschedQueueState {
  // Submitted, not yet launched.
  uint64_t pending;
  // Launched, not yet observed complete.
  uint64_t in_flight;
  // Commands observed complete (ids below this).
  uint64_t completed;
  // Whether launching is suspended.
  bool suspended;
  // The preemption level, 1 to 3.
  uint8_t level;
} XschedQueueState;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// A calibrated spin of `duration_us` microseconds in 50 µs checkpointed tiles.
//
// # Safety
// `out` must be valid for writing one pointer.
enum XschedStatus xsched_kernel_spin(uint64_t duration_us, struct XschedKernel **out);

// An n × n f32 matrix multiply of inputs generated from `seed`, one tile per `rows_per_tile`
// output rows. Its three matrices must fit in `XSCHED_KERNEL_MAX_FLOATS` (n up to 6688), else
// `XSCHED_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `out` must be valid for writing one pointer.
enum XschedStatus xsched_kernel_matmul(uint32_t n,
                                       uint32_t rows_per_tile,
                                       uint64_t seed,
                                       struct XschedKernel **out);

// `y = a·x + y` over `len` elements generated from `seed`, one tile per `chunk` elements. Not
// idempotent: every run adds `a·x` again. Its two vectors must fit in
// `XSCHED_KERNEL_MAX_FLOATS`, else `XSCHED_STATUS_INVALID_ARGUMENT`.
//
// # Safety
// `out` must be valid for writing one pointer.
enum XschedStatus xsched_kernel_saxpy(uint32_t len,
                                      uint32_t chunk,
                                      float a,
                                      uint64_t seed,
                                      struct XschedKernel **out);

// The sum of a matmul's or saxpy's output (0 for spin), for comparing runs.
//
// # Safety
// `kernel` must be NULL or a live kernel handle; `out` valid for writing one double.
enum XschedStatus xsched_kernel_checksum(const struct XschedKernel *kernel, double *out);

// Destroy a kernel handle (NULL is ignored). Submitted runs keep their own reference.
//
// # Safety
// `kernel` must be NULL or a kernel handle, destroyed once.
enum XschedStatus xsched_kernel_destroy(struct XschedKernel *kernel);

// Create a queue on a new hardware queue of `device`, configured from `XSCHED_PRIORITY`,
// `XSCHED_LEVEL`, `XSCHED_THRESHOLD`, `XSCHED_BATCH`, `XSCHED_INFLIGHT_US` and the other
// hint variables (defaults: priority 0, the device's highest level, threshold 16, batch 8).
//
// # Safety
// `rt` and `device` must be NULL or live handles; `out` valid for writing one pointer.
enum XschedStatus xsched_queue_create(const struct XschedRuntime *rt,
                                      const struct XschedDevice *device,
                                      struct XschedQueue **out);

// Destroy a queue (NULL is ignored): it leaves the scheduler, resumes if suspended, and waits
// until every submitted command completed (cancel first to drop pending ones).
//
// # Safety
// `queue` must be NULL or a live queue handle, destroyed once.
enum XschedStatus xsched_queue_destroy(struct XschedQueue *queue);

// Submit a host callback; `*command` receives its id (may be NULL if not needed).
//
// # Safety
// `queue` must be NULL or live; `callback` callable from another thread with `user`;
// `command` NULL or valid for writing.
enum XschedStatus xsched_queue_submit_callback(const struct XschedQueue *queue,
                                               XschedCallback callback,
                                               void *user,
                                               uint64_t *command);

// Submit a built-in kernel; `*command` receives its id (may be NULL).
//
// # Safety
// `queue` and `kernel` must be NULL or live handles; `command` NULL or valid for writing.
enum XschedStatus xsched_queue_submit_kernel(const struct XschedQueue *queue,
                                             const struct XschedKernel *kernel,
                                             uint64_t *command);

// Block until `command` completed; its outcome (`COMMAND_FAILED`, `CANCELLED`, ...).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_wait(const struct XschedQueue *queue, uint64_t command);

// Block until every command submitted so far completed; the first failure among them.
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_wait_all(const struct XschedQueue *queue);

// Stop launching (and deactivate/interrupt at Levels 2/3). Under a scheduler, its next
// decision may resume the queue.
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_suspend(const struct XschedQueue *queue);

// Launch again (and reactivate/restore).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_resume(const struct XschedQueue *queue);

// Set the preemption level (1 block, 2 deactivate, 3 interrupt). Fails with
// `UNSUPPORTED_LEVEL` beyond the device, `SUSPENDED` while suspended.
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_level(const struct XschedQueue *queue, uint8_t level);

// Set the launch config: at most `threshold` in flight, a sync point every `batch`, and an
// in-flight time budget of `inflight_us` microseconds at Level 1 (0: none). Fails with
// `INVALID_CONFIG` unless `threshold >= batch >= 1`.
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_launch_config(const struct XschedQueue *queue,
                                                 uint32_t threshold,
                                                 uint32_t batch,
                                                 uint64_t inflight_us);

// Fixed priority; higher is more urgent.
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_priority(const struct XschedQueue *queue, int32_t priority);

// Bandwidth share weight (positive).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_share(const struct XschedQueue *queue, uint32_t share);

// Time slice for share policies, in microseconds (positive).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_timeslice_us(const struct XschedQueue *queue, uint64_t us);

// Laxity in microseconds (for the `laxity` policy).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_laxity_us(const struct XschedQueue *queue, uint64_t us);

// Relative deadline in microseconds (for deadline policies).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_deadline_us(const struct XschedQueue *queue, uint64_t us);

// Request latency target in microseconds (for `slo-aware`: the queues it protects).
//
// # Safety
// `queue` must be NULL or a live handle.
enum XschedStatus xsched_queue_set_slo_us(const struct XschedQueue *queue, uint64_t us);

// A snapshot of the queue.
//
// # Safety
// `queue` must be NULL or a live handle; `out` valid for writing.
enum XschedStatus xsched_queue_query(const struct XschedQueue *queue, struct XschedQueueState *out);

// Drop every command not yet launched (their waits return `CANCELLED`); `*count` receives how
// many (may be NULL).
//
// # Safety
// `queue` must be NULL or a live handle; `count` NULL or valid for writing.
enum XschedStatus xsched_queue_cancel_pending(const struct XschedQueue *queue, uint64_t *count);

// Create a runtime configured from `XSCHED_SCHEDULER`, `XSCHED_POLICY` and `XSCHED_SOCKET`
// (default: local scheduler, `hpf`).
//
// # Safety
// `out` must be valid for writing one pointer.
enum XschedStatus xsched_runtime_create(struct XschedRuntime **out);

// Create a runtime with an explicit scheduler mode (0 = app, 1 = local, 2 = global) and policy
// name (NULL for `hpf`). An unknown policy, in any mode, is `XSCHED_STATUS_INVALID_ARGUMENT`
// with a message naming the known ones (`xsched_last_error`).
//
// # Safety
// `policy` must be NULL or a NUL-terminated string; `out` valid for writing one pointer.
enum XschedStatus xsched_runtime_create_with(uint32_t scheduler,
                                             const char *policy,
                                             struct XschedRuntime **out);

// Destroy a runtime (NULL is ignored). Queues created from it keep working, unscheduled.
//
// # Safety
// `rt` must be NULL or a runtime from `xsched_runtime_create*`, destroyed once.
enum XschedStatus xsched_runtime_destroy(struct XschedRuntime *rt);

// Create a CPU device with `workers` threads (0 means 1).
//
// # Safety
// `out` must be valid for writing one pointer.
enum XschedStatus xsched_device_create_cpu(uint32_t workers, struct XschedDevice **out);

// Destroy a device (NULL is ignored). Commands it still holds fail.
//
// # Safety
// `device` must be NULL or a device from `xsched_device_create_cpu`, destroyed once.
enum XschedStatus xsched_device_destroy(struct XschedDevice *device);

// The name of a status code, e.g. `"XSCHED_STATUS_UNSUPPORTED_LEVEL"`, or
// `"XSCHED_STATUS_UNKNOWN"` for a number that is no status. Never NULL; the string is static.
// Takes an `int` so that any value from C is safe to pass.
const char *xsched_status_name(int32_t status);

// The message of the calling thread's last failed call ("" if none). The pointer stays valid
// until the thread's next failing call; copy it to keep it.
const char *xsched_last_error(void);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* XSCHED_H */
