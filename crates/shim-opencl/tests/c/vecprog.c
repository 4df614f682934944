/* An ordinary OpenCL program, written for xsched's tests and never linked against xsched: it
 * links -lOpenCL only, so the shim can only reach it through LD_PRELOAD.
 *
 *   vecprog check N WORK ITERS        results checksum, profiling, and bad-input status codes
 *   vecprog fg N WORK PERIOD_US REQS [K]  open-loop requests (write, K kernels, blocking read)
 *   vecprog bg N WORK                 saturating kernel loop until SIGTERM: throughput
 *   vecprog overhead N WORK CALLS     mean time of one clEnqueueNDRangeKernel call (ns)
 *   vecprog hold N WORK MS            one queue in use for MS milliseconds
 *   vecprog fork N WORK MS stay|exec  a queue in use, then fork: the child sleeps 2*MS without
 *                                     OpenCL (stay) or execs `hold ... 2*MS` (exec); the parent
 *                                     prints {"pid","child"}, uses its queue MS more and exits
 *
 * N is the vector length and WORK the inner iterations per element (the kernel-length knob).
 * Every mode prints one JSON line on stdout. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h" /* crates/interpose/c */

static const char *SOURCE =
    "__kernel void vec(__global float *a, __global const float *b, uint work) {\n"
    "  size_t i = get_global_id(0);\n"
    "  float x = a[i];\n"
    "  for (uint k = 0; k < work; k++) x = x * 0.999f + b[i];\n"
    "  a[i] = x;\n"
    "}\n";

#define CHECK(call)                                                                  \
  do {                                                                               \
    cl_int err_ = (call);                                                            \
    if (err_ != CL_SUCCESS) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, err_);    \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static cl_context ctx;
static cl_device_id dev;
static cl_kernel kernel;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void setup(void) {
  cl_platform_id platform;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &platform, NULL));
  CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  cl_program program = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(program, 1, &dev, "", NULL, NULL));
  kernel = clCreateKernel(program, "vec", &err);
  CHECK(err);
  CHECK(clReleaseProgram(program));
}

static cl_mem buffer(size_t n) {
  cl_int err;
  cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
  CHECK(err);
  return m;
}

static void set_args(cl_mem a, cl_mem b, cl_uint work) {
  CHECK(clSetKernelArg(kernel, 0, sizeof(cl_mem), &a));
  CHECK(clSetKernelArg(kernel, 1, sizeof(cl_mem), &b));
  CHECK(clSetKernelArg(kernel, 2, sizeof(cl_uint), &work));
}

