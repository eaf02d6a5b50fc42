// Child processes for the store tests: rocksdcp_test_child (test_child.cc)
// run to completion, or kept holding a store's lock.

#ifndef ROCKSDCP_TESTS_ROCKSDB_CHILD_PROCESS_H_
#define ROCKSDCP_TESTS_ROCKSDB_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace rocksdcp::testing {

// Runs the test child with `args`; returns its exit code (-1 if it did not
// exit normally).
int RunChild(const std::vector<std::string>& args);

// Runs the test child with `args` as user `uid` (-1: this process's user),
// and returns its exit code (-1 if it did not exit normally) and what it
// printed on stdout.
struct ChildOutput {
  int exit_code = -1;
  std::string out;
};
ChildOutput RunChildAs(int uid, const std::vector<std::string>& args);

// The test child with `args`, running beside the test until it exits.
class BackgroundChild {
 public:
  explicit BackgroundChild(const std::vector<std::string>& args);
  ~BackgroundChild();  // Waits for it.
  BackgroundChild(const BackgroundChild&) = delete;
  BackgroundChild& operator=(const BackgroundChild&) = delete;

  // True once it has exited (without blocking); its exit code then.
  bool Exited();
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// A child process holding a store open read-write until destroyed.
class LockHolder {
 public:
  explicit LockHolder(const std::string& store);
  ~LockHolder();
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;

  // True once the child holds the lock (it said so).
  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  bool ready_ = false;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_CHILD_PROCESS_H_
