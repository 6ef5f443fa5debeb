// The host's price of the CUDA calls replay's device thread makes, per call, on one stream (10,000 calls each), and
// what a batch of ten small launches costs as launches, as a CUDA graph replayed as captured, and as one whose ten
// kernel nodes get new parameters before each launch (what a per-batch graph of replay's steps would pay):
// nvcc -O2 -arch=sm_90 -o /tmp/cuda_call_costs tools/bench/cuda_call_costs.cu && /tmp/cuda_call_costs
// (docs/PERFORMANCE.md).
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
struct Small {
  void* p[8];
};
struct Big {
  char b[3072];
};
struct Mid {
  char b[1280];
};
__global__ void KSmall(Small s, int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && s.p[0]) *out += 1;
}
__global__ void KMid(Mid s, int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && s.b[5]) *out += 1;
}
__global__ void KBig(Big s, int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && s.b[5]) *out += 1;
}
template <typename F>
double Time(const char* what, F f, cudaStream_t st) {
  const int n = 10000;
  for (int i = 0; i < 200; ++i) f(i);
  cudaStreamSynchronize(st);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f(i);
  auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(st);
  auto t2 = std::chrono::steady_clock::now();
  double host = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  double all = std::chrono::duration<double, std::micro>(t2 - t0).count() / n;
  printf("%-40s host %.2f us/call, with the device's work %.2f us/call\n", what, host, all);
  return host;
}
int main() {
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  int* d;
  cudaMalloc(&d, 1 << 20);
  void* h;
  cudaHostAlloc(&h, 1 << 20, 0);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  Small s{};
  s.p[0] = d;
  Mid m{};
  Big b{};
  Time(
      "kernel, 64-byte params, 1 block", [&](int) { KSmall<<<1, 256, 0, st>>>(s, d); }, st);
  Time(
      "kernel, 64-byte params, 528 blocks", [&](int) { KSmall<<<528, 256, 0, st>>>(s, d); }, st);
  Time(
      "kernel, 1,280-byte params", [&](int) { KMid<<<1, 256, 0, st>>>(m, d); }, st);
  Time(
      "kernel, 3,072-byte params", [&](int) { KBig<<<1, 256, 0, st>>>(b, d); }, st);
  Time(
      "cudaMemcpyAsync H2D 4 KiB pinned", [&](int) { cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, st); }, st);
  Time(
      "cudaMemcpyAsync D2D 8 B", [&](int) { cudaMemcpyAsync(d, d + 64, 8, cudaMemcpyDeviceToDevice, st); }, st);
  Time(
      "cudaEventRecord", [&](int) { cudaEventRecord(e, st); }, st);
  Time(
      "cudaEventQuery (after a record)", [&](int) { cudaEventQuery(e); }, st);
  Time(
      "cudaStreamWaitEvent", [&](int) { cudaStreamWaitEvent(st, e, 0); }, st);
  Time(
      "cudaSetDevice(0)", [&](int) { cudaSetDevice(0); }, st);
  Time(
      "cudaGetLastError", [&](int) { (void)cudaGetLastError(); }, st);
  Time(
      "kernel + H2D + sync (round trip)",
      [&](int) {
        cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, st);
        KSmall<<<1, 256, 0, st>>>(s, d);
        cudaMemcpyAsync(h, d, 8, cudaMemcpyDeviceToHost, st);
        cudaStreamSynchronize(st);
      },
      st);
  // A batch of replay's shape: ten small launches (64 blocks each), as launches and as a graph.
  const int kBatch = 10;
  auto launch_batch = [&](int i) {
    for (int k = 0; k < kBatch; ++k) {
      s.p[1] = reinterpret_cast<void*>(static_cast<long>(i * kBatch + k));
      KSmall<<<64, 256, 0, st>>>(s, d);
    }
  };
  Time("batch of 10 launches (per batch)", launch_batch, st);
  cudaGraph_t graph;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  launch_batch(0);
  cudaStreamEndCapture(st, &graph);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, graph, 0);
  size_t node_count = 0;
  cudaGraphGetNodes(graph, nullptr, &node_count);
  cudaGraphNode_t nodes[kBatch];
  cudaGraphGetNodes(graph, nodes, &node_count);
  Time(
      "batch of 10 as a graph, as captured", [&](int) { cudaGraphLaunch(exec, st); }, st);
  Time(
      "batch of 10 as a graph, 10 nodes reset",
      [&](int i) {
        for (size_t k = 0; k < node_count; ++k) {
          s.p[1] = reinterpret_cast<void*>(static_cast<long>(i * kBatch + k));
          void* args[] = {&s, &d};
          cudaKernelNodeParams params{};
          params.func = reinterpret_cast<void*>(KSmall);
          params.gridDim = dim3(64);
          params.blockDim = dim3(256);
          params.kernelParams = args;
          cudaGraphExecKernelNodeSetParams(exec, nodes[k], &params);
        }
        cudaGraphLaunch(exec, st);
      },
      st);
  Time(
      "batch of 10: capture + instantiate + launch",
      [&](int i) {
        cudaGraph_t g;
        cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        launch_batch(i);
        cudaStreamEndCapture(st, &g);
        cudaGraphExec_t x;
        cudaGraphInstantiate(&x, g, 0);
        cudaGraphLaunch(x, st);
        cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
      },
      st);
  printf("graph nodes: %zu\n", node_count);
  printf("error: %s\n", cudaGetErrorString(cudaGetLastError()));
}
