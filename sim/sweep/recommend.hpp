// `zerosim recommend` (docs/recommend.md): the procedure of the seed article "How to choose which ZeRO stage and
// offloads to use" (docs/recommend.md "The seed articles") as a search. For the scenario's model, cluster and global
// batch, every ZeRO stage, optimizer and parameter offload, activation checkpointing (off, full, and the scenario's
// own selective mode), and split of the
// global batch into micro-batch and accumulation (and, with --gpus, other cluster sizes) is simulated; the fastest
// configuration that fits is written as a ds_config.json, a scenario naming it and a Hugging Face snippet. On a
// DeepSpeed pipeline scenario (training.pipeline_parallel > 1) it searches the tensor-parallel and pipeline degrees x
// micro-batch instead, prunes by the memory analysis before simulating, and writes Megatron-DeepSpeed's arguments
// (docs/recommend.md "Pipeline scenarios").
#pragma once

#include "config/torch_fsdp_arguments.hpp"
#include "core/json.hpp"
#include "memory/memory_model.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::sweep {

/// One configuration tried, and what its simulation gave.
struct Candidate {
  int gpus = 0;
  int stage = 0;        ///< the ZeRO stage (for FSDP, the stage its sharding matches)
  std::string sharding; ///< "" for DeepSpeed (the stage says it); for FSDP "FSDP FULL_SHARD", ...
  std::string offload;  ///< "none", "optimizer cpu", "optimizer + params cpu", "optimizer + params nvme", "params cpu"
  /// Activation checkpointing: "none", "full", or the scenario's own selective mode ("selective", "per_op").
  std::string checkpointing = "none";
  int micro_batch = 1;
  int grad_accum = 1; ///< under a pipeline, DeepSpeed's micro-batches per step
  /// A pipeline search's degrees (0 elsewhere: the scenario's tensor-parallel degree, no pipeline).
  int tensor_parallel = 0, pipeline_parallel = 0;
  std::vector<std::string> sets; ///< the --set overrides that make it from the scenario
  /// "done", PRUNED_BY_MEMORY (not simulated: the memory analysis found it does not fit or leaves less than the
  /// headroom free), or why it did not run ("refused: ...", "not modelled: ...")
  std::string status;
  bool fits = false;
  bool tight = false; ///< fits, but leaves less than the headroom of the GPU free (memory::is_tight)
  double step_time_s = 0, tokens_per_s = 0, tflops_model = 0;
  double gpu_device_bytes = 0, capacity_bytes = 0, shortfall_bytes = 0;
  std::optional<double> cost_per_million_tokens; ///< with price_per_gpu_hour
  std::string label() const;                     ///< "stage 3, optimizer cpu, checkpointing, mb 2 x ga 8, 8 GPUs"
};

struct RecommendOptions {
  std::string scenario;
  std::vector<std::string> sets;
  std::string calibration;
  std::vector<int> gpus; ///< --gpus A,B,...: cluster sizes to try (empty: the scenario's)
  /// --headroom: the share of GPU memory a candidate must leave free to be ranked (docs/recommend.md "Headroom").
  double headroom = memory::DEFAULT_HEADROOM;
  std::string out_dir; ///< "" : a new folder, <scenario stem>.recommend[-N] (core::output_dir)
  int jobs = 1;
};

/// Runs `work` for the candidates all[todo[k]], each in a forked worker, at most options.jobs at once. As each ends, a
/// candidate whose worker returned nothing gets its status: "refused: " (core::InputError), "not modelled: "
/// (core::UnsupportedError) or "failed: ", then the worker's message; the others go to `done` with the worker's payload
/// as JSON. `progress` hears how many have ended.
void run_candidates(const RecommendOptions& options, std::vector<Candidate>& all, const std::vector<std::size_t>& todo,
                    const std::function<std::string(const Candidate&)>& work,
                    const std::function<void(Candidate&, const core::Json&)>& done,
                    const std::function<void(std::size_t)>& progress);

/// The status of a pipeline candidate the memory analysis prunes before any simulation (prune_by_memory).
inline const std::string PRUNED_BY_MEMORY = "pruned by the memory analysis";

/// The candidates of the search for `options` (not run). Throws core::InputError for a scenario that is not a
/// DeepSpeed training run, a GPU count the node size does not divide, or a global batch no candidate can split.
/// A DeepSpeed pipeline scenario gets pipeline_candidates instead of the ZeRO stage x offload search.
std::vector<Candidate> candidates(const RecommendOptions& options);

