// calibration/kernels.yaml: the kernel efficiency priors per GPU kind (docs/compute.md §1.4). Read with the
// same FieldReader as every other file, so a typo is an input error with file, line and key.
#include "config/document.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::config {
namespace {

KeyDoc kkey(std::string k, std::string type, std::string def, std::string desc, const Schema* child = nullptr)
{
  return modelled_key(std::move(k), std::move(type), std::move(def), std::move(desc), child);
}

/// value, status, source, note: every figure of the file has them.
std::vector<KeyDoc> figure_keys(const std::string& value_default)
{
  return {kkey("value", "number in (0, 1]", value_default, "achieved / nominal"),
          kkey("status", "one of measured, stated", "required", "printed by a benchmark, or derived"),
          kkey("source", "string", "required", "where the figure comes from"),
          kkey("note", "string", "\"\"", "how it was derived")};
}

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
                  kkey("torch", "major.minor string", "required", "the first torch generation it applies to"));
    return g;
  }();
  return s;
}

const Schema& attention_schema()
{
  static const Schema s = [] {
    Schema a{"attention", figure_keys("fwd and bwd")};
    a.keys.insert(
        a.keys.begin() + 1,
        {kkey("fwd", "number in (0, 1]", "value", "forward achieved / dense peak, in the kernel's own FLOPs"),
         kkey("bwd", "number in (0, 1]", "value", "backward achieved / dense peak, in the kernel's own FLOPs"),
         kkey("causal_skip", "bool", "true", "the kernel skips fully masked tiles of a causal mask")});
    return a;
  }();
  return s;
}

const Schema& kind_schema()
{
  static const Schema s{
      "kind",
      {kkey("match", "list of strings", "required (but for the last kind)", "names matched in gpu.model"),
       kkey("match_also", "list of strings", "none", "names that must be present too (PCIE)"),
       kkey("sms", "integer >= 1", "required", "streaming multiprocessors (wave quantisation)"),
       kkey("hbm", "mapping", "required", "streaming-kernel bandwidth / nominal", &figure_schema()),
       kkey("gemm", "list of mappings", "required", "large-GEMM cap by torch generation"),
       kkey("attention", "mapping of kernel -> figures", "required", "fused attention kernels that run on this kind"),
       kkey("note", "string", "\"\"", "about the kind")}};
  return s;
}

/// A figure with a unit other than a fraction (host microseconds, CTAs, an exponent).
const Schema& quantity_schema(const std::string& name, const std::string& type)
{
  static std::map<std::string, Schema> schemas;
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  auto it = schemas.find(name);
  if (it == schemas.end()) {
    std::vector<KeyDoc> keys = figure_keys("required");
    keys.front().type = type;
    it = schemas.emplace(name, Schema{name, keys}).first;
  }
  return it->second;
}

const Schema& host_schema()
{
  static const Schema s{
      "host",
      {kkey("torch", "major.minor string", "required", "the first torch generation it applies to"),
       kkey("eager_op", "mapping (value in us)", "required",
            "per forward op from eager Python: Python, dispatcher, autograd record, launch",
            &quantity_schema("eager_op", "microseconds in (0, 1000]")),
       kkey("backward_op", "mapping (value in us)", "required",
            "per kernel launched by the C++ autograd engine in backward",
            &quantity_schema("backward_op", "microseconds in (0, 1000]")),
       kkey("compiled_op", "mapping (value in us)", "required", "per kernel launched by a torch.compile graph",
            &quantity_schema("compiled_op", "microseconds in (0, 1000]")),
       kkey("hook_param", "mapping (value in us)", "required",
            "per parameter per framework hook (FSDP unshard/reshard, ZeRO-1/2 gradient hook)",
            &quantity_schema("hook_param", "microseconds in (0, 1000]")),
       kkey("note", "string", "\"\"", "about the generation")}};
  return s;
}

const Schema& interference_schema()
{
  static const Schema s{
      "interference",
      {kkey("nccl_ctas", "mapping (value: CTAs)", "required", "SMs an NCCL collective kernel occupies while it runs",
            &quantity_schema("nccl_ctas", "number in [1, 1024]"))}};
  return s;
}

