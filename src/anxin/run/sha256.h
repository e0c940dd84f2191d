// SHA-256 (FIPS 180-4) of a file or a buffer, as lower-case hex, for the
// checkpoint manifests of `anxin ckpt seal`.
//
//   Sha256 h;
//   h.Update("abc");
//   std::string hex = h.HexDigest();  // "ba7816bf8f01cfea..."
//
// Thread safety: one Sha256 per thread; Sha256File may run concurrently.
#ifndef ANXIN_RUN_SHA256_H_
#define ANXIN_RUN_SHA256_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "anxin/base/error.h"

namespace anxin::run {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// The hash of the file's contents and its size.
struct FileDigest {
  uint64_t size = 0;
  std::string sha256;
};
Result<FileDigest> Sha256File(const std::string& path);

}  // namespace anxin::run

#endif  // ANXIN_RUN_SHA256_H_
