#include "sweep/recommend.hpp"

#include "config/scenario_loader.hpp"
#include "core/bytes.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "core/worker_pool.hpp"
#include "spec/names.hpp"
#include "sweep/sweep.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <sstream>

namespace zerosim::sweep {

namespace fs = std::filesystem;
using core::Json;

namespace {

/// A number of candidates.csv as the run JSON writes it.
std::string number(double v)
{
  return core::dump_json(Json(v), -1);
}

/// The offload settings a stage allows, in the seed article's order (faster first): none; the optimizer on the CPU
/// (stage 1-3, ZeRO-Offload); stage 3 also the parameters on the CPU, and both on NVMe when the node has NVMe
/// (ZeRO-Infinity).
std::vector<std::pair<std::string, std::vector<std::string>>> offloads(int stage, bool nvme)
{
  const std::string opt = "deepspeed.zero_optimization.offload_optimizer.device=";
  const std::string par = "deepspeed.zero_optimization.offload_param.device=";
  std::vector<std::pair<std::string, std::vector<std::string>>> out = {{"none", {opt + "none", par + "none"}}};
  if (stage >= 1)
    out.push_back({"optimizer cpu", {opt + "cpu", par + "none"}});
  if (stage == 3) {
    out.push_back({"optimizer + params cpu", {opt + "cpu", par + "cpu"}});
    if (nvme)
      out.push_back({"optimizer + params nvme", {opt + "nvme", par + "nvme"}});
  }
  return out;
}

/// The Trainer's `fsdp` option that matches the sharding ("full_shard", "shard_grad_op", ...; " offload" with
/// CPUOffload).
std::string hf_fsdp_option(const spec::Scenario& s)
{
  std::string o;
  if (s.fsdp.reshard_after_forward)
    o = *s.fsdp.reshard_after_forward ? "full_shard" : "shard_grad_op";
  else
    o = core::lowercase(spec::to_string(s.fsdp.sharding_strategy)); // the Trainer's option: "shard_grad_op", ...
  return s.fsdp.cpu_offload ? o + " offload" : o;
}

const std::string FSDP_MODULE = "torch.distributed.fsdp";

} // namespace

std::vector<config::TorchFsdpName> fsdp_names(const spec::Scenario& s)
{
  if (s.fsdp.reshard_after_forward)
    return {{FSDP_MODULE, "fully_shard"},
            {FSDP_MODULE, "CPUOffloadPolicy"},
            {FSDP_MODULE, "OffloadPolicy"},
            {"fully_shard", "reshard_after_forward"},
            {"fully_shard", "offload_policy"}};
  return {{FSDP_MODULE, "FullyShardedDataParallel"},
          {FSDP_MODULE, "ShardingStrategy"},
          {FSDP_MODULE, "CPUOffload"},
          {"FullyShardedDataParallel", "sharding_strategy"},
          {"FullyShardedDataParallel", "cpu_offload"},
          {"FullyShardedDataParallel", "limit_all_gathers"},
          {"ShardingStrategy", spec::to_string(s.fsdp.sharding_strategy)},
          {"CPUOffload", "offload_params"}};
}

std::string fsdp_snippet(const Candidate& c, const spec::Scenario& s)
{
  config::check_torch_fsdp_names(config::torch_fsdp_table(), fsdp_names(s), s.software.torch,
                                 "fsdp_settings.py for " + s.file);
  const bool bf16 = s.training.precision == spec::Precision::BF16 || s.training.precision == spec::Precision::AMP_BF16;
  std::ostringstream py;
  py << "# The FSDP configuration zerosim recommend chose (" << c.label() << ").\n";
  if (s.fsdp.reshard_after_forward) {
    py << "# FSDP2: apply to each transformer block, then to the root module.\n"
       << "from torch.distributed.fsdp import fully_shard, CPUOffloadPolicy, OffloadPolicy\n\n"
       << "fsdp_kwargs = dict(\n"
       << "    reshard_after_forward=" << (*s.fsdp.reshard_after_forward ? "True" : "False") << ",\n"
       << "    offload_policy=" << (s.fsdp.cpu_offload ? "CPUOffloadPolicy()" : "OffloadPolicy()") << ",\n"
       << ")\n";
  } else {
    py << "# FSDP1: FullyShardedDataParallel(model, **fsdp_kwargs), wrapping each block.\n"
       << "from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy, CPUOffload\n\n"
       << "fsdp_kwargs = dict(\n"
       << "    sharding_strategy=ShardingStrategy." << spec::to_string(s.fsdp.sharding_strategy) << ",\n"
       << "    cpu_offload=CPUOffload(offload_params=" << (s.fsdp.cpu_offload ? "True" : "False") << "),\n"
       << "    limit_all_gathers=" << (s.fsdp.limit_all_gathers ? "True" : "False") << ",\n"
       << ")\n";
  }
  py << "\n# Hugging Face Trainer: per_device_train_batch_size=" << c.micro_batch
     << ", gradient_accumulation_steps=" << c.grad_accum
     << ", gradient_checkpointing=" << (c.checkpointing != "none" ? "True" : "False")
     << ", bf16=" << (bf16 ? "True" : "False") << ",\n# fsdp=\"" << hf_fsdp_option(s) << " auto_wrap\".\n"
     << "# " << c.gpus << " GPUs (" << c.gpus / s.cluster.gpus_per_node << " nodes of " << s.cluster.gpus_per_node
     << "): global batch " << s.training.global_batch << " sequences of " << s.training.seq_len << " tokens.\n";
  return py.str();
}

namespace {

/// The Hugging Face Trainer / Accelerate settings of the winner, as Python to paste.
std::string hf_snippet(const Candidate& c, const spec::Scenario& s)
{
  std::ostringstream py;
  py << "# The configuration zerosim recommend chose (" << c.label() << ").\n"
     << "# Hugging Face Trainer: pass these to TrainingArguments (the DeepSpeed config is ds_config.json beside this\n"
     << "# file; with Accelerate, `accelerate launch --use_deepspeed --deepspeed_config_file ds_config.json ...`).\n"
     << "from transformers import TrainingArguments\n\n"
     << "args = TrainingArguments(\n"
     << "    output_dir=\"out\",\n"
     << "    per_device_train_batch_size=" << c.micro_batch << ",\n"
     << "    gradient_accumulation_steps=" << c.grad_accum << ",\n"
     << "    gradient_checkpointing=" << (c.checkpointing != "none" ? "True" : "False") << ",\n"
     << "    bf16=" << (s.training.precision == spec::Precision::BF16 ? "True" : "False") << ",\n"
     << "    fp16=" << (s.training.precision == spec::Precision::FP16 ? "True" : "False") << ",\n"
     << "    deepspeed=\"ds_config.json\",\n"
     << ")\n"
     << "# " << c.gpus << " GPUs (" << c.gpus / s.cluster.gpus_per_node << " nodes of " << s.cluster.gpus_per_node
     << "): global batch " << s.training.global_batch << " sequences of " << s.training.seq_len << " tokens.\n";
  return py.str();
}

} // namespace

void run_candidates(const RecommendOptions& o, std::vector<Candidate>& all, const std::vector<std::size_t>& todo,
                    const std::function<std::string(const Candidate&)>& work,
                    const std::function<void(Candidate&, const Json&)>& done,
                    const std::function<void(std::size_t)>& progress)
{
  core::PoolOptions pool;
  pool.jobs = o.jobs;
  pool.time_limit_s = 600;
  std::size_t finished = 0;
  core::run_pool(
      core::count_to(todo.size()), [&](std::size_t k) { return work(all[todo[k]]); },
      [&](std::size_t k, const core::WorkOutcome& w) {
        Candidate& c = all[todo[k]];
        if (w.status == core::WorkStatus::DONE)
          done(c, Json::parse(w.payload));
        else
          c.status = w.status == core::WorkStatus::REJECTED      ? "refused: " + w.message
                     : w.status == core::WorkStatus::UNSUPPORTED ? "not modelled: " + w.message
                                                                 : "failed: " + w.message;
        progress(++finished);
      },
      pool);
}

std::string Candidate::label() const
{
  const std::string head =
      (sharding.empty() ? "stage " + std::to_string(stage) : sharding) + ", " +
      (offload == "none" ? "no offload" : offload) + ", " +
      (checkpointing == "none" ? std::string("no checkpointing") : "checkpointing " + checkpointing);
  if (pipeline_parallel > 0) // DeepSpeed's gradient_accumulation_steps is the pipeline's micro-batches per step
    return head + ", tp " + std::to_string(tensor_parallel) + " x pp " + std::to_string(pipeline_parallel) + " x dp " +
           std::to_string(gpus / (tensor_parallel * pipeline_parallel)) + ", mb " + std::to_string(micro_batch) +
           " x " + std::to_string(grad_accum) + " micro-batches, " + std::to_string(gpus) + " GPUs";
  return head + ", mb " + std::to_string(micro_batch) + " x ga " + std::to_string(grad_accum) + ", " +
         std::to_string(gpus) + " GPUs";
}

std::vector<Candidate> candidates(const RecommendOptions& o)
{
  config::LoadOptions lo;
  lo.sets = o.sets;
  lo.calibration = o.calibration;
  const spec::Scenario s = config::load_scenario(o.scenario, lo);
  if (s.framework == spec::Framework::DDP)
    throw core::InputError("recommend: " + o.scenario +
                           " runs DDP, which has no sharding or offload to choose; "
                           "recommend searches DeepSpeed's ZeRO stages and offloads, or FSDP's sharding and offload");
  if (s.training.mode != spec::Mode::TRAIN)
    throw core::InputError("recommend: " + o.scenario + " is an inference run; recommend searches training setups");
  const int gpn = s.cluster.gpus_per_node;
  std::vector<int> sizes = o.gpus.empty() ? std::vector<int>{s.cluster.total_gpus()} : o.gpus;
  const bool nvme = s.cluster.node.nvme.devices > 0;
  const std::int64_t global = s.training.global_batch;
  // Off and full, and the scenario's own mode when it is a selective one (so that its setting is a candidate too).
  std::vector<std::string> checkpointing_modes = {"none", "full"};
  const std::string own = spec::to_string(s.training.activation_checkpointing);
  if (std::find(checkpointing_modes.begin(), checkpointing_modes.end(), own) == checkpointing_modes.end())
    checkpointing_modes.push_back(own);
  std::vector<Candidate> out;
  for (int gpus : sizes) {
    if (gpus <= 0 || gpus % gpn != 0)
      throw core::InputError("--gpus: " + std::to_string(gpus) + " is not a whole number of " + std::to_string(gpn) +
                             "-GPU nodes (cluster.gpus_per_node)");
    if (s.framework == spec::Framework::DEEPSPEED && s.pp() > 1) { // DeepSpeed's pipeline engine: its own search
      std::vector<Candidate> p = pipeline_candidates(s, gpus);
      if (p.empty())
        throw core::InputError("recommend: no tensor-parallel and pipeline degree of " + std::to_string(gpus) +
                               " GPUs keeps the global batch " + std::to_string(global) +
                               " (the data-parallel degree GPUs / (t x p) must divide it; docs/recommend.md "
                               "\"Pipeline scenarios\")");
      std::move(p.begin(), p.end(), std::back_inserter(out));
      continue;
    }
    const int dp = spec::data_parallel_of(gpus, s.tp());
    if (global % dp != 0)
      throw core::InputError("recommend: the global batch " + std::to_string(global) + " does not split over " +
                             std::to_string(dp) + " data-parallel ranks (" + std::to_string(gpus) + " GPUs)");
    const std::int64_t per_gpu = global / dp;
    auto add = [&](int stage, const std::string& sharding, const std::string& offload,
                   const std::vector<std::string>& framework_sets) {
      for (const std::string& ckpt : checkpointing_modes)
        for (std::int64_t mb = 1; mb <= per_gpu; mb *= 2) {
          if (per_gpu % mb != 0)
            continue;
          Candidate c;
          c.gpus = gpus;
          c.stage = stage;
          c.sharding = sharding;
          c.offload = offload;
          c.checkpointing = ckpt;
          c.micro_batch = static_cast<int>(mb);
          c.grad_accum = static_cast<int>(per_gpu / mb);
          c.sets = {"cluster.nodes=" + std::to_string(gpus / gpn), "training.activation_checkpointing=" + ckpt,
                    "training.micro_batch=" + std::to_string(mb)};
          c.sets.push_back(s.training.global_batch_given ? "training.global_batch=" + std::to_string(global)
                                                         : "training.grad_accum=" + std::to_string(per_gpu / mb));
          c.sets.insert(c.sets.end(), framework_sets.begin(), framework_sets.end());
          out.push_back(std::move(c));
        }
    };
    if (s.framework == spec::Framework::FSDP) {
      // FSDP: the sharding (FSDP2's reshard_after_forward when the scenario uses FSDP2, else FSDP1's strategies,
      // HYBRID_SHARD on more than one node) x CPUOffload; `stage` numbers them in the ZeRO stage they match. The
      // names fsdp_settings.py would write must exist in software.torch's release (data/torch_fsdp_arguments.csv):
      // a ShardingStrategy member it lacks is not searched, any other name missing refuses the scenario.
      const config::TorchFsdpTable& table = config::torch_fsdp_table();
      std::vector<config::TorchFsdpName> names = fsdp_names(s);
      std::erase_if(names, [](const config::TorchFsdpName& n) { return n.first == "ShardingStrategy"; });
      config::check_torch_fsdp_names(table, names, s.software.torch, "recommend: fsdp_settings.py for " + o.scenario);
      const config::TorchFsdpVersion& torch = *table.for_torch(s.software.torch);
      auto add_strategy = [&](int stage, const std::string& strategy, const std::string& what, const std::string& off) {
        if (torch.has({"ShardingStrategy", strategy}))
          add(stage, "FSDP " + strategy, what, {"fsdp.sharding_strategy=" + strategy, off});
      };
      for (bool offload : {false, true}) {
        const std::string off = std::string("fsdp.cpu_offload=") + (offload ? "true" : "false");
        const std::string what = offload ? "params cpu (CPUOffload)" : "none";
        if (s.fsdp.reshard_after_forward) {
          add(3, "FSDP2 reshard_after_forward", what, {"fsdp.reshard_after_forward=true", off});
          add(2, "FSDP2 no reshard after forward", what, {"fsdp.reshard_after_forward=false", off});
        } else {
          add_strategy(3, "FULL_SHARD", what, off);
          add_strategy(2, "SHARD_GRAD_OP", what, off);
          if (gpus / gpn > 1)
            add_strategy(3, "HYBRID_SHARD", what, off); // not in torch 1.13's ShardingStrategy
          add_strategy(0, "NO_SHARD", what, off);
        }
      }
      continue;
    }
    for (int stage = 0; stage <= 3; ++stage)
      for (const auto& [offload, offload_sets] : offloads(stage, nvme)) {
        std::vector<std::string> sets = {"deepspeed.zero_optimization.stage=" + std::to_string(stage)};
        sets.insert(sets.end(), offload_sets.begin(), offload_sets.end());
        add(stage, "", offload, sets);
      }
  }
  return out;
}

namespace {

/// The candidates that ran and fit, tight (`tight`) or not, in the ranking's order.
std::vector<const Candidate*> fitting(const std::vector<Candidate>& all, bool tight)
{
  std::vector<const Candidate*> fit;
  for (const Candidate& c : all)
    if (c.status == "done" && c.fits && c.tight == tight)
      fit.push_back(&c);
  std::stable_sort(fit.begin(), fit.end(), [](const Candidate* a, const Candidate* b) {
    if (a->cost_per_million_tokens && b->cost_per_million_tokens &&
        *a->cost_per_million_tokens != *b->cost_per_million_tokens)
      return *a->cost_per_million_tokens < *b->cost_per_million_tokens;
    if (a->step_time_s != b->step_time_s)
      return a->step_time_s < b->step_time_s;
    return a->gpu_device_bytes < b->gpu_device_bytes;
  });
  return fit;
}

} // namespace

std::vector<const Candidate*> ranked(const std::vector<Candidate>& all)
{
  return fitting(all, false);
}

std::vector<const Candidate*> tight_ones(const std::vector<Candidate>& all)
{
  return fitting(all, true);
}

namespace {

/// Simulates every candidate not yet judged (status empty; prune_by_memory judges pipeline candidates first), at most
/// o.jobs at once, and fills in its status and figures from the point's JSON.
void simulate_candidates(const RecommendOptions& o, std::vector<Candidate>& all, std::ostream& err)
{
  Plan plan; // the pipeline's inputs: the scenario, its overrides and calibration (no axes: each candidate its own)
  plan.scenario = o.scenario;
  plan.sets = o.sets;
  plan.calibration = o.calibration;
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].status.empty())
      todo.push_back(i);
  if (todo.size() == all.size())
    err << "recommend: " << all.size() << " candidates, " << o.jobs << " at once\n";
  else
    err << "recommend: " << todo.size() << " of " << all.size() << " candidates to simulate, " << o.jobs
        << " at once\n";
  run_candidates(
      o, all, todo, [&](const Candidate& c) { return simulate_point(plan, c.sets); },
      [&](Candidate& c, const Json& r) {
        c.status = "done";
        c.fits = r.value("fits", false);
        c.step_time_s = core::number_at(r, {"step_time_s"}).value_or(0);
        c.tokens_per_s = core::number_at(r, {"tokens_per_s"}).value_or(0);
        c.tflops_model = core::number_at(r, {"tflops_per_gpu", "model"}).value_or(0);
        c.gpu_device_bytes = core::number_at(r, {"peak_memory_bytes", "gpu_device"}).value_or(0);
        c.capacity_bytes = core::number_at(r, {"capacity_bytes", "gpu"}).value_or(0);
        c.shortfall_bytes = core::number_at(r, {"shortfall_bytes"}).value_or(0);
        c.tight = c.fits && memory::is_tight(c.gpu_device_bytes, c.capacity_bytes, o.headroom);
        if (const auto per_step = core::number_at(r, {"cost", "per_step"}); per_step && c.tokens_per_s > 0)
          c.cost_per_million_tokens = *per_step / (c.tokens_per_s * c.step_time_s) * 1e6;
      },
      [&](std::size_t finished) {
        if (finished % 20 == 0 || finished == todo.size())
          err << "recommend: " << finished << "/" << todo.size() << " simulated\n";
      });
}

