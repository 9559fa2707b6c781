// The ranks that stand for all in ZeRO-1/2's memory (schedule::memory_ranks, docs/schedule.md "Ranks that can
// differ"): on a small GPT whose partitions cut the flat buffer inside and across tensors, the largest peak over the
// few ranks memory_ranks names is the largest over every rank, each rank's graph built and replayed as `zerosim run`
// replays the ranks it does not simulate. The expected value is the brute force over all ranks, not a formula.
#include "memory/memory_model.hpp"
#include "run/memory_analysis.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;

namespace {

constexpr std::int64_t GiB = 1024LL * 1024 * 1024;

/// A 4-block GPT (h 256, ffn 1024, vocab 5000, untied head) on `nodes` x 8 GPUs, bf16 AdamW, DeepSpeed stage
/// `stage`, micro-batch 1 x 64 tokens, 2 micro-steps, IPG buckets of `bucket` elements (small, so that the partitions
/// fall in several buckets).
spec::Scenario gpt(int stage, int nodes, std::int64_t bucket)
{
  spec::Scenario s;
  s.name = "memory-ranks";
  auto& m = s.model;
  m.name = "gpt-ranks";
  m.layers = 4;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 1024;
  m.vocab = 5000;
  m.max_position = 512;
  s.cluster.nodes = nodes;
  s.cluster.gpus_per_node = 8;
  s.cluster.node.gpus = 8;
  s.cluster.node.gpu.memory_bytes = 80 * GiB;
  s.cluster.node.cpu.memory_bytes = 1024 * GiB;
  m.tied_embeddings = false; // the LM head ends the flat buffer: the last ranks' partitions hold its gradients
  // Few activations (64 tokens a micro-step), so that the gradient buffers a partition touches decide the peak.
  s.training.seq_len = 64;
  s.training.micro_batch = 1;
  s.training.grad_accum = 2;
  s.training.global_batch = 2LL * s.world();
  s.training.precision = spec::Precision::BF16;
  s.deepspeed.zero.stage = stage;
  s.deepspeed.zero.reduce_bucket_size = bucket;
  return s;
}

struct Peak {
  std::int64_t gpu = -1, reserved = 0, cpu_per_node = 0;
  int rank = -1;
};

/// The largest allocated peak over `ranks` (lowest rank on ties).
Peak largest(const spec::Scenario& s, const workload::Workload& w, const std::vector<int>& ranks)
{
  Peak p;
  for (int r : ranks) {
    const memory::MemoryReport m = memory::replay_memory(s, schedule::build_step_graph(s, w, r));
    if (m.gpu > p.gpu || (m.gpu == p.gpu && r < p.rank))
      p = {m.gpu, m.gpu_reserved, m.cpu_per_node, r};
  }
  return p;
}

} // namespace

TEST_CASE("memory ranks: ZeRO-1/2's largest peak over the named ranks is the largest over every rank")
{
  struct Case {
    std::string what;
    int stage, nodes;
    std::int64_t bucket;
    bool overlap, offload;
    int tp = 1;
  };
  const std::vector<Case> cases = {
      {"stage 2, 16 GPUs", 2, 2, 200000, false, false},
      {"stage 2 overlap_comm, 32 GPUs", 2, 4, 300000, true, false},
      {"stage 1, 16 GPUs", 1, 2, 200000, false, false},
      {"stage 1 overlap_comm, 24 GPUs", 1, 3, 150000, true, false},
      {"stage 2 optimizer offload, 16 GPUs", 2, 2, 200000, false, true},
      {"stage 1 tensor parallel 2, 32 GPUs", 1, 4, 200000, false, false, 2},
  };
  int rank_0_below = 0;
  for (const Case& c : cases) {
    CAPTURE(c.what);
    spec::Scenario s = gpt(c.stage, c.nodes, c.bucket);
    s.deepspeed.zero.overlap_comm = c.overlap;
    if (c.offload)
      s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    s.training.tensor_parallel = c.tp;
    s.training.global_batch = 2LL * s.dp();
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    std::vector<int> every;
    for (int r = 0; r < s.world(); ++r)
      every.push_back(r);
    const std::vector<int> named = schedule::memory_ranks(s, w);
    CHECK(named.size() < every.size() / 2); // the point of it: a few ranks stand for all
    const Peak all = largest(s, w, every), few = largest(s, w, named);
    if (largest(s, w, {0}).gpu < all.gpu)
      ++rank_0_below;
    CHECK(few.gpu == all.gpu);
    CHECK(few.reserved == all.reserved);
    // `zerosim memory` reports the largest over the named ranks (the lowest named rank on ties), figures of that rank;
    // `zerosim run`, which replays node 0's ranks beside them, names the same rank (a tie goes to the named ranks).
    const memory::MemoryReport reported = run::analyze_memory(s);
    CHECK(reported.gpu == all.gpu);
    CHECK(reported.rank == few.rank);
    CHECK(reported.cpu_per_node == few.cpu_per_node);
  }
  CHECK(rank_0_below >= 2); // the cases exercise it: rank 0 alone would report less
}

