// Failures that must be loud and bounded, one scenario per run (CTest checks what is printed):
//   late-rank   3+ ranks, ACCEL_COMM_TIMEOUT short: the last rank sleeps past the timeout before an
//               all_reduce; the others get a CommError naming it (and the flight recorder); the job
//               then ends with MPI_Abort (a clean MPI_Finalize would wait for the late rank)
//   late-rank-after-p2p  3 ranks: the same, but ranks 0 and 1 exchanged a message first (their sequence
//               numbers run one ahead of rank 2's) and rank 1 is late: rank 1 is named, ranks 0 and 2
//               see each other waiting
//   p2p-silent  2 ranks: rank 0 waits for a message rank 1 never sends; the CommError names rank 1
//   death       a rank dies (SIGKILL) in the middle of a run under plain mpirun: the job ends non-zero,
//               long before the (default, 10-minute) timeout
//   log         ACCEL_COMM_LOG=1: the summary table at exit, from rank 0
//   mismatch    ACCEL_COMM_CHECK=1: the last rank passes another count to an all_reduce; every rank gets a
//               CommError naming the count, before any data moved
//   split-missing  ACCEL_COMM_TIMEOUT short: the last rank never calls split(); the others' split fails
//               with a CommError once the timeout passes (creating a communicator is bounded too)
//   abort       the last rank calls accel::comm::abort(reason, 3) while the others wait for it in an
//               all_reduce: theirs fails within milliseconds (ACCEL_COMM_TIMEOUT is 30 s) with a CommError
//               naming that rank and quoting the reason, and MPI_Abort ends the job with status 3
// Each rank prints "rank R: ..." lines that CTest matches.
#include <accel/comm.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