static int check(size_t n, cl_uint work, int iters) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  /* the OpenCL 1.x entry point, deprecated but common */
  cl_command_queue prof = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  CHECK(err);
  cl_queue_properties ooo_props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue ooo = clCreateCommandQueueWithProperties(ctx, dev, ooo_props, &err);
  CHECK(err);

  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) { a[i] = (float)(i % 97) * 0.5f; b[i] = (float)(i % 13) * 0.25f; }
  cl_mem da = buffer(n), db = buffer(n), dc = buffer(n);
  CHECK(clEnqueueWriteBuffer(q, da, CL_TRUE, 0, n * sizeof(float), a, 0, NULL, NULL));
  cl_event wrote;
  CHECK(clEnqueueWriteBuffer(q, db, CL_FALSE, 0, n * sizeof(float), b, 0, NULL, &wrote));
  float zero = 0.0f;
  CHECK(clEnqueueFillBuffer(q, dc, &zero, sizeof zero, 0, n * sizeof(float), 1, &wrote, NULL));
  size_t global = n;
  cl_event last = NULL;
  for (int i = 0; i < iters; i++) {
    set_args(da, db, work + (cl_uint)i); /* arguments change between launches */
    if (last) CHECK(clReleaseEvent(last));
    CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, &last));
  }
  cl_event copied, read;
  CHECK(clEnqueueCopyBuffer(q, da, dc, 0, 0, n * sizeof(float), 1, &last, &copied));
  CHECK(clEnqueueReadBuffer(q, dc, CL_FALSE, 0, n * sizeof(float), out, 1, &copied, &read));
  CHECK(clWaitForEvents(1, &read));
  cl_int status;
  CHECK(clGetEventInfo(read, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL));
  uint32_t sum = checksum(out, n);

  /* a profiling queue: its events carry real start and end times */
  cl_event timed;
  set_args(da, db, work);
  CHECK(clEnqueueNDRangeKernel(prof, kernel, 1, NULL, &global, NULL, 0, NULL, &timed));
  CHECK(clFinish(prof));
  cl_ulong start = 0, end = 0;
  CHECK(clGetEventProfilingInfo(timed, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL));
  CHECK(clGetEventProfilingInfo(timed, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL));
  /* an out-of-order queue still works */
  CHECK(clEnqueueNDRangeKernel(ooo, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
  CHECK(clFinish(ooo));

  /* bad input: the real library's status codes, unchanged */
  cl_int bad_dim = clEnqueueNDRangeKernel(q, kernel, 0, NULL, &global, NULL, 0, NULL, NULL);
  cl_int bad_buffer = clEnqueueReadBuffer(q, NULL, CL_TRUE, 0, 4, out, 0, NULL, NULL);
  cl_int bad_size = clEnqueueReadBuffer(q, dc, CL_TRUE, 0, (n + 1) * sizeof(float), out, 0, NULL, NULL);
  cl_int bad_queue = clEnqueueNDRangeKernel(NULL, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
  cl_int bad_create;
  cl_command_queue none = clCreateCommandQueueWithProperties(NULL, dev, NULL, &bad_create);
  CHECK(clFinish(q));

  CHECK(clReleaseEvent(wrote)); CHECK(clReleaseEvent(last)); CHECK(clReleaseEvent(copied));
  CHECK(clReleaseEvent(read)); CHECK(clReleaseEvent(timed));
  CHECK(clReleaseMemObject(da)); CHECK(clReleaseMemObject(db)); CHECK(clReleaseMemObject(dc));
  CHECK(clReleaseCommandQueue(q)); CHECK(clReleaseCommandQueue(prof)); CHECK(clReleaseCommandQueue(ooo));
  printf("{\"mode\":\"check\",\"checksum\":\"%08x\",\"read_status\":%d,\"profiled\":%s,"
         "\"errors\":{\"work_dim\":%d,\"buffer\":%d,\"size\":%d,\"queue\":%d,"
         "\"create\":%d,\"created_null\":%s}}\n",
         sum, status, end > start ? "true" : "false", bad_dim, bad_buffer, bad_size,
         bad_queue, bad_create, none == NULL ? "true" : "false");
  free(a); free(b); free(out);
  return 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static int fg(size_t n, cl_uint work, double period_us, int requests, int kernels) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  float *host = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) host[i] = (float)(i % 7);
  cl_mem da = buffer(n), db = buffer(n);
  CHECK(clEnqueueWriteBuffer(q, db, CL_TRUE, 0, n * sizeof(float), host, 0, NULL, NULL));
  set_args(da, db, work);
  size_t global = n;
  const int warmup = 5;
  double *lat = malloc(sizeof(double) * (size_t)requests);
  uint32_t sum = 0;
  double start = now_us();
  for (int i = 0; i < warmup + requests; i++) {
    double due = start + i * period_us;
    double t = now_us();
    if (t < due) {
      struct timespec s = {(time_t)((due - t) / 1e6), (long)(fmod(due - t, 1e6) * 1e3)};
      nanosleep(&s, NULL);
    }
    CHECK(clEnqueueWriteBuffer(q, da, CL_FALSE, 0, n * sizeof(float), host, 0, NULL, NULL));
    for (int k = 0; k < kernels; k++)
      CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
    float result[4];
    CHECK(clEnqueueReadBuffer(q, da, CL_TRUE, 0, sizeof result, result, 0, NULL, NULL));
    sum ^= checksum(result, 4);
    if (i >= warmup) lat[i - warmup] = now_us() - (due > t ? due : t);
  }
  double mean = 0;
  for (int i = 0; i < requests; i++) mean += lat[i] / requests;
  qsort(lat, (size_t)requests, sizeof(double), cmp_double);
  printf("{\"mode\":\"fg\",\"requests\":%d,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
         "\"checksum\":\"%08x\"}\n",
         requests, mean, lat[requests / 2], lat[(int)(requests * 0.99)], sum);
  CHECK(clReleaseMemObject(da)); CHECK(clReleaseMemObject(db)); CHECK(clReleaseCommandQueue(q));
  free(host); free(lat);
  return 0;
}

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static int bg(size_t n, cl_uint work) {
  signal(SIGTERM, on_term);
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_mem da = buffer(n), db = buffer(n);
  float zero = 0.0f;
  CHECK(clEnqueueFillBuffer(q, db, &zero, sizeof zero, 0, n * sizeof(float), 0, NULL, NULL));
  CHECK(clEnqueueFillBuffer(q, da, &zero, sizeof zero, 0, n * sizeof(float), 0, NULL, NULL));
  set_args(da, db, work);
  size_t global = n;
  enum { WINDOW = 32 };
  cl_event ring[WINDOW] = {0};
  long done = 0;
  double start = now_us();
  printf("{\"mode\":\"bg\",\"started\":true}\n");
  fflush(stdout);
  for (long i = 0; !stop; i++) {
    cl_event *slot = &ring[i % WINDOW];
    if (*slot) {
      CHECK(clWaitForEvents(1, slot));
      CHECK(clReleaseEvent(*slot));
      done++;
    }
    CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, slot));
    CHECK(clFlush(q));
  }
  double seconds = (now_us() - start) / 1e6;
  CHECK(clFinish(q));
  for (int i = 0; i < WINDOW; i++) if (ring[i]) CHECK(clReleaseEvent(ring[i]));
  printf("{\"mode\":\"bg\",\"kernels\":%ld,\"seconds\":%.3f,\"kernels_per_s\":%.1f}\n", done, seconds,
         done / seconds);
  CHECK(clReleaseMemObject(da)); CHECK(clReleaseMemObject(db)); CHECK(clReleaseCommandQueue(q));
  return 0;
}

