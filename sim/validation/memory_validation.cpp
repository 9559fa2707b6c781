#include "validation/memory_validation.hpp"
#include "validation/report_common.hpp"

#include "config/scenario_loader.hpp"
#include "core/bytes.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"
#include "engine/engine.hpp"
#include "memory/estimator.hpp"
#include "memory/memory_model.hpp"
#include "metrics/run_metrics.hpp"
#include "run/memory_analysis.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::validation {

namespace {

/// The memory predicted for a measured figure of `metric`. Allocated follows the host's program order (`zerosim
/// memory`: run::analyze_memory). Reserved and what the device holds are `zerosim run`'s
/// (metrics::compute_metrics: the rank with the largest allocated peak, the caching allocator at simulated times,
/// where FSDP1's record_stream frees wait for the device).
memory::MemoryReport predicted_memory(const spec::Scenario& s, MemMetric metric)
{
  if (metric == MemMetric::ALLOCATED)
    return run::analyze_memory(s);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const engine::Timeline t = run::simulate_step(s, w);
  return metrics::compute_metrics(s, w, t).memory;
}

} // namespace

MemoryComparison compare_memory_case(const MemoryCase& c)
{
  MemoryComparison r;
  r.c = c;
  if (c.metric == MemMetric::ESTIMATOR) {
    const auto& q = *c.estimator;
    memory::ModelStatesEstimate e;
    if (c.estimator_older_formula) {
      e = memory::estimate_zero2_model_states_mem_needs_older(q.total_params, q.gpus_per_node, q.nodes);
      r.detail =
          "older ZeRO-2 formula 4P + 16P/N printed by memory.rst (current code 2P + 18P/N: " +
          std::to_string(memory::estimate_zero2_model_states_mem_needs(q.total_params, q.gpus_per_node, q.nodes, false)
                             .gpu_bytes) +
          " B)";
    } else if (q.stage == 2) {
      e = memory::estimate_zero2_model_states_mem_needs(q.total_params, q.gpus_per_node, q.nodes, q.offload_optimizer);
      r.detail = "estimate_zero2_model_states_mem_needs";
    } else {
      e = memory::estimate_zero3_model_states_mem_needs(q.total_params, q.largest_layer_params, q.gpus_per_node,
                                                        q.nodes, q.offload_optimizer, q.offload_param,
                                                        c.estimator_zero_init);
      r.detail = "estimate_zero3_model_states_mem_needs";
    }
    r.predicted_bytes = e.gpu_bytes;
  } else {
    memory::MemoryReport m = predicted_memory(*c.scenario, c.metric);
    r.predicted_bytes = c.metric == MemMetric::ALLOCATED  ? m.gpu
                        : c.metric == MemMetric::RESERVED ? m.gpu_reserved
                                                          : m.gpu_device;
    r.detail = "peak at " + m.peak_task;
  }
  r.error_pct = (static_cast<double>(r.predicted_bytes) - c.measured_bytes) / c.measured_bytes * 100.0;
  if (c.metric == MemMetric::DEVICE_USED) {
    r.ok = static_cast<double>(r.predicted_bytes) <= c.measured_bytes;
    r.verdict = r.ok ? "within bound" : "EXCEEDS bound";
  } else {
    r.ok = std::abs(r.error_pct) <= ACCEPTED_MEDIAN_ABS_ERROR_PCT;
    r.verdict = r.ok ? "within 15 %" : "outside 15 %";
  }
  return r;
}

