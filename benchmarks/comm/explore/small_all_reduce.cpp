// Where a small all_reduce's time goes, 2 ranks, interleaved in one process (rounds rotate the order):
//   mpi          MPI_Allreduce (the blocking call: the baseline of bench_comm)
//   raw          accel's schedule for 2 ranks by hand: MPI_Isend + MPI_Irecv to the peer, MPI_Testall
//                polled, MPI_Reduce_local — the floor for a non-blocking engine, without accel
//   accel        comm.all_reduce on an idle stream (run on this thread), flight recorder on (default)
//   accel_norec  the same on a communicator created with ACCEL_COMM_TRACE_SIZE=0
// Prints per-call time (median, min-max over rounds) and MPI_Allreduce / this (> 1: faster than MPI).
// Exploratory (RESULTS.md, "Small collectives: the run-at-once path"):
//
//   g++ -O3 -std=c++20 -DNDEBUG -DACCEL_HAS_MPI=1 -DOMPI_SKIP_MPICXX -Iinclude $(mpicxx --showme:compile) \
//       benchmarks/comm/explore/small_all_reduce.cpp -o /tmp/small_all_reduce $(mpicxx --showme:link) -pthread
//   mpirun -np 2 --bind-to none /tmp/small_all_reduce [iters=20000] [rounds=15] [floats=2]
#include <accel/comm.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  using B = accel::CpuBackend;
  accel::comm::init(argc, argv);
  auto& comm = accel::comm::world<B>();
  if (comm.size() != 2) {
    if (comm.rank() == 0) std::fprintf(stderr, "run with mpirun -np 2\n");
    accel::comm::finalize();
    return 2;
  }
  setenv("ACCEL_COMM_TRACE_SIZE", "0", 1);  // read when a communicator is created
  auto quiet = comm.split(0, comm.rank());
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  const int count = argc > 3 ? std::atoi(argv[3]) : 2;
  if (iters < 1 || rounds < 1 || count < 1 || count > 1024) {
    if (comm.rank() == 0) std::fprintf(stderr, "iters >= 1, rounds >= 1, 1 <= floats <= 1024\n");
    accel::comm::finalize();
    return 2;
  }
  accel::cpu::Stream stream;
  accel::Buffer<float, B> in(1024, stream), out(1024, stream);
  float* ip = in.data();
  float* op = out.data();
  std::fill(ip, ip + 1024, 1.0f);
  const int peer = 1 - comm.rank();
  std::vector<float> received(1024);
  const std::size_t n = static_cast<std::size_t>(count);
  const std::vector<std::pair<std::string, std::function<void()>>> candidates = {
      {"mpi", [&] { MPI_Allreduce(ip, op, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"raw",
       [&] {
         MPI_Request requests[2];
         MPI_Isend(ip, count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD, &requests[0]);
         MPI_Irecv(received.data(), count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD, &requests[1]);
         std::memcpy(op, ip, n * sizeof(float));
         int done = 0;
         while (done == 0) MPI_Testall(2, requests, &done, MPI_STATUSES_IGNORE);
         MPI_Reduce_local(received.data(), op, count, MPI_FLOAT, MPI_SUM);
       }},
      {"accel", [&] { comm.all_reduce(stream, ip, op, n, accel::Dtype::float32); }},
      {"accel_norec", [&] { quiet.all_reduce(stream, ip, op, n, accel::Dtype::float32); }},
  };
  const std::size_t k = candidates.size();
  std::vector<std::vector<double>> seconds(k);
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t c = (j + static_cast<std::size_t>(r)) % k;
      for (int i = 0; i < iters / 4; ++i) candidates[c].second();  // the previous candidate's after-effects
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) candidates[c].second();
      const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      double sum = 0;
      MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      seconds[c].push_back(sum / 2);
    }
  }
  if (op[0] != 2.0f) std::fprintf(stderr, "rank %d: wrong sum %g\n", comm.rank(), static_cast<double>(op[0]));
  if (comm.rank() == 0) {
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (std::size_t c = 0; c < k; ++c) {
      std::vector<double> ratio;
      for (int r = 0; r < rounds; ++r) ratio.push_back(seconds[0][static_cast<std::size_t>(r)] / seconds[c][static_cast<std::size_t>(r)]);
      const auto [lo, hi] = std::minmax_element(seconds[c].begin(), seconds[c].end());
      const auto [rlo, rhi] = std::minmax_element(ratio.begin(), ratio.end());
      std::printf("%-12s %.3f us (%.3f-%.3f)  MPI_Allreduce/this %.3f (%.3f-%.3f)\n", candidates[c].first.c_str(),
                  median(seconds[c]) * 1e6, *lo * 1e6, *hi * 1e6, median(ratio), *rlo, *rhi);
    }
  }
  accel::comm::finalize();
  return 0;
}
