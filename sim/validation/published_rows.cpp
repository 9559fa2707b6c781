#include "validation/published_rows.hpp"
#include "spec/names.hpp"
#include "validation/row_mapping.hpp"

#include "config/scenario_loader.hpp"
#include "core/csv.hpp"
#include "core/error.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef ZEROSIM_DATA_DIR
#define ZEROSIM_DATA_DIR "."
#endif

namespace zerosim::validation {

using namespace detail;

NodeLoader node_loader_near(const std::string& csv)
{
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(fs::path(csv)).parent_path();
  std::vector<fs::path> candidates = {p, p.parent_path(), p.parent_path().parent_path(), fs::current_path(),
                                      fs::path(ZEROSIM_DATA_DIR)};
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_directory(c / "topologies", ec)) {
      std::string dir = (c / "topologies").string();
      return [dir](const std::string& name) { return config::load_node(dir + "/" + name + ".yaml"); };
    }
  }
  throw core::InputError(csv + ": no topologies/ folder found near the file, in the current directory or in " +
                         std::string(ZEROSIM_DATA_DIR));
}

spec::MappingRules mapping_rules_near(const std::string& csv)
{
  const std::filesystem::path dir = std::filesystem::absolute(std::filesystem::path(csv)).parent_path();
  const spec::MappingRules& shipped = config::shipped_mapping_rules();
  spec::MappingRules rules;
  std::error_code ec;
  const std::filesystem::path general = dir / "rules.yaml";
  rules.general =
      std::filesystem::is_regular_file(general, ec) ? config::load_general_rules(general.string()) : shipped.general;
  const std::filesystem::path sources = dir / "sources";
  rules.by_source =
      std::filesystem::is_directory(sources, ec) ? config::load_source_rules(sources.string()) : shipped.by_source;
  return rules;
}

namespace {

std::string read_text_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw core::InputError(path + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "3-4;6-11;13" -> {3, 4, 6, ..., 11, 13}.
std::vector<long> row_ranges(const std::string& text, const std::string& where)
{
  std::vector<long> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ';')) {
    part = trim(part);
    const std::size_t dash = part.find('-');
    char* end = nullptr;
    const long a = std::strtol(part.c_str(), &end, 10);
    long b = a;
    bool ok = !part.empty() && end != part.c_str();
    if (ok && dash != std::string::npos) {
      const std::string tail = part.substr(dash + 1);
      char* e2 = nullptr;
      b = std::strtol(tail.c_str(), &e2, 10);
      ok = e2 != tail.c_str() && *e2 == '\0' && b >= a;
    } else if (ok) {
      ok = *end == '\0';
    }
    if (!ok)
      throw core::InputError(where + ": rows: expected row ids and ranges such as 3-4;6, found \"" + text + "\"");
    for (long r = a; r <= b; ++r)
      out.push_back(r);
  }
  return out;
}

} // namespace

