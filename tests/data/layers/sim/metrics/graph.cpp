// A fixture for the layer check: metrics including the schedule, downward but forbidden.
#include "schedule/step_graph.hpp"
