// Tests of the ddp schedule (docs/ddp.md). Being written (issue 4).
#include "schedule/zero_schedule.hpp"

#include <doctest/doctest.h>
