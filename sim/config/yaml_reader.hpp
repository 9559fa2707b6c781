// FieldReader: reads the typed fields of one YAML mapping against its schema (schema.hpp). On construction
// it reports unknown keys (with a did-you-mean and the keys accepted there) and duplicate keys, so a typo
// is named as such rather than as the required key it was meant to be. Every problem is a core::InputError
// thrown at the first problem found (readers go through keys in a fixed order, so the first problem is
// deterministic), in the format of docs/config.md:
//   FILE:LINE:COL: KEY.PATH: expected WHAT, found VALUE
//   FILE:LINE:COL: KEY.PATH: unknown key (did you mean 'X'?); accepted keys: a, b, c
//   FILE:LINE:COL: KEY.PATH: required key is missing          (position of the parent mapping)
// Lines and columns are 1-based (yaml-cpp's Mark is 0-based). Only sim/config/ includes this header.
#pragma once

#include "config/schema.hpp"
#include "config/units.hpp"
#include "core/error.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::config {

/// Parts of a document that came from somewhere else than their file's text: a `--set K=V` or a
/// `cluster.overrides` entry. A message about a key at or below such a path names that origin instead of
/// FILE:LINE:COL.
struct Origins {
  std::vector<std::pair<std::string, std::string>> by_path; ///< dotted path prefix -> location text

  /// The location for `path`, or "" when no origin covers it (the last matching entry wins, as later
  /// --set options override earlier ones).
  std::string find(const std::string& path) const;
};

/// "FILE:LINE:COL" (1-based) for a node parsed from FILE; "FILE" for a node built in memory.
std::string position(const std::string& file, const YAML::Mark& mark);

/// `"-1"` for a scalar, "a mapping", "a list", "nothing" (an empty value): the VALUE of "found VALUE".
std::string describe_found(const YAML::Node& node);

/// True for a mapping. Safe on every node, including the "zombie" that a const lookup of an absent key gives
/// (yaml-cpp throws InvalidNode from IsMap(), IsScalar(), Mark() ... on those; only IsDefined() is safe).
inline bool is_map(const YAML::Node& node)
{
  return node.IsDefined() && node.IsMap();
}

/// The name of a mapping key `key` found in `file` below `path` ("" at the top); a key that is a list or a
/// mapping (`[a, b]: 1`, `? {a: 1}`) is an input error at its position.
std::string key_name(const YAML::Node& key, const std::string& file, const std::string& path);

/// "a.b" from "a" and "b"; "b" when the prefix is empty.
std::string join_path(const std::string& prefix, const std::string& key);

/// The config layer's boundary for one file: a yaml-cpp exception that the readers did not turn into an input
/// error (InvalidNode, BadConversion, BadSubscript, ... from a structure no reader expected) still becomes one,
/// naming `file` and, where yaml-cpp knows it, the position; never an internal error. A file read while another
/// is (kernels.yaml while a scenario loads) is guarded with its own name, so its faults name it.
template <class F> auto guard_yaml(const std::string& file, F&& f) -> decltype(f())
{
  try {
    return f();
  } catch (const YAML::Exception& e) {
    throw core::InputError(position(file, e.mark) + ": malformed YAML structure (" + e.msg + ")");
  }
}