namespace {

/// Two graphs hold the same program: the same tasks (name, kind, stream, sizes, dependencies, allocations and frees)
/// and the same buffers, in the same order; TaskGraph::rank aside.
bool same_program(const spec::TaskGraph& a, const spec::TaskGraph& b)
{
  if (a.tasks.size() != b.tasks.size() || a.buffers.size() != b.buffers.size() || a.resident != b.resident)
    return false;
  for (std::size_t i = 0; i < a.tasks.size(); ++i) {
    const spec::Task &x = a.tasks[i], &y = b.tasks[i];
    if (x.name != y.name || x.kind != y.kind || x.stream != y.stream || x.flops != y.flops ||
        x.mem_bytes != y.mem_bytes || x.bytes != y.bytes || x.elements != y.elements || x.deps != y.deps ||
        x.allocs != y.allocs || x.frees != y.frees || x.host_seconds != y.host_seconds)
      return false;
  }
  for (std::size_t i = 0; i < a.buffers.size(); ++i)
    if (a.buffers[i].name != b.buffers[i].name || a.buffers[i].bytes != b.buffers[i].bytes ||
        a.buffers[i].device != b.buffers[i].device)
      return false;
  return true;
}

} // namespace

// The engine builds one graph and copies it to the other ranks where schedule::graph_depends_on_rank says every rank
// runs the same program: built rank by rank, the graphs must agree (ZeRO-1/2, which differ, are the case above).
TEST_CASE("memory ranks: where the schedule says every rank runs the same program, the ranks' graphs agree")
{
  struct Case {
    std::string what;
    spec::Framework framework;
    int stage;
    bool offload;
  };
  for (const Case& c : std::vector<Case>{{"ZeRO-0", spec::Framework::DEEPSPEED, 0, false},
                                         {"ZeRO-3", spec::Framework::DEEPSPEED, 3, false},
                                         {"ZeRO-3 optimizer offload", spec::Framework::DEEPSPEED, 3, true},
                                         {"FSDP FULL_SHARD", spec::Framework::FSDP, 3, false},
                                         {"DDP", spec::Framework::DDP, 0, false}}) {
    CAPTURE(c.what);
    spec::Scenario s = gpt(c.stage, 2, 200000);
    s.framework = c.framework;
    if (c.framework != spec::Framework::DEEPSPEED)
      s.training.precision = spec::Precision::AMP_BF16;
    if (c.offload)
      s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    REQUIRE_FALSE(schedule::graph_depends_on_rank(s));
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    const spec::TaskGraph first = schedule::build_step_graph(s, w, 0);
    for (int r : {1, 7, 8, s.world() - 1})
      CHECK(same_program(schedule::build_step_graph(s, w, r), first));
  }
  spec::Scenario zero2 = gpt(2, 2, 200000);
  CHECK(schedule::graph_depends_on_rank(zero2));
  const workload::Workload w = workload::build_workload(zero2.model, workload::workload_options(zero2));
  CHECK_FALSE(same_program(schedule::build_step_graph(zero2, w, 12), schedule::build_step_graph(zero2, w, 0)));
}
