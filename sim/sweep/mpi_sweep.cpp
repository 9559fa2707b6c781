#include "sweep/mpi_sweep.hpp"

#include "core/error.hpp"

#ifdef ZEROSIM_HAVE_MPI
#include <mpi.h>

#include <unistd.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>
#endif

namespace zerosim::sweep {

#ifndef ZEROSIM_HAVE_MPI

bool mpi_available()
{
  return false;
}

int run_sweep_mpi(const Plan&, const SweepOptions&, std::ostream&, std::ostream&)
{
  throw core::InputError("sweep --mpi: this zerosim was built without MPI (install libopenmpi-dev and openmpi-bin, "
                         "then rebuild: tools/dev.sh does both)");
}

#else

namespace {

using core::Json;

constexpr int TAG_REQUEST = 1; ///< a rank asks for a point (no data)
constexpr int TAG_POINT = 2;   ///< rank 0's answer: a point, or NO_POINT
constexpr int TAG_RESULT = 3;  ///< a rank's finished point (JSON text)
constexpr std::uint64_t NO_POINT = std::numeric_limits<std::uint64_t>::max();

std::string encode(std::size_t item, const core::WorkOutcome& o)
{
  Json j;
  j["point"] = item;
  j["status"] = static_cast<int>(o.status);
  j["payload"] = o.payload;
  j["message"] = o.message;
  j["wall_s"] = o.wall_s;
  return core::dump_json(j, -1);
}

void decode(const std::string& text, std::size_t& item, core::WorkOutcome& o)
{
  const Json j = Json::parse(text);
  item = j.at("point").get<std::size_t>();
  o.status = static_cast<core::WorkStatus>(j.at("status").get<int>());
  o.payload = j.at("payload").get<std::string>();
  o.message = j.at("message").get<std::string>();
  o.wall_s = j.at("wall_s").get<double>();
}

/// Rank 0's executor: its own pool draws from `next`; between turns it answers the other ranks' requests from the
/// same `next` (each other rank's first answer reserved up front) and hands their results to `done`.
void coordinate(const core::WorkSource& next, const core::WorkFunction& work, const core::WorkDone& done,
                const SweepOptions& options, int ranks, std::ostream& err)
{
  std::deque<std::uint64_t> reserved;
  for (int r = 1; r < ranks; ++r) {
    std::size_t item = 0;
    if (next(item))
      reserved.push_back(item);
  }
  std::vector<std::uint64_t> ran(static_cast<std::size_t>(ranks), 0);
  int stopped = 0;               // ranks told there is no point left
  std::uint64_t outstanding = 0; // points dealt to other ranks and not back yet
  auto service = [&]() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (!flag)
        return;
      if (st.MPI_TAG == TAG_REQUEST) {
        MPI_Recv(nullptr, 0, MPI_BYTE, st.MPI_SOURCE, TAG_REQUEST, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        std::uint64_t point = NO_POINT;
        std::size_t item = 0;
        if (!reserved.empty()) {
          point = reserved.front();
          reserved.pop_front();
        } else if (next(item)) {
          point = item;
        }
        MPI_Send(&point, 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_POINT, MPI_COMM_WORLD);
        if (point == NO_POINT) {
          ++stopped;
        } else {
          ++outstanding;
          ++ran[static_cast<std::size_t>(st.MPI_SOURCE)];
        }
      } else if (st.MPI_TAG == TAG_RESULT) {
        int count = 0;
        MPI_Get_count(&st, MPI_CHAR, &count);
        std::string text(static_cast<std::size_t>(count), '\0');
        MPI_Recv(text.data(), count, MPI_CHAR, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        std::size_t item = 0;
        core::WorkOutcome o;
        decode(text, item, o);
        --outstanding;
        done(item, o);
      } else {
        throw core::InternalError("sweep --mpi: a message with tag " + std::to_string(st.MPI_TAG));
      }
    }
  };
  core::PoolOptions pool;
  pool.jobs = options.jobs;
  pool.time_limit_s = options.point_time_limit_s;
  pool.tick = service;
  core::run_pool(
      next, work,
      [&](std::size_t item, const core::WorkOutcome& o) {
        ++ran[0];
        done(item, o);
      },
      pool);
  while (stopped < ranks - 1 || outstanding > 0) {
    service();
    ::usleep(5'000);
  }
  for (int r = 0; r < ranks; ++r)
    err << "sweep --mpi: rank " << r << " ran " << ran[static_cast<std::size_t>(r)] << " point"
        << (ran[static_cast<std::size_t>(r)] == 1 ? "" : "s")
        << (ran[static_cast<std::size_t>(r)] == 0 ? " (fewer points to run than ranks)" : "") << "\n";
}

/// Another rank: asks rank 0 for points as its pool frees a slot, runs them, sends each result back.
void serve(const Plan& plan, const SweepOptions& options)
{
  const Grid grid = plan.grid();
  core::WorkSource next = [](std::size_t& item) {
    MPI_Send(nullptr, 0, MPI_BYTE, 0, TAG_REQUEST, MPI_COMM_WORLD);
    std::uint64_t point = NO_POINT;
    MPI_Recv(&point, 1, MPI_UINT64_T, 0, TAG_POINT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (point == NO_POINT)
      return false;
    item = static_cast<std::size_t>(point);
    return true;
  };
  core::WorkFunction work = [&](std::size_t item) { return options.simulate(plan, grid.sets(item)); };
  core::WorkDone done = [](std::size_t item, const core::WorkOutcome& o) {
    std::string text = encode(item, o);
    MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
  };
  core::PoolOptions pool;
  pool.jobs = options.jobs;
  pool.time_limit_s = options.point_time_limit_s;
  core::run_pool(next, work, done, pool);
}

} // namespace

bool mpi_available()
{
  return true;
}

int run_sweep_mpi(const Plan& plan, const SweepOptions& options, std::ostream& out, std::ostream& err)
{
  MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int status = 0;
  try {
    if (rank == 0) {
      SweepOptions o = options;
      o.execute = [&](const core::WorkSource& next, const core::WorkFunction& work, const core::WorkDone& done) {
        coordinate(next, work, done, options, ranks, err);
      };
      err << "sweep --mpi: " << ranks << " ranks, " << options.jobs << " worker" << (options.jobs == 1 ? "" : "s")
          << " each\n";
      status = run_sweep(plan, o, out, err);
    } else {
      serve(plan, options);
    }
  } catch (const core::InputError& e) {
    // The other ranks wait for rank 0's answers: end the whole job, with bad input's status.
    err << e.what() << "\n";
    err.flush();
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return status;
}

#endif

} // namespace zerosim::sweep
