// Being written (issue 4); see docs/ddp.md.
#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"

namespace zerosim::schedule::detail {

void build_ddp(Builder&)
{
  throw core::UnsupportedError("framework ddp: its schedule is being written (issue 4)");
}

} // namespace zerosim::schedule::detail
