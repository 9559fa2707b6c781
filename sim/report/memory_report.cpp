#include "report/memory_report.hpp"
#include "spec/names.hpp"

#include "core/bytes.hpp"
#include "core/text.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace zerosim::report {

const char* memory_category_key(int c)
{
  static const char* keys[spec::MEM_CATEGORY_COUNT] = {"params",      "grads",   "optimizer",
                                                       "activations", "buffers", "other"};
  return keys[c];
}

namespace {

core::Json ladder_json(const std::vector<run::LadderStep>& ladder)
{
  core::Json steps = core::Json::array();
  for (const auto& rung : ladder)
    steps.push_back(core::Json::object({{"change", rung.change},
                                        {"fits", rung.report.fits},
                                        {"gpu_device_bytes", rung.report.gpu_device},
                                        {"cpu_per_node_bytes", rung.report.cpu_per_node},
                                        {"nvme_per_node_bytes", rung.report.nvme_per_node}}));
  return steps;
}

/// A data file named as the result should name it: relative to the repository when it lies inside it (the shipped
/// calibration/kernels.yaml found through the build's data folder is an absolute path of the build machine), as given
/// otherwise. Results carry no path of the machine they were made on (docs/testing.md "The repository stands alone").
std::string data_file_name(const std::string& file)
{
  namespace fs = std::filesystem;
  const fs::path p = fs::path(file).lexically_normal();
  if (!p.is_absolute())
    return file;
  const fs::path rel = p.lexically_relative(fs::path(ZEROSIM_DATA_DIR).lexically_normal());
  if (rel.empty() || *rel.begin() == "..")
    return file;
  return rel.generic_string();
}

} // namespace

core::Json meta_json(const spec::Scenario& s, const std::string& network_model)
{
  return core::Json::object(
      {{"zerosim_version", ZEROSIM_VERSION},
       {"schema_version", 1},
       {"simgrid_version", ZEROSIM_SIMGRID_VERSION},
       {"network_model", network_model},
       {"deepspeed_version", s.deepspeed_version},
       {"deepspeed_version_requested", s.deepspeed_version_requested},
       {"software", core::Json::object({{"attention", spec::to_string(s.software.attention)},
                                        {"compile", s.software.compile},
                                        {"torch", s.software.torch},
                                        {"stated", s.software.stated}})},
       {"kernel_data", data_file_name(s.kernels.file)},
       {"calibration",
        core::Json::object({{"path", s.calibration.path.empty() ? "none" : data_file_name(s.calibration.path)},
                            {"hash", s.calibration.hash},
                            {"parameters", static_cast<std::int64_t>(s.calibration.factors.size())}})}});
}

core::Json memory_json(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                       const std::vector<run::LadderStep>& ladder)
{
  core::Json breakdown = core::Json::object();
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    breakdown[memory_category_key(c)] = r.breakdown[static_cast<size_t>(c)];

  core::Json j = core::Json::object(
      {{"scenario", s.name},
       {"gpus", s.cluster.total_gpus()},
       {"dp", s.dp()},
       {"params", params},
       {"rank", r.rank},
       {"peak_memory_bytes", core::Json::object({{"gpu", r.gpu},
                                                 {"gpu_reserved", r.gpu_reserved},
                                                 {"gpu_device", r.gpu_device},
                                                 {"cpu_per_node", r.cpu_per_node},
                                                 {"cpu_pinned_per_node", r.cpu_pinned_per_node},
                                                 {"nvme_per_node", r.nvme_per_node}})},
       {"memory_breakdown_bytes", breakdown},
       {"fits", r.fits},
       {"fit_by_tier", core::Json::object({{"gpu", r.fit_gpu}, {"cpu", r.fit_cpu}, {"nvme", r.fit_nvme}})},
       {"tight", core::Json::object({{"gpu", r.tight_gpu}, {"headroom", memory::DEFAULT_HEADROOM}})},
       {"shortfall_bytes", r.shortfall_bytes},
       {"capacity_bytes",
        core::Json::object(
            {{"gpu", r.gpu_capacity}, {"cpu_per_node", r.cpu_capacity}, {"nvme_per_node", r.nvme_capacity}})},
       {"memory_model_bytes", core::Json::object({{"fragmentation", r.fragmentation_bytes},
                                                  {"awaiting_other_streams", r.allocator_pending_bytes},
                                                  {"cuda_context", r.cuda_context_bytes},
                                                  {"nccl", r.nccl_bytes}})},
       {"peak_task", r.peak_task}});
  if (!r.fits) {
    const bool answered = !ladder.empty() && ladder.back().report.fits;
    j["to_fit"] = core::Json::object(
        {{"ladder", ladder_json(ladder)}, {"answer", answered ? core::Json(ladder.back().change) : core::Json()}});
  }
  j["warnings"] = s.warnings;
  j["meta"] = meta_json(s, "none (memory replay in issue order; no timing)");
  return j;
}

