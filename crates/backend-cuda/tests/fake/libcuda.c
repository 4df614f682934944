/* A fake CUDA driver (libcuda.so.1) for xsched's tests on machines without a GPU.
 *
 * It exports the cu* symbols the backend, the shim and the test program use, with the real
 * driver's signatures and status codes, and models what scheduling depends on: every stream is a
 * FIFO of work that one "device" thread executes, round-robin across streams, one item at a
 * time; a kernel takes the time its arguments say; a stream memory wait (cuStreamWaitValue32_v2,
 * GEQ) holds its stream until the host-mapped word reaches the value; events complete when the
 * device reaches them. Device memory is host memory. Graph capture records launches instead of
 * running them. An async copy whose host side is pageable (memory neither cuMemAlloc nor
 * cuMemHostAlloc returned) blocks the caller as a real driver may: host to device waits for its
 * stream before it is queued (the driver stages it through pinned memory), device to host waits
 * until it has run (the data must reach the caller's memory); cuPointerGetAttribute
 * (CU_POINTER_ATTRIBUTE_MEMORY_TYPE) knows the allocations and fails on pageable memory. Every executed item is appended to the file named by FAKE_CUDA_LOG, so tests can
 * assert what ran and in which order.
 *
 * Kernels (from cuModuleGetFunction, any module):
 *   "work"  (unsigned us, CUdeviceptr out, unsigned tag): sleeps `us`, appends tag to out
 *           (out[0] = count, out[1 + i] = tags in execution order)
 *   "axpy"  (CUdeviceptr y, CUdeviceptr x, unsigned n, float a): y = a * x + y
 * cuModuleUnload makes them new to the driver again, at the same addresses (a reused handle).
 *
 * Knobs: FAKE_CUDA_NO_MEMOPS=1 (no stream memory operations), FAKE_CUDA_LOG=path,
 * FAKE_CUDA_LAZY_LOAD=1 (a kernel's first launch synchronizes the context before it is queued,
 * as lazy loading may on a real driver), CUDA_LAUNCH_BLOCKING=1 (the real driver's variable: each
 * launch returns only once its stream has run it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;
typedef struct fake_func *CUfunction;
typedef void *CUcontext;
typedef void *CUmodule;
typedef struct fake_graph *CUgraph;
typedef struct fake_graph *CUgraphExec;

enum {
  SUCCESS = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_HANDLE = 400, NOT_FOUND = 500,
  NOT_READY = 600, NOT_SUPPORTED = 801, CAPTURED_EVENT = 907, STREAM_CAPTURE_UNSUPPORTED = 900
};
#define STREAM_LEGACY ((CUstream)0x1)
#define STREAM_PER_THREAD ((CUstream)0x2)

enum kind { K_WORK, K_AXPY, K_COPY, K_SET8, K_WAIT, K_EVENT, K_GRAPH, K_EVWAIT };
struct fake_func { enum kind kind; const char *name; int launched; };
static struct fake_func FUNCS[] = {{K_WORK, "work"}, {K_AXPY, "axpy"}};

struct item {
  enum kind kind;
  uint64_t a, b, c; /* kernel args / copy dst, src, size / wait address, value */
  float f;
  CUevent event;
  struct fake_graph *graph;
  struct item *next;
};
struct fake_stream { int id; struct item *head, *tail; int running; int capturing; struct fake_graph *capture; struct fake_stream *next_all; };
struct fake_event { uint64_t recorded, reached; };
struct fake_graph { struct item *items[256]; int n; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct fake_stream *all_streams;
static struct fake_stream legacy = {0};
static __thread struct fake_stream *per_thread;
static int next_stream_id = 1, initialized;
static pthread_t device_thread;
static FILE *logf;
static struct fake_stream *last; /* the device's last stream, for round-robin */

/* One line, whole: threads log at once (the stream workers, and callers' lookups), so the line
 * and its newline are written under the stream's lock, never interleaved with another's. */
static void say(const char *fmt, unsigned long long x, unsigned long long y) {
  if (!logf) return;
  flockfile(logf);
  fprintf(logf, fmt, x, y);
  fputc('\n', logf);
  fflush(logf);
  funlockfile(logf);
}

static void add_stream(struct fake_stream *s) { s->next_all = all_streams; all_streams = s; }

/* The stream a handle names (the caller holds mu). */
static struct fake_stream *resolve(CUstream h, int ptsz) {
  if (h == STREAM_PER_THREAD || (h == NULL && ptsz)) {
    if (!per_thread) {
      per_thread = calloc(1, sizeof *per_thread);
      per_thread->id = 1000 + next_stream_id++;
      add_stream(per_thread);
    }
    return per_thread;
  }
  if (h == NULL || h == STREAM_LEGACY) return &legacy;
  return h;
}

static int ready(struct item *it) {
  if (it->kind == K_EVWAIT) return it->event->reached >= it->c;
  if (it->kind != K_WAIT) return 1;
  return *(volatile uint32_t *)(uintptr_t)it->a >= (uint32_t)it->b;
}

static void execute(struct fake_stream *s, struct item *it) {
  switch (it->kind) {
  case K_WORK: {
    struct timespec t = {(time_t)(it->a / 1000000), (long)(it->a % 1000000) * 1000};
    nanosleep(&t, NULL);
    uint32_t *out = (uint32_t *)(uintptr_t)it->b;
    if (out) out[1 + out[0]++] = (uint32_t)it->c;
    say("work %llu %llu", (unsigned long long)s->id, (unsigned long long)it->c);
    break;
  }
  case K_AXPY: {
    float *y = (float *)(uintptr_t)it->a, *x = (float *)(uintptr_t)it->b;
    for (uint64_t i = 0; i < it->c; i++) y[i] = it->f * x[i] + y[i];
    say("axpy %llu %llu", (unsigned long long)s->id, (unsigned long long)it->c);
    break;
  }
  case K_COPY: memcpy((void *)(uintptr_t)it->a, (void *)(uintptr_t)it->b, it->c); say("copy %llu %llu", s->id, it->c); break;
  case K_SET8: memset((void *)(uintptr_t)it->a, (int)it->b, it->c); say("memset %llu %llu", s->id, it->c); break;
  case K_WAIT: say("wait %llu %llu", s->id, it->b); break;
  case K_EVENT: break;
  case K_EVWAIT: say("evwait %llu %llu", s->id, it->c); break;
  case K_GRAPH: say("graph %llu %llu", s->id, (uint64_t)it->graph->n); break;
  }
}

/* The device: one item at a time, round-robin over streams whose head can run. */
static void *device(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    struct fake_stream *pick = NULL, *start = last ? last->next_all : NULL, *s;
    for (s = start; s && !pick; s = s->next_all)
      if (s->head && ready(s->head)) pick = s;
    for (s = all_streams; s && s != start && !pick; s = s->next_all)
      if (s->head && ready(s->head)) pick = s;
    if (!pick) {
      struct timespec t;
      clock_gettime(CLOCK_REALTIME, &t);
      t.tv_nsec += 50000; /* waits on host memory are polled */
      if (t.tv_nsec >= 1000000000) { t.tv_sec++; t.tv_nsec -= 1000000000; }
      pthread_cond_timedwait(&changed, &mu, &t);
      continue;
    }
    last = pick;
    struct item *it = pick->head;
    pick->running = 1;
    if (it->kind == K_GRAPH) {
      /* a launched graph runs its captured items in order */
      pthread_mutex_unlock(&mu);
      for (int i = 0; i < it->graph->n; i++) execute(pick, it->graph->items[i]);
      execute(pick, it);
      pthread_mutex_lock(&mu);
    } else {
      pthread_mutex_unlock(&mu);
      execute(pick, it);
      pthread_mutex_lock(&mu);
    }
    if (it->kind == K_EVENT) it->event->reached = it->c;
    pick->head = it->next;
    if (!pick->head) pick->tail = NULL;
    pick->running = 0;
    free(it);
    pthread_cond_broadcast(&changed);
  }
  return NULL;
}

