#include "spec/task_graph.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>

namespace zerosim::spec {

namespace {

/// "mb<k>.rest" with k >= first -> "mb<k + shift>.rest"; any other name unchanged.
void shift_name(std::string& name, int first, int shift)
{
  if (name.size() < 4 || name.compare(0, 2, "mb") != 0)
    return;
  std::size_t i = 2;
  int k = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) != 0)
    k = 10 * k + (name[i++] - '0');
  if (i == 2 || i >= name.size() || name[i] != '.' || k < first)
    return;
  name = "mb" + std::to_string(k + shift) + name.substr(i);
}

} // namespace

void shift_micro_steps(TaskGraph& g, int first, int shift)
{
  for (Task& t : g.tasks) {
    if (t.micro_step >= first)
      t.micro_step += shift;
    shift_name(t.name, first, shift);
  }
  for (Buffer& b : g.buffers)
    shift_name(b.name, first, shift);
  g.micro_steps += shift;
  g.reused_micro_steps += shift;
}

bool same_communications(const TaskGraph& a, const TaskGraph& b)
{
  if (a.micro_steps != b.micro_steps || a.reused_micro_steps != b.reused_micro_steps || a.dp != b.dp)
    return false;
  const auto communication = [](const Task& t) {
    return t.kind == TaskKind::COLLECTIVE || t.kind == TaskKind::SEND || t.kind == TaskKind::RECV;
  };
  auto x = a.tasks.begin();
  auto y = b.tasks.begin();
  while (true) {
    x = std::find_if(x, a.tasks.end(), communication);
    y = std::find_if(y, b.tasks.end(), communication);
    if (x == a.tasks.end() || y == b.tasks.end())
      return x == a.tasks.end() && y == b.tasks.end();
    if (std::tie(x->kind, x->phase, x->stream, x->micro_step, x->collective, x->group, x->group_size, x->bytes) !=
        std::tie(y->kind, y->phase, y->stream, y->micro_step, y->collective, y->group, y->group_size, y->bytes))
      return false;
    if (x->kind != TaskKind::COLLECTIVE && x->peer - a.rank != y->peer - b.rank)
      return false;
    ++x;
    ++y;
  }
}

const char* to_string(CommGroup g)
{
  switch (g) {
  case CommGroup::INTRA_NODE:
    return "intra_node";
  case CommGroup::INTER_NODE:
    return "inter_node";
  case CommGroup::TENSOR:
    return "tensor";
  case CommGroup::DATA_PARALLEL:
    return "data_parallel";
  case CommGroup::EMBEDDING:
    return "embedding";
  case CommGroup::WORLD:
    break;
  }
  return "world";
}

BufferId TaskGraph::add_buffer(Buffer b)
{
  buffers.push_back(std::move(b));
  return static_cast<BufferId>(buffers.size() - 1);
}

TaskId TaskGraph::add_task(Task t)
{
  tasks.push_back(std::move(t));
  return static_cast<TaskId>(tasks.size() - 1);
}

} // namespace zerosim::spec
