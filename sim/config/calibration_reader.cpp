// Calibration profiles (docs/calibration.md "Profile"): read with the same FieldReader as every other file, so a
// typo is an input error with file, line and key; written as YAML text by `zerosim calibrate`.
#include "config/document.hpp"
#include "config/readers.hpp"
#include "core/error.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::config {
namespace {

constexpr const char* PROFILE_FORMAT = "zerosim-calibration 1";

const Schema& parameter_schema()
{
  static const Schema s{
      "parameter",
      {modelled_key("value", "number > 0 within the family's bounds", "required", "the multiplier on the prior"),
       modelled_key("uncertainty", "number >= 0", "none", "one standard deviation of ln(value) from the fit"),
       modelled_key("bounds", "[lower, upper]", "the family's", "the bounds the fit kept it in (informative)"),
       modelled_key("rows", "integer >= 0", "none", "rows that informed it"),
       modelled_key("sources", "list of strings", "none", "sources that informed it"),
       modelled_key("loso_range", "[min, max]", "none", "its range over the leave-one-source-out folds"),
       modelled_key("note", "string", "\"\"", "anything the fit flagged (at a bound, one source)")}};
  return s;
}

const Schema& band_schema()
{
  static const Schema s{
      "accuracy band",
      {modelled_key("loso_median_abs_error", "percent >= 0", "required", "leave-one-source-out median |error|"),
       modelled_key("loso_p90_abs_error", "percent >= 0", "required", "leave-one-source-out p90 |error|"),
       modelled_key("rows", "integer >= 1", "required", "rows of the group")}};
  return s;
}

const Schema& profile_schema()
{
  static const Schema s{
      "calibration",
      {modelled_key("format", "\"zerosim-calibration 1\"", "required", "the profile format"),
       modelled_key("command", "string", "\"\"", "the command that reproduces the profile"),
       modelled_key("fitted_on", "string", "\"\"", "what the fit saw"),
       modelled_key("parameters", "mapping of parameter -> mapping", "required",
                    "the fitted multipliers (docs/calibration.md lists the names)", &parameter_schema()),
       KeyDoc{"fit", "mapping", "none", "the fit's summary (informative)", nullptr, KeyUse::MODELLED, true},
       modelled_key("accuracy", "mapping of group -> mapping", "none",
                    "leave-one-source-out error per GPU kind x framework, printed beside predictions",
                    &band_schema())}};
  return s;
}

constexpr const char* PRIORS_ACCURACY_FORMAT = "zerosim-priors-accuracy 1";

const Schema& priors_band_schema()
{
  static const Schema s{
      "priors accuracy band",
      {modelled_key("median_abs_error", "percent >= 0", "required", "median |error| of the priors' predictions"),
       modelled_key("p90_abs_error", "percent >= 0", "required", "p90 |error| of the priors' predictions"),
       modelled_key("median_signed_error", "percent", "required",
                    "median signed error (+ = predicted faster than measured)"),
       modelled_key("rows", "integer >= 1", "required", "whole-step rows of the group")}};
  return s;
}

const Schema& priors_accuracy_schema()
{
  static const Schema s{
      "priors accuracy",
      {modelled_key("format", "\"zerosim-priors-accuracy 1\"", "required", "the file format"),
       modelled_key("command", "string", "\"\"", "the command that wrote it"),
       modelled_key("groups", "mapping of group -> mapping", "required",
                    "the priors' error per GPU kind x framework, and overall", &priors_band_schema())}};
  return s;
}

/// The bands of a mapping of groups ("A100 / deepspeed" -> band) under `key`: a profile's leave-one-source-out
/// `accuracy` (figures named loso_*; absent or null: none) or a priors file's `groups` (with the median signed
/// error; required).
std::map<std::string, spec::AccuracyBand> read_bands(FieldReader& r, const std::string& key, const std::string& file,
                                                     const Schema& schema, spec::AccuracyKind kind)
{
  std::map<std::string, spec::AccuracyBand> out;
  YAML::Node groups = r.take(key);
  if (!groups.IsDefined() || groups.IsNull()) {
    if (kind == spec::AccuracyKind::PRIORS)
      r.fail_missing(key);
    return out;
  }
  if (!groups.IsMap())
    r.fail_expected(key, "a mapping of groups (\"A100 / deepspeed\") to their bands");
  const std::vector<std::string> names = schema.names();
  std::string with;
  for (std::size_t i = 0; i < names.size(); ++i)
    with += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  const std::string prefix = kind == spec::AccuracyKind::LEAVE_ONE_SOURCE_OUT ? "loso_" : "";
  for (auto it = groups.begin(); it != groups.end(); ++it) {
    const std::string group = key_name(it->first, file, key);
    const std::string path = join_path(key, group);
    if (!is_map(it->second))
      throw core::InputError(position(file, it->second.Mark()) + ": " + path + ": expected a mapping with " + with +
                             ", found " + describe_found(it->second));
    FieldReader b(it->second, file, path, schema, nullptr);
    spec::AccuracyBand band;
    band.kind = kind;
    band.median_abs_error_pct = b.req_number(prefix + "median_abs_error", 0, 1e6, "a percentage >= 0");
    band.p90_abs_error_pct = b.req_number(prefix + "p90_abs_error", 0, 1e6, "a percentage >= 0");
    if (kind == spec::AccuracyKind::PRIORS)
      band.median_signed_error_pct = b.req_number("median_signed_error", -1e6, 1e6, "a percentage");
    band.rows = static_cast<int>(b.req_int("rows", 1, "a positive integer"));
    out[group] = band;
  }
  return out;
}

std::map<std::string, spec::AccuracyBand> read_priors_accuracy(const YAML::Node& root, const std::string& file)
{
  require_mapping(root, file);
  FieldReader r(root, file, "", priors_accuracy_schema(), nullptr);
  if (r.req_string("format") != PRIORS_ACCURACY_FORMAT)
    r.fail_expected("format", std::string("\"") + PRIORS_ACCURACY_FORMAT + "\"");
  r.opt_string("command");
  return read_bands(r, "groups", file, priors_band_schema(), spec::AccuracyKind::PRIORS);
}

/// The names a family takes after its dot, for messages.
std::string family_keys_text(const spec::ParamFamilyInfo& f)
{
  if (f.family == spec::ParamFamily::INTERFERENCE)
    return "no key (the name is `interference`)";
  if (f.keys.empty())
    return "a GPU kind of calibration/kernels.yaml (A100, H100, ...)";
  std::string s;
  for (std::string_view k : f.keys)
    s += (s.empty() ? "" : ", ") + std::string(k);
  return "one of " + s;
}

std::string family_names_text()
{
  std::string s;
  for (const spec::ParamFamilyInfo& f : spec::param_families())
    s += (s.empty() ? "" : ", ") + std::string(f.prefix) + (f.family == spec::ParamFamily::INTERFERENCE ? "" : ".*");
  return s;
}

spec::Calibration read_profile(const YAML::Node& root, const std::string& file, const std::string& text)
{
  require_mapping(root, file);
  FieldReader r(root, file, "", profile_schema(), nullptr);
  const std::string format = r.req_string("format");
  if (format != PROFILE_FORMAT)
    r.fail_expected("format", std::string("\"") + PROFILE_FORMAT + "\"");
  r.opt_string("command");
  r.opt_string("fitted_on");
  r.take("fit");
  spec::Calibration c;
  c.accuracy = read_bands(r, "accuracy", file, band_schema(), spec::AccuracyKind::LEAVE_ONE_SOURCE_OUT);
  c.path = file;
  c.accuracy_file = c.accuracy.empty() ? "" : file;
  c.hash = spec::fnv1a64_hex(text);
  YAML::Node params = r.take("parameters");
  if (!params.IsDefined() || params.IsNull())
    r.fail_missing("parameters");
  if (!params.IsMap())
    r.fail_expected("parameters", "a mapping of parameter names to mappings");
  for (auto it = params.begin(); it != params.end(); ++it) {
    const std::string name = key_name(it->first, file, "parameters");
    const std::string path = join_path("parameters", name);
    const std::optional<spec::ParamFamilyInfo> fam = spec::param_family_of(name);
    if (!fam)
      throw core::InputError(position(file, it->first.Mark()) + ": " + path + ": unknown parameter family '" +
                             name.substr(0, name.find('.')) + "'; accepted: " + family_names_text());
    const std::string key = spec::param_key(name);
    bool key_ok = false;
    if (fam->family == spec::ParamFamily::INTERFERENCE)
      key_ok = key.empty() && name == "interference";
    else if (fam->keys.empty())
      key_ok = !key.empty(); // a GPU kind: checked against the kernel data when a scenario uses the profile
    else
      for (std::string_view k : fam->keys)
        key_ok = key_ok || key == k;
    if (!key_ok)
      throw core::InputError(position(file, it->first.Mark()) + ": " + path + ": expected " + std::string(fam->prefix) +
                             " with " + family_keys_text(*fam) + ", found \"" + name + "\"");
    if (!is_map(it->second))
      throw core::InputError(position(file, it->second.Mark()) + ": " + path +
                             ": expected a mapping with value, found " + describe_found(it->second));
    FieldReader p(it->second, file, path, parameter_schema(), nullptr);
    std::ostringstream what;
    what << "a number in [" << fam->lower << ", " << fam->upper << "] (the " << fam->prefix << " family's bounds)";
    const double value = p.req_number("value", fam->lower, fam->upper, what.str());
    p.opt_number("uncertainty", 0, 1e3, "a non-negative number");
    p.take("bounds");
    p.opt_int("rows", 0, "a non-negative integer");
    p.take("sources");
    p.take("loso_range");
    p.opt_string("note");
    c.factors[name] = value;
  }
  return c;
}

/// A number written so that reading it back gives the same double (17 significant digits are enough; 6 are kept
/// where they say all the fit knows, which the caller decides).
std::string number(double v, int digits)
{
  std::ostringstream ss;
  ss << std::setprecision(digits) << v;
  return ss.str();
}

std::string quoted(const std::string& s)
{
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\')
      out += '\\';
    out += ch;
  }
  return out + "\"";
}

} // namespace

