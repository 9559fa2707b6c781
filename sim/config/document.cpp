#include "config/document.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <nlohmann/json.hpp>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace fs = std::filesystem;

namespace zerosim::config {
namespace {

std::vector<std::string> split_dots(const std::string& s)
{
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '.') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

/// The segments of a scenario path, keeping the dotted keys of cluster.overrides and sweep whole.
std::vector<std::string> scenario_segments(const std::string& dotted)
{
  std::vector<std::string> segs = split_dots(dotted);
  auto merge_from = [&](size_t i) {
    if (segs.size() <= i + 1)
      return;
    std::string rest = segs[i];
    for (size_t j = i + 1; j < segs.size(); ++j)
      rest += "." + segs[j];
    segs.resize(i);
    segs.push_back(rest);
  };
  if (segs.size() > 2 && segs[0] == "cluster" && segs[1] == "overrides")
    merge_from(2);
  else if (segs.size() > 1 && segs[0] == "sweep")
    merge_from(1);
  return segs;
}

std::string unknown_key_message(const std::string& path, const std::string& key, const Schema& schema)
{
  std::vector<std::string> names = schema.names();
  std::string msg = join_path(path, key) + ": unknown key";
  // The exact name at another place says more than a near name here (cluster.nics_per_node is
  // cluster.network.nics_per_node, not gpus_per_node).
  const std::string elsewhere = elsewhere_hint(&schema, path, key);
  const std::string s = elsewhere.empty() ? core::did_you_mean(key, names) : std::string();
  if (!s.empty())
    msg += " (did you mean '" + s + "'?)";
  msg += elsewhere;
  msg += "; accepted keys: ";
  for (size_t i = 0; i < names.size(); ++i)
    msg += (i ? ", " : "") + names[i];
  return msg;
}

/// Sets `value` at `segs` below `node`, creating mappings on the way and merging mappings into mappings.
void set_below(YAML::Node node, const std::vector<std::string>& segs, size_t i, const YAML::Node& value,
               const std::string& where)
{
  YAML::Node cur;
  cur.reset(node);
  for (; i + 1 < segs.size(); ++i) {
    const YAML::Node& ccur = cur;
    const YAML::Node existing = ccur[segs[i]];
    if (!existing.IsDefined() || existing.IsNull())
      cur[segs[i]] = YAML::Node(YAML::NodeType::Map);
    else if (!existing.IsMap())
      throw core::InputError(where + ": " + segs[i] + ": expected a mapping to set keys in, found " +
                             describe_found(existing));
    YAML::Node next = ccur[segs[i]];
    cur.reset(next);
  }
  const YAML::Node& ccur = cur;
  YAML::Node target = ccur[segs.back()];
  if (value.IsMap() && is_map(target)) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      const YAML::Node k = it->first;
      if (!k.IsScalar())
        throw core::InputError(where + ": " + segs.back() + ": expected a key name, found " + describe_found(k));
      set_below(target, {k.Scalar()}, 0, it->second, where);
    }
    return;
  }
  cur[segs.back()] = YAML::Clone(value);
}

/// Where each document of a YAML text starts, and where its first value is (what YAML::Node::Mark() gives for
/// the document's root), read through yaml-cpp's event parser without building nodes.
class DocumentStarts : public YAML::EventHandler {
public:
  struct Document {
    YAML::Mark start;
    YAML::Mark value;
    bool has_value = false;
  };
  std::vector<Document> documents;

