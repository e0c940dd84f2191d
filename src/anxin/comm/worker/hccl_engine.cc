// The hccl engine: Huawei's HCCL collectives on Ascend NPUs, loaded at run
// time (dlopen of libascendcl.so and libhccl.so), so that the worker builds and
// runs everywhere and says plainly when CANN is missing. The prototypes below
// are declared from the documented C API (CANN's hccl.h, hccl_types.h and
// acl.h: HcclGetRootInfo, HcclCommInitRootInfo, HcclAllReduce, ...,
// aclrtSetDevice, aclrtMalloc, aclrtMemcpy); no vendor header is needed.
//
// Bootstrap: rank 0 calls HcclGetRootInfo and MPI broadcasts it; each rank
// binds NPU (local rank) unless HCCL_TEST_USE_DEVS / ASCEND_RT_VISIBLE_DEVICES
// choose otherwise. Status: written against the documentation and not yet run
// on an NPU; the report says so.
#include <dlfcn.h>
#include <fmt/format.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "anxin/base/dynamic_library.h"
#include "anxin/comm/worker/collective_engine.h"

namespace anxin::comm {
namespace {

// From hccl_types.h.
using HcclResult = int;
using HcclComm = void*;
using aclrtStream = void*;
using aclError = int;
constexpr uint32_t kRootInfoBytes = 4108;
struct HcclRootInfo {
  char internal[kRootInfoBytes];
};
enum HcclDataType : int {
  kHcclInt8 = 0,
  kHcclInt16 = 1,
  kHcclInt32 = 2,
  kHcclFp16 = 3,
  kHcclFp32 = 4,
  kHcclInt64 = 5,
  kHcclUint64 = 6,
  kHcclUint8 = 7,
  kHcclUint16 = 8,
  kHcclUint32 = 9,
  kHcclFp64 = 10,
  kHcclBfp16 = 11,
};
enum HcclReduceOp : int { kHcclSum = 0, kHcclProd = 1, kHcclMax = 2, kHcclMin = 3 };
// From acl_rt.h.
constexpr int kAclMemMallocHugeFirst = 0;
constexpr int kAclMemcpyHostToDevice = 1;
constexpr int kAclMemcpyDeviceToHost = 2;

struct Api {
  aclError (*aclInit)(const char*);
  aclError (*aclFinalize)();
  aclError (*aclrtSetDevice)(int32_t);
  aclError (*aclrtResetDevice)(int32_t);
  aclError (*aclrtCreateStream)(aclrtStream*);
  aclError (*aclrtDestroyStream)(aclrtStream);
  aclError (*aclrtSynchronizeStream)(aclrtStream);
  aclError (*aclrtMalloc)(void**, size_t, int);
  aclError (*aclrtFree)(void*);
  aclError (*aclrtMemcpy)(void*, size_t, const void*, size_t, int);
  aclError (*aclrtMemset)(void*, size_t, int32_t, size_t);
  HcclResult (*HcclGetRootInfo)(HcclRootInfo*);
  HcclResult (*HcclCommInitRootInfo)(uint32_t, const HcclRootInfo*, uint32_t, HcclComm*);
  HcclResult (*HcclCommDestroy)(HcclComm);
  HcclResult (*HcclAllReduce)(void*, void*, uint64_t, int, int, HcclComm, aclrtStream);
  HcclResult (*HcclAllGather)(void*, void*, uint64_t, int, HcclComm, aclrtStream);
  HcclResult (*HcclReduceScatter)(void*, void*, uint64_t, int, int, HcclComm, aclrtStream);
  HcclResult (*HcclBroadcast)(void*, uint64_t, int, uint32_t, HcclComm, aclrtStream);
  HcclResult (*HcclReduce)(void*, void*, uint64_t, int, int, uint32_t, HcclComm, aclrtStream);
  HcclResult (*HcclAlltoAll)(const void*, uint64_t, int, const void*, uint64_t, int, HcclComm,
                             aclrtStream);
  HcclResult (*HcclSend)(void*, uint64_t, int, uint32_t, HcclComm, aclrtStream);
  HcclResult (*HcclRecv)(void*, uint64_t, int, uint32_t, HcclComm, aclrtStream);
};

template <typename F>
Status Load(void* lib, const char* name, F& fn, const char* lib_name) {
  if (!LoadSymbol(lib, name, fn)) {
    return Unavailable(
        fmt::format("{} has no {}: this CANN is older than the API anxin uses", lib_name, name));
  }
  return Ok();
}

int HcclType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return kHcclInt8;
    case DataType::kUint8:
      return kHcclUint8;
    case DataType::kInt32:
      return kHcclInt32;
    case DataType::kUint32:
      return kHcclUint32;
    case DataType::kInt64:
      return kHcclInt64;
    case DataType::kUint64:
      return kHcclUint64;
    case DataType::kFloat:
      return kHcclFp32;
    case DataType::kDouble:
      return kHcclFp64;
    default:
      return -1;
  }
}

