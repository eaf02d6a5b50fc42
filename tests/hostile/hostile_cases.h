// The hostile-store cases: one table, each row a way to forge the victim
// checkpoint of the pristine store (victim.h) and what every command must
// then do. hostile_test.cc runs every command on every row.

#ifndef ROCKSDCP_TESTS_HOSTILE_HOSTILE_CASES_H_
#define ROCKSDCP_TESTS_HOSTILE_HOSTILE_CASES_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hostile/forge.h"

namespace rocksdcp::hostile {

// What a case forges with: the store's RocksDB, opened raw, and helpers
// that read the victim's values, forge them, and write them back.
class Forge {
 public:
  explicit Forge(RawStore& raw) : raw_(raw) {}

  RawStore& raw() { return raw_; }

  // ---- The victim's metadata ----
  std::string MetadataValue();
  FMetadata Metadata() { return ParseMetadata(MetadataValue()); }
  // Writes `value` as the victim's __metadata__; with `fix_checksum`, also
  // records its XXH3 in the victim's catalog entry, as a careful forger
  // would, so that the forgery reaches past the checksum.
  void PutMetadataValue(const std::string& value, bool fix_checksum = true);
  void PutMetadata(const FMetadata& m, bool fix_checksum = true) {
    PutMetadataValue(Encode(m), fix_checksum);
  }
  // The StorageInfo of `fqn` at `offset` (nullopt: a byte item) in `m`,
  // and writing it back into `m`.
  FInfo Info(FMetadata& m, const std::string& fqn, const Longs& offset);
  void SetInfo(FMetadata& m, const std::string& fqn, const Longs& offset,
               const FInfo& info);

  // ---- The catalog (the default column family) ----
  std::string CatalogValue(const std::string& id = "victim");
  FCatalog Catalog(const std::string& id = "victim") {
    return ParseCatalog(CatalogValue(id));
  }
  // Writes `value` at checkpoint/<key_id>.
  void PutCatalogValue(const std::string& key_id, const std::string& value);
  void PutCatalog(const FCatalog& c, const std::string& key_id = "victim") {
    PutCatalogValue(key_id, Encode(c));
  }

  // ---- Keys of the victim's column family ----
  std::string Value(const std::string& key);
  FPiece Piece(const std::string& key) { return ParsePiece(Value(key)); }
  void PutValue(const std::string& key, const std::string& value);
  void PutPiece(const std::string& key, const FPiece& p) {
    PutValue(key, Encode(p));
  }
  void Delete(const std::string& key);

  // Whether the case wrote the catalog itself (not only a checksum fix):
  // its catalog values then go into the seed corpus too.
  bool catalog_forged() const { return catalog_forged_; }

 private:
  RawStore& raw_;
  bool catalog_forged_ = false;
};

// Deterministic bytes that look like nothing.
std::string Garbage(size_t n, uint64_t seed);

// What each command must do, one letter per command:
//   0  exit 0: the case is harmless to it
//   1  exit 1 (failed, saying why)
//   3  exit 3 (verify: corrupted items found, and listed)
//   F  a clean failure: exit 1 or 3 (the C++ Load: 1)
//   D  ls only: exit 0, listing the store with the damaged entry marked
//      ("damaged" in its output)
//   *  any clean outcome: exit 0, 1 or 3
// Whatever the letter: no signal, at most 10 s, at most 256 MiB of RSS
// over the same command on the pristine store, a message on stderr that
// names the checkpoint or the problem when it fails, and the C++ Load
// never returns OK with bytes other than those saved (its exit 4).
//
// The commands: ls, info, verify (the whole store), dump (--npy of
// dump_fqn), export (--safetensors), load (the C++ Load into the victim's
// own state dict), mirror (the C++ Load into a state dict shaped after the
// metadata), and on copies of the store rm (the victim), keep (keep-last
// 1) and gc. After rm, keep and gc, the survivors must verify clean.
inline const std::vector<std::string> kCommands = {
    "ls",   "info",   "verify", "dump", "export",
    "load", "mirror", "rm",     "keep", "gc"};

struct HostileCase {
  std::string name;
  // "catalog", "metadata", "piece", "key" or "cf": the area's defaults
  // (hostile_cases.cc) apply, then `expect` overrides them.
  std::string area;
  std::string what;
  std::function<void(Forge&)> forge;
  // Overrides, e.g. "info=0 dump=0".
  std::string expect;
  std::string dump_fqn = "w";
  // A failing command's stderr must name the victim or one of these.
  std::vector<std::string> names = {};
  // Flush the forged values compressed (for values that compress well
  // but are large).
  bool compress = false;
  // Checkpoints that must verify clean after rm, after keep and after gc
  // (none: the store can't be verified, as with a catalog that can't be
  // scanned).
  std::vector<std::string> rm_survivors = {"before", "after"};
  std::vector<std::string> keep_survivors = {"after"};
  std::vector<std::string> gc_survivors = {"before", "after"};

  // The expectation letter of `command`.
  char Expect(const std::string& command) const;
};

const std::vector<HostileCase>& HostileCases();

}  // namespace rocksdcp::hostile

#endif  // ROCKSDCP_TESTS_HOSTILE_HOSTILE_CASES_H_
