// The throughput validation report rendered: report.md's headline, sections and causes, and report.csv
// (docs/validation.md "Throughput").
#include "validation/report_common.hpp"
#include "validation/run_validation.hpp"
#include "validation/throughput_parts.hpp"

#include "core/csv.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace zerosim::validation {

using namespace throughput_parts;

namespace {

/// The line under a table: the median of the per-source medians (the source-balanced figure: no source weighs by its
/// row count).
std::string source_medians_line(std::optional<double> m)
{
  return m ? "Median of the per-source medians of |error|: " + core::format_fixed(*m, 1) + " %.\n" : std::string();
}

std::optional<double> lookup(const std::map<std::string, double>& m, const std::string& id)
{
  auto it = m.find(id);
  return it == m.end() ? std::nullopt : std::optional<double>(it->second);
}

std::string optional_pct(std::optional<double> v)
{
  return v ? core::format_signed_pct(*v, 1) : std::string("none");
}

} // namespace

std::string render_headline(const ThroughputReport& r)
{
  std::ostringstream os;
  const std::size_t comp = component_count(r);
  os << "throughput validation: " << r.rows_total << " rows in the file; " << r.comparisons.size() << " compared ("
     << r.comparisons.size() - comp << " whole-step figures, " << comp << " component timings), " << r.failures.size()
     << " failed or timed out, " << r.not_covered.size() << " not covered\n";
  auto table = [&](const std::vector<core::ErrorStats>& stats, const char* title) {
    if (stats.empty())
      return;
    os << title << "\n";
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-28s %5s %12s %12s\n", "group", "n", "median |err|", "p90 |err|");
    os << buf;
    for (const auto& s : stats) {
      std::snprintf(buf, sizeof buf, "  %-28s %5d %10.1f %% %10.1f %%\n", s.group.c_str(), s.n, s.median_abs_pct,
                    s.p90_abs_pct);
      os << buf;
    }
  };
  os << "per framework (rows in the file: compared on a whole-step figure, on a component timing, failed, not "
        "covered):\n";
  for (const auto& f : r.frameworks) {
    char buf[200];
    if (f.whole_step)
      std::snprintf(buf, sizeof buf,
                    "  %-10s %4d rows: %4d compared, %2d component timings, %3d failed, %4d not covered; median "
                    "|err| %.1f %%, p90 %.1f %%\n",
                    f.framework.c_str(), f.rows, f.compared, f.component, f.failed, f.not_covered,
                    f.whole_step->median_abs_pct, f.whole_step->p90_abs_pct);
    else
      std::snprintf(buf, sizeof buf,
                    "  %-10s %4d rows: %4d compared, %2d component timings, %3d failed, %4d not covered; no "
                    "whole-step figure compared\n",
                    f.framework.c_str(), f.rows, f.compared, f.component, f.failed, f.not_covered);
    os << buf;
  }
  table(r.stats, "whole-step figures (primary figure of each row):");
  table(r.component_stats, "component timings (backward pass, CPU-Adam step):");
  if (r.calibrated && r.calibrated->not_run.empty()) {
    const CalibratedErrors& k = *r.calibrated;
    const auto line = [&](const char* what, const std::map<std::string, double>& errors) {
      const auto of = [&](const ThroughputComparison& c) { return lookup(errors, c.c.info.row_id); };
      const std::vector<core::ErrorStats> st = whole_step_stats(r, of);
      if (st.empty())
        return;
      const core::ErrorStats& all = st.back();
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s (%zu fitted parameters): median |err| %.1f %%, p90 %.1f %%, median signed %+.1f %%, median "
                    "of per-source medians %.1f %%\n",
                    what, k.params.size(), all.median_abs_pct, all.p90_abs_pct, all.median_signed_pct,
                    median_of_source_medians(r, of).value_or(0.0));
      os << buf;
    };
    line("whole-step, leave-one-source-out", k.loso_pct);
    line("whole-step, in-sample", k.in_sample_pct);
  }
  for (const auto& f : r.failures)
    os << "FAILED row " << f.c.info.row_id << " (" << to_string(f.status) << "): " << f.message << "\n";
  return os.str();
}