namespace {

/// "DeepSpeed 0.19, ZeRO-3, offload_optimizer cpu, offload_param none", "PyTorch FSDP2 (fully_shard), FULL_SHARD",
/// "PyTorch DDP, bucket_cap_mb 25".
std::string framework_line(const spec::Scenario& s)
{
  if (s.framework == spec::Framework::FSDP) {
    const spec::FsdpSpec& f = s.fsdp;
    // FSDP2 is chosen by fsdp.reshard_after_forward, which only fully_shard has (docs/fsdp.md).
    std::string line = f.reshard_after_forward ? "PyTorch FSDP2 (fully_shard), "
                                               : "PyTorch FSDP1 "
                                                 "(FullyShardedDataParallel), ";
    line += spec::to_string(f.sharding_strategy);
    if (f.reshard_after_forward)
      line += std::string(", reshard_after_forward ") + (*f.reshard_after_forward ? "true" : "false");
    if (f.cpu_offload)
      line += ", cpu_offload";
    return line;
  }
  if (s.framework == spec::Framework::DDP)
    return "PyTorch DDP, bucket_cap_mb " + core::format_number(s.ddp.bucket_cap_mb) +
           (s.ddp.no_sync ? ", no_sync over the accumulation" : "");
  const auto& z = s.deepspeed.zero;
  const std::string version = s.deepspeed_version_requested == s.deepspeed_version
                                  ? s.deepspeed_version
                                  : s.deepspeed_version_requested + " (modelled as " + s.deepspeed_version + ")";
  std::string line = "DeepSpeed " + version + ", ZeRO-" + std::to_string(z.stage) + ", offload_optimizer " +
                     spec::to_string(z.offload_optimizer.device) + ", offload_param " +
                     spec::to_string(z.offload_param.device);
  if (s.tp() > 1 && s.pp() == 1)
    line += ", tensor parallel " + std::to_string(s.tp()) + " (data parallel " + std::to_string(s.dp()) + ")";
  if (s.pp() > 1)
    line += ", tensor parallel " + std::to_string(s.tp()) + " x pipeline " + std::to_string(s.pp()) + " (" +
            (s.training.pipeline.schedule == spec::PipelineSchedule::GPIPE ? "GPipe" : "1F1B") + ") x data parallel " +
            std::to_string(s.dp());
  return line;
}

std::string gbps(double bytes_per_s)
{
  return core::format_number(bytes_per_s * 8 / 1e9) + " Gb/s";
}

} // namespace

