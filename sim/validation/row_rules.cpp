// The rules that sort a row: its framework, its FSDP strategy, the reasons it cannot be expressed yet, and the
// node file of its GPU. Rules: docs/validation.md; the names and the GPU table they apply are the general rules'
// data (results/validation/rules.yaml).
#include "validation/row_mapping.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace zerosim::validation {

namespace detail {

bool is_fairscale(const PublishedRow& row)
{
  return contains(field(row, "zero_stage"), "fairscale") || contains(field(row, "framework"), "fairscale");
}

/// The PyTorch framework of a row (FSDP or DDP), or DEEPSPEED for every other row (FairScale rows too: they are
/// not covered). Rules: framework_label in published_rows.hpp.
spec::Framework framework_of(const PublishedRow& row)
{
  if (is_fairscale(row))
    return spec::Framework::DEEPSPEED;
  const std::string& fw = field(row, "framework");
  const std::string sharding = lower(trim(field(row, "fsdp_sharding")));
  // "1.2B (PyTorch DDP baseline)" (ZeRO-3 Offload blog); "PyTorch DDP", "Accelerate + PyTorch DDP".
  if (contains(field(row, "model"), "ddp baseline") || (contains(fw, "ddp") && !contains(fw, "fsdp")))
    return spec::Framework::DDP;
  // Accelerate's FSDP table rows with sharding "none (DDP)" / "none": the DDP baseline of the comparison.
  if (sharding.rfind("none", 0) == 0 && contains(fw, "fsdp"))
    return spec::Framework::DDP;
  if (!sharding.empty() || contains(field(row, "zero_stage"), "equivalent") || contains(fw, "fsdp"))
    return spec::Framework::FSDP;
  return spec::Framework::DEEPSPEED;
}

/// The model size in billions of a row ("Llama 2 7B arch" -> "7"), "" when none is named.
std::string size_in_billions(const std::string& model)
{
  static const std::regex re(R"((\d+)B\b)");
  std::smatch m;
  return std::regex_search(model, m, re) ? m.str(1) : "";
}

/// The FSDP sharding strategy of an FSDP row: the source's launch scripts by model size where its data lists them
/// (sharding_by_size: a size not listed is not stated), else the fsdp_sharding column ("FULL_SHARD", "FSDP2
/// fully_shard", "SHARD_GRAD_OP", ...: the texts of the general rules' fsdp_strategies), else the zero_stage column
/// (the same texts; "3-equivalent" = FULL_SHARD, "2-equivalent" = SHARD_GRAD_OP: README "Columns"); nullopt when none
/// says.
std::optional<ShardingRead> fsdp_sharding_of(const PublishedRow& row, const spec::MappingRules& rules)
{
  ShardingRead r;
  const spec::SourceRule* src = rule_of(row, rules);
  if (src && !src->sharding_by_size.empty()) {
    const std::string size = size_in_billions(field(row, "model"));
    for (const spec::SourceSharding& sh : src->sharding_by_size)
      if (sh.size == size)
        return ShardingRead{sh.strategy, sh.note};
    return std::nullopt;
  }
  const std::string sharding = lower(field(row, "fsdp_sharding"));
  const std::string stage = lower(field(row, "zero_stage"));
  auto strategy_in = [&](const std::string& t) -> std::optional<spec::FsdpSharding> {
    for (const spec::StrategyNames& names : rules.general.fsdp_strategies)
      if (contains_any(t, names.texts))
        return names.strategy;
    return std::nullopt;
  };
  if (auto st = strategy_in(sharding)) {
    r.strategy = *st;
    return r;
  }
  if (auto st = strategy_in(stage)) {
    r.strategy = *st;
    r.note = "strategy from zero_stage '" + field(row, "zero_stage") + "'";
    return r;
  }
  if (stage.rfind("3-equivalent", 0) == 0 || stage.rfind("2-equivalent", 0) == 0) {
    r.strategy = stage[0] == '3' ? spec::FsdpSharding::FULL_SHARD : spec::FsdpSharding::SHARD_GRAD_OP;
    r.note = std::string(stage[0] == '3' ? "FULL_SHARD" : "SHARD_GRAD_OP") + " from zero_stage '" +
             field(row, "zero_stage") + "' (README: 3-equivalent = FULL_SHARD, 2-equivalent = SHARD_GRAD_OP)";
    return r;
  }
  return std::nullopt;
}

const char* sharding_name(spec::FsdpSharding s)
{
  switch (s) {
  case spec::FsdpSharding::FULL_SHARD:
    return "FULL_SHARD";
  case spec::FsdpSharding::SHARD_GRAD_OP:
    return "SHARD_GRAD_OP";
  case spec::FsdpSharding::HYBRID_SHARD:
    return "HYBRID_SHARD";
  case spec::FsdpSharding::NO_SHARD:
    return "NO_SHARD";
  }
  return "?";
}

/// A PyTorch row's selective activation checkpointing: torchtitan's "selective layer" (every 2nd block fully
/// recomputed, selective_ac_option "2") or "selective op" (a per-op save list: every second matmul output and
/// the attention outputs kept, the rest recomputed), fms-fsdp's selective checkpointing (a fraction of the
/// blocks). None is Megatron's selective recompute (the attention core only), the selective mode modelled.
bool torch_selective_ac(const PublishedRow& row)
{
  const std::string ac = lower(trim(field(row, "activation_checkpointing")));
  return ac.rfind("selective", 0) == 0 || ac.find("(selective") != std::string::npos;
}

/// What a PyTorch row's selective activation checkpointing is, from its source's code (selective_checkpointing).
std::string selective_ac_text(const PublishedRow& row, const spec::SourceRule* src)
{
  if (src)
    for (const spec::SourceSelectiveAc& a : src->selective_checkpointing)
      if (matches(a.when, row))
        return a.text;
  return "selective checkpointing of " + field(row, "framework");
}

/// Reasons why a row cannot be expressed yet (empty: it can). Trap numbers refer to results/validation/README.md.
std::vector<Exclusion> exclusions(const PublishedRow& row, const spec::MappingRules& rules)
{
  std::vector<Exclusion> why;
  const spec::SourceRule* src = rule_of(row, rules);
  const std::string& model = field(row, "model");
  const std::string& stage = field(row, "zero_stage");
  const std::string& other = field(row, "other_parallel");
  const spec::Framework fw = framework_of(row);
  if (is_fairscale(row))
    why.push_back({CAT_FAIRSCALE, "FairScale sharded DDP (OSS/SDP) is not modelled"});
  auto tp = leading_number(field(row, "tp"));
  const bool pipeline = pipeline_parallel_of(row) > 1;
  // "<=16 (MP within node ...)", "Megatron MP (degree not given)": model parallelism of a degree not given.
  bool mp_text = contains(field(row, "tp"), "mp ") || contains(field(row, "tp"), "<=");
  // Megatron tensor parallelism and DeepSpeed's PipelineEngine are modelled (docs/tensor-parallel.md,
  // docs/pipeline-parallel.md); a model-parallel degree not given, a split nobody recorded, the PyTorch frameworks'
  // tensor and pipeline parallelism (DTensor, torch.distributed.pipelining, metaseq) and the schedules DeepSpeed's
  // engine does not have are not.
  const std::string split = "tp " + trim(field(row, "tp")) + ", pp " + trim(field(row, "pp"));
  if (contains(stage, "mp") || mp_text)
    why.push_back({CAT_TP_PP, "a model-parallel degree not given (" + split +
                                  (contains(stage, "mp") ? ", " + stage : "") + ") is not modelled (README trap 6)"});
  else if (pipeline && fw != spec::Framework::DEEPSPEED)
    why.push_back({CAT_TP_PP, "pipeline parallelism with " + field(row, "framework") + " (" + split +
                                  "): only DeepSpeed's PipelineEngine is modelled (docs/pipeline-parallel.md)"});
  else if (pipeline && (contains(field(row, "tp"), "unverified") || contains(field(row, "pp"), "unverified")))
    why.push_back({CAT_TP_PP, "the pipeline split is an unverified recollection (" + split +
                                  "): the stages the run had are not known"});
  else if (const spec::SourcePipeline* pl = pipeline ? pipeline_of(row, rules) : nullptr;
           pl && pl->schedule != spec::PipelineSchedule::ONE_F_ONE_B && pl->schedule != spec::PipelineSchedule::GPIPE)
    why.push_back({CAT_PP_SCHEDULE, pl->note + " (" + split + "); DeepSpeed's PipelineEngine, the pipeline modelled, "
                                                              "has only its non-interleaved TrainSchedule "
                                                              "(docs/pipeline-parallel.md §3)"});
  else if (tp && *tp > 1 && fw != spec::Framework::DEEPSPEED)
    why.push_back({CAT_TP_PP, "tensor parallelism (tp " + trim(field(row, "tp")) + ") with " + field(row, "framework") +
                                  ": only Megatron-DeepSpeed's is modelled (docs/tensor-parallel.md)"});
  if (contains(field(row, "precision"), "float8") || contains(field(row, "precision"), "fp8") ||
      contains(other, "float8") || contains(other, "cp ") || contains(other, "context parallel"))
    why.push_back({CAT_FP8, "FP8 / context parallelism is not modelled (README trap 4)"});
  if (contains(other, "asynctp"))
    why.push_back({CAT_FP8, "AsyncTP (torchtitan's tensor parallelism overlapping its collectives with the matmuls "
                            "they feed) is not modelled"});
  if (contains_any(model, rules.general.encoder_models))
    why.push_back({CAT_ENCODER, "encoder-decoder or encoder-only model (" + model +
                                    "): not expressible as a decoder-only transformer (README trap 8)"});
  if (contains(field(row, "max_model_fit"), "tiling"))
    why.push_back({CAT_TILING,
                   "the limit measured is memory-centric tiling under GPU memory pre-fragmented into 2 GB chunks (the "
                   "largest contiguous allocation); the memory model has neither tiling nor a fragmentation limit"});
  if (fw != spec::Framework::DEEPSPEED && torch_selective_ac(row))
    why.push_back({CAT_AC, "activation checkpointing '" + trim(field(row, "activation_checkpointing")) +
                               "': " + selective_ac_text(row, src) +
                               ", neither full recompute nor Megatron's selective recompute of the attention core "
                               "(the two modes modelled)"});
  if (fw == spec::Framework::FSDP && why.empty() && !fsdp_sharding_of(row, rules))
    why.push_back({CAT_INPUTS, "FSDP sharding strategy not stated (fsdp_sharding '" + field(row, "fsdp_sharding") +
                                   "', zero_stage '" + stage + "')"});
  if (why.empty() && fw == spec::Framework::DEEPSPEED) {
    auto s = stage_of(stage);
    if (!s || *s < 0 || *s > 3)
      why.push_back({CAT_STAGE, "ZeRO stage '" + stage + "' is not one DeepSpeed stage"});
  }
  return why;
}

const spec::SourcePipeline* pipeline_of(const PublishedRow& row, const spec::MappingRules& rules)
{
  if (const spec::SourceRule* src = rule_of(row, rules))
    for (const spec::SourcePipeline& p : src->pipeline)
      if (matches(p.when, row))
        return &p;
  return nullptr;
}

std::string joined(const std::vector<Exclusion>& why)
{
  std::string out;
  for (const auto& w : why)
    add_note(out, w.text);
  return out;
}

/// The ZeRO stage a row's run is equivalent to in what every GPU holds: the DeepSpeed stage; for FSDP, 3 for
/// FULL_SHARD and HYBRID_SHARD (parameters sharded), 2 for SHARD_GRAD_OP, 0 for NO_SHARD; 0 for DDP.
std::optional<int> equivalent_stage(const PublishedRow& row, const spec::MappingRules& rules)
{
  switch (framework_of(row)) {
  case spec::Framework::DEEPSPEED:
    return stage_of(field(row, "zero_stage"));
  case spec::Framework::DDP:
    return 0;
  case spec::Framework::FSDP:
    break;
  }
  auto sh = fsdp_sharding_of(row, rules);
  if (!sh)
    return std::nullopt;
  return spec::equivalent_zero_stage(sh->strategy);
}

const spec::ModelLayout& model_layout(const std::string& model, const spec::GeneralRules& rules)
{
  const std::string name = lower(model);
  for (const spec::ModelLayout& l : rules.model_layouts) {
    const bool starts = std::any_of(l.model_starts_with_any.begin(), l.model_starts_with_any.end(),
                                    [&](const std::string& p) { return name.rfind(lower(p), 0) == 0; });
    if (starts || contains_any(model, l.model_contains_any) ||
        (l.model_contains_any.empty() && l.model_starts_with_any.empty()))
      return l;
  }
  // The reader requires a last entry without a condition.
  throw core::InternalError("model_layout: " + rules.file + " has no layout for '" + model + "'");
}

const spec::FrameworkConvention& framework_convention(const PublishedRow& row, const spec::GeneralRules& rules)
{
  const std::string& framework = field(row, "framework");
  for (const spec::FrameworkConvention& c : rules.frameworks)
    if (contains_any(framework, c.framework_contains_any) || c.framework_contains_any.empty())
      return c;
  // The reader requires a last entry without a condition.
  throw core::InternalError("framework_convention: " + rules.file + " has no convention for '" + framework + "'");
}

std::string node_name_of(const PublishedRow& row, const spec::GeneralRules& rules)
{
  return node_name_for(field(row, "gpu"), field(row, "gpu_mem_GB"), field(row, "inter_node_network"), rules);
}

} // namespace detail

using namespace detail;

std::string node_name_for(const std::string& gpu, const std::string& gpu_mem_GB, const std::string& inter_node_network,
                          const spec::GeneralRules& rules)
{
  const std::optional<double> mem = leading_number(gpu_mem_GB);
  for (const spec::GpuNodeRule& e : rules.gpu_nodes) {
    bool holds = contains_all(gpu, e.gpu_contains) && !contains_any(gpu, e.gpu_lacks) &&
                 (e.network_contains.empty() || contains(inter_node_network, e.network_contains));
    holds = holds && (!e.memory_below_GB || (mem && *mem < *e.memory_below_GB));
    holds = holds && (!e.memory_above_GB || (mem && *mem > *e.memory_above_GB));
    if (holds)
      return e.node;
  }
  return "";
}

std::string framework_label(const PublishedRow& row)
{
  if (is_fairscale(row))
    return "FairScale";
  switch (framework_of(row)) {
  case spec::Framework::FSDP:
    return "FSDP";
  case spec::Framework::DDP:
    return "DDP";
  case spec::Framework::DEEPSPEED:
    break;
  }
  return "DeepSpeed";
}

} // namespace zerosim::validation
