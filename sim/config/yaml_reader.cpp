#include "config/yaml_reader.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

namespace zerosim::config {

std::string Origins::find(const std::string& path) const
{
  std::string found;
  for (const auto& [prefix, where] : by_path)
    if (path == prefix ||
        (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 && path[prefix.size()] == '.'))
      found = where;
  return found;
}

std::string position(const std::string& file, const YAML::Mark& mark)
{
  if (mark.is_null() || mark.line < 0)
    return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string describe_found(const YAML::Node& node)
{
  if (!node.IsDefined() || node.IsNull())
    return "nothing";
  if (node.IsMap())
    return "a mapping";
  if (node.IsSequence())
    return "a list";
  return "\"" + node.Scalar() + "\"";
}

namespace {

/// A key of the contract not built yet (KeyUse::NOT_YET), given: accepted at its one accepted value (null reads as
/// absent), refused otherwise with the feature named.
void refuse_not_yet(const KeyDoc& doc, const YAML::Node& value, const std::string& where, const std::string& path)
{
  if (!value.IsDefined() || value.IsNull())
    return;
  if (doc.default_text != "none" && value.IsScalar()) {
    const std::string& v = value.Scalar();
    const std::optional<double> a = parse_number(v);
    const std::optional<double> b = parse_number(doc.default_text);
    if (a && b ? *a == *b : v == doc.default_text || (doc.default_text == "false" && v == "False"))
      return;
  }
  const std::string expected =
      doc.default_text == "none" ? "no " + doc.key + " key" : doc.default_text + " (the feature off)";
  throw core::InputError(where + ": " + path + ": " + doc.description + " is not modelled yet: expected " + expected +
                         ", found " + describe_found(value) + " (docs/config.md \"Not yet\")");
}

} // namespace

std::string key_name(const YAML::Node& key, const std::string& file, const std::string& path)
{
  if (!key.IsScalar())
    throw core::InputError(position(file, key.Mark()) + ": " + (path.empty() ? "(top level)" : path) +
                           ": expected a key name, found " + describe_found(key));
  return key.Scalar();
}

std::string join_path(const std::string& prefix, const std::string& key)
{
  return prefix.empty() ? key : prefix + "." + key;
}

FieldReader::FieldReader(YAML::Node node, std::string file, std::string path, const Schema& schema,
                         const Origins* origins)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)), schema_(&schema), origins_(origins)
{
  check_keys();
}

bool FieldReader::has(const std::string& key) const
{
  const YAML::Node& n = node_;
  YAML::Node v = n[key];
  return v.IsDefined() && !v.IsNull();
}

YAML::Node FieldReader::take(const std::string& key)
{
  if (!schema_->find(key))
    throw core::InternalError("config: key '" + key + "' read but not in schema " + schema_->name);
  const YAML::Node& n = node_;
  return n[key];
}

std::string FieldReader::location(const YAML::Node& n, const std::string& path) const
{
  if (origins_) {
    std::string o = origins_->find(path);
    if (!o.empty())
      return o;
  }
  return position(file_, n.Mark());
}

std::string FieldReader::where(const std::string& key) const
{
  const YAML::Node& n = node_;
  YAML::Node v = n[key];
  if (!v.IsDefined())
    return where_self();
  return location(v, key_path(key));
}

std::string FieldReader::where_self() const
{
  return location(node_, path_);
}

void FieldReader::fail_expected(const std::string& key, const std::string& what) const
{
  const YAML::Node& n = node_;
  fail(key, "expected " + what + ", found " + describe_found(n[key]));
}

void FieldReader::fail(const std::string& key, const std::string& message) const
{
  throw core::InputError(where(key) + ": " + key_path(key) + ": " + message);
}

void FieldReader::fail_missing(const std::string& key, const std::string& why) const
{
  throw core::InputError(where_self() + ": " + key_path(key) + ": required key is missing" +
                         (why.empty() ? "" : " (" + why + ")"));
}

namespace {

std::optional<std::int64_t> parse_int(const std::string& s)
{
  std::int64_t v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+')
    ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e)
    return std::nullopt;
  return v;
}

} // namespace

std::optional<std::int64_t> FieldReader::opt_int(const std::string& key, std::int64_t min, const std::string& what)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  std::optional<std::int64_t> i = v.IsScalar() ? parse_int(v.Scalar()) : std::nullopt;
  if (!i || *i < min)
    fail_expected(key, what);
  // Every such key is held in an int: a larger value would wrap.
  if (*i > std::numeric_limits<std::int32_t>::max())
    fail_expected(key, what + " of at most " + std::to_string(std::numeric_limits<std::int32_t>::max()));
  return i;
}