static CUresult push(CUstream h, int ptsz, struct item *it) {
  pthread_mutex_lock(&mu);
  if (!initialized) { pthread_mutex_unlock(&mu); free(it); return NOT_INITIALIZED; }
  struct fake_stream *s = resolve(h, ptsz);
  if (s->capturing) {
    if (it->kind == K_WAIT || it->kind == K_EVENT || it->kind == K_EVWAIT) { /* not capturable here */
      pthread_mutex_unlock(&mu); free(it); return STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->capture->n < 256) s->capture->items[s->capture->n++] = it;
    pthread_mutex_unlock(&mu);
    return SUCCESS;
  }
  it->next = NULL;
  if (s->tail) s->tail->next = it; else s->head = it;
  s->tail = it;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

static struct item *new_item(enum kind k, uint64_t a, uint64_t b, uint64_t c) {
  struct item *it = calloc(1, sizeof *it);
  it->kind = k; it->a = a; it->b = b; it->c = c;
  return it;
}

CUresult cuInit(unsigned flags) {
  if (flags != 0) return INVALID_VALUE;
  pthread_mutex_lock(&mu);
  if (!initialized) {
    initialized = 1;
    legacy.id = 0;
    add_stream(&legacy);
    const char *path = getenv("FAKE_CUDA_LOG");
    if (path) logf = fopen(path, "a");
    pthread_create(&device_thread, NULL, device, NULL);
  }
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUresult cuDriverGetVersion(int *v) { if (!v) return INVALID_VALUE; *v = 12040; return SUCCESS; }
CUresult cuDeviceGetCount(int *n) { if (!initialized) return NOT_INITIALIZED; *n = 1; return SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { if (ordinal != 0) return INVALID_VALUE; *d = 0; return SUCCESS; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  if (d != 0 || len <= 0) return INVALID_VALUE;
  snprintf(name, (size_t)len, "xsched fake CUDA device");
  return SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice d) {
  if (d != 0) return INVALID_VALUE;
  const char *no = getenv("FAKE_CUDA_NO_MEMOPS");
  int memops = !(no && no[0] == '1');
  *value = attr == 19 ? 1 : attr == 92 ? memops : 0;
  return SUCCESS;
}
static int ctx_token;
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { if (d != 0) return INVALID_VALUE; *c = &ctx_token; return SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d == 0 ? SUCCESS : INVALID_VALUE; }
static __thread CUcontext current;
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return SUCCESS; }
CUresult cuCtxDestroy_v2(CUcontext c) { if (!c) return INVALID_VALUE; if (current == c) current = NULL; return SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) { if (!current) return 201; *d = 0; return SUCCESS; }

/* Internal, so that creating with a priority does not go through an interposed cuStreamCreate
 * (the real driver does not call its own entry points either). */
static CUresult stream_create(CUstream *out, unsigned flags) {
  (void)flags;
  if (!initialized) return NOT_INITIALIZED;
  if (!out) return INVALID_VALUE;
  struct fake_stream *s = calloc(1, sizeof *s);
  pthread_mutex_lock(&mu);
  s->id = next_stream_id++;
  add_stream(s);
  pthread_mutex_unlock(&mu);
  *out = s;
  return SUCCESS;
}
CUresult cuStreamCreate(CUstream *out, unsigned flags) { return stream_create(out, flags); }
CUresult cuStreamCreateWithPriority(CUstream *out, unsigned flags, int priority) { (void)priority; return stream_create(out, flags); }

static CUresult stream_sync(CUstream h, int ptsz) {
  pthread_mutex_lock(&mu);
  struct fake_stream *s = resolve(h, ptsz);
  while (s->head) pthread_cond_wait(&changed, &mu);
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUresult cuStreamSynchronize(CUstream h) { return stream_sync(h, 0); }
CUresult cuStreamSynchronize_ptsz(CUstream h) { return stream_sync(h, 1); }
static CUresult stream_query(CUstream h, int ptsz) {
  pthread_mutex_lock(&mu);
  int busy = resolve(h, ptsz)->head != NULL;
  pthread_mutex_unlock(&mu);
  return busy ? NOT_READY : SUCCESS;
}
CUresult cuStreamQuery(CUstream h) { return stream_query(h, 0); }
CUresult cuStreamQuery_ptsz(CUstream h) { return stream_query(h, 1); }
CUresult cuStreamDestroy_v2(CUstream h) {
  if (h == NULL || h == STREAM_LEGACY || h == STREAM_PER_THREAD) return INVALID_HANDLE;
  stream_sync(h, 0); /* work already queued completes, as on a real device */
  pthread_mutex_lock(&mu);
  for (struct fake_stream **p = &all_streams; *p; p = &(*p)->next_all)
    if (*p == h) { *p = h->next_all; break; }
  if (last == h) last = NULL;
  pthread_mutex_unlock(&mu);
  say("destroy %llu %llu", (uint64_t)h->id, 0);
  free(h);
  return SUCCESS;
}

static CUresult wait32(CUstream h, CUdeviceptr addr, uint32_t value, unsigned flags, int ptsz) {
  const char *no = getenv("FAKE_CUDA_NO_MEMOPS");
  if (no && no[0] == '1') return NOT_SUPPORTED;
  if (flags != 0 /* CU_STREAM_WAIT_VALUE_GEQ only */ || !addr) return INVALID_VALUE;
  return push(h, ptsz, new_item(K_WAIT, addr, value, 0));
}
CUresult cuStreamWaitValue32_v2(CUstream h, CUdeviceptr a, uint32_t v, unsigned f) { return wait32(h, a, v, f, 0); }
CUresult cuStreamWaitValue32_v2_ptsz(CUstream h, CUdeviceptr a, uint32_t v, unsigned f) { return wait32(h, a, v, f, 1); }

CUresult cuEventCreate(CUevent *e, unsigned flags) { (void)flags; if (!e) return INVALID_VALUE; *e = calloc(1, sizeof **e); return SUCCESS; }
CUresult cuEventDestroy_v2(CUevent e) { if (!e) return INVALID_HANDLE; free(e); return SUCCESS; }
static CUresult record(CUevent e, CUstream h, int ptsz) {
  if (!e) return INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  uint64_t n = ++e->recorded;
  pthread_mutex_unlock(&mu);
  struct item *it = new_item(K_EVENT, 0, 0, n);
  it->event = e;
  return push(h, ptsz, it);
}
CUresult cuEventRecord(CUevent e, CUstream h) { return record(e, h, 0); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream h) { return record(e, h, 1); }
/* The stream waits until the event's latest recording (at the time of the call) is reached. */
static CUresult wait_event(CUstream h, CUevent e, unsigned flags, int ptsz) {
  if (!e) return INVALID_HANDLE;
  if (flags != 0) return INVALID_VALUE;
  pthread_mutex_lock(&mu);
  uint64_t n = e->recorded;
  pthread_mutex_unlock(&mu);
  struct item *it = new_item(K_EVWAIT, 0, 0, n);
  it->event = e;
  return push(h, ptsz, it);
}
CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned f) { return wait_event(h, e, f, 0); }
CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned f) { return wait_event(h, e, f, 1); }
CUresult cuEventQuery(CUevent e) {
  if (!e) return INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  int done = e->reached >= e->recorded;
  pthread_mutex_unlock(&mu);
  return done ? SUCCESS : NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
  if (!e) return INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  uint64_t want = e->recorded;
  while (e->reached < want) pthread_cond_wait(&changed, &mu);
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

/* The allocations the driver knows (CUmemorytype: 1 pinned host, 2 device); anything else is
 * pageable host memory. */
enum { MEM_HOST = 1, MEM_DEVICE = 2 };
struct allocation { uintptr_t lo, hi; unsigned type; struct allocation *next; };
static struct allocation *allocations;
static void *allocate(size_t n, unsigned type) {
  struct allocation *a = malloc(sizeof *a);
  void *p = calloc(1, n ? n : 1);
  pthread_mutex_lock(&mu);
  *a = (struct allocation){(uintptr_t)p, (uintptr_t)p + (n ? n : 1), type, allocations};
  allocations = a;
  pthread_mutex_unlock(&mu);
  return p;
}
static void release(void *p) {
  pthread_mutex_lock(&mu);
  for (struct allocation **a = &allocations; *a; a = &(*a)->next)
    if ((*a)->lo == (uintptr_t)p) { struct allocation *gone = *a; *a = gone->next; free(gone); break; }
  pthread_mutex_unlock(&mu);
  free(p);
}
static unsigned memory_type(uintptr_t p) {
  unsigned type = 0;
  pthread_mutex_lock(&mu);
  for (struct allocation *a = allocations; a; a = a->next)
    if (p >= a->lo && p < a->hi) { type = a->type; break; }
  pthread_mutex_unlock(&mu);
  return type;
}
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr p) {
  unsigned type = memory_type((uintptr_t)p);
  if (!data || attribute != 2 /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */ || !type) return INVALID_VALUE;
  *(unsigned *)data = type;
  return SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { if (!p || !n) return INVALID_VALUE; *p = (uintptr_t)allocate(n, MEM_DEVICE); return SUCCESS; }
CUresult cuMemFree_v2(CUdeviceptr p) { release((void *)(uintptr_t)p); return SUCCESS; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; if (!p) return INVALID_VALUE; *p = allocate(n, MEM_HOST); return SUCCESS; }
CUresult cuMemFreeHost(void *p) { release(p); return SUCCESS; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) { if (!d || !p || flags) return INVALID_VALUE; *d = (uintptr_t)p; return SUCCESS; }

static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, int ptsz) {
  if (!dst || !src) return INVALID_VALUE;
  int to_pageable = !memory_type(dst), from_pageable = !memory_type(src);
  if (from_pageable && !to_pageable) stream_sync(h, ptsz);
  CUresult status = push(h, ptsz, new_item(K_COPY, dst, src, n));
  if (status == SUCCESS && to_pageable) stream_sync(h, ptsz);
  return status;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h) { return copy(d, (uintptr_t)s, n, h, 0); }
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h) { return copy(d, (uintptr_t)s, n, h, 1); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h) { return copy((uintptr_t)d, s, n, h, 0); }
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h) { return copy((uintptr_t)d, s, n, h, 1); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { return copy(d, s, n, h, 0); }
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { return copy(d, s, n, h, 1); }
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { return copy(d, s, n, h, 0); }
CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { return copy(d, s, n, h, 1); }
static CUresult set8(CUdeviceptr d, unsigned char v, size_t n, CUstream h, int ptsz) {
  if (!d) return INVALID_VALUE;
  return push(h, ptsz, new_item(K_SET8, d, v, n));
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { return set8(d, v, n, h, 0); }
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { return set8(d, v, n, h, 1); }

CUresult cuModuleLoadData(CUmodule *m, const void *image) { if (!m || !image) return INVALID_VALUE; *m = FUNCS; return SUCCESS; }
/* Unloading frees the module's kernels: a module loaded later hands out the same addresses for
 * kernels that are new to the driver (under FAKE_CUDA_LAZY_LOAD=1 their first launch loads them
 * again), as a real driver may reuse a freed kernel's address. */
CUresult cuModuleUnload(CUmodule m) {
  if (m != FUNCS) return INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < sizeof FUNCS / sizeof FUNCS[0]; i++) FUNCS[i].launched = 0;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  if (!f || !m || !name) return INVALID_VALUE;
  for (size_t i = 0; i < sizeof FUNCS / sizeof FUNCS[0]; i++)
    if (!strcmp(FUNCS[i].name, name)) { *f = &FUNCS[i]; return SUCCESS; }
  return NOT_FOUND;
}

CUresult cuCtxSynchronize(void);
/* With FAKE_CUDA_LAZY_LOAD=1, the first launch of `f` "loads" it: a context synchronization. */
static void load(CUfunction f) {
  const char *lazy = getenv("FAKE_CUDA_LAZY_LOAD");
  if (!lazy || strcmp(lazy, "1") != 0) return;
  pthread_mutex_lock(&mu);
  int first = !f->launched;
  f->launched = 1;
  pthread_mutex_unlock(&mu);
  if (first) cuCtxSynchronize();
}

static CUresult launch(CUfunction f, unsigned gx, unsigned bx, CUstream h, void **params, int ptsz) {
  if (!f || !params || gx == 0 || bx == 0 || bx > 1024) return INVALID_VALUE;
  load(f);
  struct item *it;
  if (f->kind == K_WORK)
    it = new_item(K_WORK, *(unsigned *)params[0], *(CUdeviceptr *)params[1], *(unsigned *)params[2]);
  else {
    it = new_item(K_AXPY, *(CUdeviceptr *)params[0], *(CUdeviceptr *)params[1], *(unsigned *)params[2]);
    it->f = *(float *)params[3];
  }
  CUresult status = push(h, ptsz, it);
  const char *blocking = getenv("CUDA_LAUNCH_BLOCKING");
  if (status == SUCCESS && blocking && !strcmp(blocking, "1")) stream_sync(h, ptsz);
  return status;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream h, void **params, void **extra) {
  (void)gy; (void)gz; (void)by; (void)bz; (void)shmem; (void)extra;
  return launch(f, gx, bx, h, params, 0);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shmem, CUstream h, void **params, void **extra) {
  (void)gy; (void)gz; (void)by; (void)bz; (void)shmem; (void)extra;
  return launch(f, gx, bx, h, params, 1);
}
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  void *attrs;
  unsigned numAttrs;
} CUlaunchConfig;
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  (void)extra;
  if (!c) return INVALID_VALUE;
  return launch(f, c->gridDimX, c->blockDimX, c->hStream, params, 0);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  (void)extra;
  if (!c) return INVALID_VALUE;
  return launch(f, c->gridDimX, c->blockDimX, c->hStream, params, 1);
}

