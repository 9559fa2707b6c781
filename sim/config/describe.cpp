// `zerosim describe [model|node|scenario|deepspeed|fsdp|ddp]`: printed from the same schema tables the readers
// accept keys from (schema.cpp), so the description cannot drift from what is read.
#include "config/scenario_loader.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"

#include <set>
#include <sstream>

namespace zerosim::config {
namespace {

std::string use_text(const KeyDoc& k)
{
  switch (k.use) {
  case KeyUse::MODELLED:
    return "";
  case KeyUse::IGNORED:
    return " [accepted, ignored: cannot change time or memory]";
  case KeyUse::NOT_YET:
    return k.default_text == "none" ? " [not yet: refused with exit 2]"
                                    : " [not yet: refused with exit 2 unless " + k.default_text + "]";
  case KeyUse::NOT_MODELLED:
    break;
  }
  return " [accepted, not modelled: named in warnings]";
}

void print(std::ostringstream& out, const Schema& s, int indent, std::set<const Schema*>& expanded)
{
  for (const KeyDoc& k : s.keys) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    out << pad << k.key << ": " << k.type << "; default: " << k.default_text << "\n"
        << pad << "    " << k.description << use_text(k) << "\n";
    if (k.child) {
      if (expanded.count(k.child)) {
        out << pad << "    (keys as in " << k.child->name << " above)\n";
      } else {
        expanded.insert(k.child);
        print(out, *k.child, indent + 1, expanded);
      }
    }
  }
}

} // namespace

std::string describe(const std::string& what)
{
  const Schema* s = nullptr;
  if (what == "model")
    s = &model_schema();
  else if (what == "node")
    s = &node_schema();
  else if (what == "scenario" || what.empty())
    s = &scenario_schema();
  else if (what == "deepspeed")
    s = &deepspeed_schema();
  else if (what == "fsdp")
    s = &fsdp_schema();
  else if (what == "ddp")
    s = &ddp_schema();
  else
    throw core::InputError("describe " + what + ": expected one of model, node, scenario, deepspeed, fsdp, ddp");
  std::ostringstream out;
  out << "# " << s->name
      << " file keys (units: bytes B..TiB, bandwidth B/s..TiB/s or b/s..Tb/s, Gbps, compute rate "
         "FLOPS..PFLOPS, time ns..s; docs/config.md)\n";
  std::set<const Schema*> expanded{s};
  print(out, *s, 0, expanded);
  return out.str();
}

} // namespace zerosim::config