std::int64_t FieldReader::get_int(const std::string& key, std::int64_t min, const std::string& what)
{
  return get<std::int64_t>(key, [&](FieldReader& r) { return r.opt_int(key, min, what); });
}

std::int64_t FieldReader::req_int(const std::string& key, std::int64_t min, const std::string& what)
{
  std::optional<std::int64_t> v = opt_int(key, min, what);
  if (!v)
    fail_missing(key);
  return *v;
}

std::optional<std::int64_t> FieldReader::opt_count(const std::string& key, std::int64_t min, const std::string& what)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  std::optional<double> d = v.IsScalar() ? parse_number(v.Scalar()) : std::nullopt;
  // 2^63 is the first double above int64's range; sys.maxsize (2^63 - 1) written as a float lands on it.
  constexpr double LIMIT = 9223372036854775808.0;
  if (!d || *d != std::floor(*d) || *d < static_cast<double>(min) || *d > LIMIT)
    fail_expected(key, what);
  if (*d >= LIMIT)
    return std::numeric_limits<std::int64_t>::max();
  // Exact integers beyond 2^53 written in decimal: prefer the integer parse.
  if (std::optional<std::int64_t> i = parse_int(v.Scalar()))
    return i;
  return static_cast<std::int64_t>(*d);
}

std::int64_t FieldReader::get_count(const std::string& key, std::int64_t min, const std::string& what)
{
  return get<std::int64_t>(key, [&](FieldReader& r) { return r.opt_count(key, min, what); });
}

std::optional<double> FieldReader::opt_number(const std::string& key, double min, double max, const std::string& what)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  std::optional<double> d = v.IsScalar() ? parse_number(v.Scalar()) : std::nullopt;
  if (!d || *d < min || *d > max)
    fail_expected(key, what);
  return d;
}

double FieldReader::get_number(const std::string& key, double min, double max, const std::string& what)
{
  return get<double>(key, [&](FieldReader& r) { return r.opt_number(key, min, max, what); });
}

double FieldReader::req_number(const std::string& key, double min, double max, const std::string& what)
{
  std::optional<double> d = opt_number(key, min, max, what);
  if (!d)
    fail_missing(key);
  return *d;
}

std::optional<bool> FieldReader::opt_bool(const std::string& key)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  if (v.IsScalar()) {
    const std::string& s = v.Scalar();
    if (s == "true" || s == "True" || s == "TRUE")
      return true;
    if (s == "false" || s == "False" || s == "FALSE")
      return false;
  }
  fail_expected(key, "true or false");
}

bool FieldReader::get_bool(const std::string& key)
{
  return get<bool>(key, [&](FieldReader& r) { return r.opt_bool(key); });
}

std::optional<std::string> FieldReader::opt_string(const std::string& key)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  if (!v.IsScalar())
    fail_expected(key, "a string");
  return v.Scalar();
}

std::string FieldReader::get_string(const std::string& key)
{
  return get<std::string>(key, [&](FieldReader& r) { return r.opt_string(key); });
}

std::string FieldReader::req_string(const std::string& key)
{
  std::optional<std::string> s = opt_string(key);
  if (!s)
    fail_missing(key);
  return *s;
}

std::optional<double> FieldReader::opt_quantity(const std::string& key, UnitKind kind, bool positive)
{
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  std::optional<double> q = v.IsScalar() ? parse_quantity(v.Scalar(), kind) : std::nullopt;
  if (!q)
    fail(key, "expected " + unit_expectation(kind) + ", found " + describe_found(v) +
                  (v.IsScalar() ? unit_suggestion(v.Scalar(), kind) : std::string()));
  if (positive && *q <= 0)
    fail_expected(key, "a positive " + unit_expectation(kind).substr(2));
  if (!positive && *q < 0)
    fail_expected(key, "a non-negative " + unit_expectation(kind).substr(2));
  return q;
}

double FieldReader::get_quantity(const std::string& key, UnitKind kind, bool positive)
{
  return get<double>(key, [&](FieldReader& r) { return r.opt_quantity(key, kind, positive); });
}

double FieldReader::req_quantity(const std::string& key, UnitKind kind, bool positive)
{
  std::optional<double> q = opt_quantity(key, kind, positive);
  if (!q)
    fail_missing(key);
  return *q;
}

bool FieldReader::is_auto(const std::string& key) const
{
  const YAML::Node& n = node_;
  YAML::Node v = n[key];
  return v.IsDefined() && v.IsScalar() && v.Scalar() == "auto";
}

