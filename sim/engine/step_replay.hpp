// Internal to sim/engine: the replay of one step's task graphs on a SimGrid platform (StepReplay), shared by
// engine.cpp (simulate, simulate_graphs), step_replay.cpp (construction and the event loop) and
// step_replay_activities.cpp (tasks, transfers and collectives as SimGrid activities). docs/engine.md.
#pragma once

#include "engine/engine.hpp"

#include "collectives/nccl.hpp"
#include "compute/compute_model.hpp"
#include "platform/platform.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
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
/// INTERFERENCE: the SM share an NCCL kernel holds on a GPU while its collective or transfer runs (suspended and
/// cancelled at its end; nothing continues from it). TASK_STAGE: a COMPUTE task's SM-bound stage, which its
/// memory-bound stage follows (index: jobs_; docs/engine.md "Interference"). SHARED_DELAY: a collective delay that
/// several collectives wait for (index: shared_delays_). P2P_DELAY, P2P_FLOW: a SEND/RECV transfer's route latency
/// and its data (index: transfers_).
enum class Cont {
  TASK_PART,
  COLL_FLOW,
  COLL_DELAY,
  TASK_DELAY,
  COLL_FLOW_DELAY,
  INTERFERENCE,
  TASK_STAGE,
  SHARED_DELAY,
  P2P_DELAY,
  P2P_FLOW,
};

struct Token {
  Cont what = Cont::TASK_PART;
  int index = 0;                  ///< jobs_ (TASK_PART), colls_ (COLL_*) or transfers_ (P2P_*) index
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

/// A communicator (docs/engine.md "How collectives are matched"): a group instance, (CommGroup kind, instance of
/// spec::group_instance, -1), or the two ranks of a point-to-point pair, (P2P_COMMUNICATOR, lower rank, higher rank):
/// PyTorch gives each pair that sends and receives a communicator of its own (ProcessGroupNCCL getKeySendRecv).
using Communicator = std::tuple<int, int, int>;
inline constexpr int P2P_COMMUNICATOR = -1;

/// One collective: the k-th call on one group instance (its communicator) of every simulated rank of the instance.
struct Collective {
  spec::CommGroup group = spec::CommGroup::WORLD;
  int instance = 0;                                             ///< spec::group_instance
  int ordinal = 0;                                              ///< k: its place among the calls on its communicator
  spec::CollectiveKind kind = spec::CollectiveKind::ALL_REDUCE; ///< the first issuer's (every member's must match)
  std::vector<int> members;                ///< the simulated ranks of the instance (indices into ranks_), ascending
  std::vector<TaskId> task_of_member;      ///< per member, its task; -1 until it is reached
  int issued = 0;                          ///< members whose graphs issue it (checked before the replay)
  int ready = 0;                           ///< members that have reached it
  const collectives::Plan* plan = nullptr; ///< the instance's flows (StepReplay::instance_plan)
  std::size_t phase = 0;
  int flows_left = 0;
  std::string name;
  int ctas = 0; ///< interference: the CTAs its kernel holds (collectives::nccl_ctas), 0 with interference off
  std::vector<sg4::ExecPtr> shares; ///< interference: per member, the execution holding the SM share
};

/// One point-to-point transfer: the k-th SEND of rank `sender` to rank `receiver` and the k-th RECV of `receiver`
/// from `sender`, one flow between the two GPUs once every simulated side has reached it (docs/engine.md "SEND and
/// RECV"). In the symmetric replay a side off the simulated nodes stands behind the other side's NIC, as a collective's
/// remote ranks do.
struct Transfer {
  int sender = -1, receiver = -1;     ///< global ranks
  int send_rank = -1, recv_rank = -1; ///< indices into ranks_, -1 for a side the replay does not simulate
  TaskId send_task = -1, recv_task = -1;
  int expected = 0;                              ///< simulated sides
  bool send_issued = false, recv_issued = false; ///< the graphs issue its SEND, its RECV (checked before the replay)
  int ready = 0;                                 ///< simulated sides that have reached it
  std::int64_t bytes = 0;
  std::string name;
  sg4::Host* src = nullptr;
  sg4::Host* dst = nullptr;
  int ta = -1, tb = -1; ///< trace tracks (NICs)
  int ctas = 0;         ///< interference: the CTAs of its send and receive kernels (collectives::nccl_p2p_ctas)
  std::vector<sg4::ExecPtr> shares; ///< interference: the sender's and the receiver's, where simulated
};

/// A delay several collectives wait for: the same latency starting at the same instant for the instances of one
/// group kind's k-th call in one phase (one timer execution where one collective spanned every instance before).
struct SharedDelay {
  std::vector<std::pair<Cont, int>> then; ///< COLL_FLOW_DELAY (flow_groups_) or COLL_DELAY (colls_), in order
};

class StepReplay {
public:
  /// `nodes`: the simulated nodes, ascending (every node, or engine::simulated_nodes's for the symmetric replay: the
  /// others stand behind their NICs); `graphs`: one per rank of those nodes, node-major; `copy_of` as
  /// simulate_graphs's, indexed like `graphs`.
  StepReplay(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o, std::vector<int> nodes,
             std::vector<spec::TaskGraph> graphs, const std::vector<int>& copy_of);