  void OnDocumentStart(const YAML::Mark& mark) override { documents.push_back({mark, mark, false}); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { value_at(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { value_at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override
  {
    value_at(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override
  {
    value_at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override
  {
    value_at(mark);
  }
  void OnMapEnd() override {}

private:
  void value_at(const YAML::Mark& mark)
  {
    if (!documents.empty() && !documents.back().has_value) {
      documents.back().value = mark;
      documents.back().has_value = true;
    }
  }
};

} // namespace

bool is_device(const std::string& path)
{
  std::error_code ec;
  return fs::is_character_file(path, ec) || fs::is_block_file(path, ec);
}

bool split_csv_line(const std::string& line, std::vector<std::string>& out)
{
  out.assign(1, "");
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return !quoted;
}

std::string read_data_table(const std::string& file, const std::string& what, const std::string& header,
                            const std::function<void(const std::string&, const std::vector<std::string>&)>& row)
{
  bool ok = false;
  const std::string text = read_text(file, ok);
  if (!ok)
    throw core::InputError(file + ": cannot open the " + what);
  const std::size_t fields = static_cast<std::size_t>(std::count(header.begin(), header.end(), ',')) + 1;
  const std::string SHA = "sha256 ";
  std::string sha256;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool seen_header = false;
  std::vector<std::string> f;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = file + ":" + std::to_string(n) + ": ";
    if (line.starts_with("#")) {
      if (const auto at = line.find(SHA); at != std::string::npos)
        sha256 = line.substr(at + SHA.size(), 64);
      continue;
    }
    if (!seen_header) {
      if (line != header)
        throw core::InputError(where + "expected the header \"" + header + "\", found \"" + line + "\"");
      seen_header = true;
      continue;
    }
    if (!split_csv_line(line, f) || f.size() != fields)
      throw core::InputError(where + "expected " + std::to_string(fields) + " comma-separated fields (" + header +
                             "), found \"" + line + "\"");
    row(where, f);
  }
  if (!seen_header)
    throw core::InputError(file + ": expected the header \"" + header + "\", found no line");
  return sha256;
}

std::string read_text(const std::string& path, bool& ok)
{
  // A device is no file of text: /dev/zero or /dev/urandom never end, and were read until memory ran out
  // (docs/fuzzing.md). A pipe (a shell's <(...)) and a regular file are read.
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  ok = static_cast<bool>(in) && !fs::is_directory(path, ec) && !is_device(path);
  if (!ok)
    return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

/// The message of a YAML error at `mark`. yaml-cpp reports a tab in a block's indentation as whatever token it then
/// meets ("illegal map value"); YAML indents with spaces only (YAML 1.2, section 6.1), so when a line at or before the
/// error is indented with a tab, that tab is named, at its own line and column.
std::string yaml_error(const std::string& file, const std::string& text, const YAML::Mark& mark, const std::string& msg)
{
  std::istringstream in(text);
  std::string line;
  int found_line = -1, found_col = -1;
  for (int n = 0; std::getline(in, line) && n <= mark.line; ++n) {
    const std::size_t indent = line.find_first_not_of(" \t");
    const std::size_t tab = line.find('\t');
    if (tab != std::string::npos && (indent == std::string::npos || tab < indent)) {
      found_line = n;
      found_col = static_cast<int>(tab);
    }
  }
  if (found_line < 0)
    return position(file, mark) + ": not valid YAML: " + msg;
  YAML::Mark at = mark;
  at.line = found_line;
  at.column = found_col;
  return position(file, at) + ": not valid YAML: a tab in the indentation (YAML indents with spaces only)";
}

} // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& file)
{
  // yaml-cpp's Load keeps the first document and drops the rest without a word. A second document is what a
  // first key indented deeper than the keys after it gives ("  name: x" above "cluster:"): the indented
  // mapping ends at the first line less indented, and the rest would be silently lost. So the documents are
  // counted first (up to two), and a second one is refused at the position of its first value.
  // Counting stops at two, never reading to the end: yaml-cpp 0.7's LoadAll never returns on a token that cannot
  // start a value at the top (the text "," alone: each document it reads is an empty one at the ',', which it
  // does not consume; found by fuzz/model_fuzzer.cpp, docs/fuzzing.md). Such a second document starts where the
  // first did, and is reported as the stray token it is.
  DocumentStarts starts;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (starts.documents.size() < 2 && parser.HandleNextDocument(starts)) {
    }
  } catch (const YAML::Exception& e) {
    throw core::InputError(yaml_error(file, text, e.mark, e.msg));
  }
  if (starts.documents.size() > 1) {
    const DocumentStarts::Document& first = starts.documents[0];
    const DocumentStarts::Document& second = starts.documents[1];
    if (second.start.pos == first.start.pos) {
      const std::size_t at = static_cast<std::size_t>(second.start.pos);
      // Built by appending: GCC 12 reports a false -Wrestrict on "'" + std::string + "'" here.
      std::string found = "the end of the text";
      if (at < text.size()) {
        found = "'";
        found += text[at];
        found += '\'';
      }
      throw core::InputError(position(file, second.start) + ": not valid YAML: expected a value, found " + found +
                             " (it cannot start one)");
    }
    throw core::InputError(position(file, second.value) +
                           ": not valid YAML: a second document starts here, and a file holds one mapping (is a key "
                           "above this line indented deeper than the keys after it, or is there a '---'?)");
  }
  if (starts.documents.empty())
    return YAML::Node();
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw core::InputError(yaml_error(file, text, e.mark, e.msg));
  }
}

/// A file named *.json must be strict JSON (RFC 8259): the Hugging Face Trainer and Accelerate read a ds_config.json
/// with Python's json.load, which refuses a trailing comma, a comment or a single-quoted string that YAML (and
/// DeepSpeed's own hjson) would take. The error names the line and column of the first character JSON refuses.
void check_strict_json(const std::string& text, const std::string& file)
{
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte: how many bytes were read, the refused character the last of them (1-based).
    const std::size_t at = e.byte == 0 ? 0 : std::min<std::size_t>(e.byte - 1, text.size());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string why = e.what();
    if (const auto colon = why.find(": "); colon != std::string::npos) // after "... parse error at line L, column C"
      why = why.substr(colon + 2);
    throw core::InputError(file + ":" + std::to_string(line) + ":" + std::to_string(column) +
                           ": not strict JSON (RFC 8259; a .json file is read as JSON, as json.load reads it): " + why);
  }
}

YAML::Node load_yaml_file(const std::string& path)
{
  bool ok = false;
  std::string text = read_text(path, ok);
  if (!ok)
    throw core::InputError(path + ": cannot open file");
  return parse_yaml(text, path);
}

void require_mapping(const YAML::Node& root, const std::string& file)
{
  if (!root.IsMap())
    throw core::InputError(position(file, root.Mark()) + ": expected a mapping of keys at the top of the file, found " +
                           describe_found(root));
}

std::string ScenarioDocument::file_of(const std::string& path) const
{
  std::string best;
  std::string file_found = file;
  for (const auto& [prefix, f] : part_files)
    if ((path == prefix || path.rfind(prefix + ".", 0) == 0) && prefix.size() > best.size()) {
      best = prefix;
      file_found = f;
    }
  return file_found;
}

DataFile find_data_file(const std::string& relative, const std::string& data_dir, const std::string& scenario_dir)
{
  std::vector<std::string> dirs;
  if (!data_dir.empty())
    dirs.push_back(data_dir);
  else
    dirs.push_back(
        scenario_dir.empty()
            ? ".."
            : (fs::path(scenario_dir).parent_path().empty() ? "." : fs::path(scenario_dir).parent_path().string()));
  dirs.push_back(".");
  dirs.push_back(ZEROSIM_DATA_DIR);
  DataFile out;
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    out.looked += (i ? ", " : "") + dirs[i];
    const fs::path candidate = (fs::path(dirs[i]) / relative).lexically_normal();
    std::error_code ec;
    if (out.file.empty() && fs::is_regular_file(candidate, ec))
      out.file = candidate.string();
  }
  return out;
}

void resolve_reference(ScenarioDocument& doc, const std::string& key_path)
{
  std::vector<std::string> segs = split_dots(key_path);
  YAML::Node parent;
  parent.reset(doc.root);
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const YAML::Node& cp = parent;
    YAML::Node next = cp[segs[i]];
    if (!is_map(next))
      return;
    parent.reset(next);
  }
  const YAML::Node& cp = parent;
  YAML::Node ref = cp[segs.back()];
  if (!ref.IsDefined() || !ref.IsScalar())
    return;
  std::string where = doc.origins.find(key_path);
  if (where.empty())
    where = position(doc.file_of(key_path), ref.Mark());
  const std::string name = ref.Scalar();
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".yaml") || name.ends_with(".yml") ||
                       name.ends_with(".json") || key_path == "deepspeed";
  std::string file;
  if (is_path) {
    fs::path p(name);
    file = (p.is_absolute() || doc.dir.empty() ? p : fs::path(doc.dir) / p).lexically_normal().string();
    if (is_device(file))
      throw core::InputError(where + ": " + key_path + ": expected the path of a file, found the device '" + file +
                             "'");
    bool ok = false;
    const std::string text = read_text(file, ok);
    if (!ok)
      throw core::InputError(where + ": " + key_path + ": cannot open file '" + file + "'");
    if (file.ends_with(".json"))
      check_strict_json(text, file);
  } else {
    const std::string relative = (key_path == "model" ? "models/" : "topologies/") + name + ".yaml";
    const DataFile found = find_data_file(relative, doc.options.data_dir, doc.dir);
    if (found.file.empty())
      throw core::InputError(where + ": " + key_path + ": no " + (key_path == "model" ? "model" : "node") + " named '" +
                             name + "' (looked for " + relative + " in " + found.looked + ")");
    file = found.file;
  }
  YAML::Node loaded = load_yaml_file(file);
  require_mapping(loaded, file);
  parent[segs.back()] = loaded;
  doc.part_files[key_path] = file;
}

