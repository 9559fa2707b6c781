#include "schedule/task_graph.hpp"

namespace zerosim::schedule {

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
