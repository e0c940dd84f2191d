// The fused attention forward kernel (attention_cuda.h). One warp per query
// row, eight rows per block sharing tiles of 32 keys in shared memory (K and
// V converted to float32 once per tile); each lane holds head_dim / 32 output
// elements and one key's score per tile. Online softmax as on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "anxin/kernels/cuda/attention_raw.h"

namespace anxin::kernels::cuda::raw {
namespace {

constexpr int kRows = 8;       // warps (query rows) per block
constexpr int kTile = 32;      // keys per tile
constexpr int kMaxPer = 8;     // head_dim / 32, head_dim <= 256

__device__ __forceinline__ float Load(const void* p, size_t i, int dtype) {
  if (dtype == 0) return static_cast<const float*>(p)[i];
  if (dtype == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}

__device__ __forceinline__ void Store(void* p, size_t i, int dtype, float x) {
  if (dtype == 0) {
    static_cast<float*>(p)[i] = x;
  } else if (dtype == 1) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  } else {
    static_cast<__half*>(p)[i] = __float2half_rn(x);
  }
}

__global__ void ForwardKernel(Shape s, const void* q, const void* k, const void* v, void* out,
                              const int* kv_valid) {
  extern __shared__ float smem[];
  float* ks = smem;                           // [kTile][head_dim]
  float* vs = smem + kTile * s.head_dim;      // [kTile][head_dim]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int bh = blockIdx.y;
  const int b = bh / s.heads, h = bh % s.heads;
  const int kvh = h / (s.heads / s.kv_heads);
  const int row = blockIdx.x * kRows + warp;
  const int per = s.head_dim / 32;
  const int valid = kv_valid ? kv_valid[b] : s.kv_len;
  const int offset = s.kv_len - s.q_len;
  const size_t qbase = (static_cast<size_t>(b) * s.heads + h) * s.q_len * s.head_dim;
  const size_t kvbase = (static_cast<size_t>(b) * s.kv_heads + kvh) * s.kv_len * s.head_dim;
  float qr[kMaxPer], o[kMaxPer];
  const bool active = row < s.q_len;
  for (int i = 0; i < per; ++i) {
    qr[i] = active ? Load(q, qbase + static_cast<size_t>(row) * s.head_dim + lane + 32 * i,
                          s.dtype) * s.scale
                   : 0.0f;
    o[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  int lim = min(valid, s.kv_len);
  if (s.causal) lim = min(lim, row + offset + 1);
  // The block's furthest key: the last row's limit.
  int block_lim = min(valid, s.kv_len);
  if (s.causal) block_lim = min(block_lim, min(s.q_len, (blockIdx.x + 1) * kRows) - 1 + offset + 1);
  for (int t0 = 0; t0 < block_lim; t0 += kTile) {
    __syncthreads();
    for (int x = threadIdx.x; x < kTile * s.head_dim; x += blockDim.x) {
      const int j = t0 + x / s.head_dim;
      const size_t src = kvbase + static_cast<size_t>(j) * s.head_dim + x % s.head_dim;
      ks[x] = j < s.kv_len ? Load(k, src, s.dtype) : 0.0f;
      vs[x] = j < s.kv_len ? Load(v, src, s.dtype) : 0.0f;
    }
    __syncthreads();
    if (!active || t0 >= lim) continue;
    // Lane j ends with key t0 + j's score.
    float mine = -INFINITY;
    for (int j = 0; j < kTile; ++j) {
      float part = 0.0f;
      for (int i = 0; i < per; ++i) part += qr[i] * ks[j * s.head_dim + lane + 32 * i];
      for (int w = 16; w > 0; w >>= 1) part += __shfl_xor_sync(0xffffffffu, part, w);
      if (lane == j) mine = t0 + j < lim ? part : -INFINITY;
    }
    float tile_max = mine;
    for (int w = 16; w > 0; w >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, w));
    const float m_new = fmaxf(m, tile_max);
    const float alpha = m == -INFINITY ? 0.0f : __expf(m - m_new);
    const float p = mine == -INFINITY ? 0.0f : __expf(mine - m_new);
    float psum = p;
    for (int w = 16; w > 0; w >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, w);
    l = l * alpha + psum;
    for (int i = 0; i < per; ++i) o[i] *= alpha;
    for (int j = 0; j < kTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      for (int i = 0; i < per; ++i) o[i] += pj * vs[j * s.head_dim + lane + 32 * i];
    }
    m = m_new;
  }
  if (!active) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int i = 0; i < per; ++i)
    Store(out, qbase + static_cast<size_t>(row) * s.head_dim + lane + 32 * i, s.dtype, o[i] * inv);
}

const char* Check(cudaError_t e) { return e == cudaSuccess ? nullptr : cudaGetErrorString(e); }

}  // namespace

const char* DeviceName(char* buf, size_t size) {
  int dev = 0;
  if (const char* e = Check(cudaGetDevice(&dev))) return e;
  cudaDeviceProp p;
  if (const char* e = Check(cudaGetDeviceProperties(&p, dev))) return e;
  snprintf(buf, size, "%s (compute %d.%d)", p.name, p.major, p.minor);
  return nullptr;
}

const char* Forward(const Shape& s, const void* q, const void* k, const void* v, void* out,
                    const int* kv_valid, int reps, float* ms) {
  dim3 grid((s.q_len + kRows - 1) / kRows, s.batch * s.heads);
  const size_t shared = 2 * kTile * s.head_dim * sizeof(float);
  if (const char* e = Check(cudaFuncSetAttribute(
          ForwardKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared))))
    return e;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 1e30f;
  for (int r = 0; r < (reps < 1 ? 1 : reps); ++r) {
    cudaEventRecord(start);
    ForwardKernel<<<grid, kRows * 32, shared>>>(s, q, k, v, out, kv_valid);
    cudaEventRecord(stop);
    if (const char* e = Check(cudaEventSynchronize(stop))) return e;
    if (const char* e = Check(cudaGetLastError())) return e;
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    best = t < best ? t : best;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *ms = best;
  return nullptr;
}

const char* Malloc(void** p, size_t bytes) { return Check(cudaMalloc(p, bytes)); }
const char* Free(void* p) { return Check(cudaFree(p)); }
const char* ToDevice(void* dst, const void* src, size_t bytes) {
  return Check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
const char* ToHost(void* dst, const void* src, size_t bytes) {
  return Check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace anxin::kernels::cuda::raw
