#include "spec/task_graph.hpp"

#include <cctype>
#include <string>

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
