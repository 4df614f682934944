/* A program that reaches the CUDA driver the way the CUDA runtime (libcudart, and so PyTorch and
 * vLLM) does: it is not linked against libcuda at all; it dlopen()s the driver, looks up
 * cuGetProcAddress_v2 with dlsym on that handle, and gets every other entry point from it.
 * A report against XSched upstream (vLLM on an A10) came from this shape. Written for xsched's
 * tests, never linked against xsched.
 *
 *   cudart_like N ROUNDS handle|next VERSION   one JSON line: {"checksum": ...} of y after
 *       ROUNDS axpys on a stream; cuGetProcAddress_v2 is looked up with dlsym on the driver's
 *       handle, or with dlsym(RTLD_NEXT) after loading the driver RTLD_GLOBAL; every entry point
 *       is asked for at VERSION (12040 for CUDA 12.4, 13000 for CUDA 13)
 *
 * Kernels are the fake driver's ("axpy": y = a*x + y; see crates/backend-cuda/tests/fake). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "checksum.h" /* crates/interpose/c */

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUstream, *CUfunction, *CUmodule, *CUcontext;
typedef CUresult (*getproc_t)(const char *, void **, int, uint64_t, int *);

static getproc_t getproc;
static int version;

/* The entry point `name` as the driver hands it out (legacy default stream: flags 0). */
static void *entry(const char *name) {
  void *f = NULL;
  if (getproc(name, &f, version, 0, NULL) != 0 || !f) {
    fprintf(stderr, "cuGetProcAddress(%s) failed\n", name);
    exit(1);
  }
  return f;
}

#define CALL(type, name, ...)                                                  \
  do {                                                                         \
    CUresult r_ = ((type)entry(name))(__VA_ARGS__);                            \
    if (r_ != 0) { fprintf(stderr, "%s = %d\n", name, r_); exit(1); }          \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: cudart_like N ROUNDS handle|next VERSION\n"); return 2; }
  unsigned n = (unsigned)atoi(argv[1]);
  int rounds = atoi(argv[2]);
  int next = argv[3][0] == 'n';
  version = atoi(argv[4]);
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | (next ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  getproc = (getproc_t)dlsym(next ? RTLD_NEXT : lib, "cuGetProcAddress_v2");
  if (!getproc) { fprintf(stderr, "no cuGetProcAddress_v2\n"); return 1; }

  CUcontext ctx;
  CUmodule mod;
  CUfunction axpy;
  CUdeviceptr x, y;
  CUstream s;
  CALL(CUresult (*)(unsigned), "cuInit", 0);
  CALL(CUresult (*)(CUcontext *, int), "cuDevicePrimaryCtxRetain", &ctx, 0);
  CALL(CUresult (*)(CUcontext), "cuCtxSetCurrent", ctx);
  CALL(CUresult (*)(CUmodule *, const void *), "cuModuleLoadData", &mod, "fake image");
  CALL(CUresult (*)(CUfunction *, CUmodule, const char *), "cuModuleGetFunction", &axpy, mod, "axpy");
  CALL(CUresult (*)(CUdeviceptr *, size_t), "cuMemAlloc", &x, n * sizeof(float));
  CALL(CUresult (*)(CUdeviceptr *, size_t), "cuMemAlloc", &y, n * sizeof(float));
  CALL(CUresult (*)(CUstream *, unsigned), "cuStreamCreate", &s, 1);
  float *host = malloc(n * sizeof(float));
  for (unsigned i = 0; i < n; i++) host[i] = (float)(i % 5);
  typedef CUresult (*htod_t)(CUdeviceptr, const void *, size_t, CUstream);
  CALL(htod_t, "cuMemcpyHtoDAsync", x, host, n * sizeof(float), s);
  CALL(htod_t, "cuMemcpyHtoDAsync", y, host, n * sizeof(float), s);
  float a = 0.25f;
  void *params[] = {&y, &x, &n, &a};
  typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
  for (int r = 0; r < rounds; r++) CALL(launch_t, "cuLaunchKernel", axpy, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
  CALL(CUresult (*)(void *, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync", host, y, n * sizeof(float), s);
  CALL(CUresult (*)(CUstream), "cuStreamSynchronize", s);
  CALL(CUresult (*)(CUstream), "cuStreamDestroy", s);
  printf("{\"mode\":\"cudart_like\",\"checksum\":\"%08x\"}\n", checksum(host, n));
  free(host);
  return 0;
}
