// Internal to sim/engine: the replay of one step's task graphs on a SimGrid platform (StepReplay), shared by
// engine.cpp (simulate, simulate_graphs), step_replay.cpp (construction and the event loop) and
// step_replay_activities.cpp (tasks, transfers and collectives as SimGrid activities). docs/engine.md.
#pragma once

#include "engine/engine.hpp"

#include "collectives/nccl.hpp"
#include "compute/compute_model.hpp"
#include "platform/platform.hpp"

#include <simgrid/s4u.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::engine::replay {

namespace sg4 = simgrid::s4u;
using spec::Task;
using spec::TaskId;
using spec::TaskKind;

/// Extra DRAM traffic of a pageable (not pinned) copy: the CUDA driver stages it through a pinned
/// buffer, a host memcpy that reads and writes every byte once more (CUDA C Best Practices Guide,
/// "Pinned Memory"). The DMA itself is the same flow as a pinned copy's.
inline constexpr double PAGEABLE_STAGING_DRAM_FACTOR = 2.0;

/// Interference: the largest share of a GPU's SMs one collective's kernel is let take (a guard for GPUs with
/// few SMs; NCCL never launches more CTAs than it has channels).
inline constexpr double MAX_SM_SHARE = 0.5;
/// Interference: the work of the execution that holds a collective's SM share, in seconds at full speed. It is
/// suspended and cancelled when the collective ends, long before it could finish.
inline constexpr double SM_SHARE_HORIZON_S = 1e9;

/// What an activity's completion continues.
/// TASK_DELAY: a copy's or an NVMe task's latency before its data (index: jobs_); COLL_FLOW_DELAY: the route
/// latency of a group of a collective phase's flows before they start (index: flow_groups_).
/// INTERFERENCE: the SM share an NCCL kernel holds on a GPU while its collective runs (suspended and cancelled at
/// its end; nothing continues from it). TASK_STAGE: a COMPUTE task's SM-bound stage, which its memory-bound stage
/// follows (index: jobs_; docs/engine.md "Interference").
enum class Cont { TASK_PART, COLL_FLOW, COLL_DELAY, TASK_DELAY, COLL_FLOW_DELAY, INTERFERENCE, TASK_STAGE };

struct Token {
  Cont what = Cont::TASK_PART;
  int index = 0;                  ///< jobs_ (TASK_PART) or colls_ (COLL_*) index
  int track_a = -1, track_b = -1; ///< trace tracks the activity occupies
  std::string label;
  sg4::ActivityPtr activity; ///< kept alive until the activity completes (docs/simgrid-notes.md §7.1)
};

/// A task made of several activities (a flow and an execution, say): it ends when all have ended.
struct Job {
  int rank = 0; ///< index into ranks_
  TaskId task = 0;
  int parts = 0;
  double memory_stage_s = 0; ///< a COMPUTE task split by interference: the memory-bound seconds after its SM stage
};

/// One flow of a collective phase, and the flows of a phase that share one route latency.
struct Edge {
  sg4::Host* src = nullptr;
  sg4::Host* dst = nullptr;
  double bytes = 0;
  int ta = -1, tb = -1; ///< trace tracks
};
struct FlowGroup {
  int coll = 0;
  std::vector<Edge> edges;
};

/// One collective: the same ordinal collective of every simulated rank.
struct Collective {
  std::vector<TaskId> task_of_rank; ///< per simulated rank, -1 until it is reached
  int ready = 0;
  collectives::Plan plan;
  std::size_t phase = 0;
  int flows_left = 0;
  std::string name;
  int ctas = 0; ///< interference: the CTAs its kernel holds (collectives::nccl_ctas), 0 with interference off
  std::vector<sg4::ExecPtr> shares; ///< interference: per simulated rank, the execution holding the SM share
};

class StepReplay {
public:
  /// `given`: the graphs of the simulated ranks (node-major), or empty to build them from the schedule.
  StepReplay(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o,
             std::vector<spec::TaskGraph> given = {});

  Timeline run();

  void on_complete(const sg4::Activity& a);

private:
  /// Durations, collective ordinals and predecessors of every simulated task (step_replay.cpp).
  void prepare_tasks(const spec::Scenario& s, const workload::Workload& w);
  /// The first collective that started on some ranks but not all (for the stall message).
  std::string stalled_collective() const;

  double now() const { return sg4::Engine::get_clock() - t0_; }

  bool finished_at(std::size_t ri, std::size_t t) const { return done_[ri][t] != 0; }

  int track(const std::string& process, const std::string& name);

  /// The label is kept only for the trace's intervals (no string work otherwise: this is per activity).
  Token& token(Cont what, int index, const std::string& label, int ta = -1, int tb = -1);

  /// Attaches the token before the engine runs any of the activity (completions happen inside run()).
  void launch(Token& tok, sg4::ActivityPtr a);