namespace {

/// ## Leave-one-source-out and ## In-sample: the fit's errors, its parameters and how far they move across folds.
void calibrated_sections(std::ostringstream& md, const ThroughputReport& r)
{
  const CalibratedErrors* k = r.calibrated ? &*r.calibrated : nullptr;
  md << "\n## Leave-one-source-out\n\n";
  if (k == nullptr || !k->not_run.empty() || !k->loso_not_run.empty()) {
    md << "Not run: "
       << (k == nullptr ? "this report was made on the priors alone"
                        : (!k->not_run.empty() ? k->not_run : k->loso_not_run))
       << ".\n";
  } else {
    const auto loso = [k](const ThroughputComparison& c) { return lookup(k->loso_pct, c.c.info.row_id); };
    md << "Each source's rows predicted by the simulator with the parameters `zerosim calibrate` fits on every other\n"
       << "source (a parameter only the left-out source informs stays at its prior in that fold). Rows the fit could\n"
       << "not use are not in these tables.\n\n";
    core::error_stats_table(md, whole_step_stats(r, loso));
    md << "\n" << source_medians_line(median_of_source_medians(r, loso));
  }
  md << "\n## In-sample\n\n";
  if (k == nullptr || !k->not_run.empty()) {
    md << "Not run: " << (k == nullptr ? "this report was made on the priors alone" : k->not_run) << ".\n";
    return;
  }
  const auto in = [k](const ThroughputComparison& c) { return lookup(k->in_sample_pct, c.c.info.row_id); };
  md << "Every row predicted by the simulator with the parameters fitted on every source (" << k->params.size()
     << " fitted parameters; " << k->linearisations << " linearisations, " << k->simulations
     << " simulations; the fit's surrogate agrees with the simulator within "
     << core::format_fixed(k->max_surrogate_deviation_pct, 1) << " % in-sample";
  if (k->loso_not_run.empty())
    md << " and " << core::format_fixed(k->max_loso_surrogate_deviation_pct, 1)
       << " % in the leave-one-source-out folds, each a fit of its own on the rows it fitted; extrapolated to the "
          "held-out rows, which are always simulated, the in-sample surrogate is off by up to "
       << core::format_fixed(k->max_heldout_extrapolation_pct, 1) << " %";
  md << "). Reproduce the fit alone with `" << k->command << "`.\n\n";
  core::error_stats_table(md, whole_step_stats(r, in));
  md << "\n" << source_medians_line(median_of_source_medians(r, in));
  md << "\nThe fitted multipliers (on the priors; docs/calibration.md gives each one's prior, bounds and source) and\n"
     << "their range across the leave-one-source-out folds:\n\n"
     << "| parameter | fitted | folds: min | max | sources | note |\n|---|---:|---:|---:|---:|---|\n";
  for (const FittedParameter& p : k->params)
    md << "| " << p.name << " | " << core::format_fixed(p.value, 3) << " | "
       << (p.fold_min ? core::format_fixed(*p.fold_min, 3) : "none") << " | "
       << (p.fold_max ? core::format_fixed(*p.fold_max, 3) : "none") << " | " << p.sources << " | "
       << core::markdown_cell(p.note) << " |\n";
  for (const std::string& u : k->unfitted)
    md << "\nNot fitted: " << u << "\n";
}

/// ## Rows above 30 %: one line of cause per whole-step row whose |error| exceeds 30 % in any of the three
/// predictions (causes.csv beside the validation CSV; a row it does not list says so).
void large_error_causes(std::ostringstream& md, const ThroughputReport& r)
{
  constexpr double LARGE = 30.0;
  std::ostringstream lines;
  int n = 0, explained = 0;
  for (const ThroughputComparison* c : whole_step_rows(r)) {
    const std::string& id = c->c.info.row_id;
    std::optional<double> in, loso;
    if (r.calibrated) {
      in = lookup(r.calibrated->in_sample_pct, id);
      loso = lookup(r.calibrated->loso_pct, id);
    }
    const double prior = c->figures.front().error_pct;
    const double worst = std::max({std::abs(prior), in ? std::abs(*in) : 0.0, loso ? std::abs(*loso) : 0.0});
    if (worst <= LARGE)
      continue;
    ++n;
    lines << "- row " << id << " (" << c->c.info.source_id << "; priors " << core::format_signed_pct(prior, 1);
    if (in)
      lines << ", in-sample " << core::format_signed_pct(*in, 1);
    if (loso)
      lines << ", leave-one-source-out " << core::format_signed_pct(*loso, 1);
    lines << "): ";
    auto it = r.causes.find(id);
    if (it == r.causes.end()) {
      lines << "no cause recorded in causes.csv.\n";
      continue;
    }
    ++explained;
    lines << it->second.kind << ": " << core::markdown_cell(it->second.cause);
    if (!it->second.evidence.empty())
      lines << " Evidence: " << core::markdown_cell(it->second.evidence);
    lines << "\n";
  }
  md << "\n## Rows above 30 %\n\n"
     << "Every whole-step row whose |error| is above 30 % on the priors, in-sample or leave-one-source-out, with one\n"
     << "line of cause from results/validation/causes.csv (docs/research/validation-causes.md): `mechanism`, one the\n"
     << "model does not have; `data`, a doubt about the figure or its inputs, quoted from its source; `unknown`. " << n
     << " rows, " << explained << " with a cause.\n\n"
     << lines.str();
}

} // namespace

