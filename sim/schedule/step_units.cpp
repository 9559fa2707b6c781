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

/// DeepSpeed's TrainSchedule.steps() for stage s of P over m micro-batches (pipe/schedule.py:189-289 at 0.7.0,
/// docs/pipeline-parallel.md §3): step k is a forward slot when k and s have the same parity; its micro-batch is
/// (k - s) / 2 for a forward slot and (k - 2P + 1 + s) / 2 for a backward one, valid when in [0, m). The sends of a
/// slot are those of the previous slot's micro-batch (the previous step of this stage).
void one_f_one_b(StepUnits& u, const StepShape& shape)
{
  const int m = shape.micro_batches, P = shape.stages, s = shape.stage;
  auto micro_batch = [&](int step, bool forward) {
    const int x = forward ? step - s : step - 2 * P + 1 + s;
    return x >= 0 && x % 2 == 0 && x / 2 < m ? x / 2 : -1;
  };
  u.prologue();
  int previous = -1; // the previous step's micro-batch
  for (int step = 0; step < 2 * (m + P - 1); ++step) {
    const bool forward = (step % 2) == (s % 2);
    const int i = micro_batch(step, forward);
    if (forward) {
      if (i >= 0 && s > 0)
        u.recv_activation(i);
      if (previous >= 0 && s > 0)
        u.send_grad(previous);
      if (i >= 0)
        u.forward(i, 0);
    } else {
      if (previous >= 0 && s < P - 1)
        u.send_activation(previous);
      if (i >= 0 && s < P - 1)
        u.recv_grad(i);
      if (i >= 0)
        u.backward(i, 0);
    }
    previous = i;
  }
  u.epilogue();
}

void gpipe(StepUnits& u, const StepShape& shape)
{
  const int m = shape.micro_batches, P = shape.stages, s = shape.stage;
  u.prologue();
  for (int i = 0; i < m; ++i) {
    if (s > 0)
      u.recv_activation(i);
    u.forward(i, 0);
    if (s < P - 1)
      u.send_activation(i);
  }
  for (int i = 0; i < m; ++i) {
    if (s < P - 1)
      u.recv_grad(i);
    u.backward(i, 0);
    if (s > 0)
      u.send_grad(i);
  }
  u.epilogue();
}

std::map<std::string, OrderingPolicy>& table()
{
  static std::map<std::string, OrderingPolicy> policies{
      {SEQUENTIAL_POLICY, sequential}, {ONE_F_ONE_B_POLICY, one_f_one_b}, {GPIPE_POLICY, gpipe}};
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
  if (shape.micro_batches < 1 || shape.chunks < 1 || shape.stages < 1 || shape.stage < 0 || shape.stage >= shape.stages)
    throw core::InternalError("schedule: a step of " + std::to_string(shape.micro_batches) + " micro-batches and " +
                              std::to_string(shape.chunks) + " chunks at stage " + std::to_string(shape.stage) +
                              " of " + std::to_string(shape.stages));
  const auto it = table().find(policy);
  if (it == table().end())
    throw core::InternalError("schedule: no ordering policy \"" + policy + "\" is registered");
  it->second(units, shape);
}

} // namespace zerosim::schedule
