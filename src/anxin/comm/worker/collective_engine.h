// The collective engines of the comm worker: one small interface over the
// library that moves the data (Open MPI, NCCL, HCCL). The runner (runner.h)
// owns timing, verification and reporting; an engine only places a rank's
// input, runs one call to completion, and hands back the output.
//
//   int rank = 0, ranks = 2, local_rank = 0;   // from MPI
//   std::unique_ptr<Engine> e = MakeEngine("mpi");
//   ANXIN_TRY(e->Init(rank, ranks, local_rank));
//   Call call{.op = CollOp::kAllReduce, .type = DataType::kFloat, .count = 1024};
//   ANXIN_TRY(e->Supports(call));
//   uint64_t input_bytes = InputElements(call, ranks) * TypeSize(call.type);
//   uint64_t output_bytes = OutputElements(call, ranks) * TypeSize(call.type);
//   ANXIN_TRY(e->Reserve(input_bytes, output_bytes));
//   std::vector<float> input(InputElements(call, ranks), 1.0f);
//   std::vector<float> output(OutputElements(call, ranks));
//   ANXIN_TRY(e->Upload(call, input.data(), input_bytes));
//   ANXIN_TRY(e->Run(call));
//   ANXIN_TRY(e->Download(call, output.data(), output_bytes));
//
// Logical buffers, whatever the library's layout: the input of all_gather,
// all_reduce, broadcast, reduce and sendrecv is `count` elements, of
// reduce_scatter and alltoall count x ranks; the output of all_gather and
// alltoall is count x ranks, of the others count. Upload also poisons the
// output, so a call that does nothing is caught by the check.
//
// Engines register by name from their own .cc (ANXIN_REGISTER_ENGINE), and
// the worker's CMakeLists.txt picks which .cc files are built.
//
// Thread safety: an Engine is used by one thread (the rank's main thread).
#ifndef ANXIN_COMM_WORKER_COLLECTIVE_ENGINE_H_
#define ANXIN_COMM_WORKER_COLLECTIVE_ENGINE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"
#include "anxin/comm/model.h"

namespace anxin::comm {

struct Call {
  CollOp op = CollOp::kAllReduce;
  DataType type = DataType::kFloat;
  RedOp redop = RedOp::kSum;
  int root = 0;
  bool in_place = false;
  uint64_t count = 0;  // elements per call (one rank's block for all_gather & co)
};

uint64_t InputElements(const Call& call, int ranks);
uint64_t OutputElements(const Call& call, int ranks);

class Engine {
 public:
  virtual ~Engine() = default;
  // Once, after MPI_Init (the bootstrap of every engine is MPI).
  [[nodiscard]] virtual Status Init(int rank, int ranks, int local_rank) = 0;
  // kUnimplemented with the reason when the engine cannot run this call.
  [[nodiscard]] virtual Status Supports(const Call& call) const = 0;
  // Room for the largest logical input and output (bytes).
  [[nodiscard]] virtual Status Reserve(uint64_t input_bytes, uint64_t output_bytes) = 0;
  [[nodiscard]] virtual Status Upload(const Call& call, const void* input, uint64_t bytes) = 0;
  // Runs one call and waits for it to complete on this rank.
  [[nodiscard]] virtual Status Run(const Call& call) = 0;
  [[nodiscard]] virtual Status Download(const Call& call, void* output, uint64_t bytes) = 0;
  // Point to point from the data buffers, blocking (the link matrix).
  [[nodiscard]] virtual Status Send(int peer, uint64_t bytes) = 0;
  [[nodiscard]] virtual Status Recv(int peer, uint64_t bytes) = 0;
  virtual void Finalize() {}
  // What the report says about this engine ("Open MPI 4.1.4", "NCCL 2.27.3").
  virtual std::string Describe() const = 0;
  // The algorithm the library says it uses for op ("" when it cannot tell).
  virtual std::string AlgorithmInEffect(CollOp) const { return ""; }
};

using EngineFactory = std::function<std::unique_ptr<Engine>()>;
bool RegisterEngine(std::string name, EngineFactory factory);
// nullptr when no engine of that name is built into this worker.
std::unique_ptr<Engine> MakeEngine(std::string_view name);
std::vector<std::string> EngineNames();

}  // namespace anxin::comm

#define ANXIN_REGISTER_ENGINE(name, factory)                   \
  [[maybe_unused]] const bool anxin_registered_engine_##name = \
      ::anxin::comm::RegisterEngine(#name, factory)

#endif  // ANXIN_COMM_WORKER_COLLECTIVE_ENGINE_H_