std::vector<PublishedRow> read_published_rows(const std::string& csv)
{
  core::CsvTable table = core::CsvTable::parse(read_text_file(csv), csv);
  std::vector<PublishedRow> rows;
  for (std::size_t i = 0; i < table.size(); ++i)
    rows.push_back(table.record(i));
  const std::string stacks_path = (std::filesystem::path(csv).parent_path() / "stacks.csv").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(stacks_path, ec))
    return rows;
  core::CsvTable stacks = core::CsvTable::parse(read_text_file(stacks_path), stacks_path);
  std::map<long, std::size_t> index;
  for (std::size_t i = 0; i < rows.size(); ++i)
    index[std::strtol(rows[i]["row_id"].c_str(), nullptr, 10)] = i;
  std::map<long, std::size_t> listed; // row id -> line of stacks.csv
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const std::string where = stacks_path + ":" + std::to_string(i + 2);
    const std::string attention = stacks.get(i, "attention");
    if (!spec::attention_kernel(attention))
      throw core::InputError(where + ": attention: expected one of docs/scenario-format.md's kernels, found \"" +
                             attention + "\"");
    const std::string compile = stacks.get(i, "compile");
    if (compile != "true" && compile != "false")
      throw core::InputError(where + ": compile: expected true or false, found \"" + compile + "\"");
    const std::string status = stacks.get(i, "status");
    if (status != "quoted" && status != "inferred")
      throw core::InputError(where + ": status: expected quoted or inferred, found \"" + status + "\"");
    const std::string code = stacks.get(i, "model_code");
    if (!spec::model_code(code) || code == "auto")
      throw core::InputError(where + ": model_code: expected one of " + spec::model_code_names(", ") +
                             " but auto, found \"" + code + "\"");
    const std::string code_status = stacks.get(i, "model_code_status");
    if (code_status != "quoted" && code_status != "inferred")
      throw core::InputError(where + ": model_code_status: expected quoted or inferred, found \"" + code_status + "\"");
    const std::string torch = stacks.get(i, "torch");
    if (!spec::torch_generation(torch))
      throw core::InputError(where + ": torch: expected major.minor, found \"" + torch + "\"");
    for (long id : row_ranges(stacks.get(i, "rows"), where)) {
      if (listed.count(id))
        throw core::InputError(where + ": row " + std::to_string(id) + " is already listed on line " +
                               std::to_string(listed[id] + 2));
      listed[id] = i;
      auto it = index.find(id);
      if (it == index.end())
        throw core::InputError(where + ": row " + std::to_string(id) + " is not in " + csv);
      PublishedRow& row = rows[it->second];
      row["stack.attention"] = attention;
      row["stack.torch"] = torch;
      row["stack.compile"] = compile;
      row["stack.status"] = status;
      row["stack.model_code"] = code;
      row["stack.model_code_status"] = code_status;
    }
  }
  return rows;
}

std::map<std::string, RowCause> read_row_causes(const std::string& csv, const std::vector<PublishedRow>& rows)
{
  std::map<std::string, RowCause> out;
  const std::string path = (std::filesystem::path(csv).parent_path() / "causes.csv").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return out;
  std::map<std::string, std::string> source_of; // row id -> source id
  for (const PublishedRow& r : rows)
    source_of[r.at("row_id")] = r.count("source_id") ? r.at("source_id") : "";
  core::CsvTable t = core::CsvTable::parse(read_text_file(path), path);
  std::map<std::string, std::size_t> listed;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 2);
    RowCause c{t.get(i, "kind"), t.get(i, "cause"), t.get(i, "evidence")};
    if (c.kind != "mechanism" && c.kind != "data" && c.kind != "unknown")
      throw core::InputError(where + ": kind: expected mechanism, data or unknown, found \"" + c.kind + "\"");
    if (trim(c.cause).empty())
      throw core::InputError(where + ": cause: expected one line of cause, found an empty field");
    const std::string source = t.get(i, "source_id");
    for (long n : row_ranges(t.get(i, "rows"), where)) {
      const std::string id = std::to_string(n);
      auto it = source_of.find(id);
      if (it == source_of.end())
        throw core::InputError(where + ": row " + id + " is not in " + csv);
      if (it->second != source)
        throw core::InputError(where + ": source_id: row " + id + " is " + it->second + "'s, found \"" + source + "\"");
      if (listed.count(id))
        throw core::InputError(where + ": row " + id + " is already listed on line " + std::to_string(listed[id] + 2));
      listed[id] = i;
      out[id] = c;
    }
  }
  return out;
}

spec::SoftwareSpec software_of(const PublishedRow& row, const spec::MappingRules& rules)
{
  spec::SoftwareSpec sw;
  auto it = row.find("stack.attention");
  if (it == row.end()) {
    // Not in stacks.csv: today's stack, unstated; V100 and Turing GPUs have no FlashAttention kernels and the
    // PyTorch runs that used one say so (flash_attention_of).
    sw.attention =
        flash_attention_of(row, rule_of(row, rules)) ? spec::AttentionKernel::FLASH2 : spec::AttentionKernel::EAGER;
    return sw;
  }
  const std::optional<spec::AttentionKernel> kernel = spec::attention_kernel(it->second);
  if (!kernel) // read_published_rows checked it
    throw core::InternalError("software_of: row " + field(row, "row_id") + ": unknown attention \"" + it->second +
                              "\"");
  sw.attention = *kernel;
  sw.torch = row.at("stack.torch");
  sw.compile = row.at("stack.compile") == "true";
  sw.model_code = *spec::model_code(row.at("stack.model_code")); // read_published_rows checked it
  sw.stated = true;
  return sw;
}

} // namespace zerosim::validation
