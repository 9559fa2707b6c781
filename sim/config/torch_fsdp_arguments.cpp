#include "config/torch_fsdp_arguments.hpp"

#include "config/document.hpp"
#include "core/error.hpp"
#include "spec/kernel_spec.hpp"

#include <algorithm>
#include <sstream>

namespace zerosim::config {

const TorchFsdpVersion* TorchFsdpTable::for_torch(const std::string& torch) const
{
  const int want = spec::torch_generation(torch).value_or(-1);
  const TorchFsdpVersion* best = nullptr;
  int best_generation = -1;
  for (const auto& [v, entry] : versions) {
    const int g = spec::torch_generation(v).value_or(-1);
    if (g <= want && g > best_generation) {
      best = &entry;
      best_generation = g;
    }
  }
  return best;
}

std::string TorchFsdpTable::listed() const
{
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [v, entry] : versions)
    order.emplace_back(spec::torch_generation(v).value_or(-1), v);
  std::sort(order.begin(), order.end());
  std::string out;
  for (const auto& [g, v] : order)
    out += (out.empty() ? "" : ", ") + v;
  return out;
}

TorchFsdpTable read_torch_fsdp_table(const std::string& file)
{
  TorchFsdpTable t;
  t.file = file;
  const std::string HEADER = "version,release,origin,callable,argument,default,source";
  t.script_sha256 = read_data_table(
      file, "torch FSDP argument table", HEADER, [&](const std::string& where, const std::vector<std::string>& f) {
        if (!spec::torch_generation(f[0]))
          throw core::InputError(where + "expected a torch version major.minor (\"2.6\"), found \"" + f[0] + "\"");
        TorchFsdpVersion& v = t.versions[f[0]];
        if (v.version.empty()) {
          v.version = f[0];
          v.release = f[1];
          v.origin = f[2];
        } else if (v.release != f[1] || v.origin != f[2]) {
          throw core::InputError(where + "version " + f[0] + " is read from " + v.release + " (" + v.origin +
                                 ") on an earlier line, found " + f[1] + " (" + f[2] + ")");
        }
        if (f[3].empty() || f[4].empty())
          throw core::InputError(where + "expected a callable and an argument, found \"" + f[3] + "\" and \"" + f[4] +
                                 "\"");
        if (!v.arguments.emplace(TorchFsdpName{f[3], f[4]}, TorchFsdpArgument{f[5], f[6]}).second)
          throw core::InputError(where + f[3] + " " + f[4] + " of version " + f[0] + " is listed twice");
      });
  return t;
}

const TorchFsdpTable& torch_fsdp_table()
{
  static const TorchFsdpTable table = [] {
    const DataFile found = find_data_file("data/torch_fsdp_arguments.csv", ZEROSIM_DATA_DIR, "");
    if (found.file.empty())
      throw core::InputError("cannot find data/torch_fsdp_arguments.csv (looked in " + found.looked + ")");
    return read_torch_fsdp_table(found.file);
  }();
  return table;
}

void check_torch_fsdp_names(const TorchFsdpTable& table, const std::vector<TorchFsdpName>& used,
                            const std::string& torch, const std::string& what)
{
  const TorchFsdpVersion* v = table.for_torch(torch);
  if (!v)
    throw core::InputError(what + ": software.torch " + torch + " is older than every torch release whose FSDP " +
                           "arguments were read (" + table.listed() + "; " + table.file +
                           "): expected software.torch " + table.listed().substr(0, table.listed().find(',')) +
                           " or later");
  for (const TorchFsdpName& n : used)
    if (!v->has(n))
      throw core::InputError(what + ": " + n.first + "." + n.second + " does not exist in torch " + v->release +
                             ", the release read for software.torch " + torch + " (the nearest at or below it of " +
                             table.listed() + "; " + table.file + "): choose a software.torch that has it");
}

} // namespace zerosim::config
