// The library version, for tools' --version and checkpoint headers.
#pragma once

namespace pdist {
const char* EngineVersion();
}