class FieldReader {
public:
  /// `node` must be a mapping (checked by the caller or by sub()); `path` is its dotted key path ("" at
  /// the top of a file).
  FieldReader(YAML::Node node, std::string file, std::string path, const Schema& schema, const Origins* origins);

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }
  const Schema& schema() const { return *schema_; }

  std::string key_path(const std::string& key) const { return join_path(path_, key); }
  bool has(const std::string& key) const;
  /// The value node of `key` (undefined if absent); `key` must be in the schema.
  YAML::Node take(const std::string& key);

  /// FILE:LINE:COL of the value of `key` (or of this mapping when absent), honouring Origins.
  std::string where(const std::string& key) const;
  std::string where_self() const;

  [[noreturn]] void fail_expected(const std::string& key, const std::string& what) const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  [[noreturn]] void fail_missing(const std::string& key, const std::string& why = "") const;

  // Typed reads. opt_*: nullopt when absent (or null); req_*: required; get_*: the key's default from the schema
  // when absent (see get()), so a literal default is written once, in the schema's table. A default derived from
  // other keys ("heads", "the node's gpus") is opt_*(...).value_or(derived) in the reader, and says how in the table.
  std::optional<std::int64_t> opt_int(const std::string& key, std::int64_t min, const std::string& what);
  std::int64_t get_int(const std::string& key, std::int64_t min, const std::string& what);
  std::int64_t req_int(const std::string& key, std::int64_t min, const std::string& what);
  /// A number as DeepSpeed writes it (5e8, "5e8", 500000000): must be a whole number >= min.
  std::optional<std::int64_t> opt_count(const std::string& key, std::int64_t min, const std::string& what);
  std::int64_t get_count(const std::string& key, std::int64_t min, const std::string& what);
  std::optional<double> opt_number(const std::string& key, double min, double max, const std::string& what);
  double get_number(const std::string& key, double min, double max, const std::string& what);
  double req_number(const std::string& key, double min, double max, const std::string& what);
  std::optional<bool> opt_bool(const std::string& key);
  bool get_bool(const std::string& key);
  std::optional<std::string> opt_string(const std::string& key);
  std::string get_string(const std::string& key);
  std::string req_string(const std::string& key);
  /// A quantity with a unit; `positive`: zero and negative values are refused.
  std::optional<double> opt_quantity(const std::string& key, UnitKind kind, bool positive = true);
  double get_quantity(const std::string& key, UnitKind kind, bool positive = true);
  double req_quantity(const std::string& key, UnitKind kind, bool positive = true);
  /// "auto" (as the Hugging Face Trainer writes it): true when the value is the string auto.
  bool is_auto(const std::string& key) const;

  template <class E>
  std::optional<E> opt_enum(const std::string& key, const std::vector<std::pair<std::string, E>>& names)
  {
    std::string listed;
    for (size_t i = 0; i < names.size(); ++i)
      listed += (i ? ", " : "") + names[i].first;
    return opt_named<E>(
        key,
        [&](const std::string& s) -> std::optional<E> {
          for (const auto& [name, value] : names)
            if (s == name)
              return value;
          return std::nullopt;
        },
        listed);
  }

  template <class E> E get_enum(const std::string& key, const std::vector<std::pair<std::string, E>>& names)
  {
    return get<E>(key, [&](FieldReader& r) { return r.opt_enum<E>(key, names); });
  }

  /// `read(*this)` (an optional<T>: nullopt when `key` is absent); when absent, `read` of a reader over
  /// {key: DEFAULT}, DEFAULT the schema's default_text of `key` parsed as YAML ("0.6 us", "5e8", "gelu",
  /// "\"\"" for the empty string): the default is read as if it were written in the file, by the same code. A
  /// default_text that does not read ("required", "heads") is an internal error: such a key is read with opt_* and its
  /// derived default.
  template <class T, class Read> T get(const std::string& key, Read&& read)
  {
    if (std::optional<T> v = read(*this))
      return *v;
    std::optional<T> d;
    try {
      FieldReader defaults = schema_default(key);
      d = read(defaults);
    } catch (const core::InputError& e) {
      bad_default(key, e.what());
    }
    if (!d)
      bad_default(key, "it reads as absent");
    return *d;
  }

  /// A name looked up by `lookup` (string -> optional<E>, e.g. spec::attention_kernel); anything it does not
  /// know is "expected one of `listed`".
  template <class E, class Lookup>
  std::optional<E> opt_named(const std::string& key, Lookup&& lookup, const std::string& listed)
  {
    YAML::Node v = take(key);
    if (!v.IsDefined() || v.IsNull())
      return std::nullopt;
    if (v.IsScalar())
      if (std::optional<E> e = lookup(v.Scalar()))
        return e;
    fail_expected(key, "one of " + listed);
  }

  /// The reader of the mapping at `key` (nullopt when absent or null); any other value is an error.
  std::optional<FieldReader> opt_map(const std::string& key);
  /// The same, required: absent is "required key is missing" (with `why` when given).
  FieldReader req_map(const std::string& key, const std::string& why = "");
  /// The same, an empty mapping when absent: a block whose absence means nothing of its own reads as its keys'
  /// schema defaults.
  FieldReader map_or_empty(const std::string& key);

private:
  /// A reader over {key: the schema's default of `key`}, for get().
  FieldReader schema_default(const std::string& key) const;
  [[noreturn]] void bad_default(const std::string& key, const std::string& why) const;

  /// Throws for the first key not in the schema, the first duplicate key, the first key that is no name.
  void check_keys() const;

  std::string location(const YAML::Node& n, const std::string& path) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  const Schema* schema_ = nullptr;
  const Origins* origins_ = nullptr;
};

/// The reader of item `i` of the list `list` taken from `r` at `key`, its path "key[i]": an item that is not a mapping
/// is refused at its position.
inline FieldReader list_item(const FieldReader& r, const std::string& key, const YAML::Node& list, std::size_t i,
                             const Schema& schema)
{
  const YAML::Node item = list[i];
  const std::string path = r.key_path(key) + "[" + std::to_string(i) + "]";
  if (!is_map(item))
    throw core::InputError(position(r.file(), item.Mark()) + ": " + path + ": expected a mapping, found " +
                           describe_found(item));
  return FieldReader(item, r.file(), path, schema, nullptr);
}

/// Each mapping of the list at `key` (absent: none), read by `read` with its own FieldReader.
template <class Read> void for_each_entry(FieldReader& r, const std::string& key, const Schema& schema, Read read)
{
  YAML::Node list = r.take(key);
  if (!list.IsDefined() || list.IsNull())
    return;
  if (!list.IsSequence())
    r.fail_expected(key, "a list of mappings");
  for (std::size_t i = 0; i < list.size(); ++i) {
    FieldReader e = list_item(r, key, list, i, schema);
    read(e);
  }
}

/// The texts of the list at `key` (absent: none); a value that is not a list, or an item that is not a text, is
/// refused at its position.
std::vector<std::string> opt_text_list(FieldReader& r, const std::string& key);

} // namespace zerosim::config
