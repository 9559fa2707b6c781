#include "report/memory_report.hpp"
#include "spec/names.hpp"

#include "core/text.hpp"

#include <cstdio>
#include <sstream>

namespace zerosim::report {

namespace {

const char* category_key(int c)
{
  static const char* keys[spec::MEM_CATEGORY_COUNT] = {"params",      "grads",   "optimizer",
                                                       "activations", "buffers", "other"};
  return keys[c];
}

core::Json ladder_json(const std::vector<memory::LadderStep>& ladder)
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
       {"kernel_data", s.kernels.file},
       {"calibration", core::Json::object({{"path", s.calibration.path.empty() ? "none" : s.calibration.path},
                                           {"hash", s.calibration.hash},
                                           {"parameters", static_cast<std::int64_t>(s.calibration.factors.size())}})}});
}

core::Json memory_json(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                       const std::vector<memory::LadderStep>& ladder)
{
  core::Json breakdown = core::Json::object();
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    breakdown[category_key(c)] = r.breakdown[static_cast<size_t>(c)];

  core::Json j = core::Json::object(
      {{"scenario", s.name},
       {"gpus", s.cluster.total_gpus()},
       {"dp", s.dp()},
       {"params", params},
       {"peak_memory_bytes", core::Json::object({{"gpu", r.gpu},
                                                 {"gpu_reserved", r.gpu_reserved},
                                                 {"gpu_device", r.gpu_device},
                                                 {"cpu_per_node", r.cpu_per_node},
                                                 {"cpu_pinned_per_node", r.cpu_pinned_per_node},
                                                 {"nvme_per_node", r.nvme_per_node}})},
       {"memory_breakdown_bytes", breakdown},
       {"fits", r.fits},
       {"fit_by_tier", core::Json::object({{"gpu", r.fit_gpu}, {"cpu", r.fit_cpu}, {"nvme", r.fit_nvme}})},
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

std::string parallelism_line(const spec::Scenario& s)
{
  if (s.framework != spec::Framework::DEEPSPEED)
    return spec::to_string(s.framework);
  const auto& z = s.deepspeed.zero;
  std::string line = "DeepSpeed ZeRO-" + std::to_string(z.stage) + ", offload_optimizer " +
                     spec::to_string(z.offload_optimizer.device) + ", offload_param " +
                     spec::to_string(z.offload_param.device);
  if (s.tp() > 1)
    line += ", tensor parallel " + std::to_string(s.tp()) + " (data parallel " + std::to_string(s.dp()) + ")";
  return line;
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

std::string ladder_lines(const std::vector<memory::LadderStep>& ladder)
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

std::string memory_tier_row(const std::string& what, std::int64_t bytes, std::int64_t capacity, bool fit)
{
  char line[160];
  std::snprintf(line, sizeof line, "  %-34s %12s", what.c_str(), core::format_gib(bytes).c_str());
  std::string out = line;
  if (capacity > 0) {
    std::snprintf(line, sizeof line, "  of %10s  %s", core::format_gib(capacity).c_str(), fit ? "ok" : "OVER");
    out += line;
  }
  return out + "\n";
}

std::string memory_tier_rows(const memory::MemoryReport& r)
{
  return memory_tier_row("GPU, allocated (max_allocated)", r.gpu, 0, true) +
         memory_tier_row(r.allocator_mechanism ? "GPU, reserved (caching allocator)" : "GPU, reserved (+19 % rule)",
                         r.gpu_reserved, 0, true) +
         memory_tier_row("GPU, device (+CUDA context, NCCL)", r.gpu_device, r.gpu_capacity, r.fit_gpu) +
         memory_tier_row("host per node", r.cpu_per_node, r.cpu_capacity, r.fit_cpu) +
         memory_tier_row("  of which pinned", r.cpu_pinned_per_node, 0, true) +
         memory_tier_row("NVMe per node", r.nvme_per_node, r.nvme_capacity, r.fit_nvme);
}

std::string memory_table(const spec::Scenario& s, std::int64_t params, const memory::MemoryReport& r,
                         const std::vector<memory::LadderStep>& ladder)
{
  std::ostringstream out;
  char line[256];
  out << s.name << "\n";
  std::snprintf(line, sizeof line, "  %s, %lld parameters; %d GPUs (%d nodes x %d); %s\n", s.model.name.c_str(),
                static_cast<long long>(params), s.cluster.total_gpus(), s.cluster.nodes, s.cluster.gpus_per_node,
                parallelism_line(s).c_str());
  out << line;
  if (s.training.mode == spec::Mode::INFERENCE)
    std::snprintf(line, sizeof line,
                  "  inference: batch %d per GPU, prompt %d tokens, %d generated tokens per sequence\n\n",
                  s.inference.batch, s.inference.prompt_tokens, s.inference.generate_tokens);
  else
    std::snprintf(line, sizeof line, "  micro-batch %d x seq %d, grad_accum %d, global batch %lld\n\n",
                  s.training.micro_batch, s.training.seq_len, s.training.grad_accum,
                  static_cast<long long>(s.training.global_batch));
  out << line;

  if (r.fits) {
    out << "FITS: every tier is within capacity.\n\n";
  } else {
    out << "DOES NOT FIT (" << unfit_tiers(r) << "): short by " << core::format_gib(r.shortfall_bytes) << ".\n\n";
  }

  out << "Peak memory\n" << memory_tier_rows(r);

  out << "\nGPU memory at the peak (" << r.peak_task << ")\n";
  for (int c = 0; c < spec::MEM_CATEGORY_COUNT; ++c)
    out << memory_tier_row(category_key(c), r.breakdown[static_cast<size_t>(c)], 0, true);

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

  if (!s.warnings.empty()) {
    out << "\nWarnings:\n";
    for (const auto& w : s.warnings)
      out << "  " << w << "\n";
  }
  return out.str();
}

} // namespace zerosim::report
