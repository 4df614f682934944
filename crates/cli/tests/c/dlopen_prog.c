/* An OpenCL program that never links OpenCL: it opens the loader with dlopen("libOpenCL.so.1")
 * and looks every function up through that handle with dlsym, as Python's ctypes (tinygrad),
 * Java bindings and many plugins do. No LD_PRELOAD reaches such a program; `xsched run` does,
 * by standing the shim in for the library it opens.
 *
 *   dlopen_prog ITERS [hold]  ITERS kernel launches (each waited for), then (with `hold`) the
 *                             queue kept until standard input closes, then one JSON line:
 *                             {"checksum": ..., "launches": ITERS}
 *
 * Built with `cc dlopen_prog.c -ldl` (no -lOpenCL). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SOURCE =
    "__kernel void advance(__global float *a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  a[i] = a[i] * 0.5f + (float)i;\n"
    "}\n";

#define N 1024

static void *lib;

static void *fn(const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
    exit(2);
  }
  return f;
}

#define LOOKUP(name) __typeof__(&name) p_##name = (__typeof__(&name))fn(#name)
#define CHECK(call)                                                      \
  do {                                                                   \
    cl_int err_ = (call);                                                \
    if (err_ != CL_SUCCESS) {                                            \
      fprintf(stderr, "%s failed: %d\n", #call, err_);                   \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/* Wait until standard input closes (what it sends is ignored). */
static void until_stdin_closes(void) {
  char c[64];
  while (read(0, c, sizeof c) > 0) {
  }
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 0;
  int hold = argc > 2 && strcmp(argv[2], "hold") == 0;
  lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  LOOKUP(clGetPlatformIDs);
  LOOKUP(clGetDeviceIDs);
  LOOKUP(clCreateContext);
  LOOKUP(clCreateCommandQueueWithProperties);
  LOOKUP(clCreateProgramWithSource);
  LOOKUP(clBuildProgram);
  LOOKUP(clCreateKernel);
  LOOKUP(clCreateBuffer);
  LOOKUP(clSetKernelArg);
  LOOKUP(clEnqueueWriteBuffer);
  LOOKUP(clEnqueueNDRangeKernel);
  LOOKUP(clEnqueueReadBuffer);
  LOOKUP(clFinish);
  cl_platform_id platform;
  cl_device_id dev;
  cl_int err;
  CHECK(p_clGetPlatformIDs(1, &platform, NULL));
  CHECK(p_clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_context ctx = p_clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_command_queue q = p_clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_program prog = p_clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
  CHECK(err);
  CHECK(p_clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  cl_kernel k = p_clCreateKernel(prog, "advance", &err);
  CHECK(err);
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)(i % 7);
  cl_mem a = p_clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &err);
  CHECK(err);
  CHECK(p_clEnqueueWriteBuffer(q, a, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL));
  CHECK(p_clSetKernelArg(k, 0, sizeof a, &a));
  size_t global = N, local = 64;
  long launches = 0;
  for (; launches < iters; launches++) {
    CHECK(p_clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL));
    CHECK(p_clFinish(q));
  }
  if (hold) {
    printf("{\"holding\": true}\n");
    fflush(stdout);
    until_stdin_closes();
  }
  CHECK(p_clEnqueueReadBuffer(q, a, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL));
  double sum = 0;
  for (int i = 0; i < N; i++) sum += host[i] * (double)(i + 1);
  printf("{\"checksum\": %.6f, \"launches\": %ld}\n", sum, launches);
  return 0;
}
