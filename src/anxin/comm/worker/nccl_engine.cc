// The nccl engine: NVIDIA NCCL collectives on GPU memory, one GPU per rank
// (the rank's index on its node, or CUDA_VISIBLE_DEVICES' choice), bootstrapped
// over MPI with ncclGetUniqueId. Built only into anxin-comm-worker-nccl, where
// CUDA and NCCL were found at build time. Each call is followed by a stream
// synchronisation, so a timed iteration is one complete collective (as
// nccl-tests' -z 1 blocking mode), and arrivals are comparable across ranks.
//
// Status: compiled against CUDA 13 and NCCL here; not yet run on a GPU.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "anxin/comm/worker/collective_engine.h"

namespace anxin::comm {
namespace {

int NcclType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kFloat:
      return ncclFloat32;
    case DataType::kDouble:
      return ncclFloat64;
    default:
      return -1;
  }
}

int NcclOp(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return ncclSum;
    case RedOp::kProd:
      return ncclProd;
    case RedOp::kMax:
      return ncclMax;
    case RedOp::kMin:
      return ncclMin;
    default:
      return -1;
  }
}

class NcclEngine : public Engine {
 public:
  ~NcclEngine() override { Finalize(); }

  Status Init(int rank, int ranks, int local_rank) override {
    rank_ = rank;
    ranks_ = ranks;
    int devices = 0;
    ANXIN_TRY(Cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"));
    if (devices == 0) return Unavailable("no CUDA device is visible to this rank");
    device_ = local_rank % devices;
    ANXIN_TRY(Cuda(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_)));
    ANXIN_TRY(Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    ncclUniqueId id{};
    if (rank == 0) ANXIN_TRY(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ANXIN_TRY(Nccl(ncclCommInitRank(&comm_, ranks, id, rank), "ncclCommInitRank"));
    return Ok();
  }

  Status Supports(const Call& call) const override {
    if (NcclType(call.type) < 0) {
      return Unimplemented(fmt::format("the nccl engine does not run {}", TypeName(call.type)));
    }
    if (OpReduces(call.op) && NcclOp(call.redop) < 0) {
      return Unimplemented(fmt::format("no {} reduction", RedOpName(call.redop)));
    }
    if (call.in_place && call.op == CollOp::kAlltoAll) {
      return Unimplemented("alltoall through send/recv has no in-place form");
    }
    return Ok();
  }

  Status Reserve(uint64_t input_bytes, uint64_t output_bytes) override {
    const uint64_t bytes = std::max<uint64_t>(std::max(input_bytes, output_bytes), 1);
    if (bytes <= capacity_) return Ok();
    FreeBuffers();
    ANXIN_TRY(Cuda(cudaMalloc(&send_, bytes), "cudaMalloc"));
    ANXIN_TRY(Cuda(cudaMalloc(&recv_, bytes), "cudaMalloc"));
    capacity_ = bytes;
    return Ok();
  }

  Status Upload(const Call& call, const void* input, uint64_t bytes) override {
    const uint64_t out = OutputElements(call, ranks_) * TypeSize(call.type);
    ANXIN_TRY(Cuda(cudaMemset(recv_, 0xA5, std::max(out, bytes)), "cudaMemset"));
    if (call.op == CollOp::kBroadcast && !call.in_place) {
      ANXIN_TRY(Cuda(cudaMemset(send_, 0xA5, bytes), "cudaMemset"));
    }
    char* target = static_cast<char*>(call.in_place ? recv_ : send_);
    if (call.op == CollOp::kBroadcast) target = static_cast<char*>(recv_);
    // In place, NCCL's all_gather input is this rank's slot of the output and
    // reduce_scatter's output is this rank's slot of the input.
    if (call.in_place && call.op == CollOp::kAllGather)
      target += static_cast<uint64_t>(rank_) * bytes;
    return Cuda(cudaMemcpy(target, input, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  }

  Status Run(const Call& call) override {
    const auto dt = static_cast<ncclDataType_t>(NcclType(call.type));
    const auto op = static_cast<ncclRedOp_t>(NcclOp(call.redop));
    const size_t c = call.count;
    const size_t slot = c * TypeSize(call.type);
    char* r = static_cast<char*>(recv_);
    char* s = call.in_place ? r : static_cast<char*>(send_);
    ncclResult_t rc = ncclSuccess;
    switch (call.op) {
      case CollOp::kAllReduce:
        rc = ncclAllReduce(s, r, c, dt, op, comm_, stream_);
        break;
      case CollOp::kAllGather:
        rc = ncclAllGather(call.in_place ? r + static_cast<size_t>(rank_) * slot : s, r, c, dt,
                           comm_, stream_);
        break;
      case CollOp::kReduceScatter:
        rc = ncclReduceScatter(s, call.in_place ? r + static_cast<size_t>(rank_) * slot : r, c, dt,
                               op, comm_, stream_);
        break;
      case CollOp::kBroadcast:
        rc = ncclBroadcast(r, call.in_place ? r : static_cast<char*>(send_), c, dt, call.root,
                           comm_, stream_);
        break;
      case CollOp::kReduce:
        rc = ncclReduce(s, r, c, dt, op, call.root, comm_, stream_);
        break;
      case CollOp::kAlltoAll:
        rc = ncclGroupStart();
        for (int p = 0; p < ranks_ && rc == ncclSuccess; ++p) {
          rc = ncclSend(s + static_cast<size_t>(p) * slot, c, dt, p, comm_, stream_);
          if (rc == ncclSuccess)
            rc = ncclRecv(r + static_cast<size_t>(p) * slot, c, dt, p, comm_, stream_);
        }
        if (rc == ncclSuccess) rc = ncclGroupEnd();
        break;
      case CollOp::kSendRecv:
        rc = ncclGroupStart();
        if (rc == ncclSuccess) rc = ncclSend(s, c, dt, (rank_ + 1) % ranks_, comm_, stream_);
        if (rc == ncclSuccess)
          rc = ncclRecv(r, c, dt, (rank_ - 1 + ranks_) % ranks_, comm_, stream_);
        if (rc == ncclSuccess) rc = ncclGroupEnd();
        break;
    }
    ANXIN_TRY(Nccl(rc, std::string(OpName(call.op))));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  Status Download(const Call& call, void* output, uint64_t bytes) override {
    const char* from =
        static_cast<const char*>(call.op == CollOp::kBroadcast && !call.in_place ? send_ : recv_);
    if (call.in_place && call.op == CollOp::kReduceScatter) {
      from += static_cast<uint64_t>(rank_) * bytes;
    }
    return Cuda(cudaMemcpy(output, from, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }

  Status Send(int peer, uint64_t bytes) override {
    ANXIN_TRY(Nccl(ncclSend(send_, bytes, ncclInt8, peer, comm_, stream_), "ncclSend"));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  Status Recv(int peer, uint64_t bytes) override {
    ANXIN_TRY(Nccl(ncclRecv(recv_, bytes, ncclInt8, peer, comm_, stream_), "ncclRecv"));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  std::string AlgorithmInEffect(CollOp) const override {
    const char* algo = std::getenv("NCCL_ALGO");
    return algo ? algo : "";
  }

  void Finalize() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    comm_ = nullptr;
    FreeBuffers();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  std::string Describe() const override {
    int v = 0;
    ncclGetVersion(&v);
    return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
  }

 private:
  Status Cuda(cudaError_t rc, const std::string& what) const {
    if (rc == cudaSuccess) return Ok();
    return Unavailable(fmt::format("GPU {}: {}: {}", device_, what, cudaGetErrorString(rc)));
  }
  Status Nccl(ncclResult_t rc, const std::string& what) const {
    if (rc == ncclSuccess) return Ok();
    return Unavailable(fmt::format("GPU {}: {}: {} (run with NCCL_DEBUG=WARN for NCCL's reason)",
                                   device_, what, ncclGetErrorString(rc)));
  }
  void FreeBuffers() {
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    send_ = recv_ = nullptr;
    capacity_ = 0;
  }

  int rank_ = 0, ranks_ = 1, device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  uint64_t capacity_ = 0;
};

}  // namespace

ANXIN_REGISTER_ENGINE(nccl, [] { return std::make_unique<NcclEngine>(); });

}  // namespace anxin::comm
