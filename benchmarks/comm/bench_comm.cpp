// bench_comm — accel's collectives against the raw MPI call, interleaved in one run (benchmarks/README.md).
//
//   mpirun -np 2 --bind-to none build/default/benchmarks/comm/bench_comm --rounds=7 --json=benchmarks/results/collectives.json
//
// For all_reduce, all_gather and reduce_scatter of floats (out of place), sizes S = 8 B, 32 B, ... 128 MiB (x4)
// and 256 MiB (--max-bytes=B stops lower; each rank holds two buffers of the largest size). S is
// nccl-tests' size: the per-rank buffer for all_reduce, the whole n x count buffer for all_gather and
// reduce_scatter. Each round times every candidate once, in an order rotated from round to round:
//   MPI          the blocking MPI call (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block) — the baseline
//   MPI_I*       the non-blocking call polled with MPI_Test, raw: the engine accel uses, without accel
//   accel        comm.all_reduce(stream, in, out) etc. on an idle worker stream: it runs on the calling thread
//   accel queued the same behind a task on the stream, synchronized each time: the hand-off to the stream's
//                worker and back (what a busy stream adds)
// A sample is 2 x `iters` untimed calls (the previous candidate's after-effects), a barrier, then `iters`
// back-to-back calls (iters fixed per size, the same on every rank),
// timed on each rank and averaged over the ranks (nccl-tests' default). Figures: time per call (median,
// min-max over the rounds), algbw = S / t and busbw = algbw x 2(n-1)/n (all_reduce) or (n-1)/n, and the
// ratio raw time / accel time (> 1: accel faster) and the time accel adds to the raw call, both round by
// round. The first call of each candidate is checked against the expected sum (nccl-tests' #wrong).
// --ops=reduce_scatter_in_place (not run by default) times reduce_scatter in place (MPI_IN_PLACE; accel's
// output at the rank's block of the input, as the data-parallel engine's ZeRO step calls it); its buffer
// keeps summing into itself between the timed calls (values grow, the work does not change).
#include <accel/comm.hpp>

#include "../bench_support.hpp"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using B = accel::CpuBackend;
using accel_bench::Summary;

struct Candidate {
  std::string name;
  std::function<void()> call;  // one operation
  std::vector<double> seconds;  // per call, per round (rank average)
  float* result = nullptr;      // where the checked values land (nullptr: the output buffer)
};

double rank_average(double x, MPI_Comm comm) {
  double sum = 0;
  int n = 1;
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  MPI_Comm_size(comm, &n);
  return sum / n;
}

/// Calls per sample: about 20 ms of work at an assumed 2 us + S / (1 GB/s), between 3 and 4000.
int iterations(double bytes) {
  const double estimate = 2e-6 + bytes / 1e9;
  return static_cast<int>(std::clamp(0.02 / estimate, 3.0, 4000.0));
}

/// Whether this rank may run on every online CPU (mpirun --bind-to none) rather than being pinned (Open
/// MPI binds each of <= 2 ranks to one core by default, which halves what a 2-core machine can do).
bool unbound() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return true;
  return CPU_COUNT(&set) >= sysconf(_SC_NPROCESSORS_ONLN);
}

