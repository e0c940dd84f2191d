#include "anxin/kv/cuda/kv_cuda.h"

#include "anxin/kv/cuda/kv_cuda_raw.h"

namespace anxin::kv::cuda {
namespace {

Status FromRaw(const std::string& err) {
  if (err.empty()) return Ok();
  return Unavailable("CUDA: " + err + " (this check needs an NVIDIA GPU and its driver)");
}

}  // namespace

Result<std::string> DeviceName() {
  std::string name;
  ANXIN_TRY(FromRaw(raw::DeviceName(&name)));
  return name;
}

Status QuantizeRows(const float* x, int rows, int d, const KvFormat& f, std::vector<uint8_t>* data,
                    std::vector<uint16_t>* params) {
  if (!f.quantized() || f.group_size != 32 || d % 32 != 0) {
    return InvalidArgument("the CUDA quantiser takes int8/int4 in groups of 32");
  }
  data->resize(static_cast<size_t>(rows) * d * f.ElementBits() / 8);
  params->resize(static_cast<size_t>(rows) * (d / 32) * f.ParamsPerGroup());
  return FromRaw(raw::QuantizeRows(x, rows, d, f.dtype == KvDType::kInt8 ? 1 : 2,
                                   f.scheme == KvScheme::kAsymmetric, data->data(),
                                   params->data()));
}

Status Attend(const float* q, int q_heads, int kv_heads, int d, int block_tokens, const KvFormat& f,
              const std::vector<uint8_t>& k_data, const std::vector<uint16_t>& k_params,
              const std::vector<uint8_t>& v_data, const std::vector<uint16_t>& v_params,
              const std::vector<int>& table, int length, float* out) {
  if (f.quantized() && f.key_axis == KeyAxis::kPerChannel) {
    return Unimplemented("the CUDA attention reads per-token key groups only");
  }
  if (d > 1024 || (d & (d - 1)) != 0) {
    return InvalidArgument("the CUDA attention needs a power-of-two head dim up to 1024");
  }
  raw::AttendArgs a{};
  a.q = q;
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.d = d;
  a.block_tokens = block_tokens;
  a.group = f.group_size;
  a.dtype = f.dtype == KvDType::kFp16 ? 0 : f.dtype == KvDType::kInt8 ? 1 : 2;
  a.asym = f.scheme == KvScheme::kAsymmetric;
  a.k_data = k_data.data();
  a.v_data = v_data.data();
  a.data_bytes = k_data.size();
  a.k_params = k_params.data();
  a.v_params = v_params.data();
  a.param_words = k_params.size();
  a.table = table.data();
  a.table_len = table.size();
  a.length = length;
  return FromRaw(raw::Attend(a, out));
}

}  // namespace anxin::kv::cuda
