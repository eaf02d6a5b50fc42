// Ranks as threads, for tests of multi-rank saves and loads. Part of
// rocksdcp::testing.

#ifndef ROCKSDCP_TESTING_RANKS_H_
#define ROCKSDCP_TESTING_RANKS_H_

#include <functional>

#include "rocksdcp/collective.h"

namespace rocksdcp::testing {

// Runs `body(rank, collective)` on one thread per rank of a fresh
// ThreadCollective group of `world_size`, whose coordinator is
// `coordinator`, and joins them.
void RunRanks(int world_size, int coordinator,
              const std::function<void(int, Collective&)>& body);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTING_RANKS_H_
