/* An ordinary CUDA driver-API program, written for xsched's tests and never linked against xsched:
 * it links -lcuda only (the tests' fake driver), so the shim can only reach it through LD_PRELOAD.
 * It declares the few prototypes it needs itself (no CUDA headers).
 *
 *   cuapp check N ITERS   one JSON line: results checksum, status codes, how entry points found
 *                         through dlsym + cuGetProcAddress relate to the driver's, graph replay
 *   cuapp hold N MS       one stream in use for MS milliseconds
 *   cuapp threads N K     K threads each launch on their per-thread default stream and exit;
 *                         then the legacy stream, then cuCtxDestroy
 *   cuapp crossdep N K    two streams, K rounds: an axpy on the first, an event recorded there,
 *                         the second waits on it, copies the first's result and runs an axpy;
 *                         one JSON line with the second's checksum (it depends on the order)
 *   cuapp mixed N K       8 streams at mixed priorities (CUDA priority 0 and -1, alternating), 4
 *                         pairs, K rounds: a low stream runs 3 axpys and records its event, its
 *                         high partner waits on it, copies the result and runs an axpy; one
 *                         JSON line with the checksum of the four high streams' results
 *   cuapp reload N K      one stream: K axpys, then the module unloaded and loaded again (the
 *                         fake driver hands out the same kernel address, new to it), K more;
 *                         one JSON line with the checksum
 *   cuapp fork N MS stay|exec  a stream in use, then fork: the child sleeps 2*MS without CUDA
 *                         (stay) or execs `hold N 2*MS` (exec); the parent prints
 *                         {"pid","child"}, uses its stream MS more and exits
 *
 * Kernels are the fake driver's ("axpy": y = a*x + y; see crates/backend-cuda/tests/fake). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h" /* crates/interpose/c */

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUstream, *CUfunction, *CUmodule, *CUcontext, *CUevent, *CUgraph, *CUgraphExec;
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  void *attrs;
  unsigned numAttrs;
} CUlaunchConfig;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuModuleUnload(CUmodule);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemFreeHost(void *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamCreateWithPriority(CUstream *, unsigned, int);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
CUresult cuStreamSynchronize_ptsz(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
typedef CUresult (*getproc_t)(const char *, void **, int, uint64_t, int *);
typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);

#define CHECK(call)                                                                   \
  do {                                                                                \
    CUresult err_ = (call);                                                           \
    if (err_ != 0) {                                                                  \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, err_);     \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static int check(unsigned n, int iters) {
  CUcontext ctx;
  CUmodule mod;
  CUfunction axpy;
  CHECK(cuInit(0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, "fake image"));
  CHECK(cuModuleGetFunction(&axpy, mod, "axpy"));
  size_t bytes = n * sizeof(float);
  /* x pinned (its copy is scheduled); y and out pageable (their copies block the caller) */
  float *x, *y = malloc(bytes), *out = malloc(bytes);
  CHECK(cuMemHostAlloc((void **)&x, bytes, 0));
  for (unsigned i = 0; i < n; i++) { x[i] = (float)(i % 17) * 0.5f; y[i] = (float)(i % 5); }
  CUdeviceptr dx, dy, dz;
  CHECK(cuMemAlloc_v2(&dx, bytes)); CHECK(cuMemAlloc_v2(&dy, bytes)); CHECK(cuMemAlloc_v2(&dz, bytes));
  CUstream s;
  CHECK(cuStreamCreate(&s, 1));
  CHECK(cuMemcpyHtoDAsync_v2(dx, x, bytes, s));
  CHECK(cuMemcpyHtoDAsync_v2(dy, y, bytes, s));
  CHECK(cuMemsetD8Async(dz, 0, bytes, s));
  float a = 0.75f;
  void *params[] = {&dy, &dx, &n, &a};
  for (int i = 0; i < iters; i++) CHECK(cuLaunchKernel(axpy, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
  CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, s, NULL, 0};
  CHECK(cuLaunchKernelEx(&cfg, axpy, params, NULL));

  /* the CUDA runtime's way: dlsym(cuGetProcAddress) on the driver's handle, then ask it */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  getproc_t getproc = (getproc_t)dlsym(lib, "cuGetProcAddress_v2");
  launch_t legacy_launch = NULL, ptsz_launch = NULL;
  CHECK(getproc("cuLaunchKernel", (void **)&legacy_launch, 12040, 0, NULL));
  CHECK(getproc("cuLaunchKernel", (void **)&ptsz_launch, 12040, 2, NULL));
  int proc_is_driver = (void *)legacy_launch == dlsym(lib, "cuLaunchKernel");
  /* default streams: legacy (NULL) and per-thread (NULL through the _ptsz variant) */
  CHECK(cuStreamSynchronize(s));
  CHECK(legacy_launch(axpy, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  CHECK(cuStreamSynchronize(NULL));
  CHECK(ptsz_launch(axpy, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  CHECK(cuStreamSynchronize((CUstream)0x2));

  /* a graph captured on a second stream and replayed: passes through */
  CUstream g;
  CUgraph graph;
  CUgraphExec exec;
  CHECK(cuStreamCreate(&g, 1));
  CHECK(cuStreamBeginCapture_v2(g, 0));
  CHECK(cuLaunchKernel(axpy, 1, 1, 1, 32, 1, 1, 0, g, params, NULL));
  CHECK(cuStreamEndCapture(g, &graph));
  CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, g));
  CHECK(cuStreamSynchronize(g));

  CUevent done;
  CHECK(cuEventCreate(&done, 0));
  CHECK(cuMemcpyDtoHAsync_v2(out, dy, bytes, s));
  CHECK(cuEventRecord(done, s));
  CHECK(cuEventSynchronize(done));
  uint32_t sum = checksum(out, n);

  /* bad input: the driver's status codes, unchanged */
  int bad_launch = cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
  int bad_block = cuLaunchKernel(axpy, 1, 1, 1, 4096, 1, 1, 0, s, params, NULL);
  int bad_copy = cuMemcpyHtoDAsync_v2(0, x, bytes, s);
  int bad_ex = cuLaunchKernelEx(NULL, axpy, params, NULL);
  CHECK(cuStreamSynchronize(s));
  CHECK(cuStreamDestroy_v2(s));
  CHECK(cuStreamDestroy_v2(g));
  printf("{\"mode\":\"check\",\"checksum\":\"%08x\",\"proc_is_driver\":%s,"
         "\"errors\":{\"launch\":%d,\"block\":%d,\"copy\":%d,\"ex\":%d}}\n",
         sum, proc_is_driver ? "true" : "false", bad_launch, bad_block, bad_copy, bad_ex);
  cuMemFreeHost(x); free(y); free(out);
  return 0;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A created stream with an axpy ready to launch on it. */
typedef struct {
  CUstream s;
  CUmodule mod;
  CUfunction axpy;
  CUdeviceptr x, y;
  unsigned n;
  float a;
} Work;

static Work work_on_new_stream(unsigned n) {
  Work w = {.n = n, .a = 0.5f};
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&w.mod, "fake image"));
  CHECK(cuModuleGetFunction(&w.axpy, w.mod, "axpy"));
  CHECK(cuMemAlloc_v2(&w.x, n * sizeof(float)));
  CHECK(cuMemAlloc_v2(&w.y, n * sizeof(float)));
  CHECK(cuStreamCreate(&w.s, 1));
  return w;
}

/* Launch and synchronize on the stream for `ms` milliseconds. */
static void use_stream(Work *w, double ms) {
  void *params[] = {&w->y, &w->x, &w->n, &w->a};
  struct timespec pause = {0, 5000000};
  for (double until = now_ms() + ms; now_ms() < until;) {
    CHECK(cuLaunchKernel(w->axpy, 1, 1, 1, 32, 1, 1, 0, w->s, params, NULL));
    CHECK(cuStreamSynchronize(w->s));
    nanosleep(&pause, NULL);
  }
}

static int hold(unsigned n, double ms) {
  Work w = work_on_new_stream(n);
  use_stream(&w, ms);
  CHECK(cuStreamDestroy_v2(w.s));
  return 0;
}

static CUcontext shared_ctx;

static void *per_thread(void *arg) {
  Work *w = arg;
  void *params[] = {&w->y, &w->x, &w->n, &w->a};
  CHECK(cuCtxSetCurrent(shared_ctx));
  CHECK(cuLaunchKernel_ptsz(w->axpy, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  CHECK(cuStreamSynchronize_ptsz(NULL));
  return NULL;
}

static int threads(unsigned n, int k) {
  Work w = work_on_new_stream(n);
  CHECK(cuDevicePrimaryCtxRetain(&shared_ctx, 0));
  for (int i = 0; i < k; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, per_thread, &w) != 0) { perror("pthread_create"); return 1; }
    pthread_join(t, NULL);
  }
  void *params[] = {&w.y, &w.x, &w.n, &w.a};
  CHECK(cuLaunchKernel(w.axpy, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  CHECK(cuStreamSynchronize(NULL));
  CHECK(cuStreamDestroy_v2(w.s));
  CHECK(cuCtxDestroy_v2(shared_ctx));
  printf("{\"mode\":\"threads\",\"threads\":%d}\n", k);
  return 0;
}

static int forked(unsigned n, double ms, const char *mode, const char *self) {
  Work w = work_on_new_stream(n);
  use_stream(&w, ms / 4);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) { perror("fork"); return 1; }
  if (child == 0) {
    if (!strcmp(mode, "exec")) {
      char n_s[32], ms_s[32];
      snprintf(n_s, sizeof n_s, "%u", n);
      snprintf(ms_s, sizeof ms_s, "%.0f", 2 * ms);
      execl(self, self, "hold", n_s, ms_s, (char *)NULL);
      perror("exec");
      _exit(127);
    }
    struct timespec t = {(time_t)(2 * ms / 1e3), (long)((2 * ms - 1e3 * (time_t)(2 * ms / 1e3)) * 1e6)};
    nanosleep(&t, NULL);
    _exit(0);
  }
  printf("{\"mode\":\"fork\",\"pid\":%d,\"child\":%d}\n", (int)getpid(), (int)child);
  fflush(stdout);
  use_stream(&w, ms);
  CHECK(cuStreamDestroy_v2(w.s));
  return 0;
}

/* Several streams of one process with a dependency between them (XSched's upstream PR 30: its
 * per-stream policy deadlocked on this shape). */
static int crossdep(unsigned n, int k) {
  Work a = work_on_new_stream(n);
  CUstream b;
  CUdeviceptr yb;
  CHECK(cuStreamCreate(&b, 1));
  CHECK(cuMemAlloc_v2(&yb, n * sizeof(float)));
  float *host = malloc(n * sizeof(float));
  for (unsigned i = 0; i < n; i++) host[i] = (float)(i % 7);
  CHECK(cuMemcpyHtoDAsync_v2(a.x, host, n * sizeof(float), a.s));
  CHECK(cuMemcpyHtoDAsync_v2(a.y, host, n * sizeof(float), a.s));
  CUevent done;
  CHECK(cuEventCreate(&done, 0));
  void *pa[] = {&a.y, &a.x, &a.n, &a.a};
  void *pb[] = {&yb, &a.x, &a.n, &a.a};
  for (int r = 0; r < k; r++) {
    CHECK(cuLaunchKernel(a.axpy, 1, 1, 1, 32, 1, 1, 0, a.s, pa, NULL));
    CHECK(cuEventRecord(done, a.s));
    CHECK(cuStreamWaitEvent(b, done, 0));
    CHECK(cuMemcpyDtoDAsync_v2(yb, a.y, n * sizeof(float), b));
    CHECK(cuLaunchKernel(a.axpy, 1, 1, 1, 32, 1, 1, 0, b, pb, NULL));
  }
  CHECK(cuMemcpyDtoHAsync_v2(host, yb, n * sizeof(float), b));
  CHECK(cuStreamSynchronize(b));
  CHECK(cuStreamSynchronize(a.s));
  printf("{\"mode\":\"crossdep\",\"checksum\":\"%08x\"}\n", checksum(host, n));
  CHECK(cuStreamDestroy_v2(b));
  CHECK(cuStreamDestroy_v2(a.s));
  free(host);
  return 0;
}

static int mixed(unsigned n, int k) {
  enum { PAIRS = 4 };
  Work w = work_on_new_stream(n);
  CUstream lo[PAIRS], hi[PAIRS];
  CUdeviceptr ylo[PAIRS], yhi[PAIRS];
  CUevent ev[PAIRS];
  size_t bytes = n * sizeof(float);
  float *host = malloc(bytes);
  for (unsigned i = 0; i < n; i++) host[i] = (float)(i % 11);
  CHECK(cuMemcpyHtoDAsync_v2(w.x, host, bytes, w.s));
  CHECK(cuStreamSynchronize(w.s));
  for (int j = 0; j < PAIRS; j++) {
    CHECK(cuStreamCreateWithPriority(&lo[j], 1, 0));
    CHECK(cuStreamCreateWithPriority(&hi[j], 1, -1));
    CHECK(cuMemAlloc_v2(&ylo[j], bytes));
    CHECK(cuMemAlloc_v2(&yhi[j], bytes));
    CHECK(cuMemsetD8Async(ylo[j], 0, bytes, lo[j]));
    CHECK(cuMemsetD8Async(yhi[j], 0, bytes, hi[j]));
    CHECK(cuEventCreate(&ev[j], 0));
  }
  for (int r = 0; r < k; r++) {
    for (int j = 0; j < PAIRS; j++) {
      void *pl[] = {&ylo[j], &w.x, &w.n, &w.a};
      void *ph[] = {&yhi[j], &w.x, &w.n, &w.a};
      for (int i = 0; i < 3; i++) CHECK(cuLaunchKernel(w.axpy, 1, 1, 1, 32, 1, 1, 0, lo[j], pl, NULL));
      CHECK(cuEventRecord(ev[j], lo[j]));
      CHECK(cuStreamWaitEvent(hi[j], ev[j], 0));
      CHECK(cuMemcpyDtoDAsync_v2(yhi[j], ylo[j], bytes, hi[j]));
      CHECK(cuLaunchKernel(w.axpy, 1, 1, 1, 32, 1, 1, 0, hi[j], ph, NULL));
    }
  }
  uint32_t sum = 0;
  for (int j = 0; j < PAIRS; j++) {
    CHECK(cuMemcpyDtoHAsync_v2(host, yhi[j], bytes, hi[j]));
    CHECK(cuStreamSynchronize(hi[j]));
    sum = sum * 31u + checksum(host, n);
  }
  for (int j = 0; j < PAIRS; j++) CHECK(cuStreamSynchronize(lo[j]));
  printf("{\"checksum\":%u}\n", sum);
  return 0;
}

static int reload(unsigned n, int k) {
  Work w = work_on_new_stream(n);
  size_t bytes = n * sizeof(float);
  float *x, *out;
  CHECK(cuMemHostAlloc((void **)&x, bytes, 0));
  CHECK(cuMemHostAlloc((void **)&out, bytes, 0));
  for (unsigned i = 0; i < n; i++) x[i] = (float)(i % 13) * 0.25f;
  CHECK(cuMemcpyHtoDAsync_v2(w.x, x, bytes, w.s));
  CHECK(cuMemsetD8Async(w.y, 0, bytes, w.s));
  void *params[] = {&w.y, &w.x, &w.n, &w.a};
  for (int round = 0; round < 2; round++) {
    if (round > 0) {
      CHECK(cuModuleLoadData(&w.mod, "fake image"));
      CHECK(cuModuleGetFunction(&w.axpy, w.mod, "axpy"));
    }
    for (int i = 0; i < k; i++) CHECK(cuLaunchKernel(w.axpy, 1, 1, 1, 32, 1, 1, 0, w.s, params, NULL));
    CHECK(cuStreamSynchronize(w.s));
    CHECK(cuModuleUnload(w.mod));
  }
  CHECK(cuMemcpyDtoHAsync_v2(out, w.y, bytes, w.s));
  CHECK(cuStreamSynchronize(w.s));
  CHECK(cuStreamDestroy_v2(w.s));
  printf("{\"mode\":\"reload\",\"checksum\":\"%08x\"}\n", checksum(out, n));
  cuMemFreeHost(x); cuMemFreeHost(out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "check")) return check((unsigned)atoi(argv[2]), atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "hold")) return hold((unsigned)atoi(argv[2]), atof(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "threads")) return threads((unsigned)atoi(argv[2]), atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "crossdep")) return crossdep((unsigned)atoi(argv[2]), atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "mixed")) return mixed((unsigned)atoi(argv[2]), atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "reload")) return reload((unsigned)atoi(argv[2]), atoi(argv[3]));
  if (argc == 5 && !strcmp(argv[1], "fork"))
    return forked((unsigned)atoi(argv[2]), atof(argv[3]), argv[4], argv[0]);
  fprintf(stderr, "usage: cuapp check N ITERS | hold N MS | threads N K | crossdep N K | mixed N K | reload N K | fork N MS stay|exec\n");
  return 2;
}