  /// An execution of `amount` work units on `h` over `threads` cores; `bound` > 0 caps its rate (work units per
  /// second), max-min leaving the rest of the host to the executions beside it.
  sg4::ExecPtr exec(Token& tok, sg4::Host* h, double amount, int threads = 1, double bound = 0);

  void flow(Token& tok, sg4::Host* src, sg4::Host* dst, double bytes);

  void drain();

  void finish_task(int ri, TaskId t);

  std::string proc(const RankTimeline& r) const { return "node" + std::to_string(r.node); }

  void start_task(int ri, TaskId t);

  /// The data of a copy or an NVMe task, after its latency.
  void task_data(int j);

  /// A copy's data: one flow GPU <-> host memory over the GPU's PCIe link, its switch uplink and DRAM. A
  /// pageable copy (pin_memory false) adds the driver's staging memcpy as a concurrent DRAM flow of
  /// PAGEABLE_STAGING_DRAM_FACTOR x bytes; the task ends when both end.
  void copy_transfer(int j);

  /// The data of an NVMe task: the swap path is a RAID-0 volume of every drive of the node (DGX systems' /raid;
  /// docs/engine.md "NVMe"), so each of the d drives moves bytes / d: one flow
  /// between the volume and host memory over the drives' media link (d x the drive's read or write bandwidth),
  /// their PCIe links together and DRAM (platform::Platform::nvme).
  void nvme_transfer(int j);

  int new_job(int ri, TaskId t, int parts);

  /// A split COMPUTE task's memory-bound stage, on the GPU's memory side (Platform::gpu_memory).
  void memory_stage(int j);

  void start_collective(int idx);

  /// Interference: a collective that moves data holds an SM share on every simulated GPU while it runs.
  bool holds_share(const Collective& cl) const { return sm_sms_ > 0 && cl.ctas > 0 && !cl.plan.phases.empty(); }

  /// Interference: rank `r`'s GPU gets the SM share of collective `cl` while it runs: an execution of its own,
  /// bounded at ctas x the calibration's multiplier / SMs (at most MAX_SM_SHARE), so concurrent collectives stack.
  void take_sm_share(std::size_t r, Collective& cl);

  /// Interference: collective `cl` has ended: its share on rank `r`'s GPU is given back at this instant. The
  /// execution is suspended (its max-min variable gets penalty 0 and takes nothing from now on), then cancelled so
  /// that SimGrid reaps it at its next step. Both are needed in SimGrid 3.32: cancel() alone leaves the variable,
  /// and so the share, in the solver until the reaping; and each execution is suspended once only, because s4u's
  /// Activity::resume() does not clear the flag that suspend() checks, so an execution suspended, resumed and
  /// suspended again keeps running (the pool of reused executions this replaced held every share after a rank's
  /// second collective until the step ended; docs/engine.md "Interference").
  void release_sm_share(std::size_t r, Collective& cl);

  void run_phase(int idx);

  void start_flows(const FlowGroup& g);

  void phase_done(int idx);

  void next_phase(int idx);

  const spec::Scenario& s_;
  EngineOptions o_;
  int G_ = 1;
  bool symmetric_ = false;
  collectives::Fabric fabric_;
  collectives::Options copts_;
  Timeline timeline_;
  std::vector<std::vector<double>> duration_;
  std::vector<std::vector<double>> sm_duration_; ///< COMPUTE tasks: the SM-bound part (compute::TaskTime::sm_seconds)
  std::vector<std::vector<compute::CpuWork>> cpu_work_;
  std::vector<std::vector<int>> pending_;
  std::vector<std::vector<std::vector<TaskId>>> succ_;
  std::vector<std::vector<int>> coll_of_; ///< per rank and task: the collective's ordinal in issue order
  std::vector<Collective> colls_;
  std::deque<FlowGroup> flow_groups_;
  std::deque<Job> jobs_;
  std::deque<Token> tokens_;
  std::vector<sg4::ActivityPtr> graveyard_;
  int sm_sms_ = 0;                      ///< interference: the GPU's SMs (0: interference off)
  int sm_one_node_ctas_ = 0;            ///< interference: CTAs of a collective kernel inside one node
  double sm_factor_ = 1;                ///< interference: the calibration's multiplier on the CTAs
  bool serialize_communicators_ = true; ///< a group's collectives run one at a time (Mechanisms::communicator)
  std::deque<std::pair<int, TaskId>> ready_;
  std::vector<std::vector<char>> done_;
  std::map<std::string, int> track_ids_;
  std::unique_ptr<platform::Platform> platform_;
  double t0_ = 0;
  bool draining_ = false;
};

/// The replay SimGrid's static completion signal dispatches to (one engine per process: docs/simgrid-notes.md).
extern StepReplay* g_active;

} // namespace zerosim::engine::replay
