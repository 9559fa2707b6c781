#include "schedule/task_graph.hpp"

namespace zerosim::schedule {

const char* to_string(CommGroup g)
{
  switch (g) {
  case CommGroup::INTRA_NODE:
    return "intra_node";
  case CommGroup::INTER_NODE:
    return "inter_node";
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

} // namespace zerosim::schedule
