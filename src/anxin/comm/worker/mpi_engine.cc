// The mpi engine: collectives of the MPI library the worker is linked with
// (Open MPI from Debian here), on host memory, in a communicator of its own.
// Broadcast has no separate output buffer in MPI: out-of-place broadcasts the
// receive buffer, in-place the send buffer, so both modes time MPI_Bcast.
#include <fmt/format.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "anxin/comm/worker/collective_engine.h"

namespace anxin::comm {
namespace {

MPI_Datatype MpiType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUint8:
      return MPI_UINT8_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kUint32:
      return MPI_UINT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUint64:
      return MPI_UINT64_T;
    case DataType::kFloat:
      return MPI_FLOAT;
    case DataType::kDouble:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op MpiOp(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return MPI_SUM;
    case RedOp::kProd:
      return MPI_PROD;
    case RedOp::kMin:
      return MPI_MIN;
    case RedOp::kMax:
      return MPI_MAX;
    default:
      return MPI_OP_NULL;
  }
}

Status Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Unavailable(fmt::format("{}: {}", what, text));
}

class MpiEngine : public Engine {
 public:
  Status Init(int rank, int ranks, int) override {
    rank_ = rank;
    ranks_ = ranks;
    ANXIN_TRY(Check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup"));
    // Errors come back as codes, so the runner can say which call failed.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    return Ok();
  }

  Status Supports(const Call& call) const override {
    if (call.count * static_cast<uint64_t>(ranks_) > static_cast<uint64_t>(INT32_MAX)) {
      return Unimplemented("MPI takes element counts below 2^31; lower -e");
    }
    if (MpiType(call.type) == MPI_DATATYPE_NULL) {
      return Unimplemented(fmt::format("the mpi engine has no {} type", TypeName(call.type)));
    }
    if (OpReduces(call.op) && MpiOp(call.redop) == MPI_OP_NULL) {
      return Unimplemented(fmt::format("MPI has no {} reduction", RedOpName(call.redop)));
    }
    return Ok();
  }

  Status Reserve(uint64_t input_bytes, uint64_t output_bytes) override {
    // In-place operations keep input and output in the receive buffer.
    send_.resize(std::max<uint64_t>(input_bytes, 1));
    recv_.resize(std::max<uint64_t>(std::max(input_bytes, output_bytes), 1));
    return Ok();
  }

  Status Upload(const Call& call, const void* input, uint64_t bytes) override {
    const uint64_t elt = TypeSize(call.type);
    const uint64_t out_bytes = OutputElements(call, ranks_) * elt;
    if (bytes > send_.size() || out_bytes > recv_.size()) {
      return Internal("buffers smaller than the call: Reserve was not called for this size");
    }
    // Poison the output so that a call that writes nothing fails the check.
    std::memset(recv_.data(), 0xA5, std::max(out_bytes, bytes));
    const char* in = static_cast<const char*>(input);
    const bool root = rank_ == call.root;
    switch (call.op) {
      case CollOp::kBroadcast:
        // Only the root's data matters; others keep the poison to be overwritten.
        if (root) std::memcpy(call.in_place ? send_.data() : recv_.data(), in, bytes);
        if (call.in_place && !root) std::memset(send_.data(), 0xA5, bytes);
        return Ok();
      case CollOp::kAllGather:
        if (call.in_place) {
          std::memcpy(recv_.data() + static_cast<uint64_t>(rank_) * bytes, in, bytes);
          return Ok();
        }
        break;
      case CollOp::kReduce:
        if (call.in_place && root) {
          std::memcpy(recv_.data(), in, bytes);
          return Ok();
        }
        break;
      default:
        if (call.in_place) {
          std::memcpy(recv_.data(), in, bytes);
          return Ok();
        }
        break;
    }
    std::memcpy(send_.data(), in, bytes);
    return Ok();
  }

  Status Run(const Call& call) override {
    const MPI_Datatype dt = MpiType(call.type);
    const int count = static_cast<int>(call.count);
    void* s = send_.data();
    void* r = recv_.data();
    const bool ip = call.in_place;
    switch (call.op) {
      case CollOp::kAllReduce:
        return Check(MPI_Allreduce(ip ? MPI_IN_PLACE : s, r, count, dt, MpiOp(call.redop), comm_),
                     "MPI_Allreduce");
      case CollOp::kAllGather:
        return Check(ip ? MPI_Allgather(MPI_IN_PLACE, 0, dt, r, count, dt, comm_)
                        : MPI_Allgather(s, count, dt, r, count, dt, comm_),
                     "MPI_Allgather");
      case CollOp::kReduceScatter:
        return Check(
            MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : s, r, count, dt, MpiOp(call.redop), comm_),
            "MPI_Reduce_scatter_block");
      case CollOp::kBroadcast:
        return Check(MPI_Bcast(ip ? s : r, count, dt, call.root, comm_), "MPI_Bcast");
      case CollOp::kReduce: {
        const bool root = rank_ == call.root;
        return Check(MPI_Reduce(ip && root ? MPI_IN_PLACE : s, r, count, dt, MpiOp(call.redop),
                                call.root, comm_),
                     "MPI_Reduce");
      }
      case CollOp::kAlltoAll:
        return Check(ip ? MPI_Alltoall(MPI_IN_PLACE, 0, dt, r, count, dt, comm_)
                        : MPI_Alltoall(s, count, dt, r, count, dt, comm_),
                     "MPI_Alltoall");
      case CollOp::kSendRecv: {
        const int next = (rank_ + 1) % ranks_, prev = (rank_ - 1 + ranks_) % ranks_;
        return Check(
            ip ? MPI_Sendrecv_replace(r, count, dt, next, 11, prev, 11, comm_, MPI_STATUS_IGNORE)
               : MPI_Sendrecv(s, count, dt, next, 11, r, count, dt, prev, 11, comm_,
                              MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
      }
    }
    return Internal("unknown operation");
  }

  Status Download(const Call& call, void* output, uint64_t bytes) override {
    const char* from = recv_.data();
    if (call.op == CollOp::kBroadcast && call.in_place) from = send_.data();
    std::memcpy(output, from, bytes);
    return Ok();
  }

  Status Send(int peer, uint64_t bytes) override {
    return Check(MPI_Send(send_.data(), static_cast<int>(bytes), MPI_BYTE, peer, 21, comm_),
                 "MPI_Send");
  }
  Status Recv(int peer, uint64_t bytes) override {
    return Check(MPI_Recv(recv_.data(), static_cast<int>(bytes), MPI_BYTE, peer, 21, comm_,
                          MPI_STATUS_IGNORE),
                 "MPI_Recv");
  }

  void Finalize() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  // Reads Open MPI's coll/tuned choice back through the MPI tool interface,
  // so the report shows what the library took, not what was asked.
  std::string AlgorithmInEffect(CollOp op) const override {
    const char* var = nullptr;
    switch (op) {
      case CollOp::kAllReduce:
        var = "coll_tuned_allreduce_algorithm";
        break;
      case CollOp::kAllGather:
        var = "coll_tuned_allgather_algorithm";
        break;
      case CollOp::kReduceScatter:
        var = "coll_tuned_reduce_scatter_block_algorithm";
        break;
      case CollOp::kBroadcast:
        var = "coll_tuned_bcast_algorithm";
        break;
      case CollOp::kReduce:
        var = "coll_tuned_reduce_algorithm";
        break;
      case CollOp::kAlltoAll:
        var = "coll_tuned_alltoall_algorithm";
        break;
      case CollOp::kSendRecv:
        return "";
    }
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return "";
    std::string result;
    int index = 0;
    if (MPI_T_cvar_get_index(var, &index) == MPI_SUCCESS) {
      char name[256], desc[1024];
      int name_len = sizeof(name), desc_len = sizeof(desc), verbosity = 0, bind = 0, scope = 0;
      MPI_Datatype type;
      MPI_T_enum enumtype = MPI_T_ENUM_NULL;
      MPI_T_cvar_handle handle;
      int count = 0, value = 0;
      if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                              &bind, &scope) == MPI_SUCCESS &&
          MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
        if (type == MPI_INT && MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) {
          result = std::to_string(value);
          int items = 0;
          char ename[256];
          int ename_len = sizeof(ename);
          if (enumtype != MPI_T_ENUM_NULL &&
              MPI_T_enum_get_info(enumtype, &items, ename, &ename_len) == MPI_SUCCESS) {
            for (int i = 0; i < items; ++i) {
              int item_value = 0;
              char item[256];
              int item_len = sizeof(item);
              if (MPI_T_enum_get_item(enumtype, i, &item_value, item, &item_len) == MPI_SUCCESS &&
                  item_value == value) {
                result = item;
              }
            }
          }
        }
        MPI_T_cvar_handle_free(&handle);
      }
    }
    MPI_T_finalize();
    // 0 ("ignore") means the library's own decision rules choose per call.
    return result == "ignore" || result == "0" ? "" : result;
  }

  std::string Describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    if (auto nl = v.find_first_of(",\n"); nl != std::string::npos) v.resize(nl);
    return v;
  }

 private:
  int rank_ = 0, ranks_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<char> send_, recv_;
};

}  // namespace

ANXIN_REGISTER_ENGINE(mpi, [] { return std::make_unique<MpiEngine>(); });

}  // namespace anxin::comm