std::string check_scenario_path(const std::string& dotted)
{
  std::vector<std::string> segs = scenario_segments(dotted);
  const Schema* schema = &scenario_schema();
  std::string prefix;
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string& seg = segs[i];
    if (prefix == "cluster.overrides") // a dotted node-file key
      return check_node_path(seg).empty() ? "" : "cluster.overrides." + check_node_path(seg);
    const KeyDoc* k = schema->find(seg);
    if (!k)
      return unknown_key_message(prefix, seg, *schema);
    std::string p = join_path(prefix, seg);
    if (k->opaque || i + 1 == segs.size())
      return "";
    if (!k->child)
      return p + ": takes a value, not keys (found '" + segs[i + 1] + "' below it)";
    schema = k->child;
    prefix = p;
  }
  return "";
}

std::string check_node_path(const std::string& dotted)
{
  std::vector<std::string> segs = split_dots(dotted);
  const Schema* schema = &node_schema();
  std::string prefix;
  for (size_t i = 0; i < segs.size(); ++i) {
    const KeyDoc* k = schema->find(segs[i]);
    if (!k)
      return unknown_key_message(prefix, segs[i], *schema);
    std::string p = join_path(prefix, segs[i]);
    if (i + 1 == segs.size())
      return "";
    if (!k->child)
      return p + ": takes a value, not keys (found '" + segs[i + 1] + "' below it)";
    schema = k->child;
    prefix = p;
  }
  return "";
}

