/* Whether a launch cut into slices is exact: every work-item runs once, with the ids it would
 * have had in the whole launch. Links -lOpenCL only; run it natively or under the shim with
 * XSCHED_SLICE_US set (the test sets 1, so every launch with history is cut).
 *
 *   slicecheck DIMS G0 G1 G2 L0 L1 L2 [DIMS G0 ...]...
 *
 * For each shape (global sizes G, local sizes L; unused dimensions 1), each of two kernels is
 * launched twice, waited for each time: the first launch gives the shim a measurement, the
 * second is the one it may cut. `sizes` records every builtin a slice could see wrong
 * (global, group, local ids, number of groups, global size); `groups` uses only the group and
 * local ids, as tinygrad's kernels do (its program gets no extra arguments). After each second
 * launch every record is checked against what the whole launch gives, and each work-item's
 * run count must be 1. Prints one JSON line: {"shapes": N, "checked": items, "mismatches": M}. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SIZES =
    "__kernel void sizes(__global uint *out, __global uint *runs) {\n"
    "  size_t i = get_global_id(0) + get_global_size(0) * (get_global_id(1)\n"
    "             + get_global_size(1) * get_global_id(2));\n"
    "  for (uint d = 0; d < 3; d++) {\n"
    "    out[i * 15 + d] = get_global_id(d);\n"
    "    out[i * 15 + 3 + d] = get_group_id(d);\n"
    "    out[i * 15 + 6 + d] = get_local_id(d);\n"
    "    out[i * 15 + 9 + d] = get_num_groups(d);\n"
    "    out[i * 15 + 12 + d] = get_global_size(d);\n"
    "  }\n"
    "  atomic_inc(&runs[i]);\n"
    "}\n";

/* Only group and local ids; the host passes the global sizes itself. */
static const char *GROUPS =
    "__kernel void groups(__global uint *out, __global uint *runs, uint g0, uint g1) {\n"
    "  uint x = get_group_id(0) * get_local_size(0) + get_local_id(0);\n"
    "  uint y = get_group_id(1) * get_local_size(1) + get_local_id(1);\n"
    "  uint z = get_group_id(2) * get_local_size(2) + get_local_id(2);\n"
    "  size_t i = x + g0 * (y + g1 * z);\n"
    "  out[i * 15 + 3] = get_group_id(0);\n"
    "  out[i * 15 + 4] = get_group_id(1);\n"
    "  out[i * 15 + 5] = get_group_id(2);\n"
    "  atomic_inc(&runs[i]);\n"
    "}\n";

#define CHECK(call)                                                     \
  do {                                                                  \
    cl_int err_ = (call);                                               \
    if (err_ != CL_SUCCESS) {                                           \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, err_); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue q;

static cl_kernel kernel_of(const char *source, const char *name) {
  cl_int err;
  cl_program p = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
  cl_kernel k = clCreateKernel(p, name, &err);
  CHECK(err);
  CHECK(clReleaseProgram(p));
  return k;
}

/* Launch `k` over the shape twice; check the second run. Returns the mismatches. */
static long run(cl_kernel k, int with_sizes, cl_uint dims, const size_t *g, const size_t *l) {
  size_t n = g[0] * g[1] * g[2];
  cl_int err;
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 15 * sizeof(cl_uint), NULL, &err);
  CHECK(err);
  cl_mem runs = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(cl_uint), NULL, &err);
  CHECK(err);
  cl_uint g0 = (cl_uint)g[0], g1 = (cl_uint)g[1], zero = 0;
  CHECK(clSetKernelArg(k, 0, sizeof out, &out));
  CHECK(clSetKernelArg(k, 1, sizeof runs, &runs));
  if (!with_sizes) {
    CHECK(clSetKernelArg(k, 2, sizeof g0, &g0));
    CHECK(clSetKernelArg(k, 3, sizeof g1, &g1));
  }
  for (int launch = 0; launch < 2; launch++) {
    CHECK(clEnqueueFillBuffer(q, runs, &zero, sizeof zero, 0, n * sizeof(cl_uint), 0, NULL, NULL));
    CHECK(clEnqueueNDRangeKernel(q, k, dims, NULL, g, l, 0, NULL, NULL));
    CHECK(clFinish(q));
  }
  cl_uint *o = malloc(n * 15 * sizeof(cl_uint)), *r = malloc(n * sizeof(cl_uint));
  CHECK(clEnqueueReadBuffer(q, out, CL_TRUE, 0, n * 15 * sizeof(cl_uint), o, 0, NULL, NULL));
  CHECK(clEnqueueReadBuffer(q, runs, CL_TRUE, 0, n * sizeof(cl_uint), r, 0, NULL, NULL));
  long bad = 0;
  for (size_t i = 0; i < n; i++) {
    size_t id[3] = {i % g[0], (i / g[0]) % g[1], i / (g[0] * g[1])};
    bad += r[i] != 1;
    for (int d = 0; d < 3; d++) {
      bad += o[i * 15 + 3 + d] != id[d] / l[d];
      if (with_sizes) {
        bad += o[i * 15 + d] != id[d];
        bad += o[i * 15 + 6 + d] != id[d] % l[d];
        bad += o[i * 15 + 9 + d] != g[d] / l[d];
        bad += o[i * 15 + 12 + d] != g[d];
      }
    }
  }
  free(o);
  free(r);
  CHECK(clReleaseMemObject(out));
  CHECK(clReleaseMemObject(runs));
  return bad;
}

int main(int argc, char **argv) {
  cl_platform_id platform;
  cl_int err;
  CHECK(clGetPlatformIDs(1, &platform, NULL));
  CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
  CHECK(err);
  cl_kernel sizes = kernel_of(SIZES, "sizes"), groups = kernel_of(GROUPS, "groups");
  long shapes = 0, checked = 0, bad = 0;
  for (int a = 1; a + 6 < argc; a += 7) {
    cl_uint dims = (cl_uint)atoi(argv[a]);
    size_t g[3], l[3];
    for (int d = 0; d < 3; d++) {
      g[d] = (size_t)atol(argv[a + 1 + d]);
      l[d] = (size_t)atol(argv[a + 4 + d]);
    }
    bad += run(sizes, 1, dims, g, l) + run(groups, 0, dims, g, l);
    checked += 2 * (long)(g[0] * g[1] * g[2]);
    shapes++;
  }
  printf("{\"shapes\": %ld, \"checked\": %ld, \"mismatches\": %ld}\n", shapes, checked, bad);
  return 0;
}
