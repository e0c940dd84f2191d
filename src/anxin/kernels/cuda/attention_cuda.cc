#include "anxin/kernels/cuda/attention_cuda.h"

#include <cmath>
#include <string>

#include "anxin/kernels/cuda/attention_raw.h"

namespace anxin::kernels::cuda {
namespace {

Error CudaError(const char* what, const char* e) {
  return Error(ErrorCode::kUnavailable,
               std::string(what) + ": " + e + " (is there an NVIDIA GPU and driver here?)");
}

// Device buffers freed at scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() {
    if (p) (void)raw::Free(p);
  }
};

}  // namespace

Result<std::string> DeviceName() {
  char buf[256] = {};
  if (const char* e = raw::DeviceName(buf, sizeof buf))
    return std::unexpected(CudaError("cudaGetDevice", e));
  return std::string(buf);
}

Result<double> AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                                void* out, int reps) {
  ANXIN_TRY(ValidateAttention(a));
  if (a.shape.head_dim % 32 != 0)
    return InvalidArgument("head_dim " + std::to_string(a.shape.head_dim) +
                           ": the CUDA kernel takes multiples of 32 up to 256");
  const size_t es = ElementSize(a.dtype);
  const size_t qb = a.shape.QElements() * es, kvb = a.shape.KvElements() * es;
  DeviceBuffer dq, dk, dv, dout, dvalid;
  for (auto [buf, bytes] : {std::pair{&dq, qb}, {&dk, kvb}, {&dv, kvb}, {&dout, qb}})
    if (const char* e = raw::Malloc(&buf->p, bytes))
      return std::unexpected(CudaError("cudaMalloc", e));
  const char* e = raw::ToDevice(dq.p, q, qb);
  if (!e) e = raw::ToDevice(dk.p, k, kvb);
  if (!e) e = raw::ToDevice(dv.p, v, kvb);
  if (!e && !a.kv_valid.empty()) {
    e = raw::Malloc(&dvalid.p, a.kv_valid.size() * sizeof(int));
    if (!e) e = raw::ToDevice(dvalid.p, a.kv_valid.data(), a.kv_valid.size() * sizeof(int));
  }
  if (e) return std::unexpected(CudaError("copy to the device", e));
  raw::Shape s{a.shape.batch,
               a.shape.heads,
               a.shape.kv_heads,
               a.shape.q_len,
               a.shape.kv_len,
               a.shape.head_dim,
               a.dtype == ElementType::kFloat32    ? 0
               : a.dtype == ElementType::kBFloat16 ? 1
                                                   : 2,
               a.causal ? 1 : 0,
               a.scale != 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.shape.head_dim))};
  float ms = 0;
  if (const char* err =
          raw::Forward(s, dq.p, dk.p, dv.p, dout.p, static_cast<const int*>(dvalid.p), reps, &ms))
    return std::unexpected(CudaError("attention kernel", err));
  if (const char* err = raw::ToHost(out, dout.p, qb))
    return std::unexpected(CudaError("copy from the device", err));
  return static_cast<double>(ms);
}

}  // namespace anxin::kernels::cuda
