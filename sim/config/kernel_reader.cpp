// calibration/kernels.yaml: the kernel efficiency priors per GPU kind (docs/compute.md §1.4). Read with the
// same FieldReader as every other file, so a typo is an input error with file, line and key.
#include "config/document.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <mutex>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::config {
namespace {

/// value, status, source, note: every figure of the file has them.
std::vector<KeyDoc> figure_keys(const std::string& value_default)
{
  return {modelled_key("value", "number", value_default, "achieved / nominal, or the quantity in its unit"),
          modelled_key("status", "one of measured, stated", "required", "printed by a benchmark, or derived"),
          modelled_key("source", "string", "required", "where the figure comes from"),
          modelled_key("note", "string", "\"\"", "how it was derived")};
}

/// Every figure's mapping but a GEMM entry's and an attention kernel's (their extra keys below). Its key texts
/// are printed nowhere; the range of each `value` is the reader's (read_figure's `what`).
const Schema& figure_schema()
{
  static const Schema s{"figure", figure_keys("required")};
  return s;
}

const Schema& gemm_schema()
{
  static const Schema s = [] {
    Schema g{"gemm", figure_keys("required")};
    g.keys.insert(g.keys.begin(),
                  modelled_key("torch", "major.minor string", "required", "the first torch generation it applies to"));
    return g;
  }();
  return s;
}

const Schema& misaligned_schema()
{
  static const Schema s = [] {
    Schema m{"misaligned_gemm", figure_keys("required")};
    m.keys.erase(m.keys.begin()); // no `value`: one share per 16-bit type
    m.keys.insert(m.keys.begin(),
                  {modelled_key("torch", "major.minor string", "required", "the first torch generation it applies to"),
                   modelled_key("fp16", "number in (0, 1]", "required", "fp16: share of the aligned GEMM's rate"),
                   modelled_key("bf16", "number in (0, 1]", "required", "bf16: share of the aligned GEMM's rate")});
    return m;
  }();
  return s;
}

const Schema& attention_schema()
{
  static const Schema s = [] {
    Schema a{"attention", figure_keys("fwd and bwd")};
    a.keys.insert(
        a.keys.begin() + 1,
        {modelled_key("fwd", "number in (0, 1]", "value", "forward achieved / dense peak, in the kernel's own FLOPs"),
         modelled_key("bwd", "number in (0, 1]", "value", "backward achieved / dense peak, in the kernel's own FLOPs"),
         modelled_key("causal_skip", "bool", "true", "the kernel skips fully masked tiles of a causal mask"),
         modelled_key("fwd_softmax_share", "number in [0, 1)", "0",
                      "forward: the share of the time at head dim 128 that does not scale with the head dim"),
         modelled_key("bwd_softmax_share", "number in [0, 1)", "0", "backward: the same"),
         modelled_key("seq_half", "number >= 0 (tokens)", "0",
                      "s0 of the rate's rise with the key length, r(s) ~ 1 / (1 + s0 / s); the figures are at 4096")});
    return a;
  }();
  return s;
}

const Schema& kind_schema()
{
  static const Schema s{
      "kind",
      {modelled_key("match", "list of strings", "required (but for the last kind)", "names matched in gpu.model"),
       modelled_key("match_also", "list of strings", "none", "names that must be present too (PCIE)"),
       modelled_key("sms", "integer >= 1", "required", "streaming multiprocessors (wave quantisation)"),
       modelled_key("hbm", "mapping", "required", "streaming-kernel bandwidth / nominal", &figure_schema()),
       modelled_key("hbm_nonvectorized", "mapping", "none: as streaming",
                    "non-vectorized element-wise kernels' bandwidth / the streaming kernel's", &figure_schema()),
       modelled_key("gemm", "list of mappings", "required", "large-GEMM cap by torch generation"),
       modelled_key("misaligned_gemm", "list of mappings", "none: priced as aligned",
                    "16-bit GEMMs with n or k not a multiple of 8, by torch generation"),
       modelled_key("attention", "mapping of kernel -> figures", "required",
                    "fused attention kernels that run on this kind"),
       modelled_key("nccl_ctas", "mapping (value: CTAs)", "interference.nccl_ctas",
                    "CTAs of an NCCL collective kernel inside one node of this kind", &figure_schema()),
       modelled_key("note", "string", "\"\"", "about the kind")}};
  return s;
}

const Schema& host_schema()
{
  static const Schema s{
      "host",
      {modelled_key("torch", "major.minor string", "required", "the first torch generation it applies to"),
       modelled_key("eager_op", "mapping (value in us)", "required",
                    "per forward op from eager Python: Python, dispatcher, autograd record, launch", &figure_schema()),
       modelled_key("backward_op", "mapping (value in us)", "required",
                    "per kernel launched by the C++ autograd engine in backward", &figure_schema()),
       modelled_key("compiled_op", "mapping (value in us)", "required", "per kernel launched by a torch.compile graph",
                    &figure_schema()),
       modelled_key("hook_param", "mapping (value in us)", "required",
                    "per parameter per framework hook (FSDP unshard/reshard, ZeRO-1/2 gradient hook)",
                    &figure_schema()),
       modelled_key("note", "string", "\"\"", "about the generation")}};
  return s;
}

const Schema& interference_schema()
{
  static const Schema s{"interference",
                        {modelled_key("nccl_ctas", "mapping (value: CTAs)", "required",
                                      "SMs an NCCL collective kernel occupies while it runs", &figure_schema())}};
  return s;
}

const Schema& power_schema()
{
  static const Schema s{"power",
                        {modelled_key("clock_exponent", "mapping (value: exponent)", "required",
                                      "sustained clock = (power_limit / tdp)^exponent", &figure_schema())}};
  return s;
}

const Schema& table_schema()
{
  static const Schema s{
      "kernels",
      {modelled_key("kinds", "mapping of GPU kind -> data", "required", "in match order"),
       modelled_key("host", "list of mappings", "none (no host cost priced)", "host dispatch cost by torch generation"),
       modelled_key("interference", "mapping", "none (no interference)", "communication kernels' share of the SMs",
                    &interference_schema()),
       modelled_key("power", "mapping", "none (no power-cap clocks)", "sustained clock under a power cap",
                    &power_schema())}};
  return s;
}

/// A fraction of the dense peak or of the nominal bandwidth.
constexpr double FRACTION_LO = 1e-6;
const std::string FRACTION = "a number in (0, 1]";

/// The figure of mapping `r`: its number at `key` in [lo, hi] (`required`: absent is "required key is missing";
/// otherwise 0 when absent), status, source and note.
/// A figure's provenance in mapping `r`: its status and source into `f`; its note read and dropped.
void read_provenance(FieldReader& r, spec::KernelFigure& f)
{
  std::optional<std::string> status =
      r.opt_enum<std::string>("status", {{"measured", "measured"}, {"stated", "stated"}});
  if (!status)
    r.fail_missing("status");
  f.status = *status;
  f.source = r.req_string("source");
  r.opt_string("note");
}

spec::KernelFigure read_figure(FieldReader& r, bool required, const std::string& key = "value", double lo = FRACTION_LO,
                               double hi = 1.0, const std::string& what = FRACTION)
{
  spec::KernelFigure f;
  f.value = required ? r.req_number(key, lo, hi, what) : r.opt_number(key, lo, hi, what).value_or(0);
  read_provenance(r, f);
  return f;
}

/// The required figure mapping at `key` of `r`, its value in [lo, hi] (scaled by `scale` when stored).
spec::KernelFigure read_quantity(FieldReader& r, const std::string& key, double lo, double hi, const std::string& what,
                                 double scale = 1.0)
{
  FieldReader m = r.req_map(key);
  spec::KernelFigure f = read_figure(m, true, "value", lo, hi, what);
  f.value *= scale;
  return f;
}

/// The GPU names at `key` (match, match_also) in spec::gpu_match_name form, as kind_of compares them with
/// gpu.model ("h100" and "H-100" match an H100 as "H100" does). A name with nothing left ("-") is refused: it
/// would match every GPU.
std::vector<std::string> read_names(FieldReader& r, const std::string& key)
{
  std::vector<std::string> out;
  YAML::Node v = r.take(key);
  if (!v.IsDefined() || v.IsNull())
    return out;
  if (!v.IsSequence())
    r.fail_expected(key, "a list of strings");
  for (const YAML::Node& n : v) {
    if (!n.IsScalar())
      r.fail_expected(key, "a list of strings");
    const std::string name = spec::gpu_match_name(n.Scalar());
    if (name.empty())
      throw core::InputError(position(r.file(), n.Mark()) + ": " + r.key_path(key) +
                             ": expected a GPU name (letters or digits besides '-', '_' and blanks), found \"" +
                             n.Scalar() + "\"");
    out.push_back(name);
  }
  return out;
}

/// The list at `key` of entries by torch generation (ascending `torch`), each read by `read` after its `torch`.
/// An absent list is empty; `required` makes that an error.
template <class Entry, class Read>
std::vector<Entry> read_generations(FieldReader& r, const std::string& key, const Schema& schema, bool required,
                                    Read read)
{
  std::vector<Entry> out;
  YAML::Node list = r.take(key);
  if (!list.IsDefined() || list.IsNull()) {
    if (required)
      r.fail_missing(key);
    return out;
  }
  if (!list.IsSequence() || list.size() == 0)
    r.fail_expected(key, "a non-empty list of mappings");
  std::optional<int> previous;
  for (std::size_t i = 0; i < list.size(); ++i) {
    FieldReader e = list_item(r, key, list, i, schema);
    Entry entry;
    entry.torch = e.req_string("torch");
    const std::optional<int> v = spec::torch_generation(entry.torch);
    if (!v)
      e.fail_expected("torch", "a major.minor version such as \"2.4\"");
    if (previous && *v <= *previous)
      e.fail_expected("torch", "a version above the entry before it (entries in ascending order)");
    previous = v;
    read(e, entry);
    out.push_back(entry);
  }
  return out;
}

/// The required, non-empty mapping at `key` of named entries, each a mapping read with `schema` (kinds: GPU
/// kind -> data; a kind's attention: kernel -> figures), in file order. `missing` explains an absent mapping,
/// `expected` the mapping; a name given twice is an error at its second position. `read(name, name node, entry
/// reader, last)` reads one entry.
template <class Read>
void read_entries(FieldReader& r, const std::string& key, const Schema& schema, const std::string& missing,
                  const std::string& expected, Read read)
{
  YAML::Node map = r.take(key);
  if (!map.IsDefined() || map.IsNull())
    r.fail_missing(key, missing);
  if (!map.IsMap() || map.size() == 0)
    r.fail_expected(key, expected);
  std::vector<std::string> seen;
  std::size_t i = 0;
  for (auto it = map.begin(); it != map.end(); ++it, ++i) {
    const YAML::Node name_node = it->first; // copies: it->first dies with its statement (yaml_reader.cpp)
    const YAML::Node value = it->second;
    const std::string name = key_name(name_node, r.file(), r.key_path(key));
    const std::string path = r.key_path(key) + "." + name;
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      throw core::InputError(position(r.file(), name_node.Mark()) + ": " + path + ": duplicate key");
    seen.push_back(name);
    if (!is_map(value))
      throw core::InputError(position(r.file(), name_node.Mark()) + ": " + path + ": expected a mapping, found " +
                             describe_found(value));
    FieldReader entry(value, r.file(), path, schema, nullptr);
    read(name, name_node, entry, i + 1 == map.size());
  }
}

/// "mem_efficient, flash1, ...": the kernels an `attention:` mapping may list.
std::string fused_kernel_names()
{
  std::string out;
  for (const auto& [name, kernel] : spec::ATTENTION_KERNELS)
    if (spec::is_fused(kernel))
      out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

spec::AttentionFigure read_attention(FieldReader& a)
{
  spec::AttentionFigure fig;
  const bool has_value = a.has("value");
  if (has_value && (a.has("fwd") || a.has("bwd")))
    a.fail("value", "give value, or fwd and bwd, not both");
  if (!has_value && !(a.has("fwd") && a.has("bwd")))
    a.fail_missing(a.has("fwd") ? "bwd" : "fwd", "or value for both");
  const spec::KernelFigure common = read_figure(a, true, has_value ? "value" : "fwd");
  fig.fwd = common;
  fig.bwd = common;
  if (!has_value)
    fig.bwd.value = a.req_number("bwd", FRACTION_LO, 1.0, FRACTION);
  fig.causal_skip = a.get_bool("causal_skip");
  fig.fwd_softmax_share = a.opt_number("fwd_softmax_share", 0, 0.999, "a number in [0, 1)").value_or(0);
  fig.bwd_softmax_share = a.opt_number("bwd_softmax_share", 0, 0.999, "a number in [0, 1)").value_or(0);
  fig.seq_half = a.opt_number("seq_half", 0, 1e6, "a number of tokens in [0, 1e6]").value_or(0);
  return fig;
}

spec::GpuKindData read_kind(FieldReader& r, const std::string& name, bool last)
{
  spec::GpuKindData k;
  k.kind = name;
  k.match = read_names(r, "match");
  if (k.match.empty() && !last)
    r.fail_missing("match", "every kind but the last, the fallback, names what it matches");
  k.match_also = read_names(r, "match_also");
  k.sms = static_cast<int>(r.req_int("sms", 1, "a positive integer"));
  FieldReader hbm = r.req_map("hbm");
  k.hbm = read_figure(hbm, true);
  if (r.has("hbm_nonvectorized")) {
    FieldReader nv = r.req_map("hbm_nonvectorized");
    k.hbm_nonvectorized = read_figure(nv, true);
  }

  k.gemm = read_generations<spec::GemmGeneration>(
      r, "gemm", gemm_schema(), true,
      [](FieldReader& g, spec::GemmGeneration& gen) { gen.max = read_figure(g, true); });

  k.misaligned_gemm = read_generations<spec::MisalignedGemmGeneration>(
      r, "misaligned_gemm", misaligned_schema(), false, [](FieldReader& g, spec::MisalignedGemmGeneration& gen) {
        gen.fp16 = g.req_number("fp16", FRACTION_LO, 1.0, FRACTION);
        gen.bf16 = g.req_number("bf16", FRACTION_LO, 1.0, FRACTION);
        read_provenance(g, gen.figure);
      });

  read_entries(r, "attention", attention_schema(), "at least one fused attention kernel",
               "a non-empty mapping of attention kernels to their figures",
               [&](const std::string& kernel_name, const YAML::Node& name_node, FieldReader& a, bool) {
                 const std::optional<spec::AttentionKernel> kernel = spec::attention_kernel(kernel_name);
                 if (!kernel || !spec::is_fused(*kernel))
                   throw core::InputError(position(a.file(), name_node.Mark()) + ": " + a.path() +
                                          ": expected a fused attention kernel (" + fused_kernel_names() +
                                          "; eager and sdpa_math are priced as GEMMs), found \"" + kernel_name + "\"");
                 k.attention.emplace_back(*kernel, read_attention(a));
               });
  if (r.has("nccl_ctas"))
    k.nccl_ctas = read_quantity(r, "nccl_ctas", 1, 1024, "a number in [1, 1024]");
  r.opt_string("note");
  return k;
}

std::vector<spec::HostGeneration> read_host(FieldReader& r)
{
  return read_generations<spec::HostGeneration>(r, "host", host_schema(), false,
                                                [](FieldReader& h, spec::HostGeneration& g) {
                                                  const std::string us = "microseconds in (0, 1000]";
                                                  g.eager_op = read_quantity(h, "eager_op", 1e-3, 1000, us, 1e-6);
                                                  g.backward_op = read_quantity(h, "backward_op", 1e-3, 1000, us, 1e-6);
                                                  g.compiled_op = read_quantity(h, "compiled_op", 1e-3, 1000, us, 1e-6);
                                                  g.hook_param = read_quantity(h, "hook_param", 1e-3, 1000, us, 1e-6);
                                                  h.opt_string("note");
                                                });
}

spec::KernelTable read_table(const YAML::Node& root, const std::string& file)
{
  require_mapping(root, file);
  FieldReader r(root, file, "", table_schema(), nullptr);
  spec::KernelTable t;
  t.file = file;
  read_entries(r, "kinds", kind_schema(), "", "a non-empty mapping of GPU kinds",
               [&](const std::string& name, const YAML::Node&, FieldReader& kr, bool last) {
                 t.kinds.push_back(read_kind(kr, name, last));
               });
  t.host = read_host(r);
  if (std::optional<FieldReader> inter = r.opt_map("interference"))
    t.nccl_ctas = read_quantity(*inter, "nccl_ctas", 1, 1024, "a number in [1, 1024]");
  if (std::optional<FieldReader> power = r.opt_map("power"))
    t.clock_power_exponent = read_quantity(*power, "clock_exponent", FRACTION_LO, 1.0, FRACTION);
  return t;
}

} // namespace

spec::KernelTable load_kernel_table(const std::string& path)
{
  return guard_yaml(path, [&] { return read_table(load_yaml_file(path), path); });
}

spec::KernelTable load_kernel_table_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] { return read_table(parse_yaml(text, file), file); });
}

std::string kernel_table_path(const std::string& data_dir, const std::string& scenario_dir)
{
  const DataFile found = find_data_file("calibration/kernels.yaml", data_dir, scenario_dir);
  if (found.file.empty())
    throw core::InputError("calibration/kernels.yaml: the kernel efficiency data were not found (looked in " +
                           found.looked + ")");
  return found.file;
}

const spec::KernelTable& shipped_kernel_table()
{
  static std::once_flag once;
  static spec::KernelTable table;
  std::call_once(once, [] { table = load_kernel_table(std::string(ZEROSIM_DATA_DIR) + "/calibration/kernels.yaml"); });
  return table;
}

} // namespace zerosim::config