int HcclOp(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return kHcclSum;
    case RedOp::kProd:
      return kHcclProd;
    case RedOp::kMax:
      return kHcclMax;
    case RedOp::kMin:
      return kHcclMin;
    default:
      return -1;
  }
}

class HcclEngine : public Engine {
 public:
  ~HcclEngine() override { Finalize(); }

  Status Init(int rank, int ranks, int local_rank) override {
    rank_ = rank;
    ranks_ = ranks;
    ANXIN_TRY(Open());
    device_ = local_rank;
    if (const char* devs = std::getenv("HCCL_TEST_USE_DEVS")) {
      // hccl_test's own variable: a comma list, one device per local rank.
      std::string list(devs);
      int index = 0;
      size_t start = 0;
      while (start <= list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        if (index++ == local_rank) device_ = std::atoi(list.substr(start, end - start).c_str());
        start = end + 1;
      }
    }
    ANXIN_TRY(Acl(api_.aclInit(nullptr), "aclInit"));
    acl_ready_ = true;
    ANXIN_TRY(Acl(api_.aclrtSetDevice(device_), fmt::format("aclrtSetDevice({})", device_)));
    device_set_ = true;
    ANXIN_TRY(Acl(api_.aclrtCreateStream(&stream_), "aclrtCreateStream"));
    HcclRootInfo root{};
    if (rank == 0) ANXIN_TRY(Hccl(api_.HcclGetRootInfo(&root), "HcclGetRootInfo"));
    MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
    ANXIN_TRY(Hccl(api_.HcclCommInitRootInfo(static_cast<uint32_t>(ranks), &root,
                                             static_cast<uint32_t>(rank), &comm_),
                   "HcclCommInitRootInfo"));
    return Ok();
  }

  Status Supports(const Call& call) const override {
    if (HcclType(call.type) < 0) {
      return Unimplemented(fmt::format("the hccl engine does not run {}", TypeName(call.type)));
    }
    if (OpReduces(call.op) && HcclOp(call.redop) < 0) {
      return Unimplemented(fmt::format("HCCL has no {} reduction", RedOpName(call.redop)));
    }
    if (call.in_place && (call.op == CollOp::kAlltoAll || call.op == CollOp::kSendRecv)) {
      return Unimplemented("HCCL's alltoall and send/recv have no in-place form");
    }
    return Ok();
  }

  Status Reserve(uint64_t input_bytes, uint64_t output_bytes) override {
    const uint64_t bytes = std::max<uint64_t>(std::max(input_bytes, output_bytes), 1);
    if (bytes <= capacity_) return Ok();
    FreeBuffers();
    ANXIN_TRY(Acl(api_.aclrtMalloc(&send_, bytes, kAclMemMallocHugeFirst), "aclrtMalloc"));
    ANXIN_TRY(Acl(api_.aclrtMalloc(&recv_, bytes, kAclMemMallocHugeFirst), "aclrtMalloc"));
    capacity_ = bytes;
    return Ok();
  }

  Status Upload(const Call& call, const void* input, uint64_t bytes) override {
    const uint64_t out = OutputElements(call, ranks_) * TypeSize(call.type);
    ANXIN_TRY(Acl(api_.aclrtMemset(recv_, capacity_, 0xA5, std::max(out, bytes)), "aclrtMemset"));
    void* target = send_;
    uint64_t offset = 0;
    if (call.in_place) {
      target = recv_;
      // In place, HCCL reads one rank's block of all_gather from its slot.
      if (call.op == CollOp::kAllGather) offset = static_cast<uint64_t>(rank_) * bytes;
    }
    if (call.op == CollOp::kBroadcast) target = recv_;
    return Acl(api_.aclrtMemcpy(static_cast<char*>(target) + offset, capacity_ - offset, input,
                                bytes, kAclMemcpyHostToDevice),
               "aclrtMemcpy to the device");
  }