namespace {

/// Which tier a configuration overflows and by how much, and where its GPU peak falls.
std::string limit_text(const memory::MemoryReport& m)
{
  std::string tiers;
  for (auto [fits, name] : {std::pair{m.fit_gpu, "GPU"}, std::pair{m.fit_cpu, "host"}, std::pair{m.fit_nvme, "NVMe"}})
    if (!fits)
      tiers += std::string(tiers.empty() ? "" : " and ") + name;
  return tiers + " short by " + core::format_in_gib(static_cast<double>(m.shortfall_bytes), 2) + " (GPU peak " +
         core::format_in_gib(static_cast<double>(m.gpu), 2) + " at " + m.peak_task + ")";
}

FitResult judge(const FitCase& f)
{
  FitResult r;
  r.c = f;
  memory::MemoryReport ran = run::analyze_memory(f.ran);
  r.ran_peak_bytes = ran.gpu;
  r.capacity_bytes = ran.gpu_capacity;
  r.ran_fits = ran.fits;
  r.ran_detail = ran.fits
                     ? "fits"
                     : "does not fit (short " + core::format_in_gib(static_cast<double>(ran.shortfall_bytes), 2) + ")";
  r.ok = ran.fits == f.expect_fit;
  if (f.doubled) {
    memory::MemoryReport twice = run::analyze_memory(*f.doubled);
    r.doubled_peak_bytes = twice.gpu;
    r.doubled_fits = twice.fits;
    r.ok = r.ok && !twice.fits;
  }
  if (f.claimed_params > 0 && f.expect_fit)
    r.largest = largest_fit(f);
  return r;
}

void add_group_stats(std::vector<core::ErrorStats>& out, const std::string& prefix,
                     const std::vector<const MemoryComparison*>& rows,
                     const std::function<std::string(const MemoryComparison&)>& key)
{
  std::map<std::string, std::vector<double>> groups;
  for (const auto* r : rows)
    groups[key(*r)].push_back(r->error_pct);
  for (auto& [k, v] : groups)
    out.push_back(core::error_stats(prefix + k, v));
}

std::vector<core::ErrorStats> stats_of(const std::vector<const MemoryComparison*>& rows, bool per_metric)
{
  std::vector<core::ErrorStats> out;
  if (rows.empty())
    return out;
  if (per_metric)
    add_group_stats(out, "metric ", rows, [](const MemoryComparison& r) { return to_string(r.c.metric); });
  add_group_stats(out, "source ", rows, [](const MemoryComparison& r) { return r.c.info.source_id; });
  add_group_stats(out, "framework ", rows, [](const MemoryComparison& r) { return r.c.info.framework; });
  add_group_stats(out, "", rows, [](const MemoryComparison& r) { return strategy_group(r.c.info); });
  add_group_stats(out, "offload ", rows, [](const MemoryComparison& r) { return r.c.info.offload; });
  std::vector<double> all;
  for (const auto* r : rows)
    all.push_back(r->error_pct);
  out.push_back(core::error_stats("overall", all));
  return out;
}

std::vector<MemoryFrameworkSummary> framework_summaries(const ValidationReport& r,
                                                        const std::map<std::string, std::string>& failed_framework)
{
  auto out = framework_rows<MemoryFrameworkSummary>();
  auto entry = [&](const std::string& label) -> MemoryFrameworkSummary& { return framework_entry(out, label); };
  // A row can give a comparison and a fit verdict, or two comparisons: count the row once per framework.
  std::map<std::string, std::set<std::string>> rows;
  std::map<std::string, std::vector<double>> errors, allocated, reserved;
  for (const auto& c : r.comparisons) {
    MemoryFrameworkSummary& s = entry(c.c.info.framework);
    ++s.comparisons;
    rows[s.framework].insert(c.c.info.row_id);
    if (c.c.metric == MemMetric::ALLOCATED || c.c.metric == MemMetric::RESERVED)
      errors[s.framework].push_back(c.error_pct);
    if (c.c.metric == MemMetric::ALLOCATED)
      allocated[s.framework].push_back(c.error_pct);
    if (c.c.metric == MemMetric::RESERVED)
      reserved[s.framework].push_back(c.error_pct);
  }
  for (const auto& f : r.fits) {
    MemoryFrameworkSummary& s = entry(f.c.info.framework);
    ++s.fits;
    s.fits_ok += f.ok ? 1 : 0;
    rows[s.framework].insert(f.c.info.row_id);
  }
  for (const auto& n : r.not_covered) {
    MemoryFrameworkSummary& s = entry(n.framework);
    ++s.not_covered;
    rows[s.framework].insert(n.row_id);
  }
  for (const auto& [row_id, framework] : failed_framework) {
    MemoryFrameworkSummary& s = entry(framework);
    ++s.failed;
    rows[s.framework].insert(row_id);
  }
  for (auto& s : out) {
    s.rows = static_cast<int>(rows[s.framework].size());
    if (!errors[s.framework].empty())
      s.measured = core::error_stats("framework " + s.framework, errors[s.framework]);
    if (!allocated[s.framework].empty())
      s.allocated = core::error_stats("framework " + s.framework + " allocated", allocated[s.framework]);
    if (!reserved[s.framework].empty())
      s.reserved = core::error_stats("framework " + s.framework + " reserved", reserved[s.framework]);
  }
  return out;
}

} // namespace