static CUresult begin_capture(CUstream h, int mode, int ptsz) {
  (void)mode;
  pthread_mutex_lock(&mu);
  struct fake_stream *s = resolve(h, ptsz);
  s->capturing = 1;
  s->capture = calloc(1, sizeof *s->capture);
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUresult cuStreamBeginCapture_v2(CUstream h, int mode) { return begin_capture(h, mode, 0); }
CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, int mode) { return begin_capture(h, mode, 1); }
static CUresult end_capture(CUstream h, CUgraph *g, int ptsz) {
  pthread_mutex_lock(&mu);
  struct fake_stream *s = resolve(h, ptsz);
  if (!s->capturing) { pthread_mutex_unlock(&mu); return INVALID_VALUE; }
  *g = s->capture;
  s->capturing = 0;
  s->capture = NULL;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}
CUresult cuStreamEndCapture(CUstream h, CUgraph *g) { return end_capture(h, g, 0); }
CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g) { return end_capture(h, g, 1); }
CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags) { (void)flags; if (!e || !g) return INVALID_VALUE; *e = g; return SUCCESS; }
static CUresult graph_launch(CUgraphExec e, CUstream h, int ptsz) {
  if (!e) return INVALID_VALUE;
  struct item *it = new_item(K_GRAPH, 0, 0, 0);
  it->graph = e;
  return push(h, ptsz, it);
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream h) { return graph_launch(e, h, 0); }
CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream h) { return graph_launch(e, h, 1); }

