// A test-only extension through the schedule's seams (issue 31): an ordering policy defined here, registered in the
// policy table (schedule/step_units.hpp) and composed over a hand-made two-stage pipeline whose units carry
// SEND/RECV, then replayed by the engine. Nothing outside this file and its registration changes. The expected step
// times are the schedules' critical paths, written from the kernel and transfer times measured alone.
#include "engine/engine.hpp"
#include "physics_test_util.hpp"
#include "schedule/step_units.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;
using namespace zerosim::physics_test;
using spec::Task;
using spec::TaskGraph;
using spec::TaskKind;

namespace {

/// All forwards, then all backwards in reverse micro-batch order (GPipe's order, Huang et al. 2019).
void forwards_then_backwards(schedule::StepUnits& u, const schedule::StepShape& shape)
{
  u.prologue();
  for (int mb = 0; mb < shape.micro_batches; ++mb)
    for (int c = 0; c < shape.chunks; ++c)
      u.forward(mb, c);
  for (int mb = shape.micro_batches - 1; mb >= 0; --mb)
    for (int c = shape.chunks - 1; c >= 0; --c)
      u.backward(mb, c);
  u.epilogue();
}

constexpr const char* POLICY = "test: all forwards, then all backwards in reverse";

/// One stage of a two-stage pipeline, one GPU each (stage s is rank s): a forward kernel of F FLOPs and a backward
/// of 2F per micro-batch; stage 0 sends its activations (A bytes) to stage 1 after each forward and receives their
/// gradient before each backward. Transfers are on the compute stream, blocking it as a blocking send/recv does.
class TwoStage : public schedule::StepUnits {
public:
  TwoStage(int stage, double flops, std::int64_t bytes) : stage_(stage), flops_(flops), bytes_(bytes)
  {
    graph.rank = stage;
  }

  void prologue() override {}
  void forward(int mb, int /*chunk*/) override
  {
    const std::string m = "mb" + std::to_string(mb);
    if (stage_ == 1)
      add(p2p(TaskKind::RECV, m + ".recv_activations", 0), mb);
    add(kernel_task(m + ".fwd", flops_), mb);
    if (stage_ == 0)
      add(p2p(TaskKind::SEND, m + ".send_activations", 1), mb);
  }
  void backward(int mb, int /*chunk*/) override
  {
    const std::string m = "mb" + std::to_string(mb);
    if (stage_ == 0)
      add(p2p(TaskKind::RECV, m + ".recv_gradients", 1), mb);
    add(kernel_task(m + ".bwd", 2 * flops_), mb);
    if (stage_ == 1)
      add(p2p(TaskKind::SEND, m + ".send_gradients", 0), mb);
  }
  void epilogue() override {}

  TaskGraph graph;

private:
  Task p2p(TaskKind kind, const std::string& name, int peer) const { return p2p_task(kind, name, peer, bytes_); }
  void add(Task t, int mb)
  {
    t.micro_step = mb;
    graph.tasks.push_back(std::move(t));
  }

  int stage_;
  double flops_;
  std::int64_t bytes_;
};

/// Both stages' graphs under `policy`, over `m` micro-batches.
std::vector<TaskGraph> pipeline(const std::string& policy, int m, double flops, std::int64_t bytes)
{
  std::vector<TaskGraph> graphs;
  for (int stage = 0; stage < 2; ++stage) {
    TwoStage units(stage, flops, bytes);
    schedule::compose_step(units, schedule::StepShape{m, 1}, policy);
    units.graph.micro_steps = m;
    graphs.push_back(std::move(units.graph));
  }
  return graphs;
}

double step_time(const engine::Timeline& t)
{
  double end = 0;
  for (const engine::RankTimeline& r : t.ranks)
    for (const engine::TaskTime& x : r.times)
      end = std::max(end, x.end);
  return end;
}

} // namespace