std::string scenario_header(const spec::Scenario& s, std::int64_t params)
{
  const spec::ClusterSpec& c = s.cluster;
  const spec::NodeSpec& n = c.node;
  std::string out = s.name + "\n";
  const auto row = [&](const char* what, const std::string& text) {
    char head[32];
    std::snprintf(head, sizeof head, "  %-11s", what);
    out += head + text + "\n";
  };
  row("model", s.model.name + ", " + std::to_string(params) + " parameters (" + std::to_string(s.model.layers) +
                   " layers, hidden " + std::to_string(s.model.hidden) + ")");
  std::string hw = std::to_string(c.total_gpus()) + " x " + n.gpu.model + " (" + core::format_gib(n.gpu.memory_bytes) +
                   "): " + std::to_string(c.nodes) + (c.nodes == 1 ? " node" : " nodes") + " x " +
                   std::to_string(c.gpus_per_node) + " GPUs of '" + n.name + "'";
  if (c.nodes > 1)
    hw += ", " + std::to_string(c.network.nics_per_node) + " x " + gbps(c.network.nic_bandwidth_Bps) + " NIC" +
          (c.network.nics_per_node == 1 ? "" : "s") + " per node";
  row("hardware", hw);
  row("framework", framework_line(s));
  if (s.training.mode == spec::Mode::INFERENCE)
    row("inference", "batch " + std::to_string(s.inference.batch) + " per GPU, prompt " +
                         std::to_string(s.inference.prompt_tokens) + " tokens, " +
                         std::to_string(s.inference.generate_tokens) + " generated tokens per sequence, " +
                         spec::to_string(s.training.precision));
  else
    row("training", "micro-batch " + std::to_string(s.training.micro_batch) + " x seq " +
                        std::to_string(s.training.seq_len) + ", grad_accum " + std::to_string(s.training.grad_accum) +
                        ", global batch " + std::to_string(s.training.global_batch) + ", " +
                        spec::to_string(s.training.precision) + ", activation checkpointing " +
                        spec::to_string(s.training.activation_checkpointing));
  const spec::SoftwareSpec& sw = s.software;
  row("stack", "torch " + sw.torch + ", " + spec::to_string(sw.attention) + " attention, " +
                   spec::to_string(s.model_code()) + " model code, " + (sw.compile ? "torch.compile" : "eager") +
                   (sw.stated ? "" : " (no software: block: today's stack assumed)"));
  // The calibration profile the figures use (docs/calibration.md §5, §8), or the priors alone; named as meta names it.
  const spec::Calibration& cal = s.calibration;
  const std::string multipliers = std::to_string(cal.factors.size()) + " multipliers";
  if (cal.path.empty() || cal.path == "none")
    row("profile", "none: the priors alone (no calibration profile)");
  else
    row("profile",
        data_file_name(cal.path) + ", the calibration (" + multipliers + "; --calibration none: the priors)");
  return out;
}

std::string warnings_block(const std::vector<std::string>& warnings)
{
  if (warnings.empty())
    return "";
  std::string out = "\nWarnings:\n";
  for (const auto& w : warnings)
    out += "  " + w + "\n";
  return out;
}

std::string unfit_tiers(const memory::MemoryReport& r)
{
  std::string tiers;
  if (!r.fit_gpu)
    tiers += " GPU";
  if (!r.fit_cpu)
    tiers += " host";
  if (!r.fit_nvme)
    tiers += " NVMe";
  return tiers.empty() ? tiers : tiers.substr(1);
}

std::string ladder_lines(const std::vector<run::LadderStep>& ladder)
{
  std::string out;
  char line[256];
  for (const auto& rung : ladder) {
    std::snprintf(line, sizeof line, "  + %-44s GPU %10s  host %10s  %s\n", rung.change.c_str(),
                  core::format_gib(rung.report.gpu_device).c_str(), core::format_gib(rung.report.cpu_per_node).c_str(),
                  rung.report.fits ? "fits" : "does not fit");
    out += line;
  }
  if (!ladder.empty() && ladder.back().report.fits)
    out += "Answer: " + ladder.back().change + " (with the rungs above it).\n";
  else
    out += "No rung of the ladder makes it fit: more GPUs or larger ones are needed.\n";
  return out;
}

std::string memory_tier_row(const std::string& what, std::int64_t bytes, std::int64_t capacity, bool fit, bool tight)
{
  char line[160];
  std::snprintf(line, sizeof line, "  %-34s %12s", what.c_str(), core::format_gib(bytes).c_str());
  std::string out = line;
  if (capacity > 0) {
    std::snprintf(line, sizeof line, "  of %10s  %s", core::format_gib(capacity).c_str(),
                  !fit    ? "OVER"
                  : tight ? "tight"
                          : "ok");
    out += line;
  }
  return out + "\n";
}