/// candidates.csv: every candidate, its rank among `best` (empty when not ranked) first; a pipeline search adds the
/// tensor-parallel and pipeline degrees after the GPUs.
void write_candidates_csv(const fs::path& dir, const std::vector<Candidate>& all,
                          const std::vector<const Candidate*>& best)
{
  const bool pipeline = std::any_of(all.begin(), all.end(), [](const Candidate& c) { return c.pipeline_parallel > 0; });
  std::ostringstream csv;
  csv << "rank,gpus," << (pipeline ? "tensor_parallel,pipeline_parallel," : "")
      << "stage,sharding,offload,activation_checkpointing,micro_batch,grad_accum,status,fits,tight,"
         "step_time_s,"
         "tokens_per_s,tflops_per_gpu_model,gpu_device_bytes,capacity_bytes,shortfall_bytes,cost_per_million_"
         "tokens\n";
  for (const Candidate& c : all) {
    const auto it = std::find(best.begin(), best.end(), &c);
    csv << (it == best.end() ? std::string() : std::to_string(it - best.begin() + 1)) << "," << c.gpus << ",";
    if (pipeline)
      csv << c.tensor_parallel << "," << c.pipeline_parallel << ",";
    csv << c.stage << "," << core::csv_field(c.sharding) << "," << core::csv_field(c.offload) << "," << c.checkpointing
        << "," << c.micro_batch << "," << c.grad_accum << "," << core::csv_field(c.status) << ","
        << (c.fits ? "true" : "false") << "," << (c.tight ? "true" : "false") << "," << number(c.step_time_s) << ","
        << number(c.tokens_per_s) << "," << number(c.tflops_model) << "," << number(c.gpu_device_bytes) << ","
        << number(c.capacity_bytes) << "," << number(c.shortfall_bytes) << ","
        << (c.cost_per_million_tokens ? number(*c.cost_per_million_tokens) : std::string()) << "\n";
  }
  core::write_file(dir / "candidates.csv", csv.str());
}

} // namespace

