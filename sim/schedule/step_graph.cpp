// Dispatch: check that the scenario is one this version models, pick its framework's builder from the table, and
// compose the builder's units with the ordering policy (schedule/step_units.hpp).
#include "schedule/step_graph.hpp"

#include "core/error.hpp"
#include "schedule/inference.hpp"
#include "schedule/schedule_builder.hpp"
#include "spec/names.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace zerosim::schedule {

namespace {

void check_supported(const spec::Scenario& s, const workload::Workload& w, int rank)
{
  const std::string where = detail::scenario_label(s);
  detail::check_rank(s, rank, where);
  if (s.training.grad_accum < 1)
    throw core::InputError(where + ": training.grad_accum: expected >= 1, found " +
                           std::to_string(s.training.grad_accum));
  if (w.layers.empty())
    throw core::InternalError("schedule: the workload has no layers");
  if (s.pp() > 1 && s.framework != spec::Framework::DEEPSPEED)
    throw core::InputError(where +
                           ": training.pipeline_parallel: pipeline parallelism is modelled for DeepSpeed's "
                           "PipelineEngine; expected 1 with framework " +
                           spec::to_string(s.framework) + ", found " + std::to_string(s.pp()));
  if (s.framework != spec::Framework::DEEPSPEED)
    return; // the DDP and FSDP builders check their own blocks
  if (s.pp() > 1 && s.deepspeed.zero.stage >= 2)
    throw core::InputError(where +
                           ": deepspeed.zero_optimization.stage: DeepSpeed's pipeline engine asserts \"ZeRO-2 "
                           "and ZeRO-3 are incompatible with pipeline parallelism\" (runtime/pipe/engine.py, "
                           "docs/pipeline-parallel.md §5); expected 0 or 1 with pipeline_parallel " +
                           std::to_string(s.pp()) + ", found " + std::to_string(s.deepspeed.zero.stage));
  detail::check_deepspeed_precision_and_stage(s, where, "; amp_* is for ddp and fsdp");
  const spec::Precision p = s.training.precision;
  const spec::ZeroSpec& z = s.deepspeed.zero;
  if (z.stage == 0 && z.offload_optimizer.device != spec::OffloadDevice::NONE)
    throw core::UnsupportedError(where + ": offload_optimizer needs ZeRO stage 1, 2 or 3 (stage 0 has no "
                                         "partitioned optimizer to offload)");
  if (z.stage < 3 && z.offload_param.device != spec::OffloadDevice::NONE)
    throw core::UnsupportedError(where +
                                 ": offload_param is a ZeRO stage 3 feature (docs/deepspeed-schedule.md §6.2); "
                                 "stage " +
                                 std::to_string(z.stage) + " does not offload parameters");
  if ((z.stage == 1 || z.stage == 2) && z.reduce_scatter && !z.use_multi_rank_bucket_allreduce)
    throw core::UnsupportedError(where + ": use_multi_rank_bucket_allreduce: false (one dist.reduce per "
                                         "destination rank, docs/deepspeed-schedule.md §3.2) is not modelled yet");
  // DeepSpeed picks BF16_Optimizer (fp32 grad accumulation, partitioned master) in these cases
  // (§1.2, §14); its schedule is not described in docs/deepspeed-schedule.md and not modelled.
  const bool bf16 = p == spec::Precision::BF16;
  if (bf16 && z.stage == 0 && s.deepspeed_version == "0.16" && s.pp() == 1)
    throw core::UnsupportedError(where +
                                 ": bf16 with ZeRO stage 0 on DeepSpeed 0.16 runs BF16_Optimizer "
                                 "(docs/deepspeed-schedule.md §14), which is not modelled yet (use deepspeed_version "
                                 "0.19 or ZeRO stage >= 1)");
  if (bf16 && z.stage == 1 && s.deepspeed.grad_accum_dtype == spec::Dtype::FP32 &&
      z.offload_optimizer.device == spec::OffloadDevice::NONE && s.pp() == 1)
    throw core::UnsupportedError(where + ": bf16 with ZeRO stage 1 and grad_accum_dtype fp32 runs BF16_Optimizer "
                                         "(docs/deepspeed-schedule.md §1.2), which is not modelled yet without a "
                                         "pipeline (it is under DeepSpeed's pipeline engine)");
  // DeepSpeedZeroOptimizer with a grad_accum_dtype other than the model's keeps an extra accumulator per parameter
  // (stage_1_and_2.py use_grad_accum_attribute, "Stage 1, Mode 2"), which the pipeline's ZeRO-1 does not model.
  if (s.pp() > 1 && z.stage == 1 && !spec::pipeline_runs_bf16_optimizer(s) &&
      s.deepspeed.grad_accum_dtype != spec::model_dtype(p))
    throw core::UnsupportedError(
        where + ": deepspeed.data_types.grad_accum_dtype " + spec::to_string(s.deepspeed.grad_accum_dtype) +
        " with training.precision " + spec::to_string(p) +
        " and ZeRO stage 1 under the pipeline engine: DeepSpeedZeroOptimizer then accumulates each gradient in a "
        "separate grad_accum tensor (stage_1_and_2.py use_grad_accum_attribute), which is not modelled yet; leave "
        "grad_accum_dtype at the model dtype (docs/pipeline-parallel.md §5)");
  if (z.reduce_bucket_size < 1)
    throw core::InputError(where + ": reduce_bucket_size: expected >= 1 element");
}

/// One framework's builder: which scenarios it builds, and its step's units over a Builder.
struct FrameworkBuilder {
  const char* name;
  bool (*builds)(const spec::Scenario& s);
  std::unique_ptr<StepUnits> (*make)(detail::Builder& b);
};

bool zero_stage_is(const spec::Scenario& s, int lo, int hi)
{
  return s.framework == spec::Framework::DEEPSPEED && s.deepspeed.zero.stage >= lo && s.deepspeed.zero.stage <= hi;
}

/// The builder table (docs/architecture.md "Where to add"): a framework's builder is one row, the first row that
/// builds the scenario wins. check_supported has ruled out a DeepSpeed stage outside 0-3.
constexpr FrameworkBuilder BUILDERS[] = {
    {"deepspeed pipeline engine",
     [](const spec::Scenario& s) { return s.framework == spec::Framework::DEEPSPEED && s.pp() > 1; },
     detail::pipeline_units},
    {"ddp", [](const spec::Scenario& s) { return s.framework == spec::Framework::DDP; }, detail::ddp_units},
    {"fsdp", [](const spec::Scenario& s) { return s.framework == spec::Framework::FSDP; }, detail::fsdp_units},
    {"deepspeed zero 0", [](const spec::Scenario& s) { return zero_stage_is(s, 0, 0); }, detail::stage0_units},
    {"deepspeed zero 1-2", [](const spec::Scenario& s) { return zero_stage_is(s, 1, 2); }, detail::stage12_units},
    {"deepspeed zero 3", [](const spec::Scenario& s) { return zero_stage_is(s, 3, 3); }, detail::stage3_units},
};

const FrameworkBuilder& builder_for(const spec::Scenario& s)
{
  for (const FrameworkBuilder& fb : BUILDERS)
    if (fb.builds(s))
      return fb;
  throw core::InternalError("schedule: no builder for " + detail::scenario_label(s) + " (framework " +
                            spec::to_string(s.framework) + ", ZeRO stage " + std::to_string(s.deepspeed.zero.stage) +
                            ")");
}

} // namespace

