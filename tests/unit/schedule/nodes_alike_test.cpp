// Whether all nodes run alike (schedule::nodes_differ, docs/engine.md "Nodes alike") is decided from the spec without
// building a graph; here every node's graphs are built (up to 64 GPUs) and compared with spec::same_communications: the
// property must agree with them. The expected value is the brute force over every rank, not a formula.
#include "config/scenario_loader.hpp"
#include "schedule/step_graph.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;

namespace {

/// `nodes` DGX A100 80GB nodes of `gpus_per_node` GPUs, one 200 Gb/s NIC per 4 GPUs, 3 micro-steps.
spec::Scenario job(int nodes, int gpus_per_node, const std::string& training, const std::string& framework,
                   const std::string& model = "gpt2-xl")
{
  const std::string text =
      "name: nodes-alike\nmodel: " + model + "\ncluster:\n  node: dgx-a100-80gb\n  nodes: " + std::to_string(nodes) +
      "\n  gpus_per_node: " + std::to_string(gpus_per_node) +
      "\n  network: {nic_bandwidth: 200 Gbps, nics_per_node: " + std::to_string(std::max(1, gpus_per_node / 4)) +
      "}\ntraining: {seq_len: 1024, micro_batch: 1, grad_accum: 3, precision: bf16" + training + "}\n" + framework;
  return config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/nodes-alike-test.yaml");
}

/// Every rank's graph of `s`: whether each node's rank local g runs node 0's rank g's program.
bool graphs_alike(const spec::Scenario& s)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const int G = s.cluster.gpus_per_node;
  std::vector<spec::TaskGraph> first;
  for (int g = 0; g < G; ++g)
    first.push_back(schedule::build_step_graph(s, w, g));
  for (int n = 1; n < s.cluster.nodes; ++n)
    for (int g = 0; g < G; ++g)
      if (!spec::same_communications(first[static_cast<std::size_t>(g)], schedule::build_step_graph(s, w, n * G + g)))
        return false;
  return true;
}

} // namespace

TEST_CASE("the nodes-alike property agrees with every node's graphs")
{
  const std::vector<std::pair<std::string, std::string>> frameworks = {
      {"ZeRO-0", "deepspeed: {zero_optimization: {stage: 0}}\n"},
      {"ZeRO-1", "deepspeed: {zero_optimization: {stage: 1, overlap_comm: true}}\n"},
      {"ZeRO-2", "deepspeed: {zero_optimization: {stage: 2, reduce_bucket_size: 20000000}}\n"},
      {"ZeRO-2 + CPU optimizer",
       "deepspeed: {zero_optimization: {stage: 2, reduce_bucket_size: 20000000, offload_optimizer: {device: cpu}}}\n"},
      {"ZeRO-3", "deepspeed: {zero_optimization: {stage: 3}}\n"},
      {"ZeRO-3 + NVMe", "deepspeed: {zero_optimization: {stage: 3, offload_optimizer: {device: nvme, nvme_path: "
                        "/local_nvme}, offload_param: {device: nvme, nvme_path: /local_nvme}}}\n"},
      {"DDP", "ddp: {}\n"},
      {"FSDP HYBRID_SHARD", "fsdp: {sharding_strategy: HYBRID_SHARD}\n"},
      {"FSDP2", "fsdp: {reshard_after_forward: true}\n"},
  };
  for (const auto& [label, fw] : frameworks)
    for (const auto& [nodes, gpus] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}}) {
      CAPTURE(label);
      CAPTURE(nodes);
      const spec::Scenario s = job(nodes, gpus, "", fw);
      CHECK(schedule::nodes_differ(s).empty() == graphs_alike(s));
    }
  SUBCASE("tensor parallelism: the tensor-parallel ranks of every node hold the same positions")
  {
    const spec::Scenario s =
        job(2, 8, ", tensor_parallel: 4", "deepspeed: {zero_optimization: {stage: 1}}\n", "llama2-7b");
    CHECK(schedule::nodes_differ(s).empty() == graphs_alike(s));
  }
}

TEST_CASE("graphs that issue other communications are not alike")
{
  // The comparison the property is checked against must see a difference where the symmetric replay would match
  // the wrong calls: another collective, another group, another peer offset.
  spec::TaskGraph a;
  a.rank = 0;
  spec::Task ar;
  ar.kind = spec::TaskKind::COLLECTIVE;
  ar.collective = spec::CollectiveKind::ALL_REDUCE;
  ar.group = spec::CommGroup::DATA_PARALLEL;
  ar.bytes = 1 << 20;
  a.tasks.push_back(ar);
  spec::Task send;
  send.kind = spec::TaskKind::SEND;
  send.peer = 1;
  send.bytes = 4096;
  a.tasks.push_back(send);
  spec::TaskGraph b = a;
  b.rank = 8;
  b.tasks[1].peer = 9;
  CHECK(spec::same_communications(a, b)); // the same calls, the peer at the same offset
  spec::Task work;
  work.kind = spec::TaskKind::COMPUTE;
  work.flops = 1e9;
  b.tasks.insert(b.tasks.begin(), work);
  CHECK(spec::same_communications(a, b)); // local work does not change what is matched
  spec::TaskGraph other_group = a;
  other_group.tasks[0].group = spec::CommGroup::TENSOR;
  CHECK_FALSE(spec::same_communications(a, other_group));
  spec::TaskGraph other_peer = b;
  other_peer.tasks[2].peer = 7;
  CHECK_FALSE(spec::same_communications(a, other_peer));
  spec::TaskGraph recv = a;
  recv.tasks[1].kind = spec::TaskKind::RECV;
  CHECK_FALSE(spec::same_communications(a, recv));
  spec::TaskGraph fewer = a;
  fewer.tasks.pop_back();
  CHECK_FALSE(spec::same_communications(a, fewer));
}
