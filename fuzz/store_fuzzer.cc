// Fuzzes a whole checkpoint as rocksdcp reads it: libFuzzer mutates the
// values (and keys) of a small real checkpoint, the fuzzer writes them
// into a store, and the store is opened read-only, listed, verified and
// loaded twice (into the state dict it was saved from, and into one shaped
// after its metadata, as tests/hostile/victim.h's LoadAsModel and
// LoadAsMirror do). Every decoder of the other fuzzers runs here too, but
// behind the store's own logic: the catalog lookup, the checks of each
// piece against the metadata, the load planner and the copies into the
// state dict.
//
// Input: records, each
//
//   u16 key length, key, u32 value length, value      (little-endian)
//
// A key "checkpoint/<id>" goes into the catalog (the default column
// family); a key "\x7f<cf>\x7f<key>" goes into column family <cf> as <key>
// (a column family an incremental checkpoint references; at most 4); any
// other into checkpoint "victim"'s column family. Unless the input has its
// own catalog entry for "victim", the fuzzer writes one, recording the
// XXH3 of whatever "__metadata__" holds, so that mutated metadata is read
// rather than refused for its checksum, and referencing every other column
// family. A record cut
// short ends the input.
//
// The seeds (corpus/store/) are the pristine victim and each case of the
// hostile-store suite (tests/hostile/, ROCKSDCP_HOSTILE_CORPUS).
//
// The store lives in RocksDB's in-memory Env, one directory reused for
// every input. A crash, a sanitizer report, a leak, a timeout (-timeout)
// or an allocation over -malloc_limit_mb is a finding: whatever the store
// holds, a read of it must fail cleanly, in time and memory proportional
// to what it holds.

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/checksum.h"
#include "fuzz_util.h"
#include "hostile/victim.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/store_impl.h"

namespace rocksdcp::fuzz {
namespace {

constexpr char kStore[] = "/fuzz/store";
constexpr char kVictimCf[] = "victim";

constexpr size_t kMaxOtherCfs = 4;

struct Records {
  std::vector<std::pair<std::string, std::string>> catalog;
  std::vector<std::pair<std::string, std::string>> checkpoint;
  // Other column families' records, by name.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>>
      others;
};

Records Parse(const uint8_t* data, size_t size) {
  Records r;
  size_t at = 0;
  auto take = [&](size_t n, std::string* out) {
    if (size - at < n) return false;
    if (out != nullptr)
      out->assign(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return true;
  };
  while (at < size) {
    std::string len;
    if (!take(2, &len)) break;
    const size_t klen = static_cast<uint8_t>(len[0]) |
                        (size_t{static_cast<uint8_t>(len[1])} << 8);
    std::string key;
    if (!take(klen, &key) || !take(4, &len)) break;
    size_t vlen = 0;
    for (int i = 0; i < 4; ++i) {
      vlen |= size_t{static_cast<uint8_t>(len[i])} << (8 * i);
    }
    std::string value;
    if (!take(vlen, &value)) break;
    const size_t end = key.size() > 1 && key[0] == '\x7f' ? key.find('\x7f', 1)
                                                          : std::string::npos;
    if (end != std::string::npos) {
      std::string cf = key.substr(1, end - 1);
      if (cf.empty() || cf == kVictimCf ||
          cf == rocksdb::kDefaultColumnFamilyName ||
          (r.others.count(cf) == 0 && r.others.size() == kMaxOtherCfs)) {
        continue;
      }
      r.others[cf].emplace_back(key.substr(end + 1), std::move(value));
    } else if (key.rfind(keys::kCatalogPrefix, 0) == 0) {
      r.catalog.emplace_back(std::move(key), std::move(value));
    } else {
      r.checkpoint.emplace_back(std::move(key), std::move(value));
    }
  }
  return r;
}

rocksdb::Env* MemEnv() {
  static rocksdb::Env* env = rocksdb::NewMemEnv(rocksdb::Env::Default());
  return env;
}

void Check(const rocksdb::Status& s) {
  if (!s.ok()) Fail(__FILE__, __LINE__, "RocksDB setup", s.ToString());
}

// Writes the records as a store at kStore, replacing what was there.
void WriteStore(const Records& r) {
  rocksdb::Options options;
  options.env = MemEnv();
  Check(rocksdb::DestroyDB(kStore, options));
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  const rocksdb::ColumnFamilyOptions cf(CheckpointColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kVictimCf, cf}};
  for (const auto& [name, records] : r.others)
    descriptors.push_back({name, cf});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  Check(rocksdb::DB::Open(options, kStore, descriptors, &handles, &raw));
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteBatch batch;
  std::string metadata;
  for (const auto& [key, value] : r.checkpoint) {
    Check(batch.Put(handles[1], key, value));
    if (key == keys::kMetadataKey) metadata = value;
  }
  size_t h = 2;
  for (const auto& [name, records] : r.others) {
    for (const auto& [key, value] : records) {
      Check(batch.Put(handles[h], key, value));
    }
    ++h;
  }
  bool has_victim = false;
  for (const auto& [key, value] : r.catalog) {
    Check(batch.Put(handles[0], key, value));
    has_victim = has_victim || key == keys::CatalogKey(kVictimCf);
  }
  if (!has_victim) {
    CheckpointInfo entry;
    entry.id = kVictimCf;
    entry.column_family = kVictimCf;
    entry.created_unix_micros = 1;
    entry.world_size = 1;
    // No item count: a read-only open takes a checkpoint whose column
    // family holds no piece for one a writer is committing (a torn view)
    // when the entry counts items, and opens 32 times over.
    entry.items = 0;
    entry.metadata_checksum = format::Xxh3(metadata);
    for (const auto& [name, records] : r.others) {
      entry.referenced_column_families.push_back(name);
    }
    Check(batch.Put(handles[0], keys::CatalogKey(kVictimCf),
                    format::EncodeCatalogEntry(entry)));
  }
  Check(db->Write(rocksdb::WriteOptions(), &batch));
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    Check(db->DestroyColumnFamilyHandle(h));
  }
  Check(db->Close());
}

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  fuzz::WriteStore(fuzz::Parse(data, size));
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  auto store =
      StoreImpl::Open(fuzz::kStore, options, fuzz::MemEnv()->GetFileSystem());
  if (!store.ok()) return 0;
  (void)(*store)->List().ok();
  VerifyOptions verify;
  verify.max_problems = 100;
  (void)(*store)->Verify(verify).ok();
  std::string wrong;
  (void)hostile::LoadAsModel(**store, fuzz::kVictimCf, &wrong).ok();
  (void)hostile::LoadAsMirror(**store, fuzz::kVictimCf, &wrong).ok();
  return 0;
}