std::string tight_line(const memory::MemoryReport& r)
{
  if (!r.tight_gpu)
    return "";
  return "  tight: " +
         core::format_fixed(
             100.0 * static_cast<double>(r.gpu_capacity - r.gpu_device) / static_cast<double>(r.gpu_capacity), 1) +
         " % of the GPU free, under the " + core::format_fixed(100 * memory::DEFAULT_HEADROOM, 1) +
         " % headroom: reserved memory is predicted a median " + core::format_fixed(100 * memory::DEFAULT_HEADROOM, 1) +
         " % off on published runs, so a real run may not fit (docs/recommend.md \"Headroom\")\n";
}

std::string memory_tier_rows(const memory::MemoryReport& r)
{
  return memory_tier_row("GPU, allocated (max_allocated)", r.gpu, 0, true) +
         memory_tier_row(r.allocator_mechanism ? "GPU, reserved (caching allocator)" : "GPU, reserved (+19 % rule)",
                         r.gpu_reserved, 0, true) +
         memory_tier_row("GPU, device (+CUDA context, NCCL)", r.gpu_device, r.gpu_capacity, r.fit_gpu, r.tight_gpu) +
         memory_tier_row("host per node", r.cpu_per_node, r.cpu_capacity, r.fit_cpu) +
         memory_tier_row("  of which pinned", r.cpu_pinned_per_node, 0, true) +
         memory_tier_row("NVMe per node", r.nvme_per_node, r.nvme_capacity, r.fit_nvme) + tight_line(r);
}

std::string memory_table(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                         const std::vector<run::LadderStep>& ladder)
{
  std::ostringstream out;
  out << scenario_header(s, params) << warnings_block(s.warnings) << "\n";

  if (r.fits && r.tight_gpu) {
    out << "FITS, TIGHT: every tier is within capacity, but the GPU keeps less than the "
        << core::format_fixed(100 * memory::DEFAULT_HEADROOM, 1) << " % headroom free (below).\n\n";
  } else if (r.fits) {
    out << "FITS: every tier is within capacity.\n\n";
  } else {
    out << "DOES NOT FIT (" << unfit_tiers(r) << "): short by " << core::format_gib(r.shortfall_bytes) << ".\n\n";
  }

  out << "Peak memory (rank " << r.rank << ")\n" << memory_tier_rows(r);

  out << "\nGPU memory at the peak (" << r.peak_task << ")\n";
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    out << memory_tier_row(memory_category_key(c), r.breakdown[static_cast<size_t>(c)], 0, true);

  out << "\nStated terms: fragmentation " << core::format_gib(r.fragmentation_bytes)
      << (r.allocator_mechanism ? " (caching allocator replayed over " + std::to_string(r.allocator_steps) + " step(s))"
                                : std::string(" (the old 19 % rule)"))
      << (r.allocator_pending_bytes > 0
              ? " with up to " + core::format_gib(r.allocator_pending_bytes) +
                    " freed but awaiting another stream's work (record_stream, at simulated times)"
              : std::string())
      << ", CUDA context " << core::format_gib(r.cuda_context_bytes) << ", NCCL buffers "
      << core::format_gib(r.nccl_bytes) << " (docs/memory.md)\n";
  if (r.allocator_ooms > 0)
    out << "The caching allocator's replay ran out of device memory " << r.allocator_ooms
        << " time(s) even after freeing its cached segments; reserved is shown at the device's room: buffers the "
           "schedule keeps whole (gathered parameters, buckets) fragment more than PyTorch's tensors do "
           "(docs/memory.md §2.1).\n";

  if (!r.fits) {
    out << "\nTo make it fit (the ladder, applied in order):\n" << ladder_lines(ladder);
  }

  return out.str();
}

} // namespace zerosim::report
