// results/validation/sources/SNN.yaml: what each published source says that its rows do not (docs/validation.md,
// "Per-source data"). Read with the same FieldReader as every other file, so a typo is an input error with file,
// line and key. shipped_mapping_rules adds the general rules (general_rules_reader.cpp).
#include "config/document.hpp"
#include "config/mapping_rules_loader.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <filesystem>
#include <mutex>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::config {
namespace {

KeyDoc text_key(std::string k, std::string desc, std::string def = "\"\"")
{
  return modelled_key(std::move(k), "string", std::move(def), std::move(desc));
}

const Schema& when_schema()
{
  static const Schema s{
      "when",
      {text_key("locator_contains", "the locator cell contains it"),
       text_key("framework_contains", "the framework cell contains it"),
       text_key("model_contains", "the model cell contains it"),
       text_key("precision_contains", "the precision cell contains it"),
       text_key("checkpointing_contains", "the activation_checkpointing cell contains it"),
       modelled_key("stage", "integer 0-3", "any", "the row's DeepSpeed stage"),
       modelled_key("pipeline", "bool", "any", "the row's pp cell is above 1 (true) or not (false)"),
       modelled_key("offload_any", "list of 'optimizer|param cpu|nvme'", "any", "one of these offloads is the row's")}};
  return s;
}

const Schema& model_size_schema()
{
  static const Schema s{"model_sizes",
                        {text_key("size", "as max_model_fit writes it (13B)", "required"),
                         modelled_key("layers", "integer >= 1", "required", ""),
                         modelled_key("hidden", "integer >= 1", "required", ""),
                         modelled_key("heads", "integer >= 1", "required", ""),
                         modelled_key("micro_batch", "integer >= 1", "the row's", ""),
                         modelled_key("tensor_parallel", "integer >= 1", "1", ""),
                         text_key("citation", "where the shape is published", "required")}};
  return s;
}

const Schema& heads_schema()
{
  static const Schema entry{"heads_by_hidden.sizes",
                            {modelled_key("hidden", "integer >= 1", "required", ""),
                             modelled_key("heads", "integer >= 1", "required", ""),
                             text_key("citation", "where the heads are published", "required")}};
  static const Schema s{"heads_by_hidden",
                        {text_key("missing_from", "where the rows' heads are missing (Table 1)", "required"),
                         modelled_key("sizes", "list of mappings", "required", "", &entry)}};
  return s;
}

const Schema& zero_schema()
{
  static const Schema param{"offload_param",
                            {modelled_key("buffer_size", "count", "DeepSpeed's", ""),
                             modelled_key("max_in_cpu", "count", "DeepSpeed's", "")}};
  static const Schema opt{"offload_optimizer", {modelled_key("device", "one of cpu, nvme", "the row's", "")}};
  static const Schema s{"zero_optimization",
                        {modelled_key("stage", "integer 0-1", "the row's", "the stage the run's ds_config set"),
                         modelled_key("reduce_bucket_size", "count", "DeepSpeed's", ""),
                         modelled_key("allgather_bucket_size", "count", "DeepSpeed's", ""),
                         modelled_key("contiguous_gradients", "bool", "DeepSpeed's", ""),
                         modelled_key("overlap_comm", "bool", "DeepSpeed's", ""),
                         modelled_key("reduce_scatter", "bool", "DeepSpeed's", ""),
                         modelled_key("sub_group_size", "count", "DeepSpeed's", ""),
                         modelled_key("stage3_max_reuse_distance", "count", "DeepSpeed's", ""),
                         modelled_key("offload_optimizer", "mapping", "the row's", "", &opt),
                         modelled_key("offload_param", "mapping", "the row's", "", &param)}};
  return s;
}

const Schema& deepspeed_entry_schema()
{
  static const Schema aio{"aio",
                          {modelled_key("block_size", "count", "1048576", ""),
                           modelled_key("queue_depth", "integer >= 1", "8", ""),
                           modelled_key("thread_count", "integer >= 1", "1", "")}};
  static const Schema run{"known_runs",
                          {modelled_key("layers", "integer >= 1", "required", ""),
                           modelled_key("hidden", "integer >= 1", "required", ""),
                           text_key("citation", "the script that says so", "required")}};
  static const Schema s{"deepspeed",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         modelled_key("zero_optimization", "mapping", "none", "", &zero_schema()),
                         text_key("zero_note", ""), modelled_key("aio", "mapping", "none", "", &aio),
                         text_key("aio_note", ""),
                         modelled_key("cpu_checkpoints", "one of never, always, where_needed", "never", ""),
                         text_key("checkpoint_note", ""), text_key("where_needed_text", ""),
                         modelled_key("known_runs", "list of mappings", "none", "", &run), text_key("citation", "")}};
  return s;
}