std::string render_throughput_markdown(const ThroughputReport& r)
{
  std::ostringstream md;
  const std::size_t comp = component_count(r);
  md << report_header("Time and throughput against measurement", "zerosim validate --run") << " (columns and\n"
     << "traps: `results/validation/README.md`); method, figure priority and assumptions: `docs/validation.md`\n"
     << "(\"Throughput\"). Do not edit by hand. Signed error, one direction for every metric: + = predicted faster\n"
     << "than measured (optimistic), - = predicted slower; (predicted - measured) / measured for a rate (samples/s,\n"
     << "tokens/s, TFLOPs, MFU), (measured - predicted) / measured for a time (step, backward, CPU-Adam step), so\n"
     << "|error| = |predicted - measured| / measured either way. A row is never dropped because its error is "
        "large.\n\n";

  md << "## Headline\n\n"
     << "- Rows in the file: " << r.rows_total << ".\n"
     << "- Compared: " << r.comparisons.size() << " (" << r.comparisons.size() - comp << " on a whole-step figure, "
     << comp << " on a component timing).\n"
     << "- Failed or timed out in the simulator: " << r.failures.size() << (r.failures.empty() ? "" : " (listed below)")
     << ".\n"
     << "- Not covered: " << r.not_covered.size() << " (grouped by reason below).\n\n";
  md << "Per framework (the rows of the file by the framework they ran on; median and p90 of |error| over the\n"
     << "whole-step figures compared):\n\n"
     << "| framework | rows | compared (whole step) | component timings | failed | not covered | median abs error | "
        "p90 abs error | median signed error |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& f : r.frameworks) {
    md << "| " << f.framework << " | " << f.rows << " | " << f.compared << " | " << f.component << " | " << f.failed
       << " | " << f.not_covered << " | ";
    if (f.whole_step)
      md << core::format_fixed(f.whole_step->median_abs_pct, 1) << " % | "
         << core::format_fixed(f.whole_step->p90_abs_pct, 1) << " % | "
         << core::format_signed_pct(f.whole_step->median_signed_pct, 1) << " |\n";
    else
      md << "none compared | | |\n";
  }
  md << "\nThe whole-step figures (step time, samples/s, tokens/s, TFLOPs, MFU; the primary figure of each row) are\n"
     << "judged three ways below, in this order: leave-one-source-out (each source predicted with the calibration\n"
     << "parameters fitted without it: the figure to trust for a run the project has not seen), in-sample (fitted on\n"
     << "every source) and on the priors alone (no calibration: `--calibration none`). Each table groups the rows by\n"
     << "source, framework, ZeRO stage or FSDP strategy, offload mode, GPU kind, scale band (nodes) and, for pipeline\n"
     << "rows, pipeline schedule and degree (\"pipeline 1f1b pp 12\").\n";
  calibrated_sections(md, r);
  md << "\n## Priors only\n\n"
     << "Every row predicted on the model's priors (`--calibration none`): kernel and link figures from sources\n"
     << "outside the validation data (calibration/kernels.yaml, docs/collectives.md), nothing fitted.\n\n";
  core::error_stats_table(md, r.stats);
  md << "\n" << source_medians_line(median_of_source_medians(r, priors_error));
  md << "\nComponent timings (backward pass, CPU-Adam step), kept apart:\n\n";
  core::error_stats_table(md, r.component_stats);

  const bool fitted = r.calibrated && r.calibrated->not_run.empty();
  md << "\n## Compared rows\n\n"
     << "The primary figure of each row (priority: `docs/validation.md`). Tolerance: the chart-read tolerance the\n"
     << "file states, or half a printed range. Predicted and error: on the priors"
     << (fitted ? "; then the error in-sample and leave-one-source-out" : "") << ".\n\n"
     << "| row | source | model | GPUs | stage / strategy | offload | metric | measured | predicted | error | "
     << (fitted ? "in-sample | leave-one-source-out | " : "") << "tolerance |\n"
     << "|---|---|---|---:|---:|---|---|---:|---:|---:|" << (fitted ? "---:|---:|" : "") << "---|\n";
  for (const auto& c : r.comparisons) {
    const FigureComparison& f = c.figures.front();
    md << "| " << c.c.info.row_id << " | " << c.c.info.source_id << " | " << core::markdown_cell(c.c.info.model)
       << " | " << gpus_of(c.c) << " | " << stage_text(c.c) << " | " << c.c.info.offload << " | "
       << to_string(f.figure.metric) << " | " << figure_text(f.figure.metric, f.figure.value) << " | "
       << figure_text(f.figure.metric, f.predicted) << " | " << core::format_signed_pct(f.error_pct, 1) << " | ";
    if (fitted)
      md << optional_pct(lookup(r.calibrated->in_sample_pct, c.c.info.row_id)) << " | "
         << optional_pct(lookup(r.calibrated->loso_pct, c.c.info.row_id)) << " | ";
    md << tolerance_text(f.figure) << " |\n";
  }
  large_error_causes(md, r);

  std::vector<TimeMetric> used;
  for (const auto& c : r.comparisons)
    for (const auto& f : c.figures)
      if (std::find(used.begin(), used.end(), f.figure.metric) == used.end())
        used.push_back(f.figure.metric);
  std::sort(used.begin(), used.end());
  md << "\nMetrics, and the predicted quantity each is compared with (docs/scenario-format.md \"Results\"):\n\n"
     << "| metric | definition |\n|---|---|\n";
  for (TimeMetric m : used)
    md << "| " << to_string(m) << " | " << definition_of(m) << " |\n";

  bool any_other = std::any_of(r.comparisons.begin(), r.comparisons.end(),
                               [](const auto& c) { return c.figures.size() > 1 || !c.c.not_compared.empty(); });
  if (any_other) {
    md << "\n## Other figures of the compared rows (not in the statistics)\n\n"
       << "| row | metric | measured | predicted | error | note |\n|---|---|---:|---:|---:|---|\n";
    for (const auto& c : r.comparisons) {
      for (std::size_t i = 1; i < c.figures.size(); ++i) {
        const FigureComparison& f = c.figures[i];
        md << "| " << c.c.info.row_id << " | " << to_string(f.figure.metric) << " | "
           << figure_text(f.figure.metric, f.figure.value) << " | " << figure_text(f.figure.metric, f.predicted)
           << " | " << core::format_signed_pct(f.error_pct, 1) << " | " << core::markdown_cell(f.figure.note) << " |\n";
      }
      if (!c.c.not_compared.empty())
        md << "| " << c.c.info.row_id << " | not compared | | | | " << core::markdown_cell(c.c.not_compared) << " |\n";
    }
  }

  if (!r.failures.empty()) {
    md << "\n## Failed in the simulator\n\n"
       << "Rows the simulator was asked about and gave no answer for (a crash, an error, or the per-row time limit):\n"
       << "bugs or limits of the simulator, not verdicts.\n\n"
       << "| row | source | model | config | status | message |\n|---|---|---|---|---|---|\n";
    for (const auto& f : r.failures)
      md << "| " << f.c.info.row_id << " | " << f.c.info.source_id << " | " << core::markdown_cell(f.c.info.model)
         << " | " << core::markdown_cell(f.c.info.config) << " | " << to_string(f.status) << " | "
         << core::markdown_cell(f.message) << " |\n";
  }

  auto groups = by_category(r);
  md << "\n## Not covered\n\n" << r.not_covered.size() << " rows, by reason:\n\n| reason | rows |\n|---|---:|\n";
  for (const auto& [cat, rows] : groups)
    md << "| " << core::markdown_cell(cat) << " | " << rows.size() << " |\n";
  for (const auto& [cat, rows] : groups) {
    md << "\n### " << core::markdown_cell(cat) << " (" << rows.size()
       << ")\n\n| row | source | model | why |\n|---|---|---|---|\n";
    for (const auto* n : rows)
      md << "| " << n->row_id << " | " << n->source_id << " | " << core::markdown_cell(n->model) << " | "
         << core::markdown_cell(n->reason) << " |\n";
  }

  md << "\n## Configuration and inputs assumed per compared row\n\n";
  for (const auto& c : r.comparisons) {
    md << "- row " << c.c.info.row_id << " (" << c.c.info.source_id << ", " << core::markdown_cell(c.c.info.locator)
       << "; evidence: " << core::markdown_cell(c.c.evidence) << "): " << core::markdown_cell(c.c.info.config) << ". "
       << core::markdown_cell(c.c.info.assumptions);
    if (!c.figures.front().figure.note.empty())
      md << "; figure: " << core::markdown_cell(c.figures.front().figure.note);
    if (!c.predicted.fits)
      md << "; predicted NOT to fit in memory (simulated anyway)";
    for (const auto& w : c.predicted.warnings)
      md << "; engine warning: " << core::markdown_cell(w);
    md << "; replay " << c.predicted.replay << ".\n";
  }
  return md.str();
}

