#include "run/memory_analysis.hpp"

#include "core/error.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <algorithm>
#include <optional>

namespace zerosim::run {

namespace {

/// nvme_path the ladder's NVMe rung writes when the scenario has none: a placeholder mount point that
/// tells the user where a local NVMe file system must be mounted (docs/scenario-format.md "Command line").
constexpr const char* LADDER_NVME_PATH = "/local_nvme";

} // namespace

memory::MemoryReport analyze_memory(const spec::Scenario& s)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  // The middle micro-steps of an accumulation allocate and free alike (the engine's accumulation reuse rests on the
  // same fact), so a long accumulation is replayed as its first micro-steps and its last: the same peak, in a graph
  // whose size does not grow with training.grad_accum.
  schedule::StepOptions step;
  // A 1F1B pipeline's in-flight micro-batches depend on their count only up to p (min(p - s, m),
  // docs/pipeline-parallel.md §7), which the reused graph holds; GPipe's grow with every one: all are built.
  step.simulated_micro_steps = schedule::reused_micro_steps_to_build(s);
  // Where every rank runs one program (ZeRO-0 and 3, FSDP, DDP, inference), rank 0 stands for all. ZeRO-1/2 ranks
  // own different ends of the flat buffer: the ranks among which the largest peak lies are each replayed, and the
  // largest reported (lowest rank on ties), as `zerosim run` does (metrics::compute_metrics).
  std::vector<int> ranks{0};
  if (schedule::graph_depends_on_rank(s))
    ranks = schedule::memory_ranks(s, w);
  std::sort(ranks.begin(), ranks.end());
  std::optional<memory::MemoryReport> largest;
  for (int rank : ranks) {
    memory::MemoryReport r = memory::replay_memory(s, schedule::build_step_graph(s, w, rank, step));
    if (!largest || r.gpu > largest->gpu)
      largest = std::move(r);
  }
  if (!largest)
    throw core::InternalError("memory: schedule::memory_ranks named no rank");
  return std::move(*largest);
}

