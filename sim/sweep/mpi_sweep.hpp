// `mpirun -np N zerosim sweep ... --mpi` (docs/sweep.md "MPI"): the points of one sweep dealt dynamically to the
// ranks of an MPI job, each rank running its points in forked workers (core::run_pool) as a local sweep does. Rank 0
// deals the points, runs its share and writes the files, which are the local run's apart from wall_s. Built when
// CMake finds MPI (Debian's libopenmpi-dev); otherwise --mpi is refused with a message.
#pragma once

#include "sweep/sweep.hpp"

#include <ostream>

namespace zerosim::sweep {

/// True when this zerosim was built with MPI.
bool mpi_available();

/// Runs the sweep of `plan` across the ranks of MPI_COMM_WORLD (MPI_Init and MPI_Finalize here). On rank 0 it is
/// run_sweep with an executor that deals the points: each other rank's first point is reserved for it, so every rank
/// runs at least one point when there are as many points as ranks, and the count each rank ran is logged. Returns
/// run_sweep's status on rank 0 and 0 on the others. Throws core::InputError when built without MPI.
int run_sweep_mpi(const Plan& plan, const SweepOptions& options, std::ostream& out, std::ostream& err);

} // namespace zerosim::sweep