const Schema& pipeline_schema()
{
  static const Schema s{"pipeline",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         modelled_key("schedule", "one of 1f1b, gpipe, interleaved_1f1b, zero_bubble", "required", ""),
                         text_key("partition", "DeepSpeed's partition_method (type:transformer|embedding)",
                                  "Megatron-DeepSpeed's type:transformer"),
                         text_key("note", "printed with the row", "required"), text_key("citation", "")}};
  return s;
}

const Schema& mixed_precision_schema()
{
  static const Schema s{"mixed_precision",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         modelled_key("autocast", "bool", "false", "for amp_* precisions"),
                         modelled_key("param_dtype", "dtype", "none", ""),
                         modelled_key("reduce_dtype", "dtype", "none", ""), text_key("note", "", "required"),
                         text_key("citation", "")}};
  return s;
}

const Schema& fsdp_schema_of_source()
{
  static const Schema s{"fsdp",
                        {modelled_key("backward_prefetch", "one of BACKWARD_PRE, BACKWARD_POST, NONE", "none", ""),
                         modelled_key("limit_all_gathers", "bool", "none", ""), text_key("note", "", "required"),
                         text_key("citation", "")}};
  return s;
}

const Schema& sharding_schema()
{
  static const Schema s{
      "sharding_by_size",
      {text_key("size", "the model cell's size in billions (7)", "required"),
       modelled_key("strategy", "one of FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD", "required", ""),
       text_key("note", "", "required")}};
  return s;
}

const Schema& selective_schema()
{
  static const Schema s{"selective_checkpointing",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("text", "", "required"), text_key("citation", "")}};
  return s;
}

const Schema& not_compared_schema()
{
  static const Schema s{"not_compared",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("category", "", "required"), text_key("reason", "", "required")}};
  return s;
}

const Schema& rerun_schema()
{
  static const Schema s{"rerun",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("source_id", "", "required"), text_key("note", "", "required"),
                         text_key("citation", "")}};
  return s;
}

const Schema& cpu_adam_schema()
{
  static const Schema cells{"cells", {}};
  static const Schema s{"cpu_adam",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         modelled_key("cells", "mapping of column -> text", "required", "", &cells),
                         text_key("note", "", "required"), text_key("figure_note", "", "required"),
                         text_key("citation", "")}};
  return s;
}

const Schema& tflops_schema()
{
  static const Schema s{"tflops",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         modelled_key("recompute_counted", "bool", "required", ""), text_key("note", "", "required")}};
  return s;
}

const Schema& cell_reading_schema()
{
  static const Schema s{"cell_readings",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("column", "one of total_gpus, global_batch, vocab", "required"),
                         modelled_key("value", "integer >= 1", "required", "what the scenario is built with"),
                         text_key("note", "printed with the row; {cell}: the cell as written", "required")}};
  return s;
}

const Schema& figure_not_compared_schema()
{
  static const Schema s{"figures_not_compared",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("column", "a figure column of published.csv", "required"),
                         text_key("reason", "", "required")}};
  return s;
}

const Schema& older_formula_schema()
{
  static const Schema s{"estimator_older_formula",
                        {modelled_key("when", "mapping", "every row", "", &when_schema()),
                         text_key("note", "", "required"), text_key("citation", "")}};
  return s;
}

const Schema& sdpa_schema()
{
  static const Schema s{"sdpa_flash", {text_key("citation", "", "required")}};
  return s;
}