namespace {

using B = accel::CpuBackend;

int late_rank(bool after_p2p) {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<float, B> buf(1000, s);
  for (int i = 0; i < 3; ++i) c.all_reduce(s, buf);  // operations #1..#3 complete everywhere
  // after_p2p: rank 0 sends rank 1 a message the others do not see (#4 on ranks 0 and 1 only), so the
  // late all_reduce is #5 there and #4 elsewhere; rank 1 is late, and the ranks on time must still see
  // each other waiting in it (by its collective number).
  if (after_p2p && c.rank() == 0) c.send(s, buf, 1);
  if (after_p2p && c.rank() == 1) c.recv(s, buf, 0);
  s.synchronize();
  const int late = after_p2p ? 1 : c.size() - 1;
  // The ranks on time meet again after the failure (their own communicator, made while all were there):
  // the first to return would otherwise end the job with MPI_Abort before the others printed.
  auto on_time = c.split(c.rank() == late ? 1 : 0, c.rank());
  if (c.rank() == late) std::this_thread::sleep_for(std::chrono::seconds(6));
  try {
    c.all_reduce(s, buf);  // #4 (or #5): the late rank arrives after the others timed out
    s.synchronize();
    std::printf("rank %d: the late all_reduce completed\n", c.rank());
  } catch (const accel::comm::CommError& e) {
    std::string missing;
    for (const int r : e.missing_ranks()) missing += " " + std::to_string(r);
    // seq is this rank's numbering (sends and receives count where issued); collective is every rank's.
    std::printf("rank %d: caught CommError seq=%llu timed_out=%d missing=[%s ] op=%s rank=%d size=%d collective=%llu\n",
                c.rank(), static_cast<unsigned long long>(e.seq()), e.timed_out() ? 1 : 0, missing.c_str(),
                e.info().op.c_str(), e.info().rank, e.info().size, static_cast<unsigned long long>(e.collective()));
    std::fflush(stdout);
  } catch (const accel::TaskError& e) {
    std::printf("rank %d: caught TaskError: %s\n", c.rank(), e.what());
  }
  if (c.rank() != late) {
    on_time.barrier(s);
    s.synchronize();
  }
  return 0;
}

int p2p_silent() {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<std::int64_t, B> buf(16, s);
  if (c.rank() == 0) {
    try {
      c.recv(s, buf, 1);
      std::printf("rank 0: recv completed\n");
    } catch (const accel::comm::CommError& e) {
      std::printf("rank 0: caught CommError timed_out=%d peer=%d: %s\n", e.timed_out() ? 1 : 0, e.info().peer,
                  e.what());
    }
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // never sends
  }
  std::fflush(stdout);
  return 0;
}

int death() {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<double, B> buf(100, s);
  for (int i = 0; i < 5; ++i) {
    if (i == 3 && c.rank() == c.size() - 1) {
      std::printf("rank %d: dying\n", c.rank());
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    c.all_reduce(s, buf);
    s.synchronize();
  }
  std::printf("rank %d: finished all operations\n", c.rank());
  return 0;
}

int log_summary() {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<float, B> buf(256, s);
  for (int i = 0; i < 4; ++i) c.all_reduce(s, buf);
  accel::Buffer<float, B> out(256 * static_cast<std::size_t>(c.size()), s);
  c.all_gather(s, buf, out);
  s.synchronize();
  std::printf("rank %d: done\n", c.rank());
  return 0;
}

int mismatch() {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<float, B> buf(8, s);
  c.all_reduce(s, buf);  // #1 agrees
  const std::size_t count = c.rank() == c.size() - 1 ? 5 : 8;
  try {
    c.all_reduce(s, buf.data(), buf.data(), count, accel::Dtype::float32, accel::ReduceOp::sum);  // #2 does not
    std::printf("rank %d: all_reduce #2 completed\n", c.rank());
  } catch (const accel::comm::CommError& e) {
    std::printf("rank %d: caught CommError seq=%llu: %s\n", c.rank(), static_cast<unsigned long long>(e.seq()), e.what());
  }
  std::fflush(stdout);
  return 0;
}

int split_missing() {
  auto& c = accel::comm::world<B>();
  const int absent = c.size() - 1;
  if (c.rank() == absent) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    std::printf("rank %d: never called split\n", c.rank());
    std::fflush(stdout);
    return 0;
  }
  try {
    const auto part = c.split(0, c.rank());
    std::printf("rank %d: split completed (%d ranks)\n", c.rank(), part.size());
  } catch (const accel::comm::CommError& e) {
    std::printf("rank %d: caught CommError timed_out=%d: %s\n", c.rank(), e.timed_out() ? 1 : 0, e.what());
  }
  std::fflush(stdout);
  return 0;
}

int abort_job() {
  auto& c = accel::comm::world<B>();
  accel::cpu::Stream s;
  accel::Buffer<float, B> buf(1000, s);
  c.all_reduce(s, buf);  // #1 completes everywhere
  s.synchronize();
  const int last = c.size() - 1;
  if (c.rank() == last) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait in #2 by now
    accel::comm::abort("rank " + std::to_string(last) + " cannot go on (a test of accel::comm::abort)", 3);
  }
  try {
    c.all_reduce(s, buf);  // #2: the last rank never comes
    std::printf("rank %d: all_reduce #2 completed\n", c.rank());
  } catch (const accel::comm::CommError& e) {
    // May not get out: the aborting rank ends the job once this rank acknowledged (after its stderr).
    std::printf("rank %d: caught CommError missing=[%d] timed_out=%d\n", c.rank(),
                e.missing_ranks().empty() ? -1 : e.missing_ranks().front(), e.timed_out() ? 1 : 0);
  }
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(8));  // MPI_Abort ends this process before
  std::printf("rank %d: still running 8 s after the abort\n", c.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  accel::comm::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "late-rank") return late_rank(false);
  if (mode == "late-rank-after-p2p") return late_rank(true);
  if (mode == "p2p-silent") return p2p_silent();
  if (mode == "death") return death();
  if (mode == "log") return log_summary();
  if (mode == "mismatch") return mismatch();
  if (mode == "split-missing") return split_missing();
  if (mode == "abort") return abort_job();
  std::fprintf(stderr, "usage: comm_failures late-rank|late-rank-after-p2p|p2p-silent|death|log|mismatch|split-missing|abort\n");
  return 2;
}