std::string render_throughput_csv(const ThroughputReport& r)
{
  std::string out = core::csv_record({"row_id", "source_id", "kind", "primary", "model", "gpus", "zero_stage",
                                      "offload", "metric", "definition", "measured", "predicted", "signed_error_pct",
                                      "tolerance", "category_or_status", "notes"});
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  for (const auto& c : r.comparisons) {
    for (std::size_t i = 0; i < c.figures.size(); ++i) {
      const FigureComparison& f = c.figures[i];
      std::string notes = c.c.info.config + "; " + c.c.info.assumptions;
      if (!f.figure.note.empty())
        notes += "; figure: " + f.figure.note;
      out +=
          core::csv_record({c.c.info.row_id, c.c.info.source_id, "compared", i == 0 ? "yes" : "no", c.c.info.model,
                            std::to_string(gpus_of(c.c)), stage_text(c.c), c.c.info.offload, to_string(f.figure.metric),
                            definition_of(f.figure.metric), num(f.figure.value), num(f.predicted),
                            core::format_fixed(f.error_pct, 2), f.figure.tolerance ? num(*f.figure.tolerance) : "",
                            is_component(f.figure.metric) ? "component timing" : "whole step", notes});
    }
  }
  for (const auto& f : r.failures)
    out += core::csv_record({f.c.info.row_id, f.c.info.source_id, "failed", "", f.c.info.model,
                             std::to_string(gpus_of(f.c)), stage_text(f.c), f.c.info.offload,
                             to_string(f.c.figures.front().metric), "", num(f.c.figures.front().value), "", "", "",
                             to_string(f.status), f.message});
  for (const auto& n : r.not_covered)
    out += core::csv_record(
        {n.row_id, n.source_id, "not covered", "", n.model, "", "", "", "", "", "", "", "", "", n.category, n.reason});
  return out;
}

} // namespace zerosim::validation
