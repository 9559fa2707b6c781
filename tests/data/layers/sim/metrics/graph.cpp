// A fixture for the layer check: metrics including the schedule, downward but forbidden.
#include "engine/timeline.hpp"
#include "schedule/zero_schedule.hpp"