LargestFit largest_fit(const FitCase& f)
{
  // A guard, far above any model of the file (the largest named is 70B): a family that still fits there is reported
  // as fitting at the guard.
  constexpr int MAX_LAYERS = 1 << 14;
  LargestFit r;
  r.family = f.family;
  r.published_params = f.claimed_params;
  r.ran_layers = f.ran.model.layers;
  auto with_layers = [&](int layers) {
    spec::Scenario s = f.ran;
    s.model.layers = layers;
    s.name += " at " + std::to_string(layers) + " layers";
    return s;
  };
  auto params_at = [&](int layers) { return workload::count_params(with_layers(layers).model); };
  std::map<int, memory::MemoryReport> seen;
  auto analyze = [&](int layers) -> const memory::MemoryReport& {
    auto it = seen.find(layers);
    if (it == seen.end()) {
      it = seen.emplace(layers, run::analyze_memory(with_layers(layers))).first;
      ++r.evaluations;
    }
    return it->second;
  };
  r.ran_params = params_at(r.ran_layers);
  // Bracket: lo fits (0 = none does), hi does not. Memory grows with the layer count at every tier (parameters,
  // gradients, optimizer states and checkpoints per layer), so the predicate is monotone.
  int lo = 0, hi = std::max(1, r.ran_layers);
  while (analyze(hi).fits && hi < MAX_LAYERS) {
    lo = hi;
    hi = std::min(2 * hi, MAX_LAYERS);
  }
  if (analyze(hi).fits) {
    lo = hi;
    r.limit = "still fits at the search limit of " + std::to_string(MAX_LAYERS) + " layers";
  } else {
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (analyze(mid).fits ? lo : hi) = mid;
    }
    r.limit = "at " + std::to_string(hi) + " layers: " + limit_text(analyze(hi));
  }
  r.largest_layers = lo;
  if (lo > 0) {
    r.largest_params = params_at(lo);
    r.largest_peak_bytes = analyze(lo).gpu;
  }
  r.error_pct = (static_cast<double>(r.largest_params) - r.published_params) / r.published_params * 100.0;
  r.within = std::abs(r.error_pct) <= ACCEPTED_LARGEST_MODEL_ERROR_PCT;
  // Parameters are affine in the layer count: P(l) = P(1) + (l - 1) x (P(2) - P(1)).
  const std::int64_t per_layer = params_at(2) - params_at(1);
  const double target = 2.0 * r.published_params;
  int twice = std::max(
      1,
      static_cast<int>(std::ceil((target - static_cast<double>(params_at(1))) / static_cast<double>(per_layer))) + 1);
  while (twice > 1 && static_cast<double>(params_at(twice - 1)) >= target)
    --twice;
  while (static_cast<double>(params_at(twice)) < target)
    ++twice;
  r.twice_layers = twice;
  r.twice_params = params_at(twice);
  r.twice_peak_bytes = analyze(twice).gpu;
  r.twice_fits = analyze(twice).fits;
  r.ok = r.within && !r.twice_fits;
  return r;
}