std::string size_name(double bytes) {
  char buf[32];
  if (bytes >= 1 << 20) {
    std::snprintf(buf, sizeof buf, "%g MiB", bytes / (1 << 20));
  } else if (bytes >= 1 << 10) {
    std::snprintf(buf, sizeof buf, "%g KiB", bytes / (1 << 10));
  } else {
    std::snprintf(buf, sizeof buf, "%g B", bytes);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  accel::comm::init(argc, argv);
  accel_bench::Report report("collectives", argc, argv);
  const int rounds = accel_bench::take_rounds(argc, argv, 7);
  bool smoke = false;
  double max_bytes = 256.0 * (1 << 20);
  std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      smoke = true;
    } else if (a.rfind("--max-bytes=", 0) == 0) {
      max_bytes = std::atof(a.c_str() + 12);
    } else if (a.rfind("--ops=", 0) == 0) {
      ops.clear();
      std::string list = a.substr(6);
      for (std::size_t p = 0; p <= list.size();) {
        const std::size_t q = std::min(list.find(',', p), list.size());
        ops.push_back(list.substr(p, q - p));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "bench_comm: unknown argument %s (--rounds=N --json=FILE --smoke --max-bytes=B --ops=a,b)\n",
                   a.c_str());
      return 2;
    }
  }
  if (smoke) max_bytes = 4096;

  auto& comm = accel::comm::world<B>();
  MPI_Comm raw = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  const int n = comm.size(), rank = comm.rank();
  const int rounds_here = smoke ? 1 : rounds;
  report.set_rounds(rounds_here);
  // The command as run: the launcher is outside argv, so it is rebuilt from what the ranks see.
  int bound_here = unbound() ? 0 : 1, bound_any = 0;
  MPI_Allreduce(&bound_here, &bound_any, 1, MPI_INT, MPI_MAX, raw);
  report.prefix_command("mpirun -np " + std::to_string(n) + (bound_any != 0 ? "" : " --bind-to none"));
  if (bound_any != 0 && rank == 0) {
    std::fprintf(stderr, "bench_comm: ranks are bound to fewer CPUs than the machine has; run with --bind-to none\n");
  }
  report.note("ranks", std::to_string(n));
  report.note("engine", B{}.communication_backend_version());
  report.note("timing", "per call, averaged over the ranks; a sample = barrier + iters back-to-back calls");
  if (rank == 0) {
    report.print_header("MPI, " + std::to_string(n) + " ranks on one node, float32, out of place");
    std::printf("%s\n", B{}.communication_backend_version().c_str());
  }

  accel::cpu::Stream stream;
  const auto max_floats = static_cast<std::size_t>(max_bytes / 4);
  accel::Buffer<float, B> in(max_floats, stream), out(max_floats, stream);
  std::fill(in.data(), in.data() + max_floats, 1.0f);
  std::fill(out.data(), out.data() + max_floats, 0.0f);
  int wrong = 0;

  for (const std::string& op : ops) {
    if (rank == 0) {
      std::printf("\n%s (%d ranks)\n%10s %6s | %-24s %-24s %-24s %-24s | %-18s %-18s\n", op.c_str(), n, "size", "iters",
                  "MPI us", "MPI_I* us", "accel us", "accel queued us", "accel/MPI ratio", "busbw accel GB/s");
    }
    const bool all_reduce = op == "all_reduce";
    const double factor = all_reduce ? 2.0 * (n - 1) / n : double(n - 1) / n;
    std::vector<double> sizes;
    for (double b = 8; b <= max_bytes; b *= 4) sizes.push_back(b);
    if (sizes.back() < max_bytes) sizes.push_back(max_bytes);  // 256 MiB is not 8 x 4^k
    for (const double bytes : sizes) {
      // S: the per-rank buffer (all_reduce), the whole buffer (all_gather, reduce_scatter); floats per rank.
      const auto total = static_cast<std::size_t>(bytes / 4);
      if (!all_reduce && total < static_cast<std::size_t>(n)) continue;
      const std::size_t count = all_reduce ? total : total / static_cast<std::size_t>(n);
      const bool in_place = op == "reduce_scatter_in_place";
      const float expected = all_reduce || op.rfind("reduce_scatter", 0) == 0 ? static_cast<float>(n) : 1.0f;
      const int iters = smoke ? 2 : iterations(bytes);
      float* ip = in.data();
      float* op_out = out.data();
      std::vector<Candidate> cands;
      if (all_reduce) {
        cands.push_back({"MPI", [&] { MPI_Allreduce(ip, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw); }, {}});
        cands.push_back({"MPI_I*", [&] {
                           MPI_Request r;
                           MPI_Iallreduce(ip, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw, &r);
                           int done = 0;
                           while (done == 0) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                         }, {}});
        cands.push_back({"accel", [&] { comm.all_reduce(stream, ip, op_out, count, accel::Dtype::float32); }, {}});
        cands.push_back({"accel queued", [&] {
                           stream.enqueue([] {});
                           comm.all_reduce(stream, ip, op_out, count, accel::Dtype::float32);
                           stream.synchronize();
                         }, {}});
      } else if (op == "all_gather") {
        cands.push_back({"MPI", [&] { MPI_Allgather(ip, static_cast<int>(count), MPI_FLOAT, op_out, static_cast<int>(count), MPI_FLOAT, raw); }, {}});
        cands.push_back({"MPI_I*", [&] {
                           MPI_Request r;
                           MPI_Iallgather(ip, static_cast<int>(count), MPI_FLOAT, op_out, static_cast<int>(count), MPI_FLOAT, raw, &r);
                           int done = 0;
                           while (done == 0) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                         }, {}});
        cands.push_back({"accel", [&] { comm.all_gather(stream, ip, op_out, count, accel::Dtype::float32); }, {}});
        cands.push_back({"accel queued", [&] {
                           stream.enqueue([] {});
                           comm.all_gather(stream, ip, op_out, count, accel::Dtype::float32);
                           stream.synchronize();
                         }, {}});
      } else if (op == "reduce_scatter") {
        cands.push_back({"MPI", [&] { MPI_Reduce_scatter_block(ip, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw); }, {}});
        cands.push_back({"MPI_I*", [&] {
                           MPI_Request r;
                           MPI_Ireduce_scatter_block(ip, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw, &r);
                           int done = 0;
                           while (done == 0) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                         }, {}});
        cands.push_back({"accel", [&] { comm.reduce_scatter(stream, ip, op_out, count, accel::Dtype::float32); }, {}});
        cands.push_back({"accel queued", [&] {
                           stream.enqueue([] {});
                           comm.reduce_scatter(stream, ip, op_out, count, accel::Dtype::float32);
                           stream.synchronize();
                         }, {}});
      } else if (in_place) {  // in `out`: MPI leaves the result at its start, accel at the rank's block
        float* mine = op_out + count * static_cast<std::size_t>(rank);
        cands.push_back({"MPI", [&] { MPI_Reduce_scatter_block(MPI_IN_PLACE, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw); }, {}, op_out});
        cands.push_back({"MPI_I*", [&] {
                           MPI_Request r;
                           MPI_Ireduce_scatter_block(MPI_IN_PLACE, op_out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw, &r);
                           int done = 0;
                           while (done == 0) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                         }, {}, op_out});
        cands.push_back({"accel", [&, mine] { comm.reduce_scatter(stream, op_out, mine, count, accel::Dtype::float32); }, {}, mine});
        cands.push_back({"accel queued", [&, mine] {
                           stream.enqueue([] {});
                           comm.reduce_scatter(stream, op_out, mine, count, accel::Dtype::float32);
                           stream.synchronize();
                         }, {}, mine});
      } else {
        if (rank == 0) std::fprintf(stderr, "bench_comm: unknown op %s\n", op.c_str());
        return 2;
      }
      // Warm-up and check: one call each, the output against the expected value (nccl-tests' #wrong).
      for (Candidate& c : cands) {
        float* const result = c.result != nullptr ? c.result : op_out;
        if (in_place) {
          std::fill(op_out, op_out + total, 1.0f);
        } else {
          op_out[0] = -1.0f;
        }
        c.call();
        stream.synchronize();
        if (result[0] != expected || result[count - 1] != expected) ++wrong;
      }
      const std::size_t k = cands.size();
      for (int r = 0; r < rounds_here; ++r) {
        for (std::size_t j = 0; j < k; ++j) {
          Candidate& c = cands[(static_cast<std::size_t>(r) + j) % k];
          // Untimed calls first: what the previous candidate left behind is not charged to this one
          // (Open MPI's MPI_Iallgather, in some runs, slows the next ~10 large operations of any kind:
          // RESULTS.md, "Collectives", "Follow-up 3").
          if (!smoke) {
            MPI_Barrier(raw);
            for (int i = 0; i < 2 * iters; ++i) c.call();
            stream.synchronize();
          }
          MPI_Barrier(raw);
          const double t0 = accel_bench::now(accel_bench::Clock::wall);
          for (int i = 0; i < iters; ++i) c.call();
          stream.synchronize();
          const double t = (accel_bench::now(accel_bench::Clock::wall) - t0) / iters;
          c.seconds.push_back(rank_average(t, raw));
        }
      }
      if (rank != 0) continue;
      const auto us = [](const Candidate& c) { return accel_bench::scaled(accel_bench::summarize(c.seconds), 1e6); };
      for (const Candidate& c : cands) {
        const Summary t = accel_bench::summarize(c.seconds);
        report.point(c.name, op, bytes, "us per call", accel_bench::scaled(t, 1e6));
        report.point(c.name, op, bytes, "busbw GB/s", accel_bench::scaled(accel_bench::rate(c.seconds, bytes), factor / 1e9));
        report.point(c.name, op, bytes, "algbw GB/s", accel_bench::scaled(accel_bench::rate(c.seconds, bytes), 1 / 1e9));
      }
      const Summary ratio = accel_bench::ratio_per_round(cands[0].seconds, cands[2].seconds);
      const Summary ratio_queued = accel_bench::ratio_per_round(cands[0].seconds, cands[3].seconds);
      const Summary ratio_nb = accel_bench::ratio_per_round(cands[1].seconds, cands[2].seconds);
      // The latency accel adds to the raw call, round by round (the target: within 2 us idle).
      const auto added_us = [&](const Candidate& c) {
        std::vector<double> d;
        for (std::size_t r = 0; r < c.seconds.size(); ++r) d.push_back((c.seconds[r] - cands[0].seconds[r]) * 1e6);
        return accel_bench::summarize(d);
      };
      report.point("accel", op, bytes, "us added to MPI", added_us(cands[2]));
      report.point("accel queued", op, bytes, "us added to MPI", added_us(cands[3]));
      report.ratio("accel", "MPI", op, bytes, ratio);
      report.ratio("accel queued", "MPI", op, bytes, ratio_queued);
      report.ratio("accel", "MPI_I*", op, bytes, ratio_nb);
      const Summary busbw = accel_bench::scaled(accel_bench::rate(cands[2].seconds, bytes), factor / 1e9);
      std::printf("%10s %6d | %-24s %-24s %-24s %-24s | %-18s %-18s\n", size_name(bytes).c_str(), iters,
                  accel_bench::fmt(us(cands[0]), 2).c_str(), accel_bench::fmt(us(cands[1]), 2).c_str(),
                  accel_bench::fmt(us(cands[2]), 2).c_str(), accel_bench::fmt(us(cands[3]), 2).c_str(),
                  accel_bench::fmt(ratio, 3).c_str(), accel_bench::fmt(busbw, 3).c_str());
      std::fflush(stdout);
    }
  }
  int wrong_all = 0;
  MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, raw);
  if (rank == 0) {
    std::printf("\n#wrong: %d\n", wrong_all);
    report.note("wrong", std::to_string(wrong_all));
    report.write();
  }
  MPI_Comm_free(&raw);
  return wrong_all == 0 ? 0 : 1;
}
