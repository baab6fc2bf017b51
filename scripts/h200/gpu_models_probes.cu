// Probe kernels for aiprof's memory and divergence models, profiled with Nsight Compute.
// Each launch is one probe; the manifest (probes.csv) lists them in launch order so the ncu CSV
// (one row per launch ID) can be matched back. Build: nvcc -O2 -arch=sm_90 -o probes this.cu
// Run: ncu --clock-control none --csv --page raw --metrics ... ./probes OUT_DIR/probes.csv
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// Global loads: lane t loads in[t * stride + offset] (pairs: in[t / 2]); one warp, one LDG.
template <typename T>
__global__ void ld_global(const T* __restrict__ in, T* __restrict__ out, int stride, int offset,
                          int pairs) {
  int t = threadIdx.x;
  int idx = pairs ? t / 2 : t * stride + offset;
  out[t] = in[idx];
}

// Shared loads: lane t loads s[t * stride] once (one LDS of sizeof(T) per lane).
template <typename T>
__global__ void ld_shared(T* out, int stride, int n) {
  extern __shared__ __align__(16) unsigned char raw[];
  volatile float* f = reinterpret_cast<volatile float*>(raw);
  for (int i = threadIdx.x; i < n; i += blockDim.x) f[i] = (float)i;  // 32-bit stores
  __syncthreads();
  const T* s = reinterpret_cast<const T*>(raw);  // one load per lane: nothing to merge
  out[threadIdx.x] = s[threadIdx.x * stride];
}

// 32x32 float tile transpose by one warp: 32 row stores, 32 column loads.
template <int PAD>
__global__ void transpose_tile(const float* in, float* out) {
  __shared__ float tile[32][32 + PAD];
  volatile float (*vt)[32 + PAD] = tile;
  int t = threadIdx.x;
#pragma unroll 1
  for (int r = 0; r < 32; ++r) vt[r][t] = in[r * 32 + t];
  __syncthreads();
#pragma unroll 1
  for (int c = 0; c < 32; ++c) out[c * 32 + t] = vt[t][c];
}

// Divergence: MODE 0 even/odd lanes take different loops; MODE 1 the choice is per block.
template <int MODE>
__global__ void diverge(float* out, int iters) {
  int t = threadIdx.x;
  float x = (float)t;
  bool a = MODE == 0 ? (t & 1) : (blockIdx.x & 1);
  if (a) {
    for (int i = 0; i < iters; ++i) x = x * 1.0001f + 0.5f;
  } else {
    for (int i = 0; i < iters; ++i) x = x * 0.9999f - 0.25f;
  }
  out[blockIdx.x * blockDim.x + t] = x;
}

int main(int argc, char** argv) {
  const char* manifest = argc > 1 ? argv[1] : "probes.csv";
  FILE* m = fopen(manifest, "w");
  fprintf(m, "probe,kind,elem_bytes,stride,offset,pairs,pad,mode,iters,blocks,threads\n");
  int probe = 0;
  char* in; float* out;
  CHECK(cudaMalloc(&in, 1 << 20));
  CHECK(cudaMalloc(&out, 1 << 20));
  CHECK(cudaMemset(in, 0, 1 << 20));
  auto G = [&](int eb, int stride, int offset, int pairs) {
    switch (eb) {
      case 1: ld_global<char><<<1, 32>>>((char*)in, (char*)out, stride, offset, pairs); break;
      case 2: ld_global<short><<<1, 32>>>((short*)in, (short*)out, stride, offset, pairs); break;
      case 4: ld_global<float><<<1, 32>>>((float*)in, out, stride, offset, pairs); break;
      case 8: ld_global<double><<<1, 32>>>((double*)in, (double*)out, stride, offset, pairs); break;
      case 16: ld_global<float4><<<1, 32>>>((float4*)in, (float4*)out, stride, offset, pairs);
               break;
    }
    CHECK(cudaDeviceSynchronize());
    fprintf(m, "%d,global,%d,%d,%d,%d,0,0,0,1,32\n", probe++, eb, stride, offset, pairs);
  };
  int strides4[] = {0, 1, 2, 3, 4, 8, 16, 32, 33};
  for (int s : strides4) G(4, s, 0, 0);
  G(4, 1, 1, 0); G(4, 1, 3, 0); G(4, 2, 1, 0); G(4, 0, 0, 1);
  G(1, 1, 0, 0); G(2, 1, 0, 0); G(2, 2, 0, 0);
  G(8, 1, 0, 0); G(8, 2, 0, 0); G(8, 1, 1, 0);
  G(16, 1, 0, 0); G(16, 2, 0, 0); G(16, 0, 0, 0);
  const int smem = 48 * 1024;
  auto S = [&](int eb, int stride) {
    int n = smem / 4;
    switch (eb) {
      case 4: ld_shared<float><<<1, 32, smem>>>(out, stride, n); break;
      case 8: ld_shared<double><<<1, 32, smem>>>((double*)out, stride, n); break;
      case 16: ld_shared<float4><<<1, 32, smem>>>((float4*)out, stride, n); break;
    }
    CHECK(cudaDeviceSynchronize());
    fprintf(m, "%d,shared,%d,%d,0,0,0,0,0,1,32\n", probe++, eb, stride);
  };
  int s4[] = {0, 1, 2, 4, 8, 16, 32, 33};
  for (int s : s4) S(4, s);
  int s8[] = {0, 1, 2, 4, 16, 17};
  for (int s : s8) S(8, s);
  int s16[] = {0, 1, 2, 4, 8, 9};
  for (int s : s16) S(16, s);
  transpose_tile<0><<<1, 32>>>((float*)in, out); CHECK(cudaDeviceSynchronize());
  fprintf(m, "%d,transpose,4,0,0,0,0,0,0,1,32\n", probe++);
  transpose_tile<1><<<1, 32>>>((float*)in, out); CHECK(cudaDeviceSynchronize());
  fprintf(m, "%d,transpose,4,0,0,0,1,0,0,1,32\n", probe++);
  int iters_list[] = {0, 100};
  for (int iters : iters_list) {
    diverge<0><<<2, 64>>>(out, iters); CHECK(cudaDeviceSynchronize());
    fprintf(m, "%d,diverge,4,0,0,0,0,0,%d,2,64\n", probe++, iters);
    diverge<1><<<2, 64>>>(out, iters); CHECK(cudaDeviceSynchronize());
    fprintf(m, "%d,diverge,4,0,0,0,0,1,%d,2,64\n", probe++, iters);
  }
  fclose(m);
  printf("probes: %d launches\n", probe);
  return 0;
}
