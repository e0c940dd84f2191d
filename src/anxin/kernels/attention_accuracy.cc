// The fused attention kernel on inputs NumPy wrote, compared with NumPy's
// float64 reference by compare's own metrics (attention_accuracy.py drives
// it; docs/kernels.md, "Accuracy").
//
//   kernels_attention_accuracy CASE_DIR
//
// CASE_DIR holds q.npy, k.npy, v.npy ([batch, heads, len, head_dim], values
// exact in the case's dtype), ref.npy (float64) and case.json
// {"dtype": "bfloat16", "causal": true, "kv_valid": [..], "backward": false}.
// Writes out.npy in the dtype (bfloat16 as <V2 with an out.npy.dtype
// sidecar, as `anxin compare` reads it) and prints one JSON line of metrics.
// Exit 0 when it ran, 2 on bad input, 3 when the kernel failed.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/compare/api.h"
#include "anxin/compare/dump.h"
#include "anxin/kernels/attention.h"

namespace {

using anxin::kernels::ElementType;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return code;
}

anxin::Result<std::vector<double>> Load(const std::string& path, std::vector<int64_t>* shape) {
  ANXIN_ASSIGN_OR_RETURN(anxin::compare::Dump d, anxin::compare::LoadDump(path, {}));
  if (d.tensors.size() != 1) return anxin::InvalidArgument(path + ": expected one tensor");
  const anxin::compare::Tensor& t = d.tensors.front();
  std::vector<double> v(t.NumElements());
  t.ReadDoubles(0, v.size(), v.data());
  if (shape) *shape = t.shape;
  return v;
}

bool WriteNpy(const std::string& path, const std::string& descr, const void* data, size_t bytes,
              const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string blob("\x93NUMPY\x01\x00", 8);
  blob += static_cast<char>(header.size() & 0xff);
  blob += static_cast<char>(header.size() >> 8);
  blob += header;
  blob.append(static_cast<const char*>(data), bytes);
  return anxin::WriteFileAtomic(path, blob).has_value();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail(2, "usage: kernels_attention_accuracy CASE_DIR");
  const std::string dir = argv[1];
  auto text = anxin::ReadFile(dir + "/case.json");
  if (!text) return Fail(2, text.error().ToString());
  nlohmann::json c = nlohmann::json::parse(*text, nullptr, false);
  if (c.is_discarded()) return Fail(2, dir + "/case.json: not valid JSON");
  const std::string dtype = c.value("dtype", "float32");
  ElementType t = dtype == "bfloat16"  ? ElementType::kBFloat16
                  : dtype == "float16" ? ElementType::kFloat16
                                       : ElementType::kFloat32;
  std::vector<int64_t> qshape, kshape;
  auto q = Load(dir + "/q.npy", &qshape);
  auto k = Load(dir + "/k.npy", &kshape);
  auto v = Load(dir + "/v.npy", nullptr);
  auto ref = Load(dir + "/ref.npy", nullptr);
  for (auto* r : {&q, &k, &v, &ref})
    if (!*r) return Fail(2, r->error().ToString());
  if (qshape.size() != 4 || kshape.size() != 4) return Fail(2, "q and k must be 4-D");

  anxin::kernels::AttentionArgs a;
  a.shape = {.batch = static_cast<int>(qshape[0]),
             .heads = static_cast<int>(qshape[1]),
             .kv_heads = static_cast<int>(kshape[1]),
             .q_len = static_cast<int>(qshape[2]),
             .kv_len = static_cast<int>(kshape[2]),
             .head_dim = static_cast<int>(qshape[3])};
  a.dtype = t;
  a.causal = c.value("causal", false);
  std::vector<int> valid = c.value("kv_valid", std::vector<int>{});
  a.kv_valid = valid;
  a.threads = 2;
  auto pack = [&](const std::vector<double>& x) {
    std::vector<float> f(x.begin(), x.end());
    std::vector<uint8_t> raw(f.size() * anxin::kernels::ElementSize(t));
    anxin::kernels::FromFloat(t, f.data(), f.size(), raw.data());
    return raw;
  };
  std::vector<uint8_t> qr = pack(*q), kr = pack(*k), vr = pack(*v);
  std::vector<uint8_t> out(a.shape.QElements() * anxin::kernels::ElementSize(t));
  if (auto s = AttentionForward(a, qr.data(), kr.data(), vr.data(), out.data(), nullptr); !s)
    return Fail(3, s.error().ToString());

  const std::string descr = t == ElementType::kFloat32   ? "<f4"
                            : t == ElementType::kFloat16 ? "<f2"
                                                         : "|V2";
  if (!WriteNpy(dir + "/out.npy", descr, out.data(), out.size(), qshape))
    return Fail(3, "cannot write " + dir + "/out.npy");
  if (t == ElementType::kBFloat16) {
    if (!anxin::WriteFileAtomic(dir + "/out.npy.dtype", "bfloat16\n"))
      return Fail(3, "cannot write " + dir + "/out.npy.dtype");
  }
  const anxin::compare::DType out_dtype =
      t == ElementType::kFloat32   ? anxin::compare::DType::kFloat32
      : t == ElementType::kFloat16 ? anxin::compare::DType::kFloat16
                                   : anxin::compare::DType::kBFloat16;
  anxin::compare::BufferComparison r = anxin::compare::CompareBuffers(
      out_dtype, out.data(), anxin::compare::DType::kFloat64, ref->data(), ref->size());
  nlohmann::json j;
  j["dtype"] = dtype;
  j["causal"] = a.causal;
  j["padding"] = !valid.empty();
  j["cosine"] = r.metrics.cosine;
  j["max_abs_err"] = r.metrics.max_abs_err;
  j["max_ulp_err"] = r.metrics.max_ulp_err.value_or(-1);
  j["elements"] = r.metrics.elements;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
