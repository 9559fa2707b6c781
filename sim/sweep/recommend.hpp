// `zerosim recommend` (docs/recommend.md): the procedure of the seed article "How to choose which ZeRO stage and
// offloads to use" (docs/recommend.md "The seed articles") as a search. For the scenario's model, cluster and global
// batch, every ZeRO stage, optimizer and parameter offload, activation checkpointing (off, full, and the scenario's
// own selective mode), and split of the
// global batch into micro-batch and accumulation (and, with --gpus, other cluster sizes) is simulated; the fastest
// configuration that fits is written as a ds_config.json, a scenario naming it and a Hugging Face snippet.
#pragma once

#include "config/torch_fsdp_arguments.hpp"
#include "memory/memory_model.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
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
  int grad_accum = 1;
  std::vector<std::string> sets; ///< the --set overrides that make it from the scenario
  std::string status;            ///< "done", or why it did not run
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

/// The candidates of the search for `options` (not run). Throws core::InputError for a scenario that is not a
/// DeepSpeed training run, a GPU count the node size does not divide, or a global batch no candidate can split.
std::vector<Candidate> candidates(const RecommendOptions& options);

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
