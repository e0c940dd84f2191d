// The GPU peer of bench/comm/run-gpu: a raw ncclAllReduce loop, one GPU per
// MPI rank, timed like `anxin bench comm --engine nccl` (each call followed
// by a stream synchronisation), for float sums from 8 B to 1 GiB by x8.
// Prints "size us_per_call" per line on rank 0. Prepared; not yet run on a GPU.
//
//   mpirun -np 8 comm_nccl_raw_allreduce [ITERS]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(cond, what)                                     \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "nccl_raw_allreduce: %s\n", what); \
      MPI_Abort(MPI_COMM_WORLD, 1);                           \
    }                                                         \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1, local = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  CHECK(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0, "no CUDA device");
  CHECK(cudaSetDevice(local % devices) == cudaSuccess, "cudaSetDevice");
  ncclUniqueId id;
  if (rank == 0) CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, ranks, id, rank) == ncclSuccess, "ncclCommInitRank");
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  const size_t max_bytes = size_t{1} << 30;
  void *send = nullptr, *recv = nullptr;
  CHECK(cudaMalloc(&send, max_bytes) == cudaSuccess, "cudaMalloc");
  CHECK(cudaMalloc(&recv, max_bytes) == cudaSuccess, "cudaMalloc");
  CHECK(cudaMemset(send, 0, max_bytes) == cudaSuccess, "cudaMemset");
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
    const size_t count = bytes / sizeof(float);
    for (int w = 0; w < 5; ++w) {
      CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream) == ncclSuccess,
            "ncclAllReduce");
      CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream) == ncclSuccess,
            "ncclAllReduce");
      CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
    }
    double us = (MPI_Wtime() - t0) / iters * 1e6, slowest = 0;
    MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%zu %.3f\n", bytes, slowest);
  }
  ncclCommDestroy(comm);
  cudaFree(send);
  cudaFree(recv);
  MPI_Finalize();
  return 0;
}