namespace {

/// How the candidates ended: simulated and fitting (tight or not), not fitting, judged by the memory analysis alone
/// (pipeline searches: PRUNED_BY_MEMORY, tight or not fitting), or not run (refused, not modelled, failed).
struct Tally {
  int short_of = 0, memory_short = 0, memory_tight = 0, not_run = 0;
  explicit Tally(const std::vector<Candidate>& all)
  {
    for (const Candidate& c : all) {
      short_of += c.status == "done" && !c.fits ? 1 : 0;
      memory_short += c.status == PRUNED_BY_MEMORY && !c.fits ? 1 : 0;
      memory_tight += c.status == PRUNED_BY_MEMORY && c.tight ? 1 : 0;
      not_run += c.status != "done" && c.status != PRUNED_BY_MEMORY ? 1 : 0;
    }
  }
};

/// The search's first lines: what was searched, how many fit, the headroom.
void print_search(const RecommendOptions& o, const std::vector<Candidate>& all, std::size_t best, std::size_t tight,
                  std::ostream& out)
{
  const Tally n(all);
  const bool pipeline = std::any_of(all.begin(), all.end(), [](const Candidate& c) { return c.pipeline_parallel > 0; });
  out << "recommend: searched " << all.size() << " candidates of " << o.scenario
      << (pipeline ? " (tensor-parallel x pipeline degree x ZeRO stage 0 or 1 x optimizer offload x activation "
                     "checkpointing x micro-batch, global batch fixed"
                   : " (sharding: ZeRO stage or FSDP strategy x offload x activation checkpointing x micro-batch, "
                     "global batch fixed")
      << (o.gpus.empty() ? "" : ", x GPU count") << "): " << best << " fit with "
      << core::format_fixed(100 * o.headroom, 1) << " % of the GPU free, " << tight + n.memory_tight << " fit tightly, "
      << n.short_of + n.memory_short << " do not fit, " << n.not_run << " not simulated\n";
  if (n.memory_short + n.memory_tight > 0)
    out << "Judged by the memory analysis alone, before any simulation (docs/recommend.md \"Pipeline scenarios\"): "
        << n.memory_short << " that do not fit, " << n.memory_tight << " tight\n";
  out << "Headroom " << core::format_fixed(100 * o.headroom, 1)
      << " %: a candidate must leave that share of the GPU free to be ranked; reserved memory is predicted a median "
      << core::format_fixed(100 * memory::DEFAULT_HEADROOM, 1)
      << " % off on published runs (docs/recommend.md \"Headroom\"; --headroom FRACTION changes it)\n\n";
}

/// The ten best ranked, or why there is none.
void print_ranked(const std::vector<const Candidate*>& best, bool any_tight, bool any_short, const fs::path& dir,
                  std::ostream& out)
{
  if (best.empty()) {
    out << (any_tight ? "No candidate fits with the headroom free." : "No candidate fits.")
        << (any_short ? " The nearest that do not fit, by shortfall, are below.\n" : "\n");
    return;
  }
  const bool priced = best.front()->cost_per_million_tokens.has_value();
  out << "Ranked (" << (priced ? "cheapest per million tokens first" : "fastest first") << "):\n"
      << "  rank  step time      tokens/s  TFLOPs/GPU  GPU memory (headroom)     " << (priced ? "$/Mtok  " : "")
      << "configuration\n";
  for (std::size_t k = 0; k < best.size() && k < 10; ++k) {
    const Candidate& c = *best[k];
    char line[512];
    std::snprintf(line, sizeof line, "  %4zu  %9.3f s  %10.1f  %10.1f  %6.1f GiB (%5.1f GiB)  ", k + 1, c.step_time_s,
                  c.tokens_per_s, c.tflops_model, c.gpu_device_bytes / core::GIB,
                  (c.capacity_bytes - c.gpu_device_bytes) / core::GIB);
    out << line << (priced ? core::format_fixed(*c.cost_per_million_tokens, 3) + "  " : "") << c.label() << "\n";
  }
  if (best.size() > 10)
    out << "  ... " << best.size() - 10 << " more in " << (dir / "candidates.csv").string() << "\n";
}

/// "X of Y GiB (Z % free)" of a candidate that fits.
std::string filled(const Candidate& c)
{
  return core::format_fixed(c.gpu_device_bytes / core::GIB, 1) + " of " +
         core::format_fixed(c.capacity_bytes / core::GIB, 1) + " GiB (" +
         core::format_fixed(100 * (c.capacity_bytes - c.gpu_device_bytes) / c.capacity_bytes, 1) + " % free)";
}

/// The tight ones simulated (fastest first) and those the memory analysis found tight (least memory first).
void print_tight(const RecommendOptions& o, const std::vector<Candidate>& all,
                 const std::vector<const Candidate*>& tight, const fs::path& dir, std::ostream& out)
{
  if (!tight.empty()) {
    out << "\nTight (fit, but with less than " << core::format_fixed(100 * o.headroom, 1)
        << " % of the GPU free: never ranked; fastest first):\n";
    for (std::size_t k = 0; k < tight.size() && k < 5; ++k)
      out << "  tight  " << core::format_fixed(tight[k]->step_time_s, 3) << " s, " << filled(*tight[k]) << ": "
          << tight[k]->label() << "\n";
    if (tight.size() > 5)
      out << "  ... " << tight.size() - 5 << " more in " << (dir / "candidates.csv").string() << "\n";
  }
  std::vector<const Candidate*> by_memory;
  for (const Candidate& c : all)
    if (c.status == PRUNED_BY_MEMORY && c.tight)
      by_memory.push_back(&c);
  std::stable_sort(by_memory.begin(), by_memory.end(),
                   [](const Candidate* a, const Candidate* b) { return a->gpu_device_bytes < b->gpu_device_bytes; });
  if (by_memory.empty())
    return;
  out << "\nTight by the memory analysis (less than " << core::format_fixed(100 * o.headroom, 1)
      << " % of the GPU free: not simulated; least memory first):\n";
  for (std::size_t k = 0; k < by_memory.size() && k < 5; ++k)
    out << "  tight  " << filled(*by_memory[k]) << ": " << by_memory[k]->label() << "\n";
  if (by_memory.size() > 5)
    out << "  ... " << by_memory.size() - 5 << " more in " << (dir / "candidates.csv").string() << "\n";
}

/// The candidates that do not fit, simulated or judged by the memory analysis, nearest first.
void print_short(const std::vector<Candidate>& all, const fs::path& dir, std::ostream& out)
{
  std::vector<const Candidate*> short_of;
  for (const Candidate& c : all)
    if ((c.status == "done" || c.status == PRUNED_BY_MEMORY) && !c.fits)
      short_of.push_back(&c);
  std::stable_sort(short_of.begin(), short_of.end(),
                   [](const Candidate* a, const Candidate* b) { return a->shortfall_bytes < b->shortfall_bytes; });
  if (short_of.empty())
    return;
  out << "\nPruned (do not fit; nearest first, shortfall of the tier that overflows):\n";
  for (std::size_t k = 0; k < short_of.size() && k < 5; ++k)
    out << "  short by " << core::format_fixed(short_of[k]->shortfall_bytes / core::GIB, 1)
        << (short_of[k]->status == PRUNED_BY_MEMORY ? " GiB (memory analysis): " : " GiB: ") << short_of[k]->label()
        << "\n";
  if (short_of.size() > 5)
    out << "  ... " << short_of.size() - 5 << " more in " << (dir / "candidates.csv").string() << "\n";
}

/// The winner's files in `dir`; returns their paths as the last line names them.
std::string write_winner(const RecommendOptions& o, const Candidate& win, const fs::path& dir)
{
  // The winner's resolved scenario naming the ds_config.json (or holding the fsdp: block) beside it.
  config::LoadOptions lo;
  lo.sets = o.sets;
  lo.sets.insert(lo.sets.end(), win.sets.begin(), win.sets.end());
  lo.calibration = o.calibration;
  spec::Scenario s = config::load_scenario(o.scenario, lo);
  s.sweep.clear();
  s.name += " (zerosim recommend: " + win.label() + ")";
  if (s.framework == spec::Framework::FSDP) {
    core::write_file(dir / "scenario.yaml", config::resolved_yaml(s));
    core::write_file(dir / "fsdp_settings.py", fsdp_snippet(win, s));
    return (dir / "scenario.yaml").string() + " (zerosim run gives these figures), " +
           (dir / "fsdp_settings.py").string();
  }
  core::write_file(dir / "ds_config.json", config::deepspeed_json(s));
  core::write_file(dir / "scenario.yaml", config::resolved_yaml(s, "ds_config.json"));
  // The Hugging Face Trainer has no DeepSpeed pipeline: a pipeline winner gets Megatron-DeepSpeed's arguments.
  const fs::path launch = s.pp() > 1 ? dir / "megatron_deepspeed_args.sh" : dir / "hf_trainer.py";
  core::write_file(launch, s.pp() > 1 ? megatron_deepspeed_args(win, s) : hf_snippet(win, s));
  return (dir / "ds_config.json").string() + ", " + (dir / "scenario.yaml").string() +
         " (zerosim run gives these figures), " + launch.string();
}

} // namespace

