// CUDA kernels of the KV cache (kv_cuda.h; raw entry points in kv_cuda_raw.h). One warp per group of 32 values
// for quantisation; one block per query head for decode attention, head_dim
// threads, online softmax in fp32.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "anxin/kv/cuda/kv_cuda_raw.h"

namespace anxin::kv::cuda::raw {
namespace {

// "" on success, else what failed.
std::string Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return std::string(what) + ": " + cudaGetErrorString(e);
}

#define RAW_TRY(expr)                 \
  do {                                \
    std::string raw_err_ = (expr);    \
    if (!raw_err_.empty()) return raw_err_; \
  } while (false)

template <typename T>
struct DeviceBuffer {
  T* p = nullptr;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  std::string Alloc(size_t n) { return Check(cudaMalloc(&p, n * sizeof(T) + 1), "cudaMalloc"); }
  std::string Upload(const T* src, size_t n) {
    RAW_TRY(Alloc(n));
    return Check(cudaMemcpy(p, src, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
};

__device__ float HalfBits(uint16_t b) { return __half2float(__ushort_as_half(b)); }

// fp16 bits of v rounded away from zero (up) or towards minus infinity.
__device__ uint16_t HalfUp(float v) {
  __half h = __float2half_ru(fabsf(v));
  uint16_t bits = __half_as_ushort(h);
  if ((bits & 0x7fff) >= 0x7c00) bits = 0x7bff;
  return v < 0 ? (bits | 0x8000) : bits;
}
__device__ uint16_t HalfDown(float v) {
  uint16_t bits = __half_as_ushort(__float2half_rd(v));
  if ((bits & 0x7fff) >= 0x7c00) bits = (bits & 0x8000) ? 0xfbff : 0x7bff;
  return bits;
}

__device__ float RoundEven(float t) { return (t + 12582912.0f) - 12582912.0f; }

// Grid: one warp per group. Lane i holds element i of the group (group 32).
__global__ void QuantizeKernel(const float* x, int rows, int d, int dtype, int asym,
                               uint8_t* data, uint16_t* params) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int groups_per_row = d / 32;
  if (warp >= rows * groups_per_row) return;
  const int row = warp / groups_per_row, g = warp % groups_per_row;
  const float v = x[static_cast<size_t>(row) * d + g * 32 + lane];
  float mx = v, mn = v;
  for (int o = 16; o > 0; o /= 2) {
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
  }
  const bool int4 = dtype == 2;
  uint16_t scale_h, zero_h = 0;
  float zero = 0, lo, hi;
  if (!asym) {
    const float d_ = int4 ? (mx >= -mn ? mx : mn) / -8.0f : fmaxf(mx, -mn) / 127.0f;
    scale_h = HalfUp(d_);
    lo = int4 ? -8 : -127;
    hi = int4 ? 7 : 127;
  } else {
    zero_h = HalfDown(mn);
    zero = HalfBits(zero_h);
    scale_h = HalfUp((mx - zero) / (int4 ? 15.0f : 255.0f));
    lo = 0;
    hi = int4 ? 15 : 255;
  }
  const float s = HalfBits(scale_h);
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  const int q = static_cast<int>(RoundEven(fminf(fmaxf(__fmul_rn(v - zero, inv), lo), hi)));
  const int per = asym ? 2 : 1;
  if (lane == 0) {
    params[(static_cast<size_t>(row) * groups_per_row + g) * per] = scale_h;
    if (asym) params[(static_cast<size_t>(row) * groups_per_row + g) * per + 1] = zero_h;
  }
  const size_t row_bytes = static_cast<size_t>(d) * (int4 ? 4 : 8) / 8;
  if (!int4) {
    data[row * row_bytes + g * 32 + lane] = static_cast<uint8_t>(q);
  } else {
    const int u = q + (asym ? 0 : 8);
    const int next = __shfl_down_sync(0xffffffffu, u, 1);
    if (lane % 2 == 0) data[row * row_bytes + g * 16 + lane / 2] = static_cast<uint8_t>(u | (next << 4));
  }
}

__device__ float Dequant(const uint8_t* row, const uint16_t* params, int c, int group, int dtype,
                         int asym) {
  if (dtype == 0) return HalfBits(reinterpret_cast<const uint16_t*>(row)[c]);
  const int per = asym ? 2 : 1;
  const float s = HalfBits(params[(c / group) * per]);
  const float z = asym ? HalfBits(params[(c / group) * per + 1]) : 0.0f;
  float q;
  if (dtype == 1) {
    q = asym ? static_cast<float>(row[c]) : static_cast<float>(static_cast<int8_t>(row[c]));
  } else {
    const uint8_t b = row[c / 2];
    q = static_cast<float>((c % 2) ? (b >> 4) : (b & 15)) - (asym ? 0.0f : 8.0f);
  }
  return q * s + z;
}

// Block per query head; threadIdx.x = channel (blockDim.x = d).
__global__ void AttendKernel(const float* q, int q_heads, int kv_heads, int d, int block_tokens,
                             int group, int dtype, int asym, const uint8_t* k_data,
                             const uint16_t* k_params, const uint8_t* v_data,
                             const uint16_t* v_params, const int* table, int length,
                             float scale, float* out) {
  extern __shared__ float red[];
  const int qh = blockIdx.x, c = threadIdx.x;
  const int h = qh / (q_heads / kv_heads);
  const float qc = q[qh * d + c] * scale;
  const size_t row_bytes = static_cast<size_t>(d) * (dtype == 0 ? 16 : dtype == 1 ? 8 : 4) / 8;
  const int row_params = dtype == 0 ? 0 : (d / group) * (asym ? 2 : 1);
  float m = -INFINITY, l = 0, acc = 0;
  for (int t = 0; t < length; ++t) {
    const size_t row = (static_cast<size_t>(table[t / block_tokens]) * kv_heads + h) *
                           block_tokens + t % block_tokens;
    const float k = Dequant(k_data + row * row_bytes, k_params + row * row_params, c, group,
                            dtype, asym);
    red[c] = qc * k;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (c < w) red[c] += red[c + w];
      __syncthreads();
    }
    const float s = red[0];
    __syncthreads();
    const float mn = fmaxf(m, s);
    const float corr = expf(m - mn), p = expf(s - mn);
    l = l * corr + p;
    const float v = Dequant(v_data + row * row_bytes, v_params + row * row_params, c, group,
                            dtype, asym);
    acc = acc * corr + p * v;
    m = mn;
  }
  out[qh * d + c] = acc / l;
}

}  // namespace

std::string DeviceName(std::string* name) {
  int n = 0;
  RAW_TRY(Check(cudaGetDeviceCount(&n), "cudaGetDeviceCount"));
  if (n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  RAW_TRY(Check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties"));
  *name = std::string(p.name) + " (compute " + std::to_string(p.major) + "." +
          std::to_string(p.minor) + ")";
  return {};
}

std::string QuantizeRows(const float* x, int rows, int d, int dtype, int asym, uint8_t* data,
                         uint16_t* params) {
  const size_t n = static_cast<size_t>(rows) * d;
  const size_t row_bytes = static_cast<size_t>(d) * (dtype == 1 ? 8 : 4) / 8;
  const size_t nparams = static_cast<size_t>(rows) * (d / 32) * (asym ? 2 : 1);
  DeviceBuffer<float> dx;
  DeviceBuffer<uint8_t> dd;
  DeviceBuffer<uint16_t> dp;
  RAW_TRY(dx.Upload(x, n));
  RAW_TRY(dd.Alloc(rows * row_bytes));
  RAW_TRY(dp.Alloc(nparams));
  const int warps = rows * (d / 32);
  const int threads = 256;
  QuantizeKernel<<<(warps * 32 + threads - 1) / threads, threads>>>(dx.p, rows, d, dtype, asym,
                                                                     dd.p, dp.p);
  RAW_TRY(Check(cudaGetLastError(), "QuantizeKernel launch"));
  RAW_TRY(Check(cudaMemcpy(data, dd.p, rows * row_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"));
  return Check(cudaMemcpy(params, dp.p, nparams * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

std::string Attend(const AttendArgs& a, float* out) {
  DeviceBuffer<float> dq, dout;
  DeviceBuffer<uint8_t> dk, dv;
  DeviceBuffer<uint16_t> dkp, dvp;
  DeviceBuffer<int> dt;
  RAW_TRY(dq.Upload(a.q, static_cast<size_t>(a.q_heads) * a.d));
  RAW_TRY(dk.Upload(a.k_data, a.data_bytes));
  RAW_TRY(dv.Upload(a.v_data, a.data_bytes));
  RAW_TRY(dkp.Upload(a.k_params, a.param_words));
  RAW_TRY(dvp.Upload(a.v_params, a.param_words));
  RAW_TRY(dt.Upload(a.table, a.table_len));
  RAW_TRY(dout.Alloc(static_cast<size_t>(a.q_heads) * a.d));
  AttendKernel<<<a.q_heads, a.d, a.d * sizeof(float)>>>(
      dq.p, a.q_heads, a.kv_heads, a.d, a.block_tokens, a.group, a.dtype, a.asym, dk.p, dkp.p,
      dv.p, dvp.p, dt.p, a.length, 1.0f / std::sqrt(static_cast<float>(a.d)), dout.p);
  RAW_TRY(Check(cudaGetLastError(), "AttendKernel launch"));
  return Check(cudaMemcpy(out, dout.p, static_cast<size_t>(a.q_heads) * a.d * sizeof(float),
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy");
}

}  // namespace anxin::kv::cuda::raw
