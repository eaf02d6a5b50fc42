// A fixture owning a fresh Store in a fresh temp dir, with helpers that
// save and load through the real driver, and tensors that own their bytes.

#ifndef ROCKSDCP_TESTS_ROCKSDB_STORE_FIXTURE_H_
#define ROCKSDCP_TESTS_ROCKSDB_STORE_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rocksdcp/rocksdcp.h"
#include "test_util.h"
#include "weights.h"

namespace rocksdcp::testing {

// The ids of the committed checkpoints of the store in `dir`, oldest
// first, through a read-only open of it; empty, with a test failure, if
// the store cannot be opened or listed.
std::vector<std::string> CheckpointIds(const std::string& dir);

// Flips one byte (xor 0x5a) at `offset` of the file at `path`, as a disk
// corrupting it would.
void FlipByte(const std::string& path, int64_t offset);

// Drops every regular file under `path` (a file or a directory) from the
// page cache; their pages must be clean (saved and synced), so that the
// next read of them comes from the disk.
void DropFromPageCache(const std::string& path);

// A small state dict whose every byte is a function of `seed`: a bf16
// matrix of several pieces (at max_piece_bytes = 4096), a float tensor, a
// 0-d int64 and a byte item. The tensors' storage lives in `tensors`.
// With `weights`, the matrix holds values drawn as trained weights are
// (weights.h), which compress, instead of random bits.
struct ExampleState {
  std::vector<OwnedTensor> tensors;
  StateDict dict;
};
ExampleState ExampleStateDict(uint64_t seed, bool weights = false);
// The same shapes, zero-filled, to load into.
ExampleState EmptyExampleStateDict();
// True if `loaded` holds exactly ExampleStateDict(seed, weights).
::testing::AssertionResult IsExampleState(const ExampleState& loaded,
                                          uint64_t seed, bool weights = false);

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override;

  std::string store_path() const { return dir_.Sub("store"); }
  // (Re)opens store_ at store_path().
  void OpenStore(const StoreOptions& options = {});
  void CloseStore() { store_.reset(); }

  Result<Metadata> SaveDict(const StateDict& sd, const std::string& id,
                            const RocksDBWriterOptions& options = {});
  Status LoadDict(StateDict* sd, const std::string& id,
                  bool allow_partial_load = false);

  // Store::Verify of the whole store finds every checkpoint sound.
  void ExpectVerifies();

  // FailedPrecondition if there is no open store (OpenStore failed).
  Status NeedStore() const;
  // The .sst files under the store directory (not staging), largest first.
  std::vector<std::string> SstFiles() const;

  // The options of LoadDict's readers.
  RocksDBReaderOptions load_options_;

  ScopedTempDir dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_STORE_FIXTURE_H_