spec::Calibration load_calibration(const std::string& path)
{
  bool ok = false;
  const std::string text = read_text(path, ok);
  if (!ok)
    throw core::InputError(path + ": cannot read the calibration profile");
  return guard_yaml(path, [&] { return read_profile(parse_yaml(text, path), path, text); });
}

spec::Calibration load_calibration_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] { return read_profile(parse_yaml(text, file), file, text); });
}

std::string shipped_calibration_path(const std::string& data_dir, const std::string& scenario_dir)
{
  return find_data_file(SHIPPED_CALIBRATION, data_dir, scenario_dir).file;
}

std::string calibration_profile_yaml(const CalibrationProfile& p)
{
  std::ostringstream y;
  y << "# zerosim calibration profile (docs/calibration.md). Written by `zerosim calibrate`; do not edit by hand:\n"
    << "# rerun the command below. Each value multiplies a prior of the model (1 = the prior).\n"
    << "format: " << quoted(PROFILE_FORMAT) << "\n"
    << "command: " << quoted(p.command) << "\n"
    << "fitted_on: " << quoted(p.fitted_on) << "\n"
    << "parameters:\n";
  for (const CalibrationProfile::Parameter& q : p.parameters) {
    y << "  " << q.name << ":\n"
      << "    value: " << number(q.value, 6) << "\n"
      << "    uncertainty: " << number(q.uncertainty, 3) << "\n"
      << "    bounds: [" << number(q.lower, 6) << ", " << number(q.upper, 6) << "]\n"
      << "    rows: " << q.rows << "\n"
      << "    sources: [";
    for (std::size_t i = 0; i < q.sources.size(); ++i)
      y << (i ? ", " : "") << quoted(q.sources[i]);
    y << "]\n";
    if (q.loso_min && q.loso_max)
      y << "    loso_range: [" << number(*q.loso_min, 6) << ", " << number(*q.loso_max, 6) << "]\n";
    if (!q.note.empty())
      y << "    note: " << quoted(q.note) << "\n";
  }
  if (!p.fit.empty()) {
    y << "fit:\n";
    for (const auto& [k, v] : p.fit)
      y << "  " << k << ": " << quoted(v) << "\n";
  }
  if (!p.accuracy.empty()) {
    y << "accuracy:\n";
    for (const auto& [group, b] : p.accuracy)
      y << "  " << quoted(group) << ": {loso_median_abs_error: " << number(b.median_abs_error_pct, 4)
        << ", loso_p90_abs_error: " << number(b.p90_abs_error_pct, 4) << ", rows: " << b.rows << "}\n";
  }
  return y.str();
}