const Schema& source_schema()
{
  static const Schema s{
      "source",
      {text_key("source_id", "the file's name", "required"), text_key("source", "the source, for the reader"),
       modelled_key("model_sizes", "list of mappings", "none", "", &model_size_schema()),
       modelled_key("heads_by_hidden", "mapping", "none", "", &heads_schema()),
       modelled_key("deepspeed", "list of mappings", "none", "", &deepspeed_entry_schema()),
       modelled_key("pipeline", "list of mappings", "none", "", &pipeline_schema()),
       modelled_key("mixed_precision", "list of mappings", "none", "", &mixed_precision_schema()),
       modelled_key("fsdp", "mapping", "none", "", &fsdp_schema_of_source()),
       modelled_key("sharding_by_size", "list of mappings", "none", "", &sharding_schema()),
       modelled_key("selective_checkpointing", "list of mappings", "none", "", &selective_schema()),
       modelled_key("sdpa_flash", "mapping", "none", "", &sdpa_schema()),
       modelled_key("not_compared", "list of mappings", "none", "", &not_compared_schema()),
       modelled_key("rerun", "mapping", "none", "", &rerun_schema()),
       modelled_key("cpu_adam", "mapping", "none", "", &cpu_adam_schema()),
       modelled_key("tflops", "list of mappings", "none", "", &tflops_schema()),
       modelled_key("cell_readings", "list of mappings", "none", "", &cell_reading_schema()),
       modelled_key("figures_not_compared", "list of mappings", "none", "", &figure_not_compared_schema()),
       modelled_key("estimator_older_formula", "mapping", "none", "", &older_formula_schema())}};
  return s;
}

std::string opt_text(FieldReader& r, const std::string& key)
{
  return r.get_string(key);
}

int req_positive(FieldReader& r, const std::string& key)
{
  return static_cast<int>(r.req_int(key, 1, "an integer >= 1"));
}

spec::RowMatch read_when(FieldReader& r)
{
  spec::RowMatch m;
  std::optional<FieldReader> w = r.opt_map("when");
  if (!w)
    return m;
  m.locator_contains = opt_text(*w, "locator_contains");
  m.framework_contains = opt_text(*w, "framework_contains");
  m.model_contains = opt_text(*w, "model_contains");
  m.precision_contains = opt_text(*w, "precision_contains");
  m.checkpointing_contains = opt_text(*w, "checkpointing_contains");
  if (auto st = w->opt_int("stage", 0, "an integer 0-3")) {
    if (*st > 3)
      w->fail_expected("stage", "an integer 0-3");
    m.stage = static_cast<int>(*st);
  }
  m.pipeline = w->opt_bool("pipeline");
  YAML::Node list = w->take("offload_any");
  if (!list.IsDefined() || list.IsNull())
    return m;
  const std::string what = "a list of 'optimizer cpu', 'optimizer nvme', 'param cpu' or 'param nvme'";
  if (!list.IsSequence())
    w->fail_expected("offload_any", what);
  for (const YAML::Node& n : list) {
    static const std::vector<std::string> known = {"optimizer cpu", "optimizer nvme", "param cpu", "param nvme"};
    if (!n.IsScalar() || std::find(known.begin(), known.end(), n.Scalar()) == known.end())
      throw core::InputError(position(r.file(), n.Mark()) + ": " + w->key_path("offload_any") + ": expected " + what +
                             ", found " + describe_found(n));
    m.offload_any.push_back(n.Scalar());
  }
  return m;
}

std::optional<spec::Dtype> read_dtype(FieldReader& r, const std::string& key)
{
  return r.opt_named<spec::Dtype>(
      key, [](const std::string& s) { return parse_dtype(s); }, "fp32, fp16, bf16");
}

spec::SourceZeroKeys read_zero_keys(FieldReader& z)
{
  spec::SourceZeroKeys k;
  // Under DeepSpeed's pipeline engine only stages 0 and 1 run (docs/pipeline-parallel.md §5); a source states a stage
  // only where its rows name another.
  if (auto st = z.opt_int("stage", 0, "an integer 0-1")) {
    if (*st > 1)
      z.fail_expected("stage", "an integer 0-1");
    k.stage = static_cast<int>(*st);
  }
  k.reduce_bucket_size = z.opt_count("reduce_bucket_size", 1, "a count >= 1 (5e8)");
  k.allgather_bucket_size = z.opt_count("allgather_bucket_size", 1, "a count >= 1 (5e8)");
  k.contiguous_gradients = z.opt_bool("contiguous_gradients");
  k.overlap_comm = z.opt_bool("overlap_comm");
  k.reduce_scatter = z.opt_bool("reduce_scatter");
  k.sub_group_size = z.opt_count("sub_group_size", 1, "a count >= 1 (1e9)");
  k.stage3_max_reuse_distance = z.opt_count("stage3_max_reuse_distance", 0, "a count >= 0 (1e9)");
  if (std::optional<FieldReader> opt = z.opt_map("offload_optimizer"))
    k.offload_optimizer_device = opt->opt_enum<spec::OffloadDevice>(
        "device", {{"cpu", spec::OffloadDevice::CPU}, {"nvme", spec::OffloadDevice::NVME}});
  if (std::optional<FieldReader> par = z.opt_map("offload_param")) {
    k.offload_param_buffer_size = par->opt_count("buffer_size", 1, "a count >= 1 (1e8)");
    k.offload_param_max_in_cpu = par->opt_count("max_in_cpu", 0, "a count >= 0 (1e9)");
  }
  return k;
}