  Status Run(const Call& call) override {
    const int dt = HcclType(call.type);
    const int op = HcclOp(call.redop);
    const uint64_t c = call.count;
    void* s = call.in_place ? recv_ : send_;
    if (call.in_place && call.op == CollOp::kAllGather) {
      s = static_cast<char*>(recv_) + static_cast<uint64_t>(rank_) * c * TypeSize(call.type);
    }
    HcclResult rc = 0;
    const char* name = "";
    switch (call.op) {
      case CollOp::kAllReduce:
        name = "HcclAllReduce";
        rc = api_.HcclAllReduce(s, recv_, c, dt, op, comm_, stream_);
        break;
      case CollOp::kAllGather:
        name = "HcclAllGather";
        rc = api_.HcclAllGather(s, recv_, c, dt, comm_, stream_);
        break;
      case CollOp::kReduceScatter:
        name = "HcclReduceScatter";
        rc = api_.HcclReduceScatter(s, recv_, c, dt, op, comm_, stream_);
        break;
      case CollOp::kBroadcast:
        name = "HcclBroadcast";
        rc = api_.HcclBroadcast(recv_, c, dt, static_cast<uint32_t>(call.root), comm_, stream_);
        break;
      case CollOp::kReduce:
        name = "HcclReduce";
        rc = api_.HcclReduce(s, recv_, c, dt, op, static_cast<uint32_t>(call.root), comm_, stream_);
        break;
      case CollOp::kAlltoAll:
        name = "HcclAlltoAll";
        rc = api_.HcclAlltoAll(send_, c, dt, recv_, c, dt, comm_, stream_);
        break;
      case CollOp::kSendRecv: {
        // Even ranks send first, odd ranks receive first: no cycle of waits.
        name = "HcclSend/HcclRecv";
        const uint32_t next = static_cast<uint32_t>((rank_ + 1) % ranks_);
        const uint32_t prev = static_cast<uint32_t>((rank_ - 1 + ranks_) % ranks_);
        if (rank_ % 2 == 0) {
          rc = api_.HcclSend(send_, c, dt, next, comm_, stream_);
          if (rc == 0) rc = api_.HcclRecv(recv_, c, dt, prev, comm_, stream_);
        } else {
          rc = api_.HcclRecv(recv_, c, dt, prev, comm_, stream_);
          if (rc == 0) rc = api_.HcclSend(send_, c, dt, next, comm_, stream_);
        }
        break;
      }
    }
    ANXIN_TRY(Hccl(rc, name));
    return Acl(api_.aclrtSynchronizeStream(stream_), "aclrtSynchronizeStream");
  }

  Status Download(const Call&, void* output, uint64_t bytes) override {
    return Acl(api_.aclrtMemcpy(output, bytes, recv_, bytes, kAclMemcpyDeviceToHost),
               "aclrtMemcpy from the device");
  }

  Status Send(int peer, uint64_t bytes) override {
    ANXIN_TRY(
        Hccl(api_.HcclSend(send_, bytes, kHcclInt8, static_cast<uint32_t>(peer), comm_, stream_),
             "HcclSend"));
    return Acl(api_.aclrtSynchronizeStream(stream_), "aclrtSynchronizeStream");
  }
  Status Recv(int peer, uint64_t bytes) override {
    ANXIN_TRY(
        Hccl(api_.HcclRecv(recv_, bytes, kHcclInt8, static_cast<uint32_t>(peer), comm_, stream_),
             "HcclRecv"));
    return Acl(api_.aclrtSynchronizeStream(stream_), "aclrtSynchronizeStream");
  }

  std::string AlgorithmInEffect(CollOp) const override {
    const char* algo = std::getenv("HCCL_ALGO");
    return algo ? algo : "";
  }

  void Finalize() override {
    if (comm_ != nullptr) api_.HcclCommDestroy(comm_);
    comm_ = nullptr;
    FreeBuffers();
    if (stream_ != nullptr) api_.aclrtDestroyStream(stream_);
    stream_ = nullptr;
    if (device_set_) api_.aclrtResetDevice(device_);
    device_set_ = false;
    if (acl_ready_) api_.aclFinalize();
    acl_ready_ = false;
  }

