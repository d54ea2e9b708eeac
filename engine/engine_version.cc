// The library version.
#include "engine/engine_version.h"

namespace pdist {
const char* EngineVersion() { return "0.1.0"; }
}  // namespace pdist