CUresult cuCtxSynchronize(void) {
  pthread_mutex_lock(&mu);
  for (;;) {
    int busy = 0;
    for (struct fake_stream *s = all_streams; s; s = s->next_all) busy |= s->head != NULL;
    if (!busy) break;
    pthread_cond_wait(&changed, &mu);
  }
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

CUresult cuGetErrorString(CUresult e, const char **s) {
  if (!s) return INVALID_VALUE;
  *s = e == SUCCESS ? "no error" : "fake driver error";
  return SUCCESS;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
  if (!s) return INVALID_VALUE;
  *s = e == SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return SUCCESS;
}

/* Entry points by base name, as the runtime asks for them (flag 2: per-thread default stream). */
struct proc { const char *name; void *normal, *ptsz; };
static const struct proc PROCS[] = {
  {"cuInit", cuInit, cuInit},
  {"cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain},
  {"cuCtxSetCurrent", cuCtxSetCurrent, cuCtxSetCurrent},
  {"cuModuleLoadData", cuModuleLoadData, cuModuleLoadData},
  {"cuModuleGetFunction", cuModuleGetFunction, cuModuleGetFunction},
  {"cuModuleUnload", cuModuleUnload, cuModuleUnload},
  {"cuMemAlloc", cuMemAlloc_v2, cuMemAlloc_v2},
  {"cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz},
  {"cuLaunchKernelEx", cuLaunchKernelEx, cuLaunchKernelEx_ptsz},
  {"cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz},
  {"cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz},
  {"cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz},
  {"cuMemcpyAsync", cuMemcpyAsync, cuMemcpyAsync_ptsz},
  {"cuMemsetD8Async", cuMemsetD8Async, cuMemsetD8Async_ptsz},
  {"cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz},
  {"cuStreamQuery", cuStreamQuery, cuStreamQuery_ptsz},
  {"cuStreamCreate", cuStreamCreate, cuStreamCreate},
  {"cuStreamDestroy", cuStreamDestroy_v2, cuStreamDestroy_v2},
  {"cuEventRecord", cuEventRecord, cuEventRecord_ptsz},
  {"cuStreamWaitEvent", cuStreamWaitEvent, cuStreamWaitEvent_ptsz},
  {"cuEventSynchronize", cuEventSynchronize, cuEventSynchronize},
  {"cuStreamBeginCapture", cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz},
  {"cuStreamEndCapture", cuStreamEndCapture, cuStreamEndCapture_ptsz},
  {"cuGraphLaunch", cuGraphLaunch, cuGraphLaunch_ptsz},
  {"cuStreamWaitValue32", cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz},
  {"cuGetErrorString", cuGetErrorString, cuGetErrorString},
};
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
  if (!symbol || !pfn) return INVALID_VALUE;
  (void)version;
  say("proc %llu %llu", (uint64_t)strlen(symbol), flags);
  for (size_t i = 0; i < sizeof PROCS / sizeof PROCS[0]; i++)
    if (!strcmp(PROCS[i].name, symbol)) {
      *pfn = (flags & 2) ? PROCS[i].ptsz : PROCS[i].normal;
      if (status) *status = 0;
      return SUCCESS;
    }
  *pfn = NULL;
  if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return NOT_FOUND;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* Synchronous copies and memsets (used by tests to set up and read back): after the legacy
 * stream's work, like the real ones. */
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { stream_sync(NULL, 0); if (!d || !s) return INVALID_VALUE; memcpy(d, (void *)(uintptr_t)s, n); return SUCCESS; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { stream_sync(NULL, 0); if (!d || !s) return INVALID_VALUE; memcpy((void *)(uintptr_t)d, s, n); return SUCCESS; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { stream_sync(NULL, 0); if (!d) return INVALID_VALUE; memset((void *)(uintptr_t)d, v, n); return SUCCESS; }