void apply_set(ScenarioDocument& doc, const std::string& assignment)
{
  const std::string where = "--set " + assignment;
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw core::InputError(where + ": expected KEY=VALUE with KEY a dotted path such as training.micro_batch");
  const std::string key = assignment.substr(0, eq);
  const std::string problem = check_scenario_path(key);
  if (!problem.empty())
    throw core::InputError(where + ": " + problem);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::ParserException& e) {
    throw core::InputError(where + ": not valid YAML: " + e.msg);
  }
  std::vector<std::string> segs = scenario_segments(key);
  // Descend through references (model: NAME, cluster.node: NAME, deepspeed: ds_config.json) by loading them.
  std::string p;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    p = join_path(p, segs[i]);
    if (p == "model" || p == "cluster.node" || p == "deepspeed")
      resolve_reference(doc, p);
  }
  set_below(doc.root, segs, 0, value, where);
  doc.origins.by_path.emplace_back(key, where);
  // training.global_batch and training.grad_accum state one thing (global = micro-batch x grad_accum x data-parallel
  // ranks): an override of one replaces the file's other, as a user means it (issue 29). Both given by --set remain
  // the loader's error.
  for (const auto& [mine, other] : {std::pair<const char*, const char*>{"global_batch", "grad_accum"},
                                    std::pair<const char*, const char*>{"grad_accum", "global_batch"}}) {
    if (key != std::string("training.") + mine || value.IsNull())
      continue;
    YAML::Node training = doc.root["training"];
    const std::string other_path = std::string("training.") + other;
    if (is_map(training) && training[other] && doc.origins.find(other_path).rfind("--set ", 0) != 0)
      training.remove(other);
  }
}

void apply_overrides(ScenarioDocument& doc)
{
  const YAML::Node& root = doc.root;
  const YAML::Node cluster = root["cluster"];
  if (!is_map(cluster))
    return;
  const YAML::Node ov = cluster["overrides"];
  const YAML::Node node = cluster["node"];
  if (!is_map(ov) || !is_map(node))
    return; // the reader reports a wrong type
  for (auto it = ov.begin(); it != ov.end(); ++it) {
    const YAML::Node k = it->first;
    const std::string key = key_name(k, doc.file_of("cluster"), "cluster.overrides");
    const std::string path = "cluster.overrides." + key;
    std::string where = doc.origins.find(path);
    if (where.empty())
      where = position(doc.file_of("cluster"), k.Mark());
    std::string problem = check_node_path(key);
    if (!problem.empty())
      throw core::InputError(where + ": cluster.overrides." + problem);
    set_below(node, split_dots(key), 0, it->second, where);
    doc.origins.by_path.emplace_back("cluster.node." + key, where);
  }
}

} // namespace zerosim::config