spec::SourceDeepSpeed read_deepspeed_entry(FieldReader& e)
{
  spec::SourceDeepSpeed d;
  d.when = read_when(e);
  if (std::optional<FieldReader> z = e.opt_map("zero_optimization"))
    d.zero = read_zero_keys(*z);
  d.zero_note = opt_text(e, "zero_note");
  if (d.zero && d.zero_note.empty())
    e.fail_missing("zero_note", "(the assumption printed with each row the keys apply to)");
  if (std::optional<FieldReader> a = e.opt_map("aio")) {
    spec::SourceAio aio;
    aio.block_size = a->get_count("block_size", 1, "a count >= 1 (1048576)");
    aio.queue_depth = static_cast<int>(a->get_int("queue_depth", 1, "an integer >= 1"));
    aio.thread_count = static_cast<int>(a->get_int("thread_count", 1, "an integer >= 1"));
    d.aio = aio;
  }
  d.aio_note = opt_text(e, "aio_note");
  d.cpu_checkpoints =
      e.get_enum<spec::CpuCheckpoints>("cpu_checkpoints", {{"never", spec::CpuCheckpoints::NEVER},
                                                           {"always", spec::CpuCheckpoints::ALWAYS},
                                                           {"where_needed", spec::CpuCheckpoints::WHERE_NEEDED}});
  d.checkpoint_note = opt_text(e, "checkpoint_note");
  d.where_needed_text = opt_text(e, "where_needed_text");
  if (d.cpu_checkpoints == spec::CpuCheckpoints::WHERE_NEEDED && d.where_needed_text.empty())
    e.fail_missing("where_needed_text", "(cpu_checkpoints where_needed: the row's text that asks for it)");
  for_each_entry(e, "known_runs", sub_schema(deepspeed_entry_schema(), "known_runs"), [&](FieldReader& k) {
    d.known_runs.push_back({req_positive(k, "layers"), req_positive(k, "hidden"), k.req_string("citation")});
  });
  d.citation = opt_text(e, "citation");
  return d;
}

void read_fsdp_parts(FieldReader& r, spec::SourceRule& s)
{
  for_each_entry(r, "mixed_precision", mixed_precision_schema(), [&](FieldReader& e) {
    spec::SourceMixedPrecision m;
    m.when = read_when(e);
    m.autocast = e.get_bool("autocast");
    m.param_dtype = read_dtype(e, "param_dtype");
    m.reduce_dtype = read_dtype(e, "reduce_dtype");
    m.note = e.req_string("note");
    m.citation = opt_text(e, "citation");
    s.mixed_precision.push_back(m);
  });
  if (std::optional<FieldReader> f = r.opt_map("fsdp")) {
    spec::SourceFsdp fsdp;
    fsdp.backward_prefetch = f->opt_enum<spec::BackwardPrefetch>(
        "backward_prefetch", {{"BACKWARD_PRE", spec::BackwardPrefetch::BACKWARD_PRE},
                              {"BACKWARD_POST", spec::BackwardPrefetch::BACKWARD_POST},
                              {"NONE", spec::BackwardPrefetch::NONE}});
    fsdp.limit_all_gathers = f->opt_bool("limit_all_gathers");
    fsdp.note = f->req_string("note");
    fsdp.citation = opt_text(*f, "citation");
    s.fsdp = fsdp;
  }
  for_each_entry(r, "sharding_by_size", sharding_schema(), [&](FieldReader& e) {
    spec::SourceSharding sh;
    sh.size = e.req_string("size");
    auto st = e.opt_enum<spec::FsdpSharding>("strategy", {{"FULL_SHARD", spec::FsdpSharding::FULL_SHARD},
                                                          {"SHARD_GRAD_OP", spec::FsdpSharding::SHARD_GRAD_OP},
                                                          {"HYBRID_SHARD", spec::FsdpSharding::HYBRID_SHARD},
                                                          {"NO_SHARD", spec::FsdpSharding::NO_SHARD}});
    if (!st)
      e.fail_missing("strategy");
    sh.strategy = *st;
    sh.note = e.req_string("note");
    s.sharding_by_size.push_back(sh);
  });
  for_each_entry(r, "selective_checkpointing", selective_schema(), [&](FieldReader& e) {
    spec::SourceSelectiveAc a;
    a.when = read_when(e);
    a.text = e.req_string("text");
    a.citation = opt_text(e, "citation");
    s.selective_checkpointing.push_back(a);
  });
  if (std::optional<FieldReader> f = r.opt_map("sdpa_flash")) {
    s.sdpa_flash = true;
    s.sdpa_flash_citation = f->req_string("citation");
  }
}

