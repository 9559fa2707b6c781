// A fixture for the layer check (tests/CMakeLists.txt): the engine including the report, a floor above it.
#include "core/error.hpp"
#include "report/run_report.hpp"
