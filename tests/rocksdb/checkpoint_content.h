// Test checkpoints whose every byte is a pure function of (id, generation),
// so that whoever finds one in a store knows what it must hold, and the
// store-wide checks that go with them. The crash harness (crash_child.cc
// and crash_test.cc, in two processes) and the stress test use them.

#ifndef ROCKSDCP_TESTS_ROCKSDB_CHECKPOINT_CONTENT_H_
#define ROCKSDCP_TESTS_ROCKSDB_CHECKPOINT_CONTENT_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {

// The fqn of the byte item naming the content's (id, generation): a
// checker reads it first, then knows every other byte.
inline constexpr char kContentTagFqn[] = "content_tag";

struct GeneratedContent {
  std::vector<OwnedTensor> tensors;  // The storage of the dict's views.
  StateDict dict;
};

// Checkpoint `id` at generation `gen` (>= 1): a bf16 matrix and a float32
// tensor sharded into two boxes, each of many pieces at
// ContentWriterOptions(), both valued as trained weights are (so that
// they compress), a float32 vector, a 0-d int64, opaque bytes of several
// pieces, and the tag. Shapes and lengths vary with (id, gen), so an
// overwrite changes the layout too.
GeneratedContent MakeContent(const std::string& id, uint64_t gen);

// Writer options that cut MakeContent into many pieces spread over several
// staging SST files, written by two threads; an even `gen` is saved with
// compressed pieces, an odd one without, so that every store these tests
// make mixes both, and incremental saves reference across them.
RocksDBWriterOptions ContentWriterOptions(uint64_t gen);

// Saves MakeContent(id, gen) as `id` into `store`.
Status SaveContent(Store& store, const std::string& id, uint64_t gen,
                   bool overwrite);

// Loads checkpoint `id` from `store`: its tag first, then all of it, and
// compares every byte with MakeContent(id, tag's gen). Returns that gen;
// the load's error as it came (NotFound when there is no such checkpoint);
// or Internal naming the checkpoint, gen and item whose bytes differ.
Result<uint64_t> LoadAndVerifyContent(Store& store, const std::string& id);

// The column families RocksDB's MANIFEST lists for the (closed) store at
// `path`, "default" among them; a failure to read them fails the test.
std::set<std::string> ColumnFamiliesOnDisk(const std::string& path);

// The names in the store's staging directory: none once GC has run and no
// writer is running.
std::set<std::string> StagingEntries(const std::string& path);

// The environment variable `name` as a number, or `fallback` if unset.
uint64_t EnvU64(const char* name, uint64_t fallback);

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_CHECKPOINT_CONTENT_H_
