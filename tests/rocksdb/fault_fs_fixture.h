// FaultFsStoreTest: a store on a FaultFs (fault_fs.h) in a fresh temp
// directory, checkpoints whose content is a function of a seed, and the
// checks that every test makes after a fault or a power cut.

#ifndef ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_FIXTURE_H_
#define ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rocksdb/fault_fs.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {

// A store on a FaultFs in a fresh temp directory.
class FaultFsStoreTest : public ::testing::Test {
 public:
  // What may be in the store after a fault or power cut: for each id, the
  // seeds it may hold; nullopt: absent is allowed too.
  using Expected = std::map<std::string, std::vector<std::optional<uint64_t>>>;

 protected:
  FaultFsStoreTest();

  std::string store_path() const { return dir_.Sub("store"); }
  Status OpenStore(const StoreOptions& options = {});
  // Closes the store. With the power off, nothing it writes reaches the
  // disk: that is how a test abandons a store at a power cut.
  void CloseStore() { store_.reset(); }

  // Saves ExampleStateDict(seed) as `id` in small pieces, so several per
  // item. With one writer thread (the default) the operations are the same
  // each run; with more, each writes a staging file of its own.
  // With `base`, incrementally against that checkpoint. With compressed_,
  // ExampleStateDict(seed, weights = true), its pieces compressed.
  Status SaveSeed(const std::string& id, uint64_t seed, bool overwrite,
                  int write_threads = 1, const std::string& base = "");
  // Loads `id` into *out (shaped as EmptyExampleStateDict).
  Status LoadInto(const std::string& id, ExampleState* out);
  // `id` loads as ExampleStateDict(seed) for one of `seeds`.
  ::testing::AssertionResult LoadsAsOneOf(const std::string& id,
                                          const std::vector<uint64_t>& seeds);

  // With the store open: the catalog lists only ids of `expected`, each
  // loads bit-exact as one of its allowed seeds, an id that must exist
  // does, and one that must not is NotFound. Then GC leaves no orphan
  // column family (none that no checkpoint holds or references) and no
  // staging file, and a fresh save and load work.
  ::testing::AssertionResult CheckStore(const Expected& expected);

  // Set by a test's constructor: every SaveSeed compresses.
  bool compressed_ = false;
  ScopedTempDir dir_;
  std::shared_ptr<FaultFs> fs_;
  std::unique_ptr<Store> store_;
};

// The number of sweep points to skip between two tested ones: 1 when the
// environment sets ROCKSDCP_FULL_FAULT_SWEEP=1 (every operation; minutes),
// else enough to test about `points` of `total` (a quarter of that under a
// sanitizer, kSanitized).
uint64_t SweepStride(uint64_t total, uint64_t points);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_FIXTURE_H_