  Timeline run();

  void on_complete(const sg4::Activity& a);

private:
  /// Durations, collectives and transfers, and predecessors of every simulated task (step_replay.cpp).
  void prepare_tasks(const spec::Scenario& s, const workload::Workload& w);
  /// Rank ri's COLLECTIVE task t: its collective (colls_), created at the first member that issues it; checked
  /// against the calls of the other members (kind).
  int match_collective(std::size_t ri, TaskId t, std::map<Communicator, int>& calls);
  /// Rank ri's SEND or RECV task t: its transfer (transfers_), created at the first side that issues it.
  int match_transfer(std::size_t ri, TaskId t, std::map<std::pair<int, int>, int>& pairs);
  /// Every collective and transfer is issued by every simulated rank it involves (else the replay would stall).
  void check_matched() const;
  /// The index into ranks_ of global rank `rank`, -1 when the replay does not simulate it (the simulated ranks are
  /// those of the simulated nodes, node-major).
  int simulated_index(int rank) const;
  /// Whether the replay simulates node `node` (else it stands behind the simulated nodes' NICs).
  bool simulated(int node) const { return std::binary_search(nodes_.begin(), nodes_.end(), node); }
  spec::Gpu gpu_of(int rank) const { return spec::Gpu{rank / G_, rank % G_}; }
  /// The instance of group kind `g` of GPU `gpu` (spec::group_instance, with the pipeline's stages).
  int instance_of(spec::CommGroup g, spec::Gpu gpu) const
  {
    return spec::group_instance(g, gpu, G_, fabric_.tensor_parallel, ranks_per_stage_);
  }
  /// Whether global rank `rank` belongs to its instance of group kind `g`: every rank does, but for EMBEDDING, whose
  /// pairs are the first and the last stage's ranks.
  bool in_group(spec::CommGroup g, int rank) const;
  /// The first collective or transfer that some of its ranks reached and others did not (for the stall message).
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

  /// The plan of collective `kind` of `bytes` on instance `instance` of group kind `group`: the flows of the plan of
  /// every instance (collectives::plan) whose source GPU is in it, with the plan's latencies. Planned once per kind,
  /// size and group kind (plans_).
  const collectives::Plan* instance_plan(spec::CollectiveKind kind, std::int64_t bytes, spec::CommGroup group,
                                         int instance);

  /// Interference: a collective that moves data holds an SM share on every simulated GPU of its group while it runs.
  bool holds_share(const Collective& cl) const { return sm_sms_ > 0 && cl.ctas > 0 && !cl.plan->phases.empty(); }

  /// Interference: rank `r`'s GPU gets the SM share of a kernel of `ctas` CTAs while it runs: an execution of its
  /// own, bounded at ctas x the calibration's multiplier / SMs (at most MAX_SM_SHARE), so concurrent kernels stack.
  sg4::ExecPtr take_sm_share(std::size_t r, int ctas, const std::string& name);