std::string ordering_policy_of(const spec::Scenario& s)
{
  if (s.pp() == 1)
    return SEQUENTIAL_POLICY;
  switch (s.training.pipeline.schedule) {
  case spec::PipelineSchedule::GPIPE:
    return GPIPE_POLICY;
  case spec::PipelineSchedule::AUTO:
  case spec::PipelineSchedule::ONE_F_ONE_B:
    return ONE_F_ONE_B_POLICY;
  case spec::PipelineSchedule::INTERLEAVED_1F1B:
  case spec::PipelineSchedule::ZERO_BUBBLE:
    break;
  }
  throw core::InputError(detail::scenario_label(s) +
                         ": training.pipeline.schedule: DeepSpeed's PipelineEngine has only TrainSchedule (1F1B); "
                         "interleaved and zero-bubble schedules are Megatron-LM's and torchtitan's "
                         "(docs/pipeline-parallel.md §3); expected 1f1b or gpipe");
}

int reused_micro_steps_to_build(const spec::Scenario& s)
{
  if (s.training.mode != spec::Mode::TRAIN)
    return 0;
  int k = REUSE_SIMULATED_MICRO_STEPS;
  if (s.pp() > 1) {
    if (ordering_policy_of(s) != ONE_F_ONE_B_POLICY)
      return 0;
    k = s.pp() + PIPELINE_REUSE_SETTLE;
  }
  return s.training.grad_accum > k ? k : 0;
}

bool graph_depends_on_rank(const spec::Scenario& s)
{
  // Only ZeRO-1/2's partition of the flat buffer reads the rank (Builder::dp_rank in stage12.cpp). Inference keeps
  // no partitioned gradients or optimizer: stages 1 and 2 hold a replica like stage 0.
  // A pipeline's stages run different layers and name their neighbours' ranks (SEND/RECV peers).
  if (s.pp() > 1)
    return true;
  const int stage = s.deepspeed.zero.stage;
  return s.framework == spec::Framework::DEEPSPEED && (stage == 1 || stage == 2) &&
         s.training.mode == spec::Mode::TRAIN;
}