ValidationReport run_memory_validation(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                       const spec::Mechanisms& mechanisms, const spec::MappingRules& rules)
{
  ValidationReport r;
  RowMapping mapping;
  for (PublishedRow row : rows) {
    try {
      map_row(row, load_node, mapping, rules);
    } catch (const core::InputError& e) {
      mapping.not_covered.push_back({row["row_id"], row["source_id"], row["model"], "memory",
                                     std::string("the row cannot be mapped: ") + e.what(), framework_label(row)});
    }
  }
  r.not_covered = mapping.not_covered;
  r.other_rows = mapping.other_rows;
  std::map<std::string, std::string> failed_framework; // row_id -> framework of the rows the pipeline failed on
  // The keys the mapping assumes where a row states none: DeepSpeed's ds_config defaults, or FSDP's and DDP's.
  auto rejected = [](const RowInfo& info) {
    return "the " + std::string(info.framework == "DeepSpeed" ? "DeepSpeed" : "PyTorch " + info.framework) +
           " keys assumed for what the row does not state are rejected: ";
  };
  for (auto& c : mapping.memory)
    if (c.scenario)
      c.scenario->mechanisms = mechanisms;
  for (auto& f : mapping.fits) {
    f.ran.mechanisms = mechanisms;
    if (f.doubled)
      f.doubled->mechanisms = mechanisms;
  }
  for (const auto& c : mapping.memory) {
    try {
      r.comparisons.push_back(compare_memory_case(c));
    } catch (const core::UnsupportedError& e) {
      r.not_covered.push_back({c.info.row_id, c.info.source_id, c.info.model, "memory", e.what(), c.info.framework});
    } catch (const core::InputError& e) {
      r.not_covered.push_back(
          {c.info.row_id, c.info.source_id, c.info.model, "memory", rejected(c.info) + e.what(), c.info.framework});
    } catch (const std::exception& e) {
      r.failures.push_back("row " + c.info.row_id + ": " + e.what());
      failed_framework[c.info.row_id] = c.info.framework;
    }
  }
  for (const auto& f : mapping.fits) {
    const std::string kind = f.doubled && f.doubled->model.layers != f.ran.model.layers ? "max-model" : "fit";
    try {
      r.fits.push_back(judge(f));
    } catch (const core::UnsupportedError& e) {
      r.not_covered.push_back({f.info.row_id, f.info.source_id, f.info.model, kind, e.what(), f.info.framework});
    } catch (const core::InputError& e) {
      r.not_covered.push_back(
          {f.info.row_id, f.info.source_id, f.info.model, kind, rejected(f.info) + e.what(), f.info.framework});
    } catch (const std::exception& e) {
      r.failures.push_back("row " + f.info.row_id + ": " + e.what());
      failed_framework[f.info.row_id] = f.info.framework;
    }
  }

  std::vector<const MemoryComparison*> measured, estimator, allocated, reserved;
  for (const auto& c : r.comparisons) {
    if (c.c.metric == MemMetric::ESTIMATOR) {
      estimator.push_back(&c);
    } else if (c.c.metric == MemMetric::DEVICE_USED) {
      ++r.bound_rows;
      if (!c.ok)
        ++r.bound_violations;
    } else {
      measured.push_back(&c);
      if (c.c.metric == MemMetric::ALLOCATED)
        allocated.push_back(&c);
      if (c.c.metric == MemMetric::RESERVED)
        reserved.push_back(&c);
    }
  }
  r.measured_stats = stats_of(measured, true);
  r.estimator_stats = stats_of(estimator, false);
  if (!allocated.empty()) {
    std::vector<double> v;
    for (const auto* c : allocated)
      v.push_back(c->error_pct);
    r.allocated_median_abs_pct = core::error_stats("allocated", v).median_abs_pct;
  }
  if (!reserved.empty()) {
    std::vector<double> v;
    for (const auto* c : reserved)
      v.push_back(c->error_pct);
    r.reserved_median_abs_pct = core::error_stats("reserved", v).median_abs_pct;
  }
  r.fits_ok = !r.fits.empty() && std::all_of(r.fits.begin(), r.fits.end(), [](const FitResult& f) { return f.ok; });
  for (const auto& f : r.fits) {
    if (!f.largest || f.c.info.offload == "none")
      continue;
    ++r.largest_offload_rows;
    r.largest_offload_ok += f.largest->ok ? 1 : 0;
  }
  r.accepted = r.allocated_median_abs_pct && *r.allocated_median_abs_pct <= ACCEPTED_MEDIAN_ABS_ERROR_PCT &&
               r.fits_ok && r.largest_offload_ok == r.largest_offload_rows && r.failures.empty();
  r.frameworks = framework_summaries(r, failed_framework);
  return r;
}