const Schema& power_schema()
{
  static const Schema s{
      "power",
      {kkey("clock_exponent", "mapping (value: exponent)", "required", "sustained clock = (power_limit / tdp)^exponent",
            &quantity_schema("clock_exponent", "number in (0, 1]"))}};
  return s;
}

const Schema& table_schema()
{
  static const Schema s{
      "kernels",
      {kkey("kinds", "mapping of GPU kind -> data", "required", "in match order"),
       kkey("host", "list of mappings", "none (no host cost priced)", "host dispatch cost by torch generation"),
       kkey("interference", "mapping", "none (no interference)", "communication kernels' share of the SMs",
            &interference_schema()),
       kkey("power", "mapping", "none (no power-cap clocks)", "sustained clock under a power cap", &power_schema())}};
  return s;
}

spec::KernelFigure read_figure(FieldReader& r, const std::string& key = "value", double lo = 1e-6, double hi = 1.0,
                               const std::string& what = "a number in (0, 1]")
{
  spec::KernelFigure f;
  f.value = r.opt_number(key, lo, hi, what).value_or(0);
  std::optional<std::string> status =
      r.opt_enum<std::string>("status", {{"measured", "measured"}, {"stated", "stated"}});
  if (!status)
    r.fail_missing("status");
  f.status = *status;
  f.source = r.req_string("source");
  r.opt_string("note");
  return f;
}

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
    out.push_back(n.Scalar());
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
    const YAML::Node item = list[i];
    const std::string path = r.key_path(key) + "[" + std::to_string(i) + "]";
    if (!is_map(item))
      throw core::InputError(position(r.file(), item.Mark()) + ": " + path + ": expected a mapping, found " +
                             describe_found(item));
    FieldReader e(item, r.file(), path, schema, nullptr);
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

spec::GpuKindData read_kind(FieldReader& r, const std::string& name, bool last)
{
  spec::GpuKindData k;
  k.kind = name;
  k.match = read_names(r, "match");
  if (k.match.empty() && !last)
    r.fail_missing("match", "every kind but the last, the fallback, names what it matches");
  k.match_also = read_names(r, "match_also");
  k.sms = static_cast<int>(r.req_int("sms", 1, "a positive integer"));
  std::optional<FieldReader> hbm = r.opt_map("hbm");
  if (!hbm)
    r.fail_missing("hbm");
  k.hbm = read_figure(*hbm);
  if (k.hbm.value <= 0)
    hbm->fail_missing("value");

  k.gemm = read_generations<spec::GemmGeneration>(r, "gemm", gemm_schema(), true,
                                                  [](FieldReader& g, spec::GemmGeneration& gen) {
                                                    gen.max = read_figure(g);
                                                    if (gen.max.value <= 0)
                                                      g.fail_missing("value");
                                                  });

  YAML::Node att = r.take("attention");
  if (!att.IsDefined() || att.IsNull())
    r.fail_missing("attention", "at least one fused attention kernel");
  {
    if (!att.IsMap() || att.size() == 0)
      r.fail_expected("attention", "a non-empty mapping of attention kernels to their figures");
    for (auto it = att.begin(); it != att.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      const std::string kernel_name = key_name(key, r.file(), r.key_path("attention"));
      const std::string path = r.key_path("attention") + "." + kernel_name;
      std::optional<spec::AttentionKernel> kernel;
      for (const auto& [n, kk] : spec::ATTENTION_KERNELS)
        if (kernel_name == n)
          kernel = kk;
      if (!kernel || !spec::is_fused(*kernel))
        throw core::InputError(position(r.file(), key.Mark()) + ": " + path +
                               ": expected a fused attention kernel (mem_efficient, flash1, triton_flash, flash2, "
                               "flash3, cudnn; eager and sdpa_math are priced as GEMMs)");
      if (!is_map(value))
        throw core::InputError(position(r.file(), key.Mark()) + ": " + path + ": expected a mapping, found " +
                               describe_found(value));
      FieldReader a(value, r.file(), path, attention_schema(), nullptr);
      spec::AttentionFigure fig;
      const bool has_value = a.has("value");
      if (has_value && (a.has("fwd") || a.has("bwd")))
        a.fail("value", "give value, or fwd and bwd, not both");
      if (!has_value && !(a.has("fwd") && a.has("bwd")))
        a.fail_missing(a.has("fwd") ? "bwd" : "fwd", "or value for both");
      spec::KernelFigure common = read_figure(a, has_value ? "value" : "fwd");
      fig.fwd = common;
      fig.bwd = common;
      if (!has_value)
        fig.bwd.value = *a.opt_number("bwd", 1e-6, 1.0, "a number in (0, 1]");
      fig.causal_skip = a.get_bool("causal_skip", true);
      k.attention[*kernel] = fig;
    }
  }
  r.opt_string("note");
  return k;
}

