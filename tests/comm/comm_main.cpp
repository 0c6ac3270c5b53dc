// The main of accel/comm's multi-rank test programs: every rank runs the same doctest cases in the
// same order (their collectives match), rank 0 reports successes, every rank reports its failures, and
// the program's exit status is that rank's (mpirun's is non-zero when any rank failed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <accel/comm.hpp>

#include <doctest/doctest.h>

int main(int argc, char** argv) {
  const accel::comm::LaunchInfo& launch = accel::comm::init(argc, argv);
  doctest::Context context(argc, argv);
  context.setOption("no-colors", true);
  if (launch.rank != 0) context.setOption("minimal", true);
  const int result = context.run();
  accel::comm::finalize();
  return result;
}
