// RegisterToolsBenchmarks when the tools are not built
// (-DROCKSDCP_BUILD_TOOLS=OFF): --tools is refused, so there is nothing to
// register.

#include "bench_util.h"

namespace rocksdcp::bench {

void RegisterToolsBenchmarks(const Config&, int) {}

}  // namespace rocksdcp::bench