/// The tensor-parallel degrees a pipeline search tries for `s`: the powers of two that divide the node's GPUs and
/// the model's heads, key/value heads and FFN width (what the config layer asks of training.tensor_parallel).
std::vector<int> pipeline_tensor_degrees(const spec::Scenario& s);

/// The pipeline degrees p a search tries on `gpus` GPUs at tensor-parallel degree `t`: p >= 2 dividing gpus / t, at
/// most model.layers, whose stages (gpus / p ranks) fill whole nodes or share one, and whose data-parallel degree
/// gpus / (t p) divides the global batch. An explicit split (training.pipeline.layers) keeps the scenario's degree.
std::vector<int> pipeline_degrees(const spec::Scenario& s, int gpus, int t);

/// The candidates of DeepSpeed pipeline scenario `s` on `gpus` GPUs: tensor-parallel degree x pipeline degree x
/// ZeRO stage 0, 1 and 1 with the optimizer on the CPU (what DeepSpeed's PipelineEngine accepts) x activation
/// checkpointing off or full x every power-of-two micro-batch dividing the per-rank batch, the global batch kept.
std::vector<Candidate> pipeline_candidates(const spec::Scenario& s, int gpus);

/// The --set overrides for the memory analysis of pipeline candidate `c`: its own, with the micro-batches per step
/// cut to min(m, p). Under 1F1B stage s holds min(p - s, m) micro-batches (docs/pipeline-parallel.md §7), so no stage
/// holds more at m than at min(m, p), and the peak is the same (tested).
std::vector<std::string> memory_sets(const Candidate& c, const spec::Scenario& s);

/// Before any simulation: run::analyze_memory of every pipeline candidate (at most options.jobs at once). One whose
/// predicted device total (allocated peak, caching allocator, CUDA context, NCCL buffers) passes the GPU, whose host
/// or NVMe tier overflows, or that leaves less than options.headroom of the GPU free, gets PRUNED_BY_MEMORY with the
/// analysis' figures; one the loader or the schedule refuses gets "refused: ..." or "not modelled: ..." (skipped).
void prune_by_memory(const RecommendOptions& options, std::vector<Candidate>& all, std::ostream& err);

/// megatron_deepspeed_args.sh for winner `c` of pipeline scenario `s` (`s` with the winner's settings): the
/// pretrain_gpt.py arguments of bigscience-workshop/Megatron-DeepSpeed that give its degrees, batch, precision,
/// checkpointing and ZeRO stage, naming ds_config.json.
std::string megatron_deepspeed_args(const Candidate& c, const spec::Scenario& s);

/// The torch names fsdp_settings.py writes for FSDP scenario `s`: the names it imports from torch.distributed.fsdp,
/// the keyword arguments of FullyShardedDataParallel (FSDP1) or fully_shard (FSDP2), the ShardingStrategy member and
/// the CPUOffload field, as (module or callable, name) pairs of data/torch_fsdp_arguments.csv.
std::vector<config::TorchFsdpName> fsdp_names(const spec::Scenario& s);

/// fsdp_settings.py for winner `c` of FSDP scenario `s` (`s` with the winner's settings): the FSDP keyword arguments
/// and the Trainer's. Throws core::InputError, writing nothing, when a name of fsdp_names(s) does not exist in the
/// torch release read for s.software.torch (config::check_torch_fsdp_names).
std::string fsdp_snippet(const Candidate& c, const spec::Scenario& s);

/// Runs the search: prints how many candidates were searched, the ranked ones that fit (step time, tokens/s, TFLOPs
/// per GPU, memory headroom), the pruned ones with their shortfall; writes DIR/ds_config.json, DIR/scenario.yaml,
/// DIR/hf_trainer.py and DIR/candidates.csv. Returns 0, or 1 when no candidate fits (nothing is written then but
/// candidates.csv).
int recommend(const RecommendOptions& options, std::ostream& out, std::ostream& err);

/// The ranking: those that fit with the headroom free, by cost per million tokens when priced, else by step time (the
/// global batch is the same for every candidate), then by GPU memory used; ties by the order of the search. Tight
/// candidates (Candidate::tight) are never ranked: tight_ones() lists them.
std::vector<const Candidate*> ranked(const std::vector<Candidate>& all);
/// The candidates that fit but are tight, fastest first (the order of ranked()).
std::vector<const Candidate*> tight_ones(const std::vector<Candidate>& all);

} // namespace zerosim::sweep