/// The text at `key`, which must be one of `names` (published.csv columns).
template <std::size_t N> std::string req_column(FieldReader& e, const std::string& key, const char* const (&names)[N])
{
  const std::string column = e.req_string(key);
  std::string listed;
  for (const char* n : names) {
    if (column == n)
      return column;
    listed += (listed.empty() ? "" : ", ") + std::string(n);
  }
  e.fail_expected(key, "one of " + listed);
}

void read_cell_parts(FieldReader& r, spec::SourceRule& s)
{
  for_each_entry(r, "cell_readings", cell_reading_schema(), [&](FieldReader& e) {
    spec::SourceCellReading c;
    c.when = read_when(e);
    c.column = req_column(e, "column", spec::READABLE_COLUMNS);
    c.value = req_positive(e, "value");
    c.note = e.req_string("note");
    s.cell_readings.push_back(c);
  });
  for_each_entry(r, "figures_not_compared", figure_not_compared_schema(), [&](FieldReader& e) {
    spec::SourceFigureNotCompared f;
    f.when = read_when(e);
    f.column = req_column(e, "column", spec::FIGURE_COLUMNS);
    f.reason = e.req_string("reason");
    s.figures_not_compared.push_back(f);
  });
  if (std::optional<FieldReader> e = r.opt_map("estimator_older_formula")) {
    spec::SourceOlderFormula f;
    f.when = read_when(*e);
    f.note = e->req_string("note");
    f.citation = opt_text(*e, "citation");
    s.estimator_older_formula = f;
  }
}

void read_row_parts(FieldReader& r, spec::SourceRule& s)
{
  for_each_entry(r, "not_compared", not_compared_schema(), [&](FieldReader& e) {
    spec::SourceNotCompared n;
    n.when = read_when(e);
    n.category = e.req_string("category");
    n.reason = e.req_string("reason");
    s.not_compared.push_back(n);
  });
  if (std::optional<FieldReader> e = r.opt_map("rerun")) {
    spec::SourceRerun re;
    re.when = read_when(*e);
    re.source_id = e->req_string("source_id");
    re.note = e->req_string("note");
    re.citation = opt_text(*e, "citation");
    s.rerun = re;
  }
  if (std::optional<FieldReader> e = r.opt_map("cpu_adam")) {
    spec::SourceCpuAdam c;
    c.when = read_when(*e);
    YAML::Node cells = e->take("cells");
    if (!is_map(cells) || cells.size() == 0)
      e->fail_expected("cells", "a mapping of published.csv columns to the text the row is read with");
    for (auto it = cells.begin(); it != cells.end(); ++it) {
      const YAML::Node k = it->first;
      const YAML::Node v = it->second;
      const std::string name = key_name(k, r.file(), e->key_path("cells"));
      if (!v.IsScalar())
        throw core::InputError(position(r.file(), k.Mark()) + ": " + e->key_path("cells") + "." + name +
                               ": expected a text, found " + describe_found(v));
      c.cells[name] = v.Scalar();
    }
    c.note = e->req_string("note");
    c.figure_note = e->req_string("figure_note");
    c.citation = opt_text(*e, "citation");
    s.cpu_adam = c;
  }
  for_each_entry(r, "tflops", tflops_schema(), [&](FieldReader& e) {
    spec::SourceTflops t;
    t.when = read_when(e);
    const std::optional<bool> counted = e.opt_bool("recompute_counted");
    if (!counted)
      e.fail_missing("recompute_counted");
    t.recompute_counted = *counted;
    t.note = e.req_string("note");
    s.tflops.push_back(t);
  });
  read_cell_parts(r, s);
}

