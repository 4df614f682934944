// A plain CUDA runtime program for scripts/gpu-check.sh, run natively and under the shim: where
// PyTorch under the shim fails, this places the failure above or below the CUDA runtime. It
// uses the shapes PyTorch's first steps use (a synchronous copy on the legacy default stream,
// launches there, a created stream, an event one stream waits on, device and stream syncs, async
// copies through pageable and pinned memory),
// names each step on stderr before it runs (so a hang names its step), and checks the result.
// Prints "cudart-probe ok <sum>" and exits 0, or names the failed call and exits 1.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add(float *x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

static void step(const char *what) { fprintf(stderr, "cudart-probe: %s\n", what); }

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t err = (call);                                                           \
    if (err != cudaSuccess) {                                                           \
      fprintf(stderr, "cudart-probe: %s failed: %s\n", #call, cudaGetErrorString(err)); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

int main() {
  const int n = 1 << 20, launches = 100, blocks = (n + 255) / 256;
  static float host[1 << 20];
  for (int i = 0; i < n; i++) host[i] = (float)(i % 7);
  step("context (cudaFree(0))");
  CHECK(cudaFree(0));
  float *dev = nullptr;
  step("cudaMalloc");
  CHECK(cudaMalloc(&dev, n * sizeof(float)));
  step("cudaMemcpy host to device (legacy default stream)");
  CHECK(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
  step("launches on the legacy default stream");
  for (int k = 0; k < launches; k++) add<<<blocks, 256>>>(dev, 1.0f, n);
  CHECK(cudaGetLastError());
  step("cudaDeviceSynchronize");
  CHECK(cudaDeviceSynchronize());
  cudaStream_t s;
  cudaEvent_t done;
  step("a created stream, an event, the default stream waiting on it");
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  for (int k = 0; k < launches; k++) add<<<blocks, 256, 0, s>>>(dev, 2.0f, n);
  CHECK(cudaEventRecord(done, s));
  CHECK(cudaStreamWaitEvent(0, done, 0));
  add<<<blocks, 256>>>(dev, 3.0f, n);
  step("cudaStreamSynchronize (legacy default stream)");
  CHECK(cudaStreamSynchronize(0));
  step("cudaMemcpyAsync into and out of pageable memory, then into pinned memory");
  static float back[1 << 20];
  float *pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
  CHECK(cudaMemcpyAsync(back, dev, n * sizeof(float), cudaMemcpyDeviceToHost, 0));
  CHECK(cudaMemcpyAsync(dev, back, n * sizeof(float), cudaMemcpyHostToDevice, 0));
  CHECK(cudaMemcpyAsync(pinned, dev, n * sizeof(float), cudaMemcpyDeviceToHost, 0));
  CHECK(cudaStreamSynchronize(0));
  for (int i = 0; i < n; i++) {
    if (pinned[i] != back[i]) {
      fprintf(stderr, "cudart-probe: the pinned copy differs at %d\n", i);
      return 1;
    }
  }
  CHECK(cudaFreeHost(pinned));
  step("cudaMemcpy device to host");
  CHECK(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0, want = 0;
  for (int i = 0; i < n; i++) {
    sum += host[i];
    want += (double)(i % 7) + launches * 1.0 + launches * 2.0 + 3.0;
  }
  if (sum != want) {
    fprintf(stderr, "cudart-probe: wrong result: sum %.0f, want %.0f\n", sum, want);
    return 1;
  }
  printf("cudart-probe ok %.0f\n", sum);
  return 0;
}
