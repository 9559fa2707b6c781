// The seed's ladder (docs/recommend.md "The seed articles", docs/scenario-format.md "Command line"): rungs applied
// cumulatively, skipping those already in effect or that would be a step back.
#include "run/memory_analysis.hpp"

#include <doctest/doctest.h>

using namespace zerosim;

namespace {

/// 2 nodes x 4 GPUs (dp 8), DeepSpeed stage 0, micro-batch 4, grad_accum 2: global batch 4 x 2 x 8 = 64.
spec::Scenario base()
{
  spec::Scenario s;
  s.cluster.nodes = 2;
  s.cluster.gpus_per_node = 4;
  s.training.micro_batch = 4;
  s.training.grad_accum = 2;
  s.training.global_batch = 64;
  s.training.global_batch_given = true;
  s.deepspeed.zero.stage = 0;
  return s;
}

} // namespace

TEST_SUITE("run")
{
  TEST_CASE("ladder: every rung in the article's order and cumulatively")
  {
    const auto rungs = run::ladder_scenarios(base());
    REQUIRE(rungs.size() == 7);
    // 1. micro-batch 1 keeping the given global batch: grad_accum = 64 / (1 x 8) = 8
    CHECK(rungs[0].second.training.micro_batch == 1);
    CHECK(rungs[0].second.training.grad_accum == 8);
    CHECK(rungs[0].second.training.global_batch == 64);
    CHECK(rungs[0].first == "training.micro_batch: 1 (grad_accum 8, global batch 64)");
    // 2. activation checkpointing, with rung 1 still applied
    CHECK(rungs[1].second.training.activation_checkpointing == spec::Checkpointing::FULL);
    CHECK(rungs[1].second.training.micro_batch == 1);
    // 3. stage 2: overlap_comm not given, so DeepSpeed's default for stage 2: false
    CHECK(rungs[2].second.deepspeed.zero.stage == 2);
    CHECK_FALSE(rungs[2].second.deepspeed.zero.overlap_comm);
    // 4. optimizer offload to the CPU at stage 2
    CHECK(rungs[3].second.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(rungs[3].second.deepspeed.zero.stage == 2);
    // 5. stage 3: overlap_comm default becomes true; the optimizer stays offloaded
    CHECK(rungs[4].second.deepspeed.zero.stage == 3);
    CHECK(rungs[4].second.deepspeed.zero.overlap_comm);
    CHECK(rungs[4].second.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    // 6. parameter offload to the CPU
    CHECK(rungs[5].second.deepspeed.zero.offload_param.device == spec::OffloadDevice::CPU);
    // 7. NVMe for both, with the placeholder path
    const auto& z = rungs[6].second.deepspeed.zero;
    CHECK(z.offload_optimizer.device == spec::OffloadDevice::NVME);
    CHECK(z.offload_param.device == spec::OffloadDevice::NVME);
    CHECK(z.offload_optimizer.nvme_path == "/local_nvme");
    CHECK(z.offload_param.nvme_path == "/local_nvme");
    CHECK(z.stage == 3);
    CHECK(rungs[6].second.training.micro_batch == 1);
  }

  TEST_CASE("ladder: without a given global batch grad_accum stays and the global batch follows")
  {
    auto s = base();
    s.training.global_batch_given = false;
    const auto rungs = run::ladder_scenarios(s);
    REQUIRE_FALSE(rungs.empty());
    CHECK(rungs[0].second.training.grad_accum == 2);
    CHECK(rungs[0].second.training.global_batch == 16); // 1 x 2 x 8
  }

  TEST_CASE("ladder: rungs in effect are skipped and a given overlap_comm is kept")
  {
    auto s = base();
    s.training.micro_batch = 1;
    s.training.grad_accum = 8;
    s.training.activation_checkpointing = spec::Checkpointing::FULL;
    s.deepspeed.zero.stage = 3;
    s.deepspeed.zero.overlap_comm = false;
    s.deepspeed.zero.overlap_comm_given = true;
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const auto rungs = run::ladder_scenarios(s);
    // micro-batch, checkpointing, stage 2 (a step back), optimizer offload, stage 3 are in effect:
    // left are parameter offload and NVMe
    REQUIRE(rungs.size() == 2);
    CHECK(rungs[0].first == "deepspeed.zero_optimization.offload_param.device: cpu");
    CHECK(rungs[1].second.deepspeed.zero.stage == 3);
    CHECK_FALSE(rungs[1].second.deepspeed.zero.overlap_comm); // the user's value, not the stage-3 default
  }

  TEST_CASE("ladder: the NVMe rung keeps a path the scenario gave")
  {
    auto s = base();
    s.deepspeed.zero.offload_optimizer.nvme_path = "/mnt/nvme0";
    const auto rungs = run::ladder_scenarios(s);
    REQUIRE(rungs.size() == 7);
    CHECK(rungs[6].second.deepspeed.zero.offload_optimizer.nvme_path == "/mnt/nvme0");
    CHECK(rungs[6].second.deepspeed.zero.offload_param.nvme_path == "/local_nvme");
  }

  TEST_CASE("ladder: a DeepSpeed pipeline climbs 1F1B, ZeRO stage 1, then CPU optimizer offload")
  {
    // docs/pipeline-parallel.md §5-§7: DeepSpeed's engine refuses ZeRO-2/3; 1F1B holds min(p - s, m) micro-batches a
    // stage where GPipe holds m, ZeRO-1 shards the optimizer over the stage's data-parallel group, and the source
    // accepts its CPU optimizer offload. 2 stages on 8 GPUs: dp 4.
    auto s = base();
    s.training.pipeline_parallel = 2;
    s.training.grad_accum = 4; // 64 / (4 x 4)
    s.training.pipeline.schedule = spec::PipelineSchedule::GPIPE;
    const auto rungs = run::ladder_scenarios(s);
    REQUIRE(rungs.size() == 5);                       // micro-batch 1, activation checkpointing, 1f1b, stage 1, offload
    CHECK(rungs[0].second.training.grad_accum == 16); // 64 / (1 x 4)
    CHECK(rungs[2].first == "training.pipeline.schedule: 1f1b");
    CHECK(rungs[3].first == "deepspeed.zero_optimization.stage: 1");
    CHECK(rungs[3].second.deepspeed.zero.stage == 1);
    CHECK(rungs[4].first == "deepspeed.zero_optimization.offload_optimizer.device: cpu");
    CHECK(rungs[4].second.deepspeed.zero.offload_optimizer.device == spec::OffloadDevice::CPU);
    CHECK(rungs[4].second.deepspeed.zero.stage == 1);
    // With grad_accum_dtype fp32 (not the model dtype) the offloaded DeepSpeedZeroOptimizer is not modelled: no rung.
    s.deepspeed.grad_accum_dtype = spec::Dtype::FP32;
    s.training.precision = spec::Precision::BF16;
    CHECK(run::ladder_scenarios(s).size() == 4);
  }

  TEST_CASE("ladder: FSDP climbs to FULL_SHARD and CPU offload, DDP has nothing beyond checkpointing")
  {
    // docs/fsdp.md §5, §7: what FSDP offers to fit is sharding everything over all GPUs, then the CPU offload.
    auto s = base();
    s.framework = spec::Framework::FSDP;
    s.fsdp.sharding_strategy = spec::FsdpSharding::SHARD_GRAD_OP;
    auto rungs = run::ladder_scenarios(s);
    REQUIRE(rungs.size() == 4); // micro-batch 1, activation checkpointing, FULL_SHARD, cpu_offload
    CHECK(rungs[2].first == "fsdp.sharding_strategy: FULL_SHARD");
    CHECK(rungs[2].second.fsdp.sharding_strategy == spec::FsdpSharding::FULL_SHARD);
    CHECK(rungs[3].first == "fsdp.cpu_offload: true");
    CHECK(rungs[3].second.fsdp.cpu_offload);
    s.fsdp.sharding_strategy = spec::FsdpSharding::FULL_SHARD;
    CHECK(run::ladder_scenarios(s).size() == 3); // already fully sharded: no FULL_SHARD rung
    // DDP replicates everything: no rung of its own (docs/ddp.md).
    s.framework = spec::Framework::DDP;
    CHECK(run::ladder_scenarios(s).size() == 2);
  }
}
