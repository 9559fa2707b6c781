// Tests of the fsdp schedule (docs/fsdp.md). Being written (issue 4).
#include "schedule/zero_schedule.hpp"

#include <doctest/doctest.h>