spec::SourceRule read_source(const YAML::Node& root, const std::string& file)
{
  if (!is_map(root))
    throw core::InputError(file + ": expected a mapping of a source's data, found " + describe_found(root));
  FieldReader r(root, file, "", source_schema(), nullptr);
  spec::SourceRule s;
  s.file = file;
  s.source_id = r.req_string("source_id");
  (void)r.opt_string("source");
  for_each_entry(r, "model_sizes", model_size_schema(), [&](FieldReader& e) {
    spec::SourceModelSize m;
    m.size = e.req_string("size");
    m.layers = req_positive(e, "layers");
    m.hidden = req_positive(e, "hidden");
    m.heads = req_positive(e, "heads");
    m.micro_batch = static_cast<int>(e.opt_int("micro_batch", 1, "an integer >= 1").value_or(0)); // 0: the row's
    m.tensor_parallel = static_cast<int>(e.get_int("tensor_parallel", 1, "an integer >= 1"));
    m.citation = e.req_string("citation");
    s.model_sizes.push_back(m);
  });
  if (std::optional<FieldReader> h = r.opt_map("heads_by_hidden")) {
    s.heads_missing_from = h->req_string("missing_from");
    for_each_entry(*h, "sizes", sub_schema(heads_schema(), "sizes"), [&](FieldReader& e) {
      s.heads_by_hidden.push_back({req_positive(e, "hidden"), req_positive(e, "heads"), e.req_string("citation")});
    });
  }
  for_each_entry(r, "deepspeed", deepspeed_entry_schema(),
                 [&](FieldReader& e) { s.deepspeed.push_back(read_deepspeed_entry(e)); });
  for_each_entry(r, "pipeline", pipeline_schema(), [&](FieldReader& e) {
    spec::SourcePipeline p;
    p.when = read_when(e);
    // The names of training.pipeline.schedule but "auto": a source's runs had one schedule.
    const std::optional<spec::PipelineSchedule> schedule =
        e.opt_enum<spec::PipelineSchedule>("schedule", pipeline_schedule_names());
    if (!schedule)
      e.fail_missing("schedule");
    if (*schedule == spec::PipelineSchedule::AUTO)
      e.fail_expected("schedule", "the schedule the source's runs used: 1f1b, gpipe, interleaved_1f1b or zero_bubble");
    p.schedule = *schedule;
    if (std::optional<std::string> method = e.opt_string("partition")) {
      const std::optional<std::string> known = partition_method(*method);
      if (!known)
        e.fail_expected("partition", "parameters, uniform or type:REGEX (DeepSpeed's partition_method)");
      p.partition = *known;
    }
    p.note = e.req_string("note");
    p.citation = opt_text(e, "citation");
    s.pipeline.push_back(p);
  });
  read_fsdp_parts(r, s);
  read_row_parts(r, s);
  return s;
}

} // namespace

spec::SourceRule load_source_rule_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] { return read_source(parse_yaml(text, file), file); });
}

std::map<std::string, spec::SourceRule> load_source_rules(const std::string& dir)
{
  namespace fs = std::filesystem;
  std::map<std::string, spec::SourceRule> rules;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return rules;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ".yaml")
      files.push_back(it->path());
  if (ec)
    throw core::InputError(dir + ": cannot list the source rules: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    const std::string file = p.string();
    spec::SourceRule s = guard_yaml(file, [&] { return read_source(load_yaml_file(file), file); });
    if (s.source_id != p.stem().string())
      throw core::InputError(file + ": source_id: expected \"" + p.stem().string() + "\" (the file's name), found \"" +
                             s.source_id + "\"");
    rules[s.source_id] = std::move(s);
  }
  return rules;
}

const spec::MappingRules& shipped_mapping_rules()
{
  static std::once_flag once;
  static spec::MappingRules rules;
  std::call_once(once, [] {
    const std::string dir = std::string(ZEROSIM_DATA_DIR) + "/results/validation";
    rules.general = load_general_rules(dir + "/rules.yaml");
    rules.by_source = load_source_rules(dir + "/sources");
  });
  return rules;
}

} // namespace zerosim::config
