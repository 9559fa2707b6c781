// A fixture for the layer check: an include of the folder's own headers is allowed.
#include "core/error.hpp"