static int overhead(size_t n, cl_uint work, int calls) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_mem da = buffer(n), db = buffer(n);
  set_args(da, db, work);
  size_t global = n;
  double best = 1e30;
  for (int round = 0; round < 5; round++) {
    double t0 = now_us();
    for (int i = 0; i < calls; i++)
      CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
    double per_call_ns = (now_us() - t0) * 1e3 / calls;
    if (per_call_ns < best) best = per_call_ns;
    CHECK(clFinish(q));
  }
  printf("{\"mode\":\"overhead\",\"calls\":%d,\"enqueue_ns\":%.0f}\n", calls, best);
  CHECK(clReleaseMemObject(da)); CHECK(clReleaseMemObject(db)); CHECK(clReleaseCommandQueue(q));
  return 0;
}

/* Use `q` (kernels, then a finish) for `ms` milliseconds. */
static void use_queue(cl_command_queue q, size_t n, double ms) {
  size_t global = n;
  double until = now_us() + ms * 1e3;
  struct timespec pause = {0, 5000000};
  while (now_us() < until) {
    CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
    CHECK(clFinish(q));
    nanosleep(&pause, NULL);
  }
}

static cl_command_queue queue_with_args(size_t n, cl_uint work) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  set_args(buffer(n), buffer(n), work);
  return q;
}

static int hold(size_t n, cl_uint work, double ms) {
  cl_command_queue q = queue_with_args(n, work);
  use_queue(q, n, ms);
  CHECK(clReleaseCommandQueue(q));
  return 0;
}

static int forked(size_t n, cl_uint work, double ms, const char *mode, const char *self) {
  cl_command_queue q = queue_with_args(n, work);
  use_queue(q, n, ms / 4);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) { perror("fork"); return 1; }
  if (child == 0) {
    if (!strcmp(mode, "exec")) {
      char n_s[32], w_s[32], ms_s[32];
      snprintf(n_s, sizeof n_s, "%zu", n);
      snprintf(w_s, sizeof w_s, "%u", work);
      snprintf(ms_s, sizeof ms_s, "%.0f", 2 * ms);
      execl(self, self, "hold", n_s, w_s, ms_s, (char *)NULL);
      perror("exec");
      _exit(127);
    }
    struct timespec t = {(time_t)(2 * ms / 1e3), (long)(fmod(2 * ms, 1e3) * 1e6)};
    nanosleep(&t, NULL);
    _exit(0);
  }
  printf("{\"mode\":\"fork\",\"pid\":%d,\"child\":%d}\n", (int)getpid(), (int)child);
  fflush(stdout);
  use_queue(q, n, ms);
  CHECK(clReleaseCommandQueue(q));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: vecprog check N WORK ITERS | fg N WORK PERIOD_US REQS [K] | bg N WORK"
                    " | overhead N WORK CALLS | hold N WORK MS | fork N WORK MS stay|exec\n");
    return 2;
  }
  size_t n = (size_t)strtoul(argv[2], NULL, 10);
  cl_uint work = (cl_uint)strtoul(argv[3], NULL, 10);
  setup();
  if (!strcmp(argv[1], "check") && argc == 5) return check(n, work, atoi(argv[4]));
  if (!strcmp(argv[1], "fg") && (argc == 6 || argc == 7))
    return fg(n, work, atof(argv[4]), atoi(argv[5]), argc == 7 ? atoi(argv[6]) : 1);
  if (!strcmp(argv[1], "bg") && argc == 4) return bg(n, work);
  if (!strcmp(argv[1], "overhead") && argc == 5) return overhead(n, work, atoi(argv[4]));
  if (!strcmp(argv[1], "hold") && argc == 5) return hold(n, work, atof(argv[4]));
  if (!strcmp(argv[1], "fork") && argc == 6) return forked(n, work, atof(argv[4]), argv[5], argv[0]);
  fprintf(stderr, "bad arguments\n");
  return 2;
}