int recommend(const RecommendOptions& o, std::ostream& out, std::ostream& err)
{
  std::vector<Candidate> all = candidates(o);
  prune_by_memory(o, all, err); // pipeline candidates only: the rest are all simulated
  simulate_candidates(o, all, err);

  const std::vector<const Candidate*> best = ranked(all);
  // Without --out, a new folder of its own (core::output_dir): nothing that exists is written over.
  const fs::path dir = core::output_dir(o.out_dir, fs::path(o.scenario).stem().string(), "recommend");
  out << "recommend: writing into " << dir.string() << "\n";
  write_candidates_csv(dir, all, best);

  const std::vector<const Candidate*> tight = tight_ones(all);
  const Tally n(all);
  print_search(o, all, best.size(), tight.size(), out);
  print_ranked(best, !tight.empty() || n.memory_tight > 0, n.short_of + n.memory_short > 0, dir, out);
  print_tight(o, all, tight, dir, out);
  print_short(all, dir, out);
  if (best.empty())
    return 1;
  const Candidate& win = *best.front();
  const std::string written = write_winner(o, win, dir);
  out << "\nRecommended: " << win.label() << ": " << core::format_fixed(win.step_time_s, 3) << " s per step, "
      << core::format_fixed(win.tokens_per_s, 1) << " tokens/s.\nWritten: " << written << ", "
      << (dir / "candidates.csv").string() << "\n";
  return 0;
}

} // namespace zerosim::sweep