std::optional<FieldReader> FieldReader::opt_map(const std::string& key)
{
  const KeyDoc* doc = schema_->find(key);
  YAML::Node v = take(key);
  if (!v.IsDefined() || v.IsNull())
    return std::nullopt;
  if (!v.IsMap())
    fail_expected(key, "a mapping");
  if (!doc || !doc->child)
    throw core::InternalError("config: key '" + key + "' of " + schema_->name + " has no child schema");
  return FieldReader(v, file_, key_path(key), *doc->child, origins_);
}

FieldReader FieldReader::req_map(const std::string& key, const std::string& why)
{
  std::optional<FieldReader> m = opt_map(key);
  if (!m)
    fail_missing(key, why);
  return std::move(*m);
}

FieldReader FieldReader::map_or_empty(const std::string& key)
{
  if (std::optional<FieldReader> m = opt_map(key))
    return std::move(*m);
  return FieldReader(YAML::Node(YAML::NodeType::Map), file_, key_path(key), sub_schema(*schema_, key), origins_);
}

FieldReader FieldReader::schema_default(const std::string& key) const
{
  const KeyDoc* doc = schema_->find(key);
  if (!doc)
    throw core::InternalError("config: key '" + key + "' read but not in schema " + schema_->name);
  // Each default text is parsed once per process (a scenario load reads some hundred defaults, a sweep loads a
  // scenario per point); each use gets a clone, since yaml-cpp nodes share their data.
  static std::mutex mutex;
  static std::unordered_map<std::string, YAML::Node> parsed;
  YAML::Node value;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = parsed.find(doc->default_text);
    if (it == parsed.end()) {
      try {
        it = parsed.emplace(doc->default_text, YAML::Load(doc->default_text)).first;
      } catch (const YAML::Exception& e) {
        bad_default(key, e.msg);
      }
    }
    value = YAML::Clone(it->second);
  }
  YAML::Node defaults(YAML::NodeType::Map);
  defaults[key] = value;
  return FieldReader(defaults, "schema.cpp", path_, *schema_, nullptr);
}

void FieldReader::bad_default(const std::string& key, const std::string& why) const
{
  std::string name = schema_->name;
  name += '.';
  name += key;
  throw core::InternalError("config: the schema's default of " + name + " (" + schema_->find(key)->default_text +
                            ") is not a value of the key: " + why);
}

void FieldReader::check_keys() const
{
  std::vector<std::string> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    // A copy, not a reference: a yaml-cpp map iterator's operator-> returns a proxy whose key/value pair dies
    // at the end of the statement, so `const YAML::Node& k = it->first` dangles (AddressSanitizer:
    // stack-use-after-scope). YAML::Node is a handle; copying it is cheap.
    const YAML::Node k = it->first;
    if (!k.IsScalar())
      throw core::InputError(location(k, path_) + ": " + (path_.empty() ? "(top level)" : path_) +
                             ": expected a key name, found " + describe_found(k));
    const std::string name = k.Scalar();
    std::string kp = key_path(name);
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      throw core::InputError(location(k, kp) + ": " + kp + ": duplicate key");
    seen.push_back(name);
    if (const KeyDoc* doc = schema_->find(name)) {
      if (doc->use == KeyUse::NOT_YET)
        refuse_not_yet(*doc, it->second, location(it->second, kp), kp);
      continue;
    }
    std::vector<std::string> names = schema_->names();
    std::string msg = location(k, kp) + ": " + kp + ": unknown key";
    // The exact name at another place says more than a near name here (cluster.nics_per_node is
    // cluster.network.nics_per_node, not gpus_per_node).
    const std::string elsewhere = elsewhere_hint(schema_, path_, name);
    const std::string suggestion = elsewhere.empty() ? core::did_you_mean(name, names) : std::string();
    if (!suggestion.empty())
      msg += " (did you mean '" + suggestion + "'?)";
    msg += elsewhere;
    msg += "; accepted keys: ";
    for (size_t i = 0; i < names.size(); ++i)
      msg += (i ? ", " : "") + names[i];
    throw core::InputError(msg);
  }
}

std::vector<std::string> opt_text_list(FieldReader& r, const std::string& key)
{
  YAML::Node list = r.take(key);
  std::vector<std::string> out;
  if (!list.IsDefined() || list.IsNull())
    return out;
  if (!list.IsSequence())
    r.fail_expected(key, "a list of texts");
  for (const YAML::Node& n : list) {
    if (!n.IsScalar())
      throw core::InputError(position(r.file(), n.Mark()) + ": " + r.key_path(key) +
                             ": expected a list of texts, found an item that is " + describe_found(n));
    out.push_back(n.Scalar());
  }
  return out;
}

} // namespace zerosim::config
