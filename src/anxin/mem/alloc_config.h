// ANXIN_ALLOC_CONF: the allocator's knobs as one string, the way PyTorch reads
// PYTORCH_CUDA_ALLOC_CONF.
//
//   [shell]
//   export ANXIN_ALLOC_CONF=provider:cuda,pool_size:0.85,block_size:2MiB,fragment_threshold:0.02
//
// is read with
//
//   #include <cstdlib>
//
//   const char* text = std::getenv("ANXIN_ALLOC_CONF");
//   ANXIN_ASSIGN_OR_RETURN(AllocConf conf, ParseAllocConf(text ? text : ""));
//   ANXIN_ASSIGN_OR_RETURN(auto provider, MakeProvider(conf, /*device=*/0));
//
// Keys: provider (sim | cuda | acl), pool_size (a fraction such as 0.85, or
// bytes such as 60GiB), block_size (bytes), expand (true | false),
// fragment_threshold (0..1), small_size (bytes), and for the sim provider
// sim_capacity (bytes), sim_virtual (true | false), sim_backed (true | false).
// Bytes accept 1048576, 512KiB, 2MiB, 2M, 1.5GiB (powers of 1024; "2MB" is
// refused as ambiguous, see base ParseBytes).
#ifndef ANXIN_MEM_ALLOC_CONFIG_H_
#define ANXIN_MEM_ALLOC_CONFIG_H_

#include <memory>
#include <string>
#include <string_view>

#include "anxin/base/error.h"
#include "anxin/mem/allocator.h"
#include "anxin/mem/provider.h"

namespace anxin::mem {

struct AllocConf {
  std::string provider = "cuda";
  AllocatorOptions options;
  SimOptions sim;
};

// Unknown keys and bad values are kInvalidArgument naming the key and the
// accepted forms. An empty string gives the defaults.
Result<AllocConf> ParseAllocConf(std::string_view text);

// The provider the configuration names, for `device`.
Result<std::unique_ptr<Provider>> MakeProvider(const AllocConf& conf, int device);

}  // namespace anxin::mem

#endif  // ANXIN_MEM_ALLOC_CONFIG_H_
