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

std::string Candidate::label() const
{
  return (sharding.empty() ? "stage " + std::to_string(stage) : sharding) + ", " +
         (offload == "none" ? "no offload" : offload) + ", " +
         (checkpointing == "none" ? std::string("no checkpointing") : "checkpointing " + checkpointing) + ", mb " +
         std::to_string(micro_batch) + " x ga " + std::to_string(grad_accum) + ", " + std::to_string(gpus) + " GPUs";
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

/// Simulates every candidate (at most o.jobs at once) and fills in its status and figures from the point's JSON.
void simulate_candidates(const RecommendOptions& o, std::vector<Candidate>& all, std::ostream& err)
{
  Plan plan; // the pipeline's inputs: the scenario, its overrides and calibration (no axes: each candidate its own)
  plan.scenario = o.scenario;
  plan.sets = o.sets;
  plan.calibration = o.calibration;
  err << "recommend: " << all.size() << " candidates, " << o.jobs << " at once\n";
  core::PoolOptions pool;
  pool.jobs = o.jobs;
  pool.time_limit_s = 600;
  std::size_t finished = 0;
  core::run_pool(
      core::count_to(all.size()), [&](std::size_t i) { return simulate_point(plan, all[i].sets); },
      [&](std::size_t i, const core::WorkOutcome& w) {
        Candidate& c = all[i];
        if (w.status != core::WorkStatus::DONE) {
          c.status = w.status == core::WorkStatus::REJECTED      ? "refused: " + w.message
                     : w.status == core::WorkStatus::UNSUPPORTED ? "not modelled: " + w.message
                                                                 : "failed: " + w.message;
        } else {
          const Json r = Json::parse(w.payload);
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
        }
        if (++finished % 20 == 0 || finished == all.size())
          err << "recommend: " << finished << "/" << all.size() << " simulated\n";
      },
      pool);
}

/// candidates.csv: every candidate, its rank among `best` (empty when not ranked) first.
void write_candidates_csv(const fs::path& dir, const std::vector<Candidate>& all,
                          const std::vector<const Candidate*>& best)
{
  std::ostringstream csv;
  csv << "rank,gpus,stage,sharding,offload,activation_checkpointing,micro_batch,grad_accum,status,fits,tight,"
         "step_time_s,"
         "tokens_per_s,tflops_per_gpu_model,gpu_device_bytes,capacity_bytes,shortfall_bytes,cost_per_million_"
         "tokens\n";
  for (const Candidate& c : all) {
    const auto it = std::find(best.begin(), best.end(), &c);
    csv << (it == best.end() ? std::string() : std::to_string(it - best.begin() + 1)) << "," << c.gpus << "," << c.stage
        << "," << core::csv_field(c.sharding) << "," << core::csv_field(c.offload) << "," << c.checkpointing << ","
        << c.micro_batch << "," << c.grad_accum << "," << core::csv_field(c.status) << ","
        << (c.fits ? "true" : "false") << "," << (c.tight ? "true" : "false") << "," << number(c.step_time_s) << ","
        << number(c.tokens_per_s) << "," << number(c.tflops_model) << "," << number(c.gpu_device_bytes) << ","
        << number(c.capacity_bytes) << "," << number(c.shortfall_bytes) << ","
        << (c.cost_per_million_tokens ? number(*c.cost_per_million_tokens) : std::string()) << "\n";
  }
  core::write_file(dir / "candidates.csv", csv.str());
}

} // namespace