namespace {

/// The acceptance: the medians, the fit statements, the largest models, the bound rows.
void acceptance_section(std::ostringstream& md, const ValidationReport& r)
{
  md << "## Acceptance\n\n";
  md << "- Median absolute error on rows with allocated-memory figures: ";
  if (r.allocated_median_abs_pct) {
    int n = 0;
    for (const auto& c : r.comparisons)
      n += c.c.metric == MemMetric::ALLOCATED ? 1 : 0;
    md << core::format_fixed(*r.allocated_median_abs_pct, 1) << " % over " << n
       << " row(s) (target <= " << core::format_fixed(ACCEPTED_MEDIAN_ABS_ERROR_PCT, 0)
       << " %): " << (*r.allocated_median_abs_pct <= ACCEPTED_MEDIAN_ABS_ERROR_PCT ? "met" : "NOT met") << ".\n";
  } else {
    md << "no such row could be expressed.\n";
  }
  if (r.reserved_median_abs_pct) {
    int n = 0;
    for (const auto& c : r.comparisons)
      n += c.c.metric == MemMetric::RESERVED ? 1 : 0;
    md << "- Median absolute error on rows with reserved-memory figures (the caching allocator's peak): "
       << core::format_fixed(*r.reserved_median_abs_pct, 1) << " % over " << n
       << " row(s) (target <= " << core::format_fixed(ACCEPTED_MEDIAN_ABS_ERROR_PCT, 0)
       << " %): " << (*r.reserved_median_abs_pct <= ACCEPTED_MEDIAN_ABS_ERROR_PCT ? "met" : "NOT met") << ".\n";
  }
  int fits_passed = 0;
  for (const auto& f : r.fits)
    fits_passed += f.ok ? 1 : 0;
  md << "- Fit statements reproduced (as ran: fits, or does not where the source reports out of memory; at twice the "
        "size: does not): "
     << fits_passed << " of " << r.fits.size() << ".\n";
  md << "- Largest model that fits, max-model rows with offload (within +/-"
     << core::format_fixed(ACCEPTED_LARGEST_MODEL_ERROR_PCT, 0)
     << " % of the published size, twice the published size predicted not to fit): " << r.largest_offload_ok << " of "
     << r.largest_offload_rows << ".\n";
  if (!r.failures.empty()) {
    md << "- Rows the pipeline failed on (bugs, not verdicts): " << r.failures.size() << ".\n";
    for (const auto& f : r.failures)
      md << "  - " << core::markdown_cell(f) << "\n";
  }
  md << "- Overall (the acceptance: allocated median, fit statements, largest model with offload): "
     << (r.accepted ? "accepted" : "NOT accepted") << ".\n\n";
  md << "Beyond the acceptance: nvidia-smi figures are upper bounds (a caching-allocator ceiling), which the\n"
     << "prediction of the device total must not exceed. Exceeded: " << r.bound_violations << " of " << r.bound_rows;
  bool first = true;
  for (const auto& c : r.comparisons)
    if (c.c.metric == MemMetric::DEVICE_USED && !c.ok) {
      md << (first ? " (row " : ", row ") << c.c.info.row_id;
      first = false;
    }
  md << (first ? "" : "; docs/validation.md says why)") << ".\n\n";
}

/// Per framework: rows, comparisons, verdicts and error medians.
void frameworks_section(std::ostringstream& md, const ValidationReport& r)
{
  md << "Per framework (the memory, fit and estimator rows of the file by the framework they ran on; median and p90\n"
     << "of |error| over the measured allocated and reserved comparisons):\n\n"
     << "| framework | rows | memory comparisons | fit verdicts (reproduced) | not covered | failed | median abs error "
        "| p90 abs error | allocated: median abs error (n) | reserved: median abs error (n) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto median_cell = [](const std::optional<core::ErrorStats>& e) {
    return e ? core::format_fixed(e->median_abs_pct, 1) + " % (" + std::to_string(e->n) + ")"
             : std::string("none compared");
  };
  for (const auto& f : r.frameworks) {
    md << "| " << f.framework << " | " << f.rows << " | " << f.comparisons << " | " << f.fits << " (" << f.fits_ok
       << ") | " << f.not_covered << " | " << f.failed << " | ";
    if (f.measured)
      md << core::format_fixed(f.measured->median_abs_pct, 1) << " % | "
         << core::format_fixed(f.measured->p90_abs_pct, 1) << " % | ";
    else
      md << "none compared | | ";
    md << median_cell(f.allocated) << " | " << median_cell(f.reserved) << " |\n";
  }
  md << "\n";
}

