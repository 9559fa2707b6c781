// results/validation/rules.yaml: the general rules of the validation row mapping (docs/validation.md, "General
// rules"). Read with the same FieldReader as every other file: an unknown key, a value of the wrong kind or a missing
// required key is an input error naming the file, line, key, what was expected and what was found.
#include "config/document.hpp"
#include "config/mapping_rules_loader.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"

#include <algorithm>

namespace zerosim::config {
namespace {

const std::string TEXTS = "a list of texts";
const std::vector<std::pair<std::string, spec::FsdpSharding>> STRATEGIES = {
    {"FULL_SHARD", spec::FsdpSharding::FULL_SHARD},
    {"SHARD_GRAD_OP", spec::FsdpSharding::SHARD_GRAD_OP},
    {"HYBRID_SHARD", spec::FsdpSharding::HYBRID_SHARD},
    {"NO_SHARD", spec::FsdpSharding::NO_SHARD}};

const Schema& gpu_node_schema()
{
  static const Schema s{
      "gpu_nodes",
      {modelled_key("gpu_contains", TEXTS, "required", "every text is in the gpu cell"),
       modelled_key("gpu_lacks", TEXTS, "none", "no text is in the gpu cell"),
       modelled_key("network_contains", "string", "any", "in the inter_node_network cell"),
       modelled_key("memory_below_GB", "number", "any", "the gpu_mem_GB cell's leading number is below it"),
       modelled_key("memory_above_GB", "number", "any", "the gpu_mem_GB cell's leading number is above it"),
       modelled_key("node", "string", "required", "topologies/<node>.yaml")}};
  return s;
}

const Schema& ffn_width_schema()
{
  static const Schema s{"model_layouts.ffn_hidden",
                        {modelled_key("times", "integer >= 1", "required", ""),
                         modelled_key("over", "integer >= 1", "1", ""),
                         modelled_key("multiple_of", "integer >= 1", "1", ""),
                         modelled_key("note", "string", "none", "printed as 'ffn N (note)'")}};
  return s;
}

const Schema& layout_schema()
{
  static const Schema s{
      "model_layouts",
      {modelled_key("name", "string", "required", "the family"),
       modelled_key("model_contains_any", TEXTS, "none", "the model cell contains one"),
       modelled_key("model_starts_with_any", TEXTS, "none", "the model cell begins with one"),
       modelled_key("ffn", "one of gelu, swiglu", "required", ""),
       modelled_key("norm", "one of layernorm, rmsnorm", "required", ""),
       modelled_key("position", "one of learned, rope, alibi", "required", ""),
       modelled_key("bias", "bool", "required", ""), modelled_key("tied_embeddings", "bool", "required", ""),
       modelled_key("max_position", "one of seq_len, none", "required", "the learned position table's rows"),
       modelled_key("max_position_at_least", "integer >= 1", "none", "the table has at least this many rows"),
       modelled_key("dropout", "a probability", "the workload's rule", ""),
       modelled_key("ffn_hidden", "mapping", "required", "", &ffn_width_schema()),
       modelled_key("vocab", "integer >= 1", "the framework's", ""),
       modelled_key("vocab_note", "string", "required with vocab", ""),
       modelled_key("loss", "one of hf, megatron", "the framework's", ""),
       modelled_key("note", "string", "none", "printed with every row of the family")}};
  return s;
}

const Schema& framework_schema()
{
  static const Schema s{
      "frameworks",
      {modelled_key("name", "string", "required", "the family"),
       modelled_key("framework_contains_any", TEXTS, "none", "the framework cell contains one"),
       modelled_key("vocab", "integer >= 1", "required", "for a layout that gives none"),
       modelled_key("vocab_note", "string", "required", ""),
       modelled_key("loss", "one of hf, megatron", "none", "unless the layout names one"),
       modelled_key("loss_note", "string", "required with loss", ""),
       modelled_key("tflops_recompute_counted", "bool", "false", "an unstated TFLOPs definition counts recompute"),
       modelled_key("tflops_note", "string", "required when counted", "")}};
  return s;
}

const Schema& strategy_schema()
{
  static const Schema s{
      "fsdp_strategies",
      {modelled_key("strategy", "one of FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD", "required", ""),
       modelled_key("texts", TEXTS, "required", "the cell contains one")}};
  return s;
}

const Schema& fsdp2_schema()
{
  static const Schema s{
      "fsdp2",
      {modelled_key("framework_contains_any", TEXTS, "none", "the framework cell contains one"),
       modelled_key("sharding_contains_any", TEXTS, "none", "or the fsdp_sharding cell contains one"),
       modelled_key("no_reshard_after_forward", "list of strategies", "none", "reshard_after_forward False")}};
  return s;
}

const Schema& general_schema()
{
  static const Schema s{
      "rules",
      {modelled_key("gpu_nodes", "list of mappings", "required", "", &gpu_node_schema()),
       modelled_key("model_layouts", "list of mappings", "required", "", &layout_schema()),
       modelled_key("frameworks", "list of mappings", "required", "", &framework_schema()),
       modelled_key("fsdp_strategies", "list of mappings", "required", "", &strategy_schema()),
       modelled_key("fsdp2", "mapping", "required", "", &fsdp2_schema()),
       modelled_key("encoder_models", TEXTS, "none", "model-cell texts of encoder models"),
       modelled_key("head_widths", "list of integers >= 1", "none", "tried in order for rows without heads")}};
  return s;
}

/// A required non-empty list of texts.
std::vector<std::string> req_texts(FieldReader& r, const std::string& key)
{
  std::vector<std::string> v = opt_text_list(r, key);
  if (v.empty())
    r.fail_missing(key, "(a list of at least one text)");
  return v;
}

std::optional<spec::LossKind> read_loss(FieldReader& r)
{
  return r.opt_enum<spec::LossKind>("loss", {{"hf", spec::LossKind::HF}, {"megatron", spec::LossKind::MEGATRON}});
}

/// A small positive integer of the FFN width rule (at most 4096, so that times x hidden stays within an int), the
/// schema's default when absent unless `required`.
int positive(FieldReader& r, const std::string& key, bool required = false)
{
  const std::string what = "an integer from 1 to 4096";
  const std::int64_t v = required ? r.req_int(key, 1, what) : r.get_int(key, 1, what);
  if (v > 4096)
    r.fail_expected(key, what);
  return static_cast<int>(v);
}

/// The last entry of a first-match table must match everything (so every row gets one), and only the last may.
template <class Entry, class Unconditional>
void check_default_last(FieldReader& r, const std::string& key, const std::vector<Entry>& entries,
                        Unconditional unconditional)
{
  if (entries.empty())
    r.fail(key, "expected a list with at least its default entry (no condition, last), found an empty list");
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (unconditional(entries[i]) != (i + 1 == entries.size()))
      r.fail(key, "expected the entry without a condition (the default) last and only there, found entry " +
                      std::to_string(i) + (unconditional(entries[i]) ? " without one" : ", the last, with one"));
}

spec::GpuNodeRule read_gpu_node(FieldReader& e)
{
  spec::GpuNodeRule g;
  g.gpu_contains = req_texts(e, "gpu_contains");
  g.gpu_lacks = opt_text_list(e, "gpu_lacks");
  g.network_contains = e.opt_string("network_contains").value_or("");
  g.memory_below_GB = e.opt_number("memory_below_GB", 0, 1e9, "a number of GB");
  g.memory_above_GB = e.opt_number("memory_above_GB", 0, 1e9, "a number of GB");
  g.node = e.req_string("node");
  return g;
}

spec::ModelLayout read_layout(FieldReader& e)
{
  spec::ModelLayout l;
  l.name = e.req_string("name");
  l.model_contains_any = opt_text_list(e, "model_contains_any");
  l.model_starts_with_any = opt_text_list(e, "model_starts_with_any");
  auto req = [&](auto v, const char* key) {
    if (!v)
      e.fail_missing(key);
    return *v;
  };
  l.ffn =
      req(e.opt_enum<spec::FfnKind>("ffn", {{"gelu", spec::FfnKind::GELU}, {"swiglu", spec::FfnKind::SWIGLU}}), "ffn");
  l.norm = req(e.opt_enum<spec::NormKind>(
                   "norm", {{"layernorm", spec::NormKind::LAYERNORM}, {"rmsnorm", spec::NormKind::RMSNORM}}),
               "norm");
  l.position = req(e.opt_enum<spec::PositionKind>("position", {{"learned", spec::PositionKind::LEARNED},
                                                               {"rope", spec::PositionKind::ROPE},
                                                               {"alibi", spec::PositionKind::ALIBI}}),
                   "position");
  l.bias = req(e.opt_bool("bias"), "bias");
  l.tied_embeddings = req(e.opt_bool("tied_embeddings"), "tied_embeddings");
  l.max_position_seq_len = req(e.opt_enum<bool>("max_position", {{"seq_len", true}, {"none", false}}), "max_position");
  if (l.max_position_seq_len != (l.position == spec::PositionKind::LEARNED))
    e.fail_expected("max_position", l.max_position_seq_len ? "none (only position: learned has a table)"
                                                           : "seq_len (position: learned needs a table)");
  l.max_position_at_least = static_cast<int>(e.opt_int("max_position_at_least", 1, "an integer >= 1").value_or(0));
  l.dropout = e.opt_number("dropout", 0.0, 0.999999, "a probability, 0 <= p < 1");
  FieldReader f = e.req_map("ffn_hidden");
  l.ffn_hidden.times = positive(f, "times", true);
  l.ffn_hidden.over = positive(f, "over");
  l.ffn_hidden.multiple_of = positive(f, "multiple_of");
  l.ffn_hidden.note = f.opt_string("note").value_or("");
  if (auto v = e.opt_int("vocab", 1, "an integer >= 1")) {
    l.vocab = static_cast<int>(*v);
    l.vocab_note = e.req_string("vocab_note");
  } else if (e.has("vocab_note")) {
    e.fail("vocab_note", "only with vocab");
  }
  l.loss = read_loss(e);
  l.note = e.opt_string("note").value_or("");
  return l;
}

spec::FrameworkConvention read_framework(FieldReader& e)
{
  spec::FrameworkConvention c;
  c.name = e.req_string("name");
  c.framework_contains_any = opt_text_list(e, "framework_contains_any");
  c.vocab = static_cast<int>(e.req_int("vocab", 1, "an integer >= 1"));
  c.vocab_note = e.req_string("vocab_note");
  c.loss = read_loss(e);
  if (c.loss)
    c.loss_note = e.req_string("loss_note");
  else if (e.has("loss_note"))
    e.fail("loss_note", "only with loss");
  c.tflops_recompute_counted = e.get_bool("tflops_recompute_counted");
  if (c.tflops_recompute_counted)
    c.tflops_note = e.req_string("tflops_note");
  else if (e.has("tflops_note"))
    e.fail("tflops_note", "only with tflops_recompute_counted: true");
  return c;
}

std::vector<spec::FsdpSharding> read_strategies(FieldReader& r, const std::string& key)
{
  std::vector<spec::FsdpSharding> out;
  for (const std::string& name : opt_text_list(r, key)) {
    auto it = std::find_if(STRATEGIES.begin(), STRATEGIES.end(), [&](const auto& s) { return s.first == name; });
    if (it == STRATEGIES.end())
      r.fail(key, "expected a list of FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD or NO_SHARD, found \"" + name + "\"");
    out.push_back(it->second);
  }
  return out;
}

spec::GeneralRules read_general(const YAML::Node& root, const std::string& file)
{
  if (!is_map(root))
    throw core::InputError(file + ": expected a mapping of the row mapping's general rules, found " +
                           describe_found(root));
  FieldReader r(root, file, "", general_schema(), nullptr);
  spec::GeneralRules g;
  g.file = file;
  for (const char* key : {"gpu_nodes", "model_layouts", "frameworks", "fsdp_strategies"})
    if (!r.has(key))
      r.fail_missing(key);
  for_each_entry(r, "gpu_nodes", gpu_node_schema(), [&](FieldReader& e) { g.gpu_nodes.push_back(read_gpu_node(e)); });
  for_each_entry(r, "model_layouts", layout_schema(),
                 [&](FieldReader& e) { g.model_layouts.push_back(read_layout(e)); });
  for_each_entry(r, "frameworks", framework_schema(),
                 [&](FieldReader& e) { g.frameworks.push_back(read_framework(e)); });
  for_each_entry(r, "fsdp_strategies", strategy_schema(), [&](FieldReader& e) {
    const std::optional<spec::FsdpSharding> strategy = e.opt_enum<spec::FsdpSharding>("strategy", STRATEGIES);
    if (!strategy)
      e.fail_missing("strategy");
    g.fsdp_strategies.push_back({*strategy, req_texts(e, "texts")});
  });
  FieldReader f = r.req_map("fsdp2");
  g.fsdp2.framework_contains_any = opt_text_list(f, "framework_contains_any");
  g.fsdp2.sharding_contains_any = opt_text_list(f, "sharding_contains_any");
  g.fsdp2.no_reshard_after_forward = read_strategies(f, "no_reshard_after_forward");
  g.encoder_models = opt_text_list(r, "encoder_models");
  YAML::Node widths = r.take("head_widths");
  if (widths.IsDefined() && !widths.IsNull()) {
    if (!widths.IsSequence())
      r.fail_expected("head_widths", "a list of integers >= 1");
    for (const YAML::Node& n : widths) {
      int w = 0;
      if (!n.IsScalar() || !YAML::convert<int>::decode(n, w) || w < 1)
        throw core::InputError(position(file, n.Mark()) + ": head_widths: expected a list of integers >= 1, found " +
                               describe_found(n));
      g.head_widths.push_back(w);
    }
  }
  check_default_last(r, "model_layouts", g.model_layouts, [](const spec::ModelLayout& l) {
    return l.model_contains_any.empty() && l.model_starts_with_any.empty();
  });
  check_default_last(r, "frameworks", g.frameworks,
                     [](const spec::FrameworkConvention& c) { return c.framework_contains_any.empty(); });
  return g;
}

} // namespace

spec::GeneralRules load_general_rules_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] { return read_general(parse_yaml(text, file), file); });
}

spec::GeneralRules load_general_rules(const std::string& file)
{
  return guard_yaml(file, [&] { return read_general(load_yaml_file(file), file); });
}

} // namespace zerosim::config