  std::string Describe() const override {
    return "HCCL (dlopen; unverified: not yet run on an NPU)";
  }

 private:
  Status Open() {
    ANXIN_ASSIGN_OR_RETURN(acl_, OpenLibrary("", "libascendcl.so",
                                             "install CANN and source its set_env.sh, so that "
                                             "LD_LIBRARY_PATH holds .../cann/lib64",
                                             RTLD_GLOBAL));
    ANXIN_ASSIGN_OR_RETURN(hccl_,
                           OpenLibrary("", "libhccl.so", "install CANN's HCCL", RTLD_GLOBAL));
    const char* a = "libascendcl.so";
    const char* h = "libhccl.so";
    ANXIN_TRY(Load(acl_, "aclInit", api_.aclInit, a));
    ANXIN_TRY(Load(acl_, "aclFinalize", api_.aclFinalize, a));
    ANXIN_TRY(Load(acl_, "aclrtSetDevice", api_.aclrtSetDevice, a));
    ANXIN_TRY(Load(acl_, "aclrtResetDevice", api_.aclrtResetDevice, a));
    ANXIN_TRY(Load(acl_, "aclrtCreateStream", api_.aclrtCreateStream, a));
    ANXIN_TRY(Load(acl_, "aclrtDestroyStream", api_.aclrtDestroyStream, a));
    ANXIN_TRY(Load(acl_, "aclrtSynchronizeStream", api_.aclrtSynchronizeStream, a));
    ANXIN_TRY(Load(acl_, "aclrtMalloc", api_.aclrtMalloc, a));
    ANXIN_TRY(Load(acl_, "aclrtFree", api_.aclrtFree, a));
    ANXIN_TRY(Load(acl_, "aclrtMemcpy", api_.aclrtMemcpy, a));
    ANXIN_TRY(Load(acl_, "aclrtMemset", api_.aclrtMemset, a));
    ANXIN_TRY(Load(hccl_, "HcclGetRootInfo", api_.HcclGetRootInfo, h));
    ANXIN_TRY(Load(hccl_, "HcclCommInitRootInfo", api_.HcclCommInitRootInfo, h));
    ANXIN_TRY(Load(hccl_, "HcclCommDestroy", api_.HcclCommDestroy, h));
    ANXIN_TRY(Load(hccl_, "HcclAllReduce", api_.HcclAllReduce, h));
    ANXIN_TRY(Load(hccl_, "HcclAllGather", api_.HcclAllGather, h));
    ANXIN_TRY(Load(hccl_, "HcclReduceScatter", api_.HcclReduceScatter, h));
    ANXIN_TRY(Load(hccl_, "HcclBroadcast", api_.HcclBroadcast, h));
    ANXIN_TRY(Load(hccl_, "HcclReduce", api_.HcclReduce, h));
    ANXIN_TRY(Load(hccl_, "HcclAlltoAll", api_.HcclAlltoAll, h));
    ANXIN_TRY(Load(hccl_, "HcclSend", api_.HcclSend, h));
    ANXIN_TRY(Load(hccl_, "HcclRecv", api_.HcclRecv, h));
    return Ok();
  }

  Status Acl(aclError rc, const std::string& what) const {
    if (rc == 0) return Ok();
    return Unavailable(fmt::format("NPU {}: {} failed with ACL error {}", device_, what, rc));
  }
  Status Hccl(HcclResult rc, const std::string& what) const {
    if (rc == 0) return Ok();
    return Unavailable(
        fmt::format("NPU {}: {} failed with HCCL error {} (see the HCCL log under ~/ascend/log)",
                    device_, what, rc));
  }
  void FreeBuffers() {
    if (send_ != nullptr) api_.aclrtFree(send_);
    if (recv_ != nullptr) api_.aclrtFree(recv_);
    send_ = recv_ = nullptr;
    capacity_ = 0;
  }

  Api api_{};
  void* acl_ = nullptr;
  void* hccl_ = nullptr;
  int rank_ = 0, ranks_ = 1, device_ = 0;
  bool acl_ready_ = false, device_set_ = false;
  aclrtStream stream_ = nullptr;
  HcclComm comm_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  uint64_t capacity_ = 0;
};

}  // namespace

ANXIN_REGISTER_ENGINE(hccl, [] { return std::make_unique<HcclEngine>(); });

}  // namespace anxin::comm