/// Every memory comparison, then every fit verdict.
void rows_section(std::ostringstream& md, const ValidationReport& r)
{
  md << "## Memory rows\n\n"
     << "| row_id | source | model | config | metric | measured | predicted | signed error | verdict |\n"
     << "|---|---|---|---|---|---:|---:|---:|---|\n";
  for (const auto& c : r.comparisons) {
    md << "| " << c.c.info.row_id << " | " << c.c.info.source_id << " | " << core::markdown_cell(c.c.info.model)
       << " | " << core::markdown_cell(c.c.info.config) << " | " << to_string(c.c.metric) << " | "
       << core::format_in_gib(c.c.measured_bytes, 2) << " | "
       << core::format_in_gib(static_cast<double>(c.predicted_bytes), 2) << " | "
       << core::format_signed_pct(c.error_pct, 1) << " | " << c.verdict << " |\n";
  }
  md << "\n## Fit verdicts (max-model-size and batch rows)\n\n"
     << "| row_id | source | published | config as ran | GPU | predicted peak | verdict as ran | twice: peak | "
        "twice: verdict | result |\n"
     << "|---|---|---|---|---:|---:|---|---:|---|---|\n";
  for (const auto& f : r.fits) {
    md << "| " << f.c.info.row_id << " | " << f.c.info.source_id << " | " << core::markdown_cell(f.c.claim) << " | "
       << core::markdown_cell(f.c.info.config) << " | " << core::format_in_gib(static_cast<double>(f.capacity_bytes), 2)
       << " | " << core::format_in_gib(static_cast<double>(f.ran_peak_bytes), 2) << " | " << f.ran_detail << " | "
       << (f.doubled_peak_bytes ? core::format_in_gib(static_cast<double>(*f.doubled_peak_bytes), 2) : std::string("-"))
       << " | "
       << (f.doubled_fits   ? (*f.doubled_fits ? "fits" : "does not fit")
           : f.c.expect_fit ? "- (not a maximum)"
                            : "- (out of memory as written)")
       << " | " << (f.ok ? "as published" : "CONTRADICTS the source") << " |\n";
  }
  md << "\nTwice the size: a max-model row at twice the layers; a max-batch row at twice the micro-batch. A row whose\n"
     << "source reports an out-of-memory error for the configuration as written must be predicted not to fit.\n\n";
}

/// The largest model that fits, per max-model row that names a size.
void largest_section(std::ostringstream& md, const ValidationReport& r)
{
  md << "## Largest model that fits\n\n"
     << "For each max-model row that names a size: the largest model of the row's family predicted to fit every tier\n"
     << "(GPU, host, NVMe) with the configuration that ran (micro-batch, sequence, GPUs, offload), found by bisection\n"
     << "over the layer count; beside the published size, with the signed error (predicted - published) / published.\n"
     << "Family: the layer count grown at the published hidden size, as the papers' own size ladders do (ZeRO-Offload\n"
     << "Table 3: 10B-15B are 50-78 layers of 4096; ZeRO-Infinity Table 4: 10B-20B are 50-98 layers of 4096). Twice:\n"
     << "the fewest layers with at least twice the published parameters, which must not fit. Pass: within\n"
     << "+/-" << core::format_fixed(ACCEPTED_LARGEST_MODEL_ERROR_PCT, 0)
     << " % and twice does not fit (the acceptance counts the rows with offload).\n\n"
     << "| row_id | source | published | offload | config as ran | shape that ran | largest predicted to fit | signed "
        "error | one layer more | twice the published size | result |\n"
     << "|---|---|---|---|---|---|---|---:|---|---|---|\n";
  auto billions = [](double p) { return core::format_fixed(p / 1e9, 2) + "B"; };
  bool any_largest = false;
  for (const auto& f : r.fits) {
    if (!f.largest)
      continue;
    any_largest = true;
    const LargestFit& l = *f.largest;
    md << "| " << f.c.info.row_id << " | " << f.c.info.source_id << " | " << core::markdown_cell(f.c.claim) << " | "
       << f.c.info.offload << " | " << core::markdown_cell(f.c.info.config) << " | " << l.ran_layers << " x "
       << f.c.ran.model.hidden << " = " << billions(static_cast<double>(l.ran_params)) << " | "
       << (l.largest_layers > 0 ? std::to_string(l.largest_layers) + " x " + std::to_string(f.c.ran.model.hidden) +
                                      " = " + billions(static_cast<double>(l.largest_params)) + " (GPU peak " +
                                      core::format_in_gib(static_cast<double>(l.largest_peak_bytes), 2) + ")"
                                : std::string("none (not one layer fits)"))
       << " | " << core::format_signed_pct(l.error_pct, 1) << " | " << core::markdown_cell(l.limit) << " | "
       << l.twice_layers << " layers = " << billions(static_cast<double>(l.twice_params)) << ": "
       << (l.twice_fits ? "fits" : "does not fit") << " (GPU peak "
       << core::format_in_gib(static_cast<double>(l.twice_peak_bytes), 2) << ") | "
       << (l.ok        ? "as published"
           : !l.within ? "OUTSIDE +/-" + core::format_fixed(ACCEPTED_LARGEST_MODEL_ERROR_PCT, 0) + " %"
                       : std::string("CONTRADICTS the source (twice fits)"))
       << " |\n";
  }
  if (!any_largest)
    md << "| (none) | | | | | | | | | | |\n";
  md << "\n";
}