  /// Interference: the kernel has ended: its share `x` is given back at this instant. The
  /// execution is suspended (its max-min variable gets penalty 0 and takes nothing from now on), then cancelled so
  /// that SimGrid reaps it at its next step. Both are needed in SimGrid 3.32: cancel() alone leaves the variable,
  /// and so the share, in the solver until the reaping; and each execution is suspended once only, because s4u's
  /// Activity::resume() does not clear the flag that suspend() checks, so an execution suspended, resumed and
  /// suspended again keeps running (the pool of reused executions this replaced held every share after a rank's
  /// second collective until the step ended; docs/engine.md "Interference").
  void release_sm_share(sg4::ExecPtr& x);

  /// A collective's delay of `seconds` on the timer host, then `then` (COLL_FLOW_DELAY or COLL_DELAY) of `index`.
  /// The instances of one group kind's k-th call waiting the same delay from the same instant in the same phase share
  /// one timer execution (SharedDelay): the same times, and the activities of one collective spanning them all.
  void collective_delay(const Collective& cl, Cont then, int index, double seconds, const std::string& label);

  /// A SEND/RECV transfer whose simulated sides have all reached it: its SM shares, its route latency, its flow.
  void start_transfer(int idx);
  void transfer_flow(int idx);
  void transfer_done(int idx);

  void run_phase(int idx);

  void start_flows(const FlowGroup& g);

  void phase_done(int idx);

  void next_phase(int idx);

  const spec::Scenario& s_;
  EngineOptions o_;
  int G_ = 1;
  /// The simulated nodes, ascending; the others stand behind their NICs (symmetric_).
  std::vector<int> nodes_;
  bool symmetric_ = false;  ///< some node is not simulated
  int ranks_per_stage_ = 0; ///< D x t with a pipeline (spec::group_instance's), 0 without
  collectives::Fabric fabric_;
  collectives::Options copts_;
  Timeline timeline_;
  std::vector<std::vector<double>> duration_;
  std::vector<std::vector<double>> sm_duration_; ///< COMPUTE tasks: the SM-bound part (compute::TaskTime::sm_seconds)
  std::vector<std::vector<compute::CpuWork>> cpu_work_;
  std::vector<std::vector<int>> pending_;
  std::vector<std::vector<std::vector<TaskId>>> succ_;
  /// Per rank and task: a COLLECTIVE's index into colls_, a SEND's or RECV's into transfers_, else -1.
  std::vector<std::vector<int>> coll_of_;
  std::vector<Collective> colls_;
  std::map<std::pair<spec::CommGroup, int>, std::vector<int>> coll_by_comm_; ///< colls_ by ordinal, per instance
  std::map<std::pair<spec::CommGroup, int>, std::vector<int>> members_;      ///< simulated ranks of each instance
  std::vector<Transfer> transfers_;
  std::map<std::tuple<int, int, int>, int> transfer_of_; ///< (sender, receiver, ordinal) -> transfers_
  /// Per collective kind, size and group kind: the plan of every instance, split by instance.
  std::map<std::tuple<spec::CollectiveKind, std::int64_t, spec::CommGroup>, std::map<int, collectives::Plan>> plans_;
  std::deque<SharedDelay> shared_delays_;
  /// The shared delays started at the current instant: (group kind, ordinal, phase, continuation, seconds) ->
  /// shared_delays_ (emptied when the clock moves).
  std::map<std::tuple<spec::CommGroup, int, std::size_t, Cont, double>, int> open_delays_;
  double open_delays_at_ = -1;
  std::deque<FlowGroup> flow_groups_;
  std::deque<Job> jobs_;
  std::deque<Token> tokens_;
  std::vector<sg4::ActivityPtr> graveyard_;
  int sm_sms_ = 0;                      ///< interference: the GPU's SMs (0: interference off)
  int sm_one_node_ctas_ = 0;            ///< interference: CTAs of a collective kernel inside one node
  int world_ = 1;                       ///< ranks of the job
  double sm_factor_ = 1;                ///< interference: the calibration's multiplier on the CTAs
  bool serialize_communicators_ = true; ///< a communicator's kernels run one at a time (Mechanisms::communicator)
  /// The GPU pairs on different simulated nodes that SEND/RECV transfers join (routed besides the planner's).
  std::vector<std::pair<spec::Gpu, spec::Gpu>> p2p_pairs_;
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
