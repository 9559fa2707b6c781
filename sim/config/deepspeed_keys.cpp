#include "config/deepspeed_keys.hpp"

#include "config/document.hpp"
#include "core/error.hpp"

#include <sstream>

namespace zerosim::config {
bool DeepSpeedVersionKeys::describes_children(const std::string& block) const
{
  const auto it = keys.upper_bound(block + ".");
  return it != keys.end() && it->first.starts_with(block + ".");
}

const DeepSpeedVersionKeys& DeepSpeedKeyTable::at(const std::string& version) const
{
  const auto it = versions.find(version);
  if (it == versions.end())
    throw core::InputError(file + ": no keys of DeepSpeed " + version +
                           " (regenerate it with tools/deepspeed_config_keys.py)");
  return it->second;
}

DeepSpeedKeyTable read_deepspeed_key_table(const std::string& file)
{
  bool ok = false;
  const std::string text = read_text(file, ok);
  if (!ok)
    throw core::InputError(file + ": cannot open the DeepSpeed key table");
  DeepSpeedKeyTable t;
  t.file = file;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool header = false;
  const std::string HEADER = "version,tag,commit,key,default,note,source";
  const std::string SHA = "sha256 ";
  std::vector<std::string> f;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = file + ":" + std::to_string(n) + ": ";
    if (line.starts_with("#")) {
      if (const auto at = line.find(SHA); at != std::string::npos)
        t.script_sha256 = line.substr(at + SHA.size(), 64);
      continue;
    }
    if (!header) {
      if (line != HEADER)
        throw core::InputError(where + "expected the header \"" + HEADER + "\", found \"" + line + "\"");
      header = true;
      continue;
    }
    if (!split_csv_line(line, f) || f.size() != 7)
      throw core::InputError(where + "expected 7 comma-separated fields (" + HEADER + "), found \"" + line + "\"");
    DeepSpeedVersionKeys& v = t.versions[f[0]];
    if (v.version.empty()) {
      v.version = f[0];
      v.tag = f[1];
      v.commit = f[2];
    } else if (v.tag != f[1] || v.commit != f[2]) {
      throw core::InputError(where + "version " + f[0] + " is read at " + v.tag + " " + v.commit +
                             " on an earlier line, found " + f[1] + " " + f[2]);
    }
    if (f[3].empty())
      throw core::InputError(where + "expected a key, found an empty field");
    if (!v.keys.emplace(f[3], DeepSpeedKey{f[4], f[5], f[6]}).second)
      throw core::InputError(where + "key " + f[3] + " of version " + f[0] + " is listed twice");
  }
  if (!header)
    throw core::InputError(file + ": expected the header \"" + HEADER + "\", found no line");
  return t;
}

const DeepSpeedKeyTable& deepspeed_key_table()
{
  static const DeepSpeedKeyTable table = [] {
    const DataFile found = find_data_file("data/deepspeed_config_keys.csv", ZEROSIM_DATA_DIR, "");
    if (found.file.empty())
      throw core::InputError("cannot find data/deepspeed_config_keys.csv (looked in " + found.looked + ")");
    return read_deepspeed_key_table(found.file);
  }();
  return table;
}

} // namespace zerosim::config
