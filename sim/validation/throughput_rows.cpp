// The time and throughput mapping: a published time or throughput row as a ThroughputCase, or the reason it is
// not compared (docs/validation.md, "Throughput").
#include "validation/row_mapping.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace zerosim::validation {

using namespace detail;

namespace {

bool is_figure_column_empty(const PublishedRow& row)
{
  for (const char* c : spec::FIGURE_COLUMNS)
    if (!trim(field(row, c)).empty())
      return false;
  return true;
}

/// Which TFLOPs a tflops_per_gpu figure is (README trap 1), and the note saying how that was decided.
TimeMetric tflops_metric(const PublishedRow& row, std::string& note, const spec::MappingRules& rules)
{
  std::string inc = lower(trim(field(row, "tflops_includes_recompute")));
  // "not stated" is no answer (it begins with "no", which is one).
  if (inc.rfind("not stated", 0) == 0)
    inc.clear();
  if (inc.rfind("yes", 0) == 0)
    return TimeMetric::TFLOPS_HARDWARE;
  if (inc.rfind("no", 0) == 0)
    return TimeMetric::TFLOPS_MODEL;
  std::string ckpt = lower(trim(field(row, "activation_checkpointing")));
  bool recompute = ckpt.rfind("yes", 0) == 0 || ckpt.rfind("full", 0) == 0 || ckpt.rfind("selective", 0) == 0;
  if (!recompute) {
    note = "definition not stated; without activation checkpointing model and hardware TFLOPs are equal";
    return TimeMetric::TFLOPS_MODEL;
  }
  // The framework's convention (the general rules' frameworks: DeepSpeed's and Megatron's count the recompute).
  const spec::FrameworkConvention& fw = framework_convention(row, rules.general);
  if (fw.tflops_recompute_counted) {
    note = fw.tflops_note;
    return TimeMetric::TFLOPS_HARDWARE;
  }
  // The source's own convention where its data states it (tflops: the PyTorch FSDP paper's minGPT benchmark).
  if (const spec::SourceRule* src = rule_of(row, rules)) {
    for (const spec::SourceTflops& t : src->tflops) {
      if (matches(t.when, row)) {
        note = t.note;
        return t.recompute_counted ? TimeMetric::TFLOPS_HARDWARE : TimeMetric::TFLOPS_MODEL;
      }
    }
  }
  note = "definition not stated: model FLOPs assumed";
  return TimeMetric::TFLOPS_MODEL;
}

TimeMetric metric_of_column(const std::string& column, const PublishedRow& row, std::string& note,
                            const spec::MappingRules& rules)
{
  if (column == "step_time_s")
    return TimeMetric::STEP_TIME;
  if (column == "samples_per_s")
    return TimeMetric::SAMPLES_PER_S;
  if (column == "tokens_per_s_total")
    return TimeMetric::TOKENS_PER_S_TOTAL;
  if (column == "tokens_per_s_per_gpu")
    return TimeMetric::TOKENS_PER_S_PER_GPU;
  if (column == "tflops_per_gpu")
    return tflops_metric(row, note, rules);
  if (column == "mfu")
    return TimeMetric::MFU;
  if (column == "hfu")
    return TimeMetric::HFU;
  return TimeMetric::DERIVED_STEP_TIME;
}

/// A row that times the CPU-Adam optimizer step alone, for a model named by its size (the source's cpu_adam data:
/// ZeRO-Offload Table 4); nullptr for every other row.
const spec::SourceCpuAdam* cpu_adam_of(const PublishedRow& row, const spec::SourceRule* src)
{
  return src && src->cpu_adam && matches(src->cpu_adam->when, row) ? &*src->cpu_adam : nullptr;
}

/// Another row of the same source that gives the shape (layers, hidden) of a model of the same size on one GPU.
const PublishedRow* same_size_shape(const PublishedRow& row, const std::vector<PublishedRow>& all)
{
  auto params = plain_number(field(row, "params_B"));
  if (!params)
    return nullptr;
  for (const auto& r : all) {
    if (field(r, "source_id") != field(row, "source_id") || &r == &row)
      continue;
    auto p = plain_number(field(r, "params_B"));
    auto gpus = leading_number(field(r, "total_gpus"));
    if (p && *p == *params && plain_int(field(r, "layers")) && plain_int(field(r, "hidden")) && gpus && *gpus == 1)
      return &r;
  }
  return nullptr;
}

/// The row of another source whose configuration a row reruns (the row's source's rerun data: DeepSpeed issue #1776,
/// rows 117-118, reruns ZeRO-Infinity Table 1's 50B and 100B runs, rows 96-97): the same layers, hidden size, GPU
/// count and offload devices, with a micro-batch; nullptr when the row is not such a rerun.
const PublishedRow* rerun_twin(const PublishedRow& row, const std::vector<PublishedRow>& all,
                               const spec::SourceRule* src)
{
  if (!src || !src->rerun || !matches(src->rerun->when, row))
    return nullptr;
  for (const auto& r : all) {
    if (field(r, "source_id") != src->rerun->source_id || !leading_number(field(r, "micro_batch")))
      continue;
    bool same = true;
    for (const char* k : {"layers", "hidden", "total_gpus"})
      same = same && trim(field(r, k)) == trim(field(row, k));
    for (const char* k : {"offload_optimizer", "offload_param"})
      same = same && parse_offload(field(r, k)) == parse_offload(field(row, k));
    if (same)
      return &r;
  }
  return nullptr;
}

/// The inputs a row needs for a throughput comparison that it does not give (empty: all given).
std::vector<std::string> missing_inputs(const PublishedRow& row, const spec::MappingRules& rules)
{
  std::vector<std::string> miss;
  if (!dimension_of(field(row, "layers")) || !dimension_of(field(row, "hidden")))
    miss.push_back("model dimensions (layers '" + field(row, "layers") + "', hidden '" + field(row, "hidden") + "')");
  else if (!leading_number(field(row, "heads")))
    miss.push_back("attention heads ('" + field(row, "heads") + "')");
  if (!leading_number(field(row, "micro_batch")))
    miss.push_back("micro-batch per GPU ('" + field(row, "micro_batch") + "')");
  if (!leading_number(field(row, "total_gpus")) &&
      !(leading_number(field(row, "gpus_per_node")) && leading_number(field(row, "nodes"))))
    miss.push_back("GPU count");
  if (node_name_of(row, rules.general).empty())
    miss.push_back("a node file for GPU '" + field(row, "gpu") + "'");
  return miss;
}

std::string joined_list(const std::vector<std::string>& items)
{
  std::string out;
  for (const auto& i : items)
    add_note(out, i);
  return out;
}

/// `text` with "{row}" replaced by `row_id`.
std::string with_row(std::string text, const std::string& row_id)
{
  const std::size_t at = text.find("{row}");
  if (at != std::string::npos)
    text.replace(at, 5, row_id);
  return text;
}

/// The row with inputs filled in from the source's other rows or its data, each recorded in `notes`.
PublishedRow completed_row(const PublishedRow& row, const std::vector<PublishedRow>& all, std::string& notes,
                           const spec::MappingRules& rules)
{
  PublishedRow r = row;
  const spec::SourceRule* src = rule_of(row, rules);
  if (const spec::SourceCpuAdam* adam = cpu_adam_of(row, src)) {
    // The model of that size is the one another row of the same source gives; the cells are the source's data.
    if (const PublishedRow* twin = same_size_shape(row, all)) {
      r["layers"] = field(*twin, "layers");
      r["hidden"] = field(*twin, "hidden");
      add_note(notes, "shape " + field(*twin, "layers") + " x " + field(*twin, "hidden") + " of the " +
                          field(row, "params_B") + "B model of the same paper (published.csv row " +
                          field(*twin, "row_id") + ")");
    }
    for (const auto& [column, value] : adam->cells)
      r[column] = value;
    add_note(notes, adam->note);
  }
  const PublishedRow* paper = rerun_twin(row, all, src);
  if (paper) {
    // The batch is the rerun configuration's, where the row does not state it.
    for (const char* k : {"micro_batch", "global_batch"})
      if (trim(field(r, k)).empty())
        r[k] = field(*paper, k);
    add_note(notes, "micro-batch " + field(*paper, "micro_batch") + ", global batch " + field(*paper, "global_batch") +
                        " of " + with_row(src->rerun->note, field(*paper, "row_id")));
  }
  // A layer count the row does not list, for a model of a size and hidden size the source's data gives a shape
  // (model_sizes: the BLOOM prequel's topology tables, whose layers were "tweaked to fit PP").
  if (src && !dimension_of(field(r, "layers")))
    for (const spec::SourceModelSize& m : src->model_sizes)
      if (contains(field(r, "model"), " " + m.size) && dimension_of(field(r, "hidden")) == m.hidden) {
        r["layers"] = std::to_string(m.layers);
        add_note(notes, "layers " + std::to_string(m.layers) + " (row: '" + field(row, "layers") + "'; " + m.size +
                            " at hidden " + std::to_string(m.hidden) + ": " + m.citation + ")");
        break;
      }
  auto hidden = plain_int(field(r, "hidden"));
  // The heads the source (or the source of the rerun configuration) gives a hidden size (heads_by_hidden).
  const spec::SourceRule* heads_src = paper ? rules.find(src->rerun->source_id) : src;
  if (hidden && !leading_number(field(r, "heads")) && heads_src) {
    for (const spec::SourceHeads& t : heads_src->heads_by_hidden) {
      if (t.hidden == *hidden) {
        r["heads"] = std::to_string(t.heads);
        add_note(notes, "heads not in " + heads_src->heads_missing_from + ": " + std::to_string(t.heads) + " (" +
                            t.citation + ")");
      }
    }
  }
  if (hidden && !leading_number(field(r, "heads"))) {
    // The first head width of the general rules that divides the hidden size (head_widths: Megatron-LM's 128, then
    // 64), else one head.
    int heads = 1;
    for (int width : rules.general.head_widths)
      if (*hidden % width == 0) {
        heads = *hidden / width;
        break;
      }
    r["heads"] = std::to_string(heads);
    add_note(notes, "heads not stated: " + std::to_string(heads) + " assumed (head width " +
                        std::to_string(*hidden / heads) + ")");
  }
  return r;
}

/// The figures of a row, primary first; `not_compared` collects the cells that cannot be compared, with why.
std::vector<TimeFigure> figures_of(const PublishedRow& row, std::string& not_compared, const spec::MappingRules& rules)
{
  const spec::SourceRule* src = rule_of(row, rules);
  std::vector<TimeFigure> measured;
  std::optional<TimeFigure> derived;
  auto tolerance = chart_tolerance(field(row, "evidence_type"));
  for (const char* column : spec::FIGURE_COLUMNS) {
    const std::string& text = field(row, column);
    if (trim(text).empty())
      continue;
    // A figure its source's data says is not one to compare (figures_not_compared: the Llama 2 70B FSDP blog's
    // derived step time, an upper bound including evaluation and checkpoints).
    if (const spec::SourceFigureNotCompared* n = src ? column_entry(src->figures_not_compared, row, column) : nullptr) {
      add_note(not_compared, std::string(column) + " '" + text + "': " + n->reason);
      continue;
    }
    ParsedFigure p = parse_figure(text);
    if (!p.value) {
      add_note(not_compared, std::string(column) + " '" + text + "': " + p.why_not);
      continue;
    }
    TimeFigure f;
    f.column = column;
    f.written = text;
    f.value = *p.value;
    f.note = p.note;
    std::string def_note;
    f.metric = metric_of_column(column, row, def_note, rules);
    if (p.part == "backward")
      f.metric = TimeMetric::BACKWARD_TIME;
    if (const spec::SourceCpuAdam* adam = cpu_adam_of(row, src); adam && f.metric == TimeMetric::STEP_TIME) {
      f.metric = TimeMetric::CPU_ADAM_TIME;
      add_note(f.note, adam->figure_note);
    }
    if (!def_note.empty())
      add_note(f.note, def_note);
    if ((f.metric == TimeMetric::MFU || f.metric == TimeMetric::HFU) && f.value > 1.5) {
      f.value /= 100;
      add_note(f.note, "written in percent");
    }
    if (p.half_range)
      f.tolerance = *p.half_range;
    else if (tolerance && f.metric != TimeMetric::MFU && f.metric != TimeMetric::HFU)
      f.tolerance = *tolerance;
    if (f.metric == TimeMetric::DERIVED_STEP_TIME) {
      add_note(f.note, "derived by the file from measured throughput, not measured");
      derived = f;
    } else {
      measured.push_back(f);
    }
  }
  if (measured.empty() && derived)
    measured.push_back(*derived);
  else if (derived)
    add_note(not_compared, "derived_step_time_s '" + derived->written + "': not used, a measured figure exists");
  // A samples/s figure printed as a whole number beside a tokens/s figure of the same run (the llm-foundry
  // tables round "Throughput (S/s)" to integers: "3" stands for 2.5-3.5, "0" for a fraction) gives way to the
  // tokens/s figure, the same measurement to 5-6 significant digits; it is still compared, after it.
  auto samples = std::find_if(measured.begin(), measured.end(),
                              [](const TimeFigure& f) { return f.metric == TimeMetric::SAMPLES_PER_S; });
  auto tokens = std::find_if(measured.begin(), measured.end(), [](const TimeFigure& f) {
    return f.metric == TimeMetric::TOKENS_PER_S_TOTAL || f.metric == TimeMetric::TOKENS_PER_S_PER_GPU;
  });
  if (samples != measured.end() && tokens != measured.end() && samples < tokens && plain_int(samples->written)) {
    TimeFigure moved = *samples;
    add_note(moved.note, "printed as a whole number (rounded); the tokens/s figure is the primary one");
    measured.erase(samples);
    auto after = std::find_if(measured.begin(), measured.end(), [](const TimeFigure& f) {
      return f.metric == TimeMetric::TOKENS_PER_S_TOTAL || f.metric == TimeMetric::TOKENS_PER_S_PER_GPU;
    });
    measured.insert(after + 1, moved);
  }
  return measured;
}

} // namespace