/// A required figure at `key` of `r`, its value in [lo, hi] (scaled by `scale` when stored).
spec::KernelFigure read_quantity(FieldReader& r, const std::string& key, double lo, double hi, const std::string& what,
                                 double scale = 1.0)
{
  std::optional<FieldReader> m = r.opt_map(key);
  if (!m)
    r.fail_missing(key);
  spec::KernelFigure f = read_figure(*m, "value", lo, hi, what);
  if (f.value <= 0)
    m->fail_missing("value");
  f.value *= scale;
  return f;
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

} // namespace

spec::KernelTable load_kernel_table(const std::string& path)
{
  YAML::Node root = load_yaml_file(path);
  require_mapping(root, path);
  FieldReader r(root, path, "", table_schema(), nullptr);
  YAML::Node kinds = r.take("kinds");
  if (!kinds.IsDefined() || kinds.IsNull())
    r.fail_missing("kinds");
  if (!kinds.IsMap() || kinds.size() == 0)
    r.fail_expected("kinds", "a non-empty mapping of GPU kinds");
  spec::KernelTable t;
  t.file = path;
  std::size_t i = 0;
  for (auto it = kinds.begin(); it != kinds.end(); ++it, ++i) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    const std::string name = key_name(key, path, "kinds");
    if (!is_map(value))
      throw core::InputError(position(path, key.Mark()) + ": kinds." + name + ": expected a mapping, found " +
                             describe_found(value));
    for (const spec::GpuKindData& k : t.kinds)
      if (k.kind == name)
        throw core::InputError(position(path, key.Mark()) + ": kinds." + name + ": duplicate key");
    FieldReader kr(value, path, "kinds." + name, kind_schema(), nullptr);
    t.kinds.push_back(read_kind(kr, name, i + 1 == kinds.size()));
  }
  t.host = read_host(r);
  if (std::optional<FieldReader> inter = r.opt_map("interference"))
    t.nccl_ctas = read_quantity(*inter, "nccl_ctas", 1, 1024, "a number in [1, 1024]");
  if (std::optional<FieldReader> power = r.opt_map("power"))
    t.clock_power_exponent = read_quantity(*power, "clock_exponent", 1e-6, 1.0, "a number in (0, 1]");
  return t;
}

std::string kernel_table_path(const std::string& data_dir, const std::string& scenario_dir)
{
  std::vector<std::string> dirs;
  if (!data_dir.empty())
    dirs.push_back(data_dir);
  else if (!scenario_dir.empty())
    dirs.push_back(std::filesystem::path(scenario_dir).parent_path().empty()
                       ? "."
                       : std::filesystem::path(scenario_dir).parent_path().string());
  dirs.push_back(".");
  dirs.push_back(ZEROSIM_DATA_DIR);
  for (const std::string& d : dirs) {
    const std::filesystem::path p = (std::filesystem::path(d) / "calibration" / "kernels.yaml").lexically_normal();
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec))
      return p.string();
  }
  std::string looked;
  for (std::size_t j = 0; j < dirs.size(); ++j)
    looked += (j ? ", " : "") + dirs[j];
  throw core::InputError("calibration/kernels.yaml: the kernel efficiency data were not found (looked in " + looked +
                         ")");
}

const spec::KernelTable& shipped_kernel_table()
{
  static std::once_flag once;
  static spec::KernelTable table;
  std::call_once(once, [] { table = load_kernel_table(std::string(ZEROSIM_DATA_DIR) + "/calibration/kernels.yaml"); });
  return table;
}

} // namespace zerosim::config