TEST_CASE("an ordering policy registered by a test composes a two-stage pipeline the engine replays")
{
  // Registered once per process (doctest runs the test case once per subcase); a second registration is refused.
  static const bool registered = (schedule::register_ordering_policy(POLICY, forwards_then_backwards), true);
  REQUIRE(registered);
  CHECK_THROWS_AS(schedule::register_ordering_policy(POLICY, forwards_then_backwards), core::InternalError);

  // One node of two A100s on NVLink at 100 GB/s (1 us): a 64 MB transfer alone takes T_p = 2 x 1 us + S / B
  // (groups_test.cpp's formula); each kernel's time alone is measured (T_f for F, T_b for 2F). Interference off: no
  // kernel overlaps a transfer of its own rank here, and the figures stay those measured alone.
  spec::Scenario s =
      load("  node:\n    name: pipeline test node\n"
           "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
           "    gpus: 2\n    nvlink: {bandwidth: 100 GB/s, latency: 1 us}\n"
           "    pcie: {bandwidth: 25 GB/s, gpus_per_switch: 1, switch_uplink: 25 GB/s, latency: 1 us}\n"
           "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: 300 GB/s}\n"
           "  nodes: 1\n  gpus_per_node: 2\n",
           TRAIN);
  s.mechanisms.interference = false;
  const double F = 1e13;
  const std::int64_t S = 64'000'000;
  const int m = 4;
  const double T_p = 2 * s.cluster.node.nvlink.latency_s + static_cast<double>(S) / s.cluster.node.nvlink.bandwidth_Bps;
  CHECK(T_p == doctest::Approx(0.000642));
  const double T_f = task_time(engine::simulate_graphs(s, EMPTY, {graph_of({kernel_task("f", F)}), TaskGraph{}}), 0, 0);
  const double T_b =
      task_time(engine::simulate_graphs(s, EMPTY, {graph_of({kernel_task("b", 2 * F)}), TaskGraph{}}), 0, 0);
  REQUIRE(T_f > 10 * T_p);

  SUBCASE("all forwards, then all backwards: (m + 1)(T_f + T_b) + 2 m T_p")
  {
    // Stage 0 runs F, send per micro-batch back to back; stage 1 receives micro-batch k as stage 0 finishes
    // sending it, so each stage's forward period is T_f + T_p and stage 1 ends its last forward at
    // m (T_f + T_p) + T_f. The backwards mirror it from there with period T_b + T_p, and stage 0's last backward
    // follows the last gradient: m (T_f + T_p) + T_f + m (T_b + T_p) + T_b (the p = 2 pipeline's bubble,
    // (p - 1)(T_f + T_b), plus the transfers).
    const engine::Timeline t = engine::simulate_graphs(s, EMPTY, pipeline(POLICY, m, F, S));
    CHECK(step_time(t) == doctest::Approx((m + 1) * (T_f + T_b) + 2 * m * T_p).epsilon(1e-6));
    // The order is the policy's: stage 0 issues every forward before the first backward, the last micro-batch's
    // backward first.
    const TaskGraph& g0 = t.ranks[0].graph;
    CHECK(g0.tasks[2 * static_cast<std::size_t>(m)].name == "mb3.recv_gradients");
    CHECK(g0.tasks.back().name == "mb0.bwd");
  }
  SUBCASE("the sequential policy on the same units: 2 m (T_f + T_b + T_p)")
  {
    // One micro-batch at a time through both stages and back: F on stage 0, the transfer, F and B on stage 1, the
    // transfer back, B on stage 0, then the next micro-batch.
    const engine::Timeline t = engine::simulate_graphs(s, EMPTY, pipeline(schedule::SEQUENTIAL_POLICY, m, F, S));
    CHECK(step_time(t) == doctest::Approx(m * (2 * T_f + 2 * T_b + 2 * T_p)).epsilon(1e-6));
  }
  CHECK_THROWS_AS(pipeline("no such policy", m, F, S), core::InternalError);
}
