// A fixture for the layer check: metrics including the schedule, downward but forbidden.
#include "schedule/zero_schedule.hpp"