std::vector<std::pair<std::string, spec::Scenario>> ladder_scenarios(const spec::Scenario& s)
{
  std::vector<std::pair<std::string, spec::Scenario>> rungs;
  spec::Scenario cur = s;
  auto push = [&](std::string change) { rungs.emplace_back(std::move(change), cur); };
  const bool training = cur.training.mode == spec::Mode::TRAIN;

  // 1. micro-batch 1 (the seed: "First of all set batch size to 1 (you can always use gradient accumulation
  //    for any desired effective batch size)"). The global batch stays when the user gave it.
  if (training && cur.training.micro_batch > 1) {
    const int old_micro_batch = cur.training.micro_batch;
    cur.training.micro_batch = 1;
    if (cur.training.global_batch_given)
      cur.training.grad_accum *= old_micro_batch; // global = micro_batch x grad_accum x dp is unchanged
    cur.training.global_batch = spec::global_batch_of(cur);
    push("training.micro_batch: 1 (grad_accum " + std::to_string(cur.training.grad_accum) + ", global batch " +
         std::to_string(cur.training.global_batch) + ")");
  }
  // 2. activation checkpointing (a no-op in inference, as the seed says).
  if (training && cur.training.activation_checkpointing != spec::Checkpointing::FULL) {
    cur.training.activation_checkpointing = spec::Checkpointing::FULL;
    push("training.activation_checkpointing: full");
  }
  if (cur.framework == spec::Framework::FSDP) {
    // FSDP's own rungs (docs/fsdp.md §5, §7): shard everything over all GPUs, then offload to the CPU.
    auto& f = cur.fsdp;
    // 3. FULL_SHARD from NO_SHARD, SHARD_GRAD_OP or HYBRID_SHARD (whose shards span one node only); with FSDP2
    //    (reshard_after_forward given) also reshard after forward.
    const bool v2 = f.reshard_after_forward.has_value();
    const bool v2_keeps = v2 && !*f.reshard_after_forward;
    if (f.sharding_strategy != spec::FsdpSharding::FULL_SHARD || v2_keeps) {
      std::string change;
      if (f.sharding_strategy != spec::FsdpSharding::FULL_SHARD) {
        f.sharding_strategy = spec::FsdpSharding::FULL_SHARD;
        change = "fsdp.sharding_strategy: FULL_SHARD";
      }
      if (v2_keeps) {
        f.reshard_after_forward = true;
        change += (change.empty() ? "" : ", ") + std::string("fsdp.reshard_after_forward: true");
      }
      push(change);
    }
    // 4. CPUOffload(offload_params=True): parameters, gradients and the optimizer on the CPU.
    if (training && !f.cpu_offload) {
      f.cpu_offload = true;
      push("fsdp.cpu_offload: true");
    }
    return rungs;
  }
  if (cur.framework != spec::Framework::DEEPSPEED)
    return rungs;
  if (cur.pp() > 1) {
    // DeepSpeed's pipeline engine refuses ZeRO-2 and 3 (docs/pipeline-parallel.md §5). Its rungs: 1F1B, which holds
    // min(p - s, m) micro-batches a stage where GPipe holds all m (docs/pipeline-parallel.md §7); ZeRO stage 1, DeepSpeedZeroOptimizer's
    // master and moments sharded over the stage's data-parallel group without BF16_Optimizer's unsharded fp32
    // accumulator (docs/pipeline-parallel.md §5, §6); the CPU optimizer offload DeepSpeed accepts at stage 1,
    // skipped where zerosim refuses it (a grad_accum_dtype other than the model's, schedule::build_step_graph).
    auto& z = cur.deepspeed.zero;
    if (cur.training.pipeline.schedule == spec::PipelineSchedule::GPIPE) {
      cur.training.pipeline.schedule = spec::PipelineSchedule::ONE_F_ONE_B;
      push("training.pipeline.schedule: 1f1b");
    }
    if (training && z.stage < 1) {
      z.set_stage(1);
      push("deepspeed.zero_optimization.stage: 1");
    }
    if (training && z.offload_optimizer.device == spec::OffloadDevice::NONE &&
        cur.deepspeed.grad_accum_dtype == spec::model_dtype(cur.training.precision)) {
      z.offload_optimizer.device = spec::OffloadDevice::CPU;
      push("deepspeed.zero_optimization.offload_optimizer.device: cpu");
    }
    return rungs;
  }

  auto& z = cur.deepspeed.zero;
  // 3. ZeRO stage 2 (skipped at stage 2 or 3: never a step back).
  if (z.stage < 2) {
    z.set_stage(2); // overlap_comm follows the stage unless given (DeepSpeed's default)
    push("deepspeed.zero_optimization.stage: 2");
  }
  // 4. optimizer offload to the CPU (skipped when already offloaded, to the CPU or to NVMe).
  if (z.offload_optimizer.device == spec::OffloadDevice::NONE) {
    z.offload_optimizer.device = spec::OffloadDevice::CPU;
    push("deepspeed.zero_optimization.offload_optimizer.device: cpu");
  }
  // 5. ZeRO stage 3.
  if (z.stage < 3) {
    z.set_stage(3);
    push("deepspeed.zero_optimization.stage: 3");
  }
  // 6. parameter offload to the CPU.
  if (z.offload_param.device == spec::OffloadDevice::NONE) {
    z.offload_param.device = spec::OffloadDevice::CPU;
    push("deepspeed.zero_optimization.offload_param.device: cpu");
  }
  // 7. ZeRO-Infinity: both offloads to NVMe.
  if (z.offload_optimizer.device != spec::OffloadDevice::NVME || z.offload_param.device != spec::OffloadDevice::NVME) {
    z.offload_optimizer.device = spec::OffloadDevice::NVME;
    z.offload_param.device = spec::OffloadDevice::NVME;
    if (z.offload_optimizer.nvme_path.empty())
      z.offload_optimizer.nvme_path = LADDER_NVME_PATH;
    if (z.offload_param.nvme_path.empty())
      z.offload_param.nvme_path = LADDER_NVME_PATH;
    std::string change =
        "deepspeed.zero_optimization.offload_optimizer.device: nvme, offload_param.device: nvme (nvme_path ";
    change += z.offload_optimizer.nvme_path == z.offload_param.nvme_path
                  ? z.offload_optimizer.nvme_path
                  : z.offload_optimizer.nvme_path + " and " + z.offload_param.nvme_path;
    change += ")";
    // Every NVMe-resident partition must fit one swap buffer (DeepSpeed asserts it, docs/deepspeed-schedule.md §8):
    // raise offload_param.buffer_size to the largest partition, ⌈largest tensor / N⌉, as DeepSpeed users do. (Only for
    // a scenario with a model: the rung list alone is computed for bare scenarios too.)
    const std::int64_t dp = std::max(1, cur.dp());
    const std::int64_t largest_partition =
        cur.model.layers > 0
            ? (workload::build_workload(cur.model, workload::workload_options(cur)).largest_param_numel + dp - 1) / dp
            : 0;
    if (largest_partition >= z.offload_param.buffer_size) {
      z.offload_param.buffer_size = largest_partition + 1;
      change += ", offload_param.buffer_size: " + std::to_string(z.offload_param.buffer_size) +
                " (the largest partition must fit one swap buffer)";
    }
    push(change);
  }
  return rungs;
}

std::vector<LadderStep> climb_ladder(const spec::Scenario& s)
{
  std::vector<LadderStep> steps;
  for (auto& [change, scenario] : ladder_scenarios(s)) {
    LadderStep step;
    step.change = change;
    step.report = analyze_memory(scenario);
    step.scenario = std::move(scenario);
    const bool fits = step.report.fits;
    steps.push_back(std::move(step));
    if (fits)
      break;
  }
  return steps;
}

MemoryResult analyze_memory_scenario(const spec::Scenario& s)
{
  MemoryResult r;
  r.report = analyze_memory(s);
  if (!r.report.fits)
    r.ladder = climb_ladder(s);
  return r;
}

} // namespace zerosim::run
