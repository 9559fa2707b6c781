// Being written (issue 4); see docs/fsdp.md.
#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"

namespace zerosim::schedule::detail {

void build_fsdp(Builder&)
{
  throw core::UnsupportedError("framework fsdp: its schedule is being written (issue 4)");
}

} // namespace zerosim::schedule::detail