void map_throughput_row(const PublishedRow& row, const std::vector<PublishedRow>& all, const NodeLoader& load_node,
                        ThroughputMapping& into, const spec::MappingRules& rules)
{
  RowInfo info = info_of(row);
  auto not_covered = [&](const std::string& category, const std::string& reason) {
    into.not_covered.push_back({info.row_id, info.source_id, info.model, category, reason, info.framework});
  };
  if (is_figure_column_empty(row)) {
    std::string what = field(row, "provenance") == "estimator" ? "a DeepSpeed estimator output (memory.md compares it)"
                       : !trim(field(row, "peak_mem_GB")).empty() || !trim(field(row, "max_model_fit")).empty()
                           ? "only a memory figure or a fit statement (memory.md compares it)"
                           : "no figure at all";
    // What would also keep the row out (FP8, a pipeline DeepSpeed's engine does not run, ...), so that every row
    // left out of a modelled feature is listed with why.
    const std::vector<Exclusion> also = exclusions(row, rules);
    not_covered(CAT_NO_FIGURE, "the row has " + what + (also.empty() ? "" : "; nor could it run: " + joined(also)));
    return;
  }
  std::string notes;
  const PublishedRow r = completed_row(row, all, notes, rules);
  const spec::SourceRule* src = rule_of(r, rules);
  std::vector<Exclusion> why = exclusions(r, rules);
  // Rows whose figures the source's data says not to compare (not_compared: README trap 5's BLOOM table).
  if (src)
    for (const spec::SourceNotCompared& n : src->not_compared)
      if (matches(n.when, r))
        why.push_back({n.category, n.reason});
  if (!why.empty()) {
    not_covered(why.front().category, joined(why));
    return;
  }
  auto missing = missing_inputs(r, rules);
  if (field(r, "completeness") == "C") {
    std::string reason = "graded C by the data file (headline figures without the batch or model dimensions needed)";
    if (!missing.empty())
      reason += ": no " + joined_list(missing);
    else
      reason += "; the row's notes: " +
                (field(r, "notes").size() > 240 ? field(r, "notes").substr(0, 240) + "..." : field(r, "notes"));
    // A figure that could not be compared anyway is named too (row 633: a time per epoch).
    std::string not_compared;
    if (figures_of(r, not_compared, rules).empty() && !not_compared.empty())
      reason += "; nor is its figure comparable: " + not_compared;
    not_covered(CAT_C, reason);
    return;
  }
  if (!missing.empty()) {
    bool node_only = missing.size() == 1 && missing.front().rfind("a node file", 0) == 0;
    not_covered(node_only ? CAT_NODE : CAT_INPUTS, "not given: " + joined_list(missing));
    return;
  }
  std::string not_compared;
  std::vector<TimeFigure> figures = figures_of(r, not_compared, rules);
  if (figures.empty()) {
    not_covered(CAT_FIGURE, not_compared);
    return;
  }

  // missing_inputs() lets no row without layers, hidden, heads or micro-batch through.
  const Shape shape = *shape_of(r, notes);
  ThroughputCase c;
  c.info = info;
  c.info.assumptions = notes;
  c.scenario = row_scenario(r, load_node, shape, c.info, rules);
  c.figures = std::move(figures);
  c.evidence = field(r, "evidence_type");
  c.completeness = field(r, "completeness");
  c.not_compared = not_compared;
  into.cases.push_back(std::move(c));
}

ThroughputMapping map_throughput_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                      const spec::MappingRules& rules)
{
  ThroughputMapping m;
  for (const auto& r : rows) {
    try {
      map_throughput_row(r, rows, load_node, m, rules);
    } catch (const core::InputError& e) {
      m.not_covered.push_back({field(r, "row_id"), field(r, "source_id"), field(r, "model"), CAT_INPUTS,
                               std::string("the row cannot be mapped: ") + e.what(), framework_label(r)});
    }
  }
  return m;
}

} // namespace zerosim::validation
