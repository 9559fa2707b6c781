// The table of ordering policies (docs/schedule.md "Units and ordering policies").
#include "schedule/step_units.hpp"

#include "core/error.hpp"

#include <map>
#include <utility>

namespace zerosim::schedule {

namespace {

void sequential(StepUnits& u, const StepShape& shape)
{
  u.prologue();
  for (int mb = 0; mb < shape.micro_batches; ++mb) {
    for (int c = 0; c < shape.chunks; ++c)
      u.forward(mb, c);
    for (int c = shape.chunks - 1; c >= 0; --c)
      u.backward(mb, c);
  }
  u.epilogue();
}

std::map<std::string, OrderingPolicy>& table()
{
  static std::map<std::string, OrderingPolicy> policies{{SEQUENTIAL_POLICY, sequential}};
  return policies;
}

} // namespace

void register_ordering_policy(const std::string& name, OrderingPolicy policy)
{
  if (!policy)
    throw core::InternalError("schedule: ordering policy \"" + name + "\" registered without a function");
  if (!table().emplace(name, std::move(policy)).second)
    throw core::InternalError("schedule: ordering policy \"" + name + "\" is registered twice");
}

std::vector<std::string> ordering_policies()
{
  std::vector<std::string> names;
  for (const auto& [name, policy] : table())
    names.push_back(name);
  return names;
}

void compose_step(StepUnits& units, const StepShape& shape, const std::string& policy)
{
  if (shape.micro_batches < 1 || shape.chunks < 1)
    throw core::InternalError("schedule: a step of " + std::to_string(shape.micro_batches) + " micro-batches and " +
                              std::to_string(shape.chunks) + " chunks");
  const auto it = table().find(policy);
  if (it == table().end())
    throw core::InternalError("schedule: no ordering policy \"" + policy + "\" is registered");
  it->second(units, shape);
}

} // namespace zerosim::schedule