std::map<std::string, spec::AccuracyBand> load_priors_accuracy(const std::string& path)
{
  bool ok = false;
  const std::string text = read_text(path, ok);
  if (!ok)
    throw core::InputError(path + ": cannot read the priors' accuracy bands");
  return guard_yaml(path, [&] { return read_priors_accuracy(parse_yaml(text, path), path); });
}

std::map<std::string, spec::AccuracyBand> load_priors_accuracy_text(const std::string& text, const std::string& file)
{
  return guard_yaml(file, [&] { return read_priors_accuracy(parse_yaml(text, file), file); });
}

std::string priors_accuracy_yaml(const std::map<std::string, spec::AccuracyBand>& bands, const std::string& command)
{
  std::ostringstream y;
  y << "# zerosim: the error of its predictions on the priors (no calibration profile) per GPU kind x framework,\n"
    << "# over the whole-step rows of the validation report (report.md, \"Priors only\"). Written by\n"
    << "# `zerosim validate --run`; do not edit by hand. Percent; signed + = predicted faster than measured.\n"
    << "# `zerosim run` prints the band of the scenario's group when it runs without a profile.\n"
    << "format: " << quoted(PRIORS_ACCURACY_FORMAT) << "\n"
    << "command: " << quoted(command) << "\n"
    << "groups:\n";
  for (const auto& [group, b] : bands)
    y << "  " << quoted(group) << ": {median_abs_error: " << number(b.median_abs_error_pct, 4)
      << ", p90_abs_error: " << number(b.p90_abs_error_pct, 4)
      << ", median_signed_error: " << number(b.median_signed_error_pct.value_or(0), 4) << ", rows: " << b.rows << "}\n";
  return y.str();
}

} // namespace zerosim::config