std::string nodes_differ(const spec::Scenario& s)
{
  const spec::ClusterSpec& c = s.cluster;
  const int tp = s.tp();
  if (c.nodes > 1 && (tp < 1 || c.gpus_per_node % tp != 0))
    return "the tensor-parallel degree " + std::to_string(tp) + " does not divide the " +
           std::to_string(c.gpus_per_node) +
           " GPUs of a node, so the nodes' ranks hold different tensor-parallel "
           "positions";
  // Pipeline stages run different programs, but the nodes of one stage run alike: the symmetric replay simulates the
  // first node of each stage (engine::simulated_nodes). That holds when a stage fills whole nodes or a slice of one
  // (the config layer refuses other splits).
  const int p = s.pp();
  if (c.nodes > 1 && p > 1) {
    const std::int64_t per_stage = static_cast<std::int64_t>(s.world()) / p;
    if (per_stage * p != s.world() || (per_stage % c.gpus_per_node != 0 && c.gpus_per_node % per_stage != 0))
      return "a pipeline stage of " + std::to_string(per_stage) + " GPUs neither fills whole nodes of " +
             std::to_string(c.gpus_per_node) + " GPUs nor divides one, so a node holds parts of two stages";
  }
  return {};
}

std::vector<int> memory_ranks(const spec::Scenario& s, const workload::Workload& w)
{
  const int n = s.world();
  std::vector<int> ranks;
  if (s.pp() > 1) {
    // One rank a stage where a stage's ranks run alike (ZeRO stage 0, BF16_Optimizer); under DeepSpeedZeroOptimizer's
    // ZeRO-1 each stage's data-parallel ranks own different cuts of the stage's flat buffer: per stage, the ranks
    // stage12_memory_dp_ranks names on the stage's first rank's builder (its rank = stage·D·t + data·t).
    const bool zero1 =
        s.deepspeed.zero.stage == 1 && !spec::pipeline_runs_bf16_optimizer(s) && s.training.mode == spec::Mode::TRAIN;
    for (int stage = 0; stage < s.pp(); ++stage) {
      const int first = stage * s.dp() * s.tp();
      if (!zero1) {
        ranks.push_back(first);
        continue;
      }
      const detail::Builder b(s, w, first);
      for (int dp_rank : detail::stage12_memory_dp_ranks(b))
        ranks.push_back(first + dp_rank * b.tp);
    }
    return ranks;
  }
  if (graph_depends_on_rank(s)) {
    const detail::Builder b(s, w, 0);
    for (int dp_rank : detail::stage12_memory_dp_ranks(b))
      ranks.push_back(dp_rank * b.tp); // the lowest rank of the dp rank's tensor-parallel group (Builder::dp_rank)
    return ranks;
  }
  ranks.push_back(0);
  if (n > 1)
    ranks.push_back(n - 1);
  return ranks;
}

TaskGraph build_step_graph(const spec::Scenario& s, const workload::Workload& w, int rank, const StepOptions& opt)
{
  if (s.training.mode == spec::Mode::INFERENCE) { // one generate() request (docs/inference.md)
    detail::check_inference(s, w, rank, opt);
    detail::Builder b(s, w, rank);
    b.first_step = opt.first_step;
    detail::build_inference(b, inference_graph_passes(s, opt.sampled_decode_passes));
    return std::move(b.graph);
  }
  const int k = opt.simulated_micro_steps;
  if (k > 0 && k < s.training.grad_accum) {
    if (k < 3)
      throw core::InternalError("schedule: accumulation reuse needs at least 3 simulated micro-steps, asked " +
                                std::to_string(k));
    spec::Scenario reduced = s;
    reduced.training.grad_accum = k;
    reduced.training.global_batch = spec::global_batch_of(reduced);
    StepOptions whole = opt;
    whole.simulated_micro_steps = 0;
    TaskGraph g = build_step_graph(reduced, w, rank, whole);
    shift_micro_steps(g, k - 1, s.training.grad_accum - k);
    return g;
  }
  check_supported(s, w, rank);
  detail::Builder b(s, w, rank);
  b.first_step = opt.first_step;
  const std::unique_ptr<StepUnits> units = builder_for(s).make(b);
  compose_step(*units, StepShape{s.training.grad_accum, 1, b.stage, b.stages}, ordering_policy_of(s));
  return std::move(b.graph);
}

} // namespace zerosim::schedule
