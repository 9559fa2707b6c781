// The values derived from a scenario's keys, each computed in one place (sim/spec/scenario_spec.hpp): the global
// batch, the data-parallel degree, the tokens of a micro-batch, and DeepSpeed's stage-dependent overlap_comm default.
#include "spec/scenario_spec.hpp"

#include <doctest/doctest.h>

using namespace zerosim;

TEST_SUITE("spec")
{
  TEST_CASE("derived values: global batch, data-parallel degree and tokens per micro-batch from their definitions")
  {
    spec::Scenario s;
    s.cluster.nodes = 2;
    s.cluster.gpus_per_node = 8;
    s.cluster.node.gpus = 8;
    s.training.tensor_parallel = 2;
    s.training.micro_batch = 3;
    s.training.grad_accum = 5;
    s.training.seq_len = 4096;
    // dp = GPUs / tensor_parallel = 2 x 8 / 2 = 8
    CHECK(spec::data_parallel_of(16, 2) == 8);
    CHECK(s.dp() == 8);
    CHECK(spec::data_parallel_of(16, 0) == 16); // a degree below 1 counts as 1, as Scenario::tp() does
    // global batch = micro_batch x grad_accum x dp = 3 x 5 x 8 = 120 sequences
    CHECK(spec::global_batch_of(s) == 120);
    CHECK(spec::global_batch_of(3, 5, 8) == 120);
    // in 64 bits: 2^20 x 2^12 x 2^8 = 2^40 (over 2^31)
    CHECK(spec::global_batch_of(1 << 20, 1 << 12, 1 << 8) == (std::int64_t{1} << 40));
    // tokens per micro-batch = micro_batch x seq_len = 3 x 4096 = 12288
    CHECK(s.training.tokens_per_micro_batch() == 12288);
    CHECK(spec::tokens_per_micro_batch(1 << 16, 1 << 17) == (std::int64_t{1} << 33));
  }

  TEST_CASE("derived values: overlap_comm follows the ZeRO stage unless given (DeepSpeed's overlap_comm_valid)")
  {
    // DeepSpeed zero/config.py: overlap_comm None -> True for stage 3, False otherwise.
    CHECK_FALSE(spec::default_overlap_comm(0));
    CHECK_FALSE(spec::default_overlap_comm(1));
    CHECK_FALSE(spec::default_overlap_comm(2));
    CHECK(spec::default_overlap_comm(3));
    spec::ZeroSpec z;
    z.set_stage(3);
    CHECK(z.stage == 3);
    CHECK(z.overlap_comm);
    z.set_stage(2);
    CHECK_FALSE(z.overlap_comm);
    // given by the user: kept whatever the stage
    z.overlap_comm = true;
    z.overlap_comm_given = true;
    z.set_stage(1);
    CHECK(z.stage == 1);
    CHECK(z.overlap_comm);
  }

  TEST_CASE("derived values: the model dtype of a precision and the ZeRO stage of an FSDP sharding")
  {
    // DeepSpeed trains bf16 and fp16 models in their dtype; amp_* and fp32 leave the model in fp32
    // (docs/deepspeed-schedule.md §1.3).
    CHECK(spec::model_dtype(spec::Precision::BF16) == spec::Dtype::BF16);
    CHECK(spec::model_dtype(spec::Precision::FP16) == spec::Dtype::FP16);
    CHECK(spec::model_dtype(spec::Precision::AMP_BF16) == spec::Dtype::FP32);
    CHECK(spec::model_dtype(spec::Precision::AMP_FP16) == spec::Dtype::FP32);
    CHECK(spec::model_dtype(spec::Precision::FP32) == spec::Dtype::FP32);
    // what every GPU holds: parameters sharded (3), only gradients and optimizer state (2), nothing (0)
    CHECK(spec::equivalent_zero_stage(spec::FsdpSharding::FULL_SHARD) == 3);
    CHECK(spec::equivalent_zero_stage(spec::FsdpSharding::HYBRID_SHARD) == 3);
    CHECK(spec::equivalent_zero_stage(spec::FsdpSharding::SHARD_GRAD_OP) == 2);
    CHECK(spec::equivalent_zero_stage(spec::FsdpSharding::NO_SHARD) == 0);
  }
}
