/* An ordinary CUDA driver-API program, written for xsched's tests and never linked against xsched:
 * it links -lcuda only (the tests' fake driver), so the shim can only reach it through LD_PRELOAD.
 * It declares the few prototypes it needs itself (no CUDA headers).
 *
 *   cuapp check N ITERS   one JSON line: results checksum, status codes, how entry points found
 *                         through dlsym + cuGetProcAddress relate to the driver's, graph replay
 *
 * Kernels are the fake driver's ("axpy": y = a*x + y; see crates/backend-cuda/tests/fake). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
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
  float *x = malloc(bytes), *y = malloc(bytes), *out = malloc(bytes);
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
  free(x); free(y); free(out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "check")) return check((unsigned)atoi(argv[2]), atoi(argv[3]));
  fprintf(stderr, "usage: cuapp check N ITERS\n");
  return 2;
}
