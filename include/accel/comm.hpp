// accel/comm.hpp — collectives across ranks: accel/comm, opt-in (CMake target accel::comm).
//
//   accel::comm::init(argc, argv);                          // under mpirun, or a torchrun-style launch
//   auto& world = accel::comm::world<accel::CpuBackend>();  // MPI; CudaBackend: NCCL
//   world.all_reduce(stream, grads, accel::ReduceOp::avg);  // stream first, in stream order
//
// What is here: the Communicator concept and Collectives<B> (concepts/comm.hpp); the operations every
// communicator offers (comm/communicator.hpp); MpiCommunicator for CpuBackend (comm/mpi.hpp) and
// NcclCommunicator for CudaBackend (comm/nccl.hpp), where the build has them; AnyCommunicator for
// AnyBackend (comm/any_communicator.hpp); init / world / finalize (comm/launch.hpp); CommError and the
// flight recorder. Environment: ACCEL_COMM_TIMEOUT, ACCEL_COMM_TRACE_SIZE, ACCEL_COMM_LOG, ACCEL_COMM_CHECK
// (CommConfig::from_env() reads and checks them: comm/comm_config.hpp), ACCEL_COMM_INIT_FILE (comm/nccl.hpp).
#pragma once

#include <accel/comm/any_communicator.hpp>
#include <accel/comm/comm_config.hpp>
#include <accel/comm/comm_error.hpp>
#include <accel/comm/communicator.hpp>
#include <accel/comm/flight_recorder.hpp>
#include <accel/comm/launch.hpp>
#include <accel/comm/launch_info.hpp>
#include <accel/comm/mpi.hpp>
#if defined(ACCEL_HAS_CUDA)
#include <accel/comm/nccl.hpp>
#endif
#include <accel/concepts/comm.hpp>
#include <accel/core/reduce_op.hpp>
