// Runs a program as a child process under the limits a command must keep
// on a hostile store, and measures what it took: exit code or signal,
// wall time, peak RSS (the child's ru_maxrss, from wait4), stdout and
// stderr.
//
// Limits: RLIMIT_CPU and, unless the build uses a sanitizer (ASan can't
// start under RLIMIT_AS), RLIMIT_AS in the child; a wall-clock deadline
// after which the harness kills it (SIGKILL).

#ifndef ROCKSDCP_TESTS_HOSTILE_LIMITED_RUN_H_
#define ROCKSDCP_TESTS_HOSTILE_LIMITED_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rocksdcp::hostile {

// True in builds with ROCKSDCP_SANITIZE set.
bool SanitizerBuild();

struct Limits {
  // RLIMIT_AS in bytes; 0 sets none (and sanitizer builds never set it).
  uint64_t address_space = 0;
  // RLIMIT_CPU in seconds (soft; the hard limit is one more): SIGXCPU.
  uint64_t cpu_seconds = 10;
  // The harness kills the child (SIGKILL) after this long.
  double kill_after_seconds = 12;
};

struct RunOutcome {
  int exit_code = -1;   // When it exited.
  int signal = 0;       // When a signal ended it (SIGKILL: see killed).
  bool killed = false;  // The harness killed it at kill_after_seconds.
  double seconds = 0;
  uint64_t max_rss = 0;  // Bytes.
  std::string out;       // At most the first 1 MiB of each.
  std::string err;

  // "exit 1", "signal 6 (Aborted)", "killed after 12.0 s".
  std::string Describe() const;
};

// Runs argv[0] (a path) with argv, the environment plus `env` ("K=V"),
// plus MALLOC_ARENA_MAX=2: glibc reserves 64 MiB of address space per
// malloc arena, up to 8 per core, as threads contend, so without a cap a
// command's address space grows with the headroom RLIMIT_AS leaves it
// (until a thread's stack can't be mapped) rather than with what it
// allocates.
RunOutcome RunLimited(const std::vector<std::string>& argv,
                      const Limits& limits,
                      const std::vector<std::string>& env = {});

// The smallest RLIMIT_AS, to `step` bytes, under which `argv` exits 0
// three times in a row, by bisection between `low` and `high`; 0 if it
// fails even at `high`.
uint64_t SmallestWorkingAddressSpace(const std::vector<std::string>& argv,
                                     uint64_t low, uint64_t high,
                                     uint64_t step);

}  // namespace rocksdcp::hostile

#endif  // ROCKSDCP_TESTS_HOSTILE_LIMITED_RUN_H_