/// Error statistics, the inputs assumed per row and the rows not covered.
void statistics_section(std::ostringstream& md, const ValidationReport& r)
{
  md << "## Error statistics\n\n"
     << "Measured rows (allocated and reserved; nvidia-smi rows are upper bounds and enter only the acceptance), per\n"
     << "metric, source, framework, ZeRO stage (DeepSpeed) or FSDP strategy / DDP, offload mode and overall:\n\n";
  core::error_stats_table(md, r.measured_stats);
  md << "\nDeepSpeed-estimator rows (model states only: a conformance test of the arithmetic, not of reality):\n\n";
  core::error_stats_table(md, r.estimator_stats);

  md << "\n## Inputs assumed per row\n\n";
  for (const auto& c : r.comparisons)
    md << "- row " << c.c.info.row_id << " (" << to_string(c.c.metric) << ", " << core::markdown_cell(c.detail)
       << "): " << core::markdown_cell(c.c.info.assumptions) << "\n";
  for (const auto& f : r.fits)
    md << "- row " << f.c.info.row_id << " (fit): " << core::markdown_cell(f.c.info.assumptions) << "\n";

  md << "\n## Not covered\n\n"
     << r.not_covered.size() << " memory or max-model rows cannot be expressed yet; " << r.other_rows
     << " further rows carry only time or throughput figures (not memory rows).\n\n";
  md << "| row_id | source | model | kind | why |\n|---|---|---|---|---|\n";
  for (const auto& n : r.not_covered)
    md << "| " << n.row_id << " | " << n.source_id << " | " << core::markdown_cell(n.model) << " | " << n.kind << " | "
       << core::markdown_cell(n.reason) << " |\n";
}

} // namespace

std::string render_markdown(const ValidationReport& r)
{
  std::ostringstream md;
  md << report_header("Memory against measurement", "zerosim validate --memory") << " (columns and\n"
     << "traps: `results/validation/README.md`); method, metric mapping and assumptions: `docs/validation.md`.\n"
     << "Do not edit by hand. Signed error = (predicted - measured) / measured.\n\n";

  acceptance_section(md, r);
  frameworks_section(md, r);
  rows_section(md, r);
  largest_section(md, r);
  statistics_section(md, r);
  return md.str();
}

