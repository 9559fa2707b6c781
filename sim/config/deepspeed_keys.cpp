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
  DeepSpeedKeyTable t;
  t.file = file;
  const std::string HEADER = "version,tag,commit,key,default,note,source";
  t.script_sha256 = read_data_table(
      file, "DeepSpeed key table", HEADER, [&](const std::string& where, const std::vector<std::string>& f) {
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
      });
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