int recommend(const RecommendOptions& o, std::ostream& out, std::ostream& err)
{
  std::vector<Candidate> all = candidates(o);
  simulate_candidates(o, all, err);

  const std::vector<const Candidate*> best = ranked(all);
  // Without --out, a new folder of its own (core::output_dir): nothing that exists is written over.
  const fs::path dir = core::output_dir(o.out_dir, fs::path(o.scenario).stem().string(), "recommend");
  out << "recommend: writing into " << dir.string() << "\n";
  write_candidates_csv(dir, all, best);

  const std::vector<const Candidate*> tight = tight_ones(all);
  int pruned = 0, failed = 0;
  for (const Candidate& c : all) {
    pruned += c.status == "done" && !c.fits ? 1 : 0;
    failed += c.status != "done" ? 1 : 0;
  }
  out << "recommend: searched " << all.size() << " candidates of " << o.scenario
      << " (sharding: ZeRO stage or FSDP strategy x offload x activation checkpointing x micro-batch, global batch "
         "fixed"
      << (o.gpus.empty() ? "" : ", x GPU count") << "): " << best.size() << " fit with "
      << core::format_fixed(100 * o.headroom, 1) << " % of the GPU free, " << tight.size() << " fit tightly, " << pruned
      << " do not fit, " << failed << " not simulated\n"
      << "Headroom " << core::format_fixed(100 * o.headroom, 1)
      << " %: a candidate must leave that share of the GPU free to be ranked; reserved memory is predicted a median "
      << core::format_fixed(100 * memory::DEFAULT_HEADROOM, 1)
      << " % off on published runs (docs/recommend.md \"Headroom\"; --headroom FRACTION changes it)\n\n";
  if (best.empty()) {
    out << (tight.empty() ? "No candidate fits." : "No candidate fits with the headroom free.")
        << (pruned > 0 ? " The nearest that do not fit, by shortfall, are below.\n" : "\n");
  } else {
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
  if (!tight.empty()) {
    out << "\nTight (fit, but with less than " << core::format_fixed(100 * o.headroom, 1)
        << " % of the GPU free: never ranked; fastest first):\n";
    for (std::size_t k = 0; k < tight.size() && k < 5; ++k) {
      const Candidate& c = *tight[k];
      out << "  tight  " << core::format_fixed(c.step_time_s, 3) << " s, "
          << core::format_fixed(c.gpu_device_bytes / core::GIB, 1) << " of "
          << core::format_fixed(c.capacity_bytes / core::GIB, 1) << " GiB ("
          << core::format_fixed(100 * (c.capacity_bytes - c.gpu_device_bytes) / c.capacity_bytes, 1)
          << " % free): " << c.label() << "\n";
    }
    if (tight.size() > 5)
      out << "  ... " << tight.size() - 5 << " more in " << (dir / "candidates.csv").string() << "\n";
  }
  std::vector<const Candidate*> short_of;
  for (const Candidate& c : all)
    if (c.status == "done" && !c.fits)
      short_of.push_back(&c);
  std::stable_sort(short_of.begin(), short_of.end(),
                   [](const Candidate* a, const Candidate* b) { return a->shortfall_bytes < b->shortfall_bytes; });
  if (!short_of.empty()) {
    out << "\nPruned (do not fit; nearest first, shortfall of the tier that overflows):\n";
    for (std::size_t k = 0; k < short_of.size() && k < 5; ++k)
      out << "  short by " << core::format_fixed(short_of[k]->shortfall_bytes / core::GIB, 1)
          << " GiB: " << short_of[k]->label() << "\n";
    if (short_of.size() > 5)
      out << "  ... " << short_of.size() - 5 << " more in " << (dir / "candidates.csv").string() << "\n";
  }
  if (best.empty())
    return 1;

  // The winner, written out: its resolved scenario naming the ds_config.json beside it.
  const Candidate& win = *best.front();
  config::LoadOptions lo;
  lo.sets = o.sets;
  lo.sets.insert(lo.sets.end(), win.sets.begin(), win.sets.end());
  lo.calibration = o.calibration;
  spec::Scenario s = config::load_scenario(o.scenario, lo);
  s.sweep.clear();
  s.name += " (zerosim recommend: " + win.label() + ")";
  std::string written;
  if (s.framework == spec::Framework::FSDP) {
    core::write_file(dir / "scenario.yaml", config::resolved_yaml(s));
    core::write_file(dir / "fsdp_settings.py", fsdp_snippet(win, s));
    written =
        (dir / "scenario.yaml").string() + " (zerosim run gives these figures), " + (dir / "fsdp_settings.py").string();
  } else {
    core::write_file(dir / "ds_config.json", config::deepspeed_json(s));
    core::write_file(dir / "scenario.yaml", config::resolved_yaml(s, "ds_config.json"));
    core::write_file(dir / "hf_trainer.py", hf_snippet(win, s));
    written = (dir / "ds_config.json").string() + ", " + (dir / "scenario.yaml").string() +
              " (zerosim run gives these figures), " + (dir / "hf_trainer.py").string();
  }
  out << "\nRecommended: " << win.label() << ": " << core::format_fixed(win.step_time_s, 3) << " s per step, "
      << core::format_fixed(win.tokens_per_s, 1) << " tokens/s.\nWritten: " << written << ", "
      << (dir / "candidates.csv").string() << "\n";
  return 0;
}

} // namespace zerosim::sweep