std::string render_csv(const ValidationReport& r)
{
  // published_params_B and predicted_params_B: the largest-model records only (a model size, not memory).
  std::string out = core::csv_record({"row_id", "source_id", "kind", "model", "config", "metric", "measured_GiB",
                                      "predicted_GiB", "signed_error_pct", "verdict", "why_or_assumptions",
                                      "published_params_B", "predicted_params_B"});
  for (const auto& c : r.comparisons)
    out += core::csv_record({c.c.info.row_id, c.c.info.source_id, "memory", c.c.info.model, c.c.info.config,
                             to_string(c.c.metric), core::format_fixed(c.c.measured_bytes / core::GIB, 3),
                             core::format_fixed(static_cast<double>(c.predicted_bytes) / core::GIB, 3),
                             core::format_fixed(c.error_pct, 1), c.verdict, c.c.info.assumptions, "", ""});
  for (const auto& f : r.fits) {
    std::string verdict =
        std::string(f.ran_fits ? "fits" : "does not fit") +
        (f.doubled_fits ? std::string("; twice: ") + (*f.doubled_fits ? "fits" : "does not fit") : "") +
        (f.ok ? " (as published)" : " (contradicts the source)");
    out += core::csv_record({f.c.info.row_id, f.c.info.source_id, "fit", f.c.info.model, f.c.info.config, "fit verdict",
                             core::format_fixed(static_cast<double>(f.capacity_bytes) / core::GIB, 3),
                             core::format_fixed(static_cast<double>(f.ran_peak_bytes) / core::GIB, 3), "", verdict,
                             f.c.claim, "", ""});
  }
  for (const auto& f : r.fits) {
    if (!f.largest)
      continue;
    const LargestFit& l = *f.largest;
    std::string verdict = std::string(l.within ? "within 20 %" : "outside 20 %") + "; twice (" +
                          std::to_string(l.twice_layers) + " layers): " + (l.twice_fits ? "fits" : "does not fit") +
                          (l.ok ? " (as published)" : " (contradicts the source)");
    out += core::csv_record(
        {f.c.info.row_id, f.c.info.source_id, "largest model", f.c.info.model, f.c.info.config,
         "largest model predicted to fit (" + std::to_string(l.largest_layers) + " layers; " + l.family + ")",
         core::format_fixed(static_cast<double>(f.capacity_bytes) / core::GIB, 3),
         core::format_fixed(static_cast<double>(l.largest_peak_bytes) / core::GIB, 3),
         core::format_fixed(l.error_pct, 1), verdict, f.c.claim + "; one layer more: " + l.limit,
         core::format_fixed(l.published_params / 1e9, 3),
         core::format_fixed(static_cast<double>(l.largest_params) / 1e9, 3)});
  }
  for (const auto& n : r.not_covered)
    out += core::csv_record(
        {n.row_id, n.source_id, "not covered (" + n.kind + ")", n.model, "", "", "", "", "", "", n.reason, "", ""});
  return out;
}

int validate_memory_command(const std::string& csv, const std::string& out_dir, std::ostream& out,
                            const spec::Mechanisms& mechanisms)
{
  ValidationReport r =
      run_memory_validation(read_published_rows(csv), node_loader_near(csv), mechanisms, mapping_rules_near(csv));
  core::create_directories(out_dir, "--out");
  core::write_file(out_dir + "/memory.md", render_markdown(r));
  core::write_file(out_dir + "/memory.csv", render_csv(r));
  out << "memory validation: " << r.comparisons.size() << " memory comparisons, " << r.fits.size() << " fit verdicts, "
      << r.not_covered.size() << " rows not covered, " << r.other_rows << " time-only rows\n";
  if (r.allocated_median_abs_pct)
    out << "median |error| on allocated-memory rows: " << core::format_fixed(*r.allocated_median_abs_pct, 1) << " %\n";
  if (r.reserved_median_abs_pct)
    out << "median |error| on reserved-memory rows: " << core::format_fixed(*r.reserved_median_abs_pct, 1) << " %\n";
  out << "per framework (memory/fit/estimator rows: comparisons, fit verdicts reproduced, not covered, failed; "
         "|error| of allocated and reserved):\n";
  for (const auto& f : r.frameworks) {
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "  %-10s %4d rows: %3d comparisons, %2d of %2d fit verdicts, %3d not covered, %d failed",
                  f.framework.c_str(), f.rows, f.comparisons, f.fits_ok, f.fits, f.not_covered, f.failed);
    out << buf;
    if (f.measured) {
      std::snprintf(buf, sizeof buf, "; median %.1f %%, p90 %.1f %% (n = %d)\n", f.measured->median_abs_pct,
                    f.measured->p90_abs_pct, f.measured->n);
      out << buf;
    } else {
      out << "; none compared\n";
    }
  }
  for (const auto& f : r.fits) {
    if (!f.largest)
      continue;
    const LargestFit& l = *f.largest;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "largest model that fits, row %s (%s, offload %s): %.2fB predicted (%d layers) vs %.2fB published, "
                  "%+.1f %%; twice (%.2fB) %s\n",
                  f.c.info.row_id.c_str(), f.c.claim.c_str(), f.c.info.offload.c_str(),
                  static_cast<double>(l.largest_params) / 1e9, l.largest_layers, l.published_params / 1e9, l.error_pct,
                  static_cast<double>(l.twice_params) / 1e9, l.twice_fits ? "fits" : "does not fit");
    out << buf;
  }
  out << "acceptance: " << (r.accepted ? "met" : "NOT met") << "; report: " << out_dir << "/memory.md\n";
  return r.failures.empty() ? 0 : 1;
}

} // namespace zerosim::validation
