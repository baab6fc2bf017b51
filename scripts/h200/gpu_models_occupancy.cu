// Ground truth for aiprof.gpu.occupancy: cudaOccupancyMaxActiveBlocksPerMultiprocessor over
// (kernel variant x block size x dynamic shared memory x carveout), with each variant's
// cudaFuncAttributes and the device properties. Build: nvcc -O2 -arch=sm_90 -o occ this.cu
// Run: ./occ OUT_DIR   (writes occupancy_api.csv, kernel_attrs.csv, device_props.csv)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <set>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// N live accumulators per thread: more N -> more registers.
template <int N, int STATIC_FLOATS>
__global__ void regs_kernel(float* out, int iters) {
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = threadIdx.x * (i + 1) + out[i];
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = acc[i] * acc[(i + 7) % N] + 1.0f;
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += acc[i];
  if constexpr (STATIC_FLOATS > 0) {
    __shared__ float buf[STATIC_FLOATS];
    buf[threadIdx.x % STATIC_FLOATS] = s;
    __syncthreads();
    s += buf[(threadIdx.x * 7) % STATIC_FLOATS];
  }
  extern __shared__ float dyn[];
  if (iters < 0) dyn[threadIdx.x] = s;  // touch dynamic smem without running it
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

struct Variant { const char* name; const void* fn; };

int main(int argc, char** argv) {
  std::string out = argc > 1 ? argv[1] : ".";
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, dev));
  FILE* fp = fopen((out + "/device_props.csv").c_str(), "w");
  fprintf(fp, "key,value\nname,%s\nmajor,%d\nminor,%d\nmultiProcessorCount,%d\n"
          "maxThreadsPerBlock,%d\nmaxThreadsPerMultiProcessor,%d\nmaxBlocksPerMultiProcessor,%d\n"
          "regsPerBlock,%d\nregsPerMultiprocessor,%d\nwarpSize,%d\nsharedMemPerBlock,%zu\n"
          "sharedMemPerMultiprocessor,%zu\nsharedMemPerBlockOptin,%zu\n"
          "reservedSharedMemPerBlock,%zu\nl2CacheSize,%d\n",
          p.name, p.major, p.minor, p.multiProcessorCount, p.maxThreadsPerBlock,
          p.maxThreadsPerMultiProcessor, p.maxBlocksPerMultiProcessor, p.regsPerBlock,
          p.regsPerMultiprocessor, p.warpSize, p.sharedMemPerBlock, p.sharedMemPerMultiprocessor,
          p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock, p.l2CacheSize);
  fclose(fp);

  std::vector<Variant> variants = {
    {"r1_s0", (const void*)regs_kernel<1, 0>},      {"r8_s0", (const void*)regs_kernel<8, 0>},
    {"r20_s0", (const void*)regs_kernel<20, 0>},    {"r33_s0", (const void*)regs_kernel<33, 0>},
    {"r48_s0", (const void*)regs_kernel<48, 0>},    {"r64_s0", (const void*)regs_kernel<64, 0>},
    {"r96_s0", (const void*)regs_kernel<96, 0>},    {"r160_s0", (const void*)regs_kernel<160, 0>},
    {"r8_s1k", (const void*)regs_kernel<8, 256>},   {"r8_s8k", (const void*)regs_kernel<8, 2048>},
    {"r20_s20k", (const void*)regs_kernel<20, 5000>},
    {"r33_s40k", (const void*)regs_kernel<33, 10240>},
    {"r240_s0", (const void*)regs_kernel<240, 0>},
  };
  std::vector<int> blocks;
  for (int b = 32; b <= 1024; b += 32) blocks.push_back(b);
  for (int b : {1, 33, 100, 129, 257, 1000}) blocks.push_back(b);
  std::set<int> dyn_set = {0, 1, 127, 128, 129, 1023, 1024, 1025, 4096, 8191, 8192, 8193,
                           48 * 1024, 49 * 1024, 227 * 1024, 228 * 1024};
  for (int d = 0; d <= 232448; d += 18432) dyn_set.insert(d);
  for (int d = 5000; d <= 232448; d += 23000) dyn_set.insert(d);
  std::vector<int> dyns(dyn_set.begin(), dyn_set.end());
  int carveouts_sub[] = {0, 10, 25, 50, 75, 100};
  int sub_blocks[] = {128, 256, 1024};

  FILE* fa = fopen((out + "/kernel_attrs.csv").c_str(), "w");
  fprintf(fa, "kernel,num_regs,static_smem_bytes,max_threads_per_block,max_dynamic_smem_bytes\n");
  FILE* fo = fopen((out + "/occupancy_api.csv").c_str(), "w");
  fprintf(fo, "kernel,block_size,dynamic_smem_bytes,carveout,blocks_per_sm,err\n");
  long rows = 0;
  for (auto& v : variants) {
    cudaFuncAttributes a;
    CHECK(cudaFuncGetAttributes(&a, v.fn));
    int max_dyn = (int)p.sharedMemPerBlockOptin - (int)a.sharedSizeBytes;
    CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, max_dyn));
    CHECK(cudaFuncGetAttributes(&a, v.fn));
    fprintf(fa, "%s,%d,%zu,%d,%d\n", v.name, a.numRegs, a.sharedSizeBytes, a.maxThreadsPerBlock,
            a.maxDynamicSharedSizeBytes);
    auto sweep = [&](int carveout, const int* bs, int nb) {
      CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
      for (int i = 0; i < nb; ++i) for (int d : dyns) {
        int n = -1;
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, v.fn, bs[i], d);
        if (e != cudaSuccess) { cudaGetLastError(); n = -1; }
        fprintf(fo, "%s,%d,%d,%d,%d,%d\n", v.name, bs[i], d, carveout, n, (int)e);
        ++rows;
      }
    };
    sweep(-1, blocks.data(), (int)blocks.size());
    for (int c : carveouts_sub) sweep(c, sub_blocks, 3);
  }
  fclose(fa);
  fclose(fo);
  printf("occupancy sweep: %ld configurations, %zu kernel variants, device %s (sm_%d%d)\n",
         rows, variants.size(), p.name, p.major, p.minor);
  return 0;
}
