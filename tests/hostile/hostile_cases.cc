#include "hostile/hostile_cases.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

#include "format/checksum.h"
#include "rocksdb/catalog_codec.h"

namespace rocksdcp::hostile {

namespace {

constexpr char kCf[] = "victim";
constexpr char kDefaultCf[] = "default";
constexpr char kMetadataKey[] = "__metadata__";

// The victim's piece keys (schema/README.md's grammar).
constexpr char kW0[] = "w@0,0#00000000";
constexpr char kW1[] = "w@0,0#00000001";
constexpr char kW2[] = "w@0,0#00000002";
constexpr char kB0[] = "b@0#00000000";
constexpr char kB20[] = "b2@0#00000000";
constexpr char kE0[] = "e@0,0#00000000";
constexpr char kSh4[] = "sharded@4,0#00000000";
constexpr char kOpt0[] = "opt#00000000";
constexpr char kOpt1[] = "opt#00000001";

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kGiB = uint64_t{1} << 30;

const Longs kW00 = std::vector<int64_t>{0, 0};
const Longs kSh40 = std::vector<int64_t>{4, 0};
const Longs kAt0 = std::vector<int64_t>{0};

// What each area's forgeries break, so what each command must do unless a
// case says otherwise.
const std::map<std::string, std::string>& AreaDefaults() {
  static const auto* kDefaults = new std::map<std::string, std::string>{
      // A damaged catalog entry: listed as damaged; the victim can't be
      // read; deleting it is the remedy; GC refuses to guess.
      {"catalog",
       "ls=D info=F verify=3 dump=F export=F load=F mirror=F rm=0 keep=0 "
       "gc=F"},
      // Metadata that can't be trusted: nothing of the victim can be read.
      {"metadata",
       "ls=0 info=F verify=3 dump=F export=F load=F mirror=F rm=0 keep=0 "
       "gc=0"},
      // A bad piece: the metadata reads, the item does not.
      {"piece",
       "ls=0 info=0 verify=3 dump=F export=F load=F mirror=F rm=0 keep=0 "
       "gc=0"},
      {"key",
       "ls=0 info=0 verify=3 dump=F export=F load=F mirror=F rm=0 keep=0 "
       "gc=0"},
      {"harmless",
       "ls=0 info=0 verify=0 dump=0 export=0 load=0 mirror=0 rm=0 keep=0 "
       "gc=0"},
  };
  return *kDefaults;
}

std::map<std::string, char> ParseExpect(const std::string& spec) {
  std::map<std::string, char> out;
  std::istringstream in(spec);
  for (std::string word; in >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq + 2 != word.size()) {
      ADD_FAILURE() << "bad expectation '" << word << "' in '" << spec << "'";
      continue;
    }
    out[word.substr(0, eq)] = word[eq + 1];
  }
  return out;
}

std::vector<int64_t> Ones(size_t n) { return std::vector<int64_t>(n, 1); }

}  // namespace

char HostileCase::Expect(const std::string& command) const {
  auto area_defaults = AreaDefaults().find(area);
  std::map<std::string, char> e;
  if (area_defaults != AreaDefaults().end()) {
    e = ParseExpect(area_defaults->second);
  } else {
    ADD_FAILURE() << name << ": unknown area " << area;
  }
  for (const auto& [cmd, letter] : ParseExpect(expect)) e[cmd] = letter;
  auto it = e.find(command);
  return it == e.end() ? '?' : it->second;
}

std::string Garbage(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  for (char& c : s) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x >> 32);
  }
  return s;
}

// ---- Forge ----

std::string Forge::MetadataValue() { return Value(kMetadataKey); }

void Forge::PutMetadataValue(const std::string& value, bool fix_checksum) {
  raw_.Put(kCf, kMetadataKey, value);
  if (!fix_checksum) return;
  FCatalog c = Catalog();
  c.metadata_xxh3 = Xxh3(value);
  raw_.Put(kDefaultCf, "checkpoint/victim", Encode(c));
}

FInfo Forge::Info(FMetadata& m, const std::string& fqn, const Longs& offset) {
  FStorage* s = m.Storage(fqn, offset);
  if (s == nullptr || !s->info) {
    ADD_FAILURE() << "forge: no storage entry for " << fqn;
    return {};
  }
  return ParseInfo(*s->info);
}

void Forge::SetInfo(FMetadata& m, const std::string& fqn, const Longs& offset,
                    const FInfo& info) {
  FStorage* s = m.Storage(fqn, offset);
  if (s == nullptr) {
    ADD_FAILURE() << "forge: no storage entry for " << fqn;
    return;
  }
  s->info = Encode(info);
}

std::string Forge::CatalogValue(const std::string& id) {
  auto v = raw_.Get(kDefaultCf, "checkpoint/" + id);
  if (!v) ADD_FAILURE() << "forge: no catalog entry for " << id;
  return v.value_or("");
}

void Forge::PutCatalogValue(const std::string& key_id,
                            const std::string& value) {
  catalog_forged_ = true;
  raw_.Put(kDefaultCf, "checkpoint/" + key_id, value);
}

std::string Forge::Value(const std::string& key) {
  auto v = raw_.Get(kCf, key);
  if (!v) ADD_FAILURE() << "forge: the victim has no key " << key;
  return v.value_or("");
}

void Forge::PutValue(const std::string& key, const std::string& value) {
  raw_.Put(kCf, key, value);
}

void Forge::Delete(const std::string& key) { raw_.Delete(kCf, key); }

// ---- The cases ----

namespace {

using F = Forge;

// Changes the victim's catalog entry.
std::function<void(F&)> EditCatalog(std::function<void(FCatalog&)> edit) {
  return [edit](F& f) {
    FCatalog c = f.Catalog();
    edit(c);
    f.PutCatalog(c);
  };
}

// Changes the victim's metadata (and fixes the checksum in its entry).
std::function<void(F&)> EditMetadata(std::function<void(F&, FMetadata&)> edit) {
  return [edit](F& f) {
    FMetadata m = f.Metadata();
    edit(f, m);
    f.PutMetadata(m);
  };
}

// Changes one StorageInfo of the victim's metadata.
std::function<void(F&)> EditInfo(std::string fqn, Longs offset,
                                 std::function<void(FInfo&)> edit) {
  return EditMetadata([=](F& f, FMetadata& m) {
    FInfo info = f.Info(m, fqn, offset);
    edit(info);
    f.SetInfo(m, fqn, offset, info);
  });
}

// Changes the tensor entry `fqn` of the victim's metadata.
std::function<void(F&)> EditTensor(std::string fqn,
                                   std::function<void(FTensor&)> edit) {
  return EditMetadata([=](F&, FMetadata& m) {
    FEntry* e = m.Entry(fqn);
    if (e == nullptr) {
      ADD_FAILURE() << "forge: no entry " << fqn;
      return;
    }
    edit(e->tensor);
  });
}

// Changes one piece of the victim.
std::function<void(F&)> EditPiece(std::string key,
                                  std::function<void(FPiece&)> edit) {
  return [=](F& f) {
    FPiece p = f.Piece(key);
    edit(p);
    f.PutPiece(key, p);
  };
}

// The victim's float16 'w' claiming to be [rows, cols], its one chunk in
// pieces of `piece_bytes` (flagged compressed if `compressed` is given).
std::function<void(F&)> ReshapeW(
    int64_t rows, int64_t cols, uint64_t piece_bytes,
    std::optional<bool> compressed = std::nullopt) {
  return EditMetadata([=](F& f, FMetadata& m) {
    FTensor& t = m.Entry("w")->tensor;
    t.size = std::vector<int64_t>{rows, cols};
    (*t.chunks)[0].sizes = t.size;
    FInfo i = f.Info(m, "w", kW00);
    i.length = 2ull * static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    i.piece_bytes = piece_bytes;
    i.num_pieces = static_cast<uint32_t>(i.length / piece_bytes);
    if (compressed) i.compressed = *compressed;
    f.SetInfo(m, "w", kW00, i);
  });
}

// Piece `key` of the victim's float16 'w' rewritten as a compressed piece
// (format_version 3), as a careful forger would, with zstd itself: its two
// byte planes stored as they are, both checksums right; then `edit`, after
// which the stored bytes' checksum is set right again.
std::function<void(F&)> CompressPiece(std::string key,
                                      std::function<void(FPiece&)> edit) {
  return [=](F& f) {
    FPiece p = f.Piece(key);
    const std::string payload = p.data.value_or("");
    const size_t n = payload.size() / 2;
    std::string planes(payload.size(), '\0');
    for (size_t i = 0; i < n; ++i) {
      planes[i] = payload[2 * i];
      planes[n + i] = payload[2 * i + 1];
    }
    p.format_version = 3;
    p.codec = 1;
    p.plane_bytes = std::vector<uint32_t>{static_cast<uint32_t>(n),
                                          static_cast<uint32_t>(n)};
    p.data = planes;
    p.payload_xxh3 =
        format::Xxh3(payload.data(), payload.size(), format::Xxh3(key));
    edit(p);
    p.Rehash(key);
    f.PutPiece(key, p);
  };
}

// A zstd frame of `n` zero bytes.
std::string ZeroFrame(size_t n) {
  const std::string zeros(n, '\0');
  std::string frame(ZSTD_compressBound(n), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), zeros.data(), n, 1));
  return frame;
}

// Replaces a value of the victim's column family by `make(old value)`.
std::function<void(F&)> EditValue(
    std::string key, std::function<std::string(const std::string&)> make) {
  return [=](F& f) { f.PutValue(key, make(f.Value(key))); };
}

// A catalog entry for id `key_id` (named so), naming column family `cf`.
std::function<void(F&)> AddCatalogEntry(std::string key_id, std::string cf) {
  return [=](F& f) {
    FCatalog c = f.Catalog();
    c.checkpoint_id = key_id;
    c.column_family = cf;
    f.PutCatalog(c, key_id);
  };
}

// Makes piece 1 of "w" a reference (an incremental save's) to column
// family `cf`, consistently: `cf` holds the genuine piece under the same
// key, the storage info of "w" (version 3) and the catalog entry (version
// 2) name it. Then `edit` spoils it: the reference, the storage info, and
// what `cf` holds (nullopt: `cf` is not created).
using RefEdit = std::function<void(F&, format::PieceRef&, format::StorageInfo&,
                                   std::optional<std::string>&)>;
std::function<void(F&)> ForgeReference(std::string cf, RefEdit edit) {
  return [=](F& f) {
    FMetadata m = f.Metadata();
    FStorage* s = m.Storage("w", kW00);
    if (s == nullptr || !s->info) {
      ADD_FAILURE() << "forge: no storage entry for w";
      return;
    }
    auto info = format::DecodeStorageInfo(*s->info, format::PieceHashes::kRead);
    if (!info.ok() || info->piece_hashes.size() != 3) {
      ADD_FAILURE() << "forge: the storage info of w has no piece hashes";
      return;
    }
    const uint64_t length = info->piece_bytes;
    info->sources = {cf};
    info->piece_sources = {0, 1, 0};
    format::PieceRef ref{cf, kW1, length, info->piece_hashes[1]};
    std::optional<std::string> target = f.Value(kW1);
    edit(f, ref, *info, target);
    s->info = format::EncodeStorageInfo(*info);
    f.PutMetadata(m);  // And its checksum in the catalog entry.
    FCatalog c = f.Catalog();
    c.format_version = 2;
    c.referenced_column_families = {cf};
    c.referenced_bytes = length;
    f.PutCatalog(c);
    if (target) {
      if (!f.raw().HasColumnFamily(cf)) f.raw().CreateColumnFamily(cf);
      f.raw().Put(cf, kW1, *target);
    }
    f.PutValue(kW1, format::EncodePieceRef(ref));
  };
}

std::vector<HostileCase> MakeCases() {
  std::vector<HostileCase> c;

  // ---- References (incremental saves) ----
  // A load reads a referenced piece where the storage info says it is,
  // without the reference value, so a damaged reference value alone costs
  // it nothing; verify checks the reference against the storage info.
  using Ref = format::PieceRef;
  using Info = format::StorageInfo;
  using Target = std::optional<std::string>;
  c.push_back({"ref_sound", "harmless",
               "piece 1 of 'w' is a sound reference to column family 'base'",
               ForgeReference("base", [](F&, Ref&, Info&, Target&) {})});
  c.push_back(
      {"ref_to_missing_column_family", "piece",
       "piece 1 of 'w' references column family 'ghost', which the "
       "store does not have",
       ForgeReference("ghost", [](F&, Ref&, Info&, Target& t) { t.reset(); })});
  c.push_back({"ref_to_reference", "piece",
               "piece 1 of 'w' references column family 'base', which holds "
               "another reference there",
               ForgeReference("base", [](F& f, Ref& r, Info&, Target& t) {
                 Ref again = r;
                 again.column_family = "victim";
                 t = format::EncodePieceRef(again);
                 // Enough bytes beside it for what the metadata claims.
                 f.raw().CreateColumnFamily("base");
                 f.raw().Put("base", kW0, f.Value(kW0));
               })});
  c.push_back({"ref_wrong_hash", "piece",
               "piece 1 of 'w' references its piece with a hash other than "
               "the storage info's",
               ForgeReference(
                   "base", [](F&, Ref& r, Info&, Target&) { r.hash.low ^= 1; }),
               "dump=0 export=0 load=0 mirror=0"});
  c.push_back({"ref_wrong_size", "piece",
               "piece 1 of 'w' references its piece with one byte more",
               ForgeReference(
                   "base", [](F&, Ref& r, Info&, Target&) { ++r.byte_length; }),
               "dump=0 export=0 load=0 mirror=0"});
  c.push_back({"ref_to_other_piece", "piece",
               "piece 1 of 'w' references column family 'base', which holds "
               "piece 0 of 'w' under piece 1's key",
               ForgeReference("base", [](F& f, Ref&, Info&, Target& t) {
                 t = f.Value(kW0);
               })});
  c.push_back(
      {"ref_names_other_column_family", "piece",
       "piece 1 of 'w' references column family 'before' while the "
       "storage info says 'base' holds it",
       ForgeReference("base", [](F&, Ref& r, Info&,
                                 Target&) { r.column_family = "before"; }),
       "dump=0 export=0 load=0 mirror=0"});
  // Issue #38: another checkpoint's column family holds a sound piece of
  // its own under the same key (same header, other bytes, its XXH3 bound
  // to the key): only the storage info's XXH3-128 tells the two apart.
  c.push_back({"ref_to_another_checkpoint", "piece",
               "piece 1 of 'w' references column family 'other', which "
               "holds a sound piece of another checkpoint under the same key",
               ForgeReference("other", [](F&, Ref&, Info&, Target& t) {
                 FPiece piece = ParsePiece(*t);
                 for (char& ch : *piece.data) ch = static_cast<char>(~ch);
                 piece.Rehash(kW1);
                 t = Encode(piece);
               })});
  c.push_back({"ref_to_catalog_column_family", "piece",
               "piece 1 of 'w' references the catalog's column family, "
               "'default', which holds the genuine piece under its key",
               ForgeReference("default", [](F&, Ref&, Info&, Target&) {})});
  // Storage info and reference agree on a hash the bytes do not have: a
  // load hashes a referenced piece's bytes, as verify does, and refuses it
  // (it can't tell these genuine bytes from another checkpoint's).
  c.push_back({"ref_both_hashes_wrong", "piece",
               "piece 1 of 'w' and its storage info record a hash its bytes "
               "do not have",
               ForgeReference("base",
                              [](F&, Ref& r, Info& i, Target&) {
                                r.hash.high ^= 1;
                                i.piece_hashes[1] = r.hash;
                              }),
               "info=0"});

  // ================= The catalog =================
  c.push_back({"catalog_garbage_value", "catalog",
               "the victim's catalog entry is 64 random bytes",
               [](F& f) { f.PutCatalogValue("victim", Garbage(64, 1)); }});
  c.push_back({"catalog_empty_value", "catalog",
               "the victim's catalog entry is empty",
               [](F& f) { f.PutCatalogValue("victim", ""); }});
  c.push_back({"catalog_truncated", "catalog",
               "the victim's catalog entry cut in half", [](F& f) {
                 const std::string v = f.CatalogValue();
                 f.PutCatalogValue("victim", v.substr(0, v.size() / 2));
               }});
  c.push_back({"catalog_wrong_identifier", "catalog",
               "the victim's catalog entry carries the metadata's identifier",
               [](F& f) {
                 f.PutCatalogValue("victim",
                                   WithIdentifier(f.CatalogValue(), "RDCM"));
               }});
  // Issue #38: a block RocksDB would decompress to 512 MiB, of a few KiB
  // stored. The store's file system refuses the file's block before RocksDB
  // reads it (src/rocksdb/vetting_fs.h): the catalog can't be scanned, so
  // ls, verify, rm, keep-last and gc fail, naming the file (docs/errors.md
  // has the remedy, with ldb).
  c.push_back({"catalog_entry_inflates_512mib",
               "catalog",
               "the victim's catalog entry followed by 512 MiB of zeros, "
               "flushed zstd-compressed into a block of a few KiB",
               [](F& f) {
                 f.PutCatalogValue(
                     "victim", f.CatalogValue() + std::string(512 << 20, '\0'));
               },
               "ls=F verify=F rm=F keep=F",
               "w",
               {"sst", "compress"},
               /*compress=*/true,
               {},
               {},
               {}});
  c.push_back({"catalog_future_format_version", "catalog",
               "the victim's catalog entry has format_version 3",
               EditCatalog([](FCatalog& e) { e.format_version = 3; })});
  c.push_back({"catalog_unknown_state", "catalog",
               "the victim's catalog entry has state 9",
               EditCatalog([](FCatalog& e) { e.state = 9; })});
  c.push_back({"catalog_names_other_id",
               "catalog",
               "the victim's catalog entry says it is checkpoint 'after'",
               EditCatalog([](FCatalog& e) { e.checkpoint_id = "after"; }),
               "",
               "w",
               {"after"}});
  c.push_back({"catalog_no_column_family", "catalog",
               "the victim's catalog entry names no column family",
               EditCatalog([](FCatalog& e) { e.column_family.reset(); })});
  // Decodes; only the column family is missing.
  c.push_back({"catalog_missing_column_family",
               "catalog",
               "the victim's catalog entry names column family 'no-such-cf'",
               EditCatalog([](FCatalog& e) { e.column_family = "no-such-cf"; }),
               "ls=0 gc=0",
               "w",
               {"no-such-cf"}});
  // rm may refuse or delete the entry alone, but must not touch the
  // catalog's own column family.
  c.push_back({"catalog_names_default_cf",
               "catalog",
               "the victim's catalog entry names the 'default' column family "
               "(the catalog)",
               EditCatalog([](FCatalog& e) { e.column_family = "default"; }),
               "ls=0 rm=* gc=0",
               "w",
               {"default"}});
  // Issue #6: two ids, one column family. The victim reads as a copy of
  // 'before'; deleting either would destroy the other.
  c.push_back({"catalog_alias_before_cf",
               "catalog",
               "the victim's catalog entry names 'before''s column family, "
               "with 'before''s metadata checksum",
               [](F& f) {
                 const FCatalog before = f.Catalog("before");
                 FCatalog e = f.Catalog();
                 e.column_family = before.column_family;
                 e.metadata_xxh3 = before.metadata_xxh3;
                 f.PutCatalog(e);
               },
               "ls=0 info=* export=* mirror=* rm=F keep=* gc=0",
               "w",
               {"before"},
               false,
               {"after"},
               {"after"},
               {"after"}});
  c.push_back({"catalog_twin_entry",
               "catalog",
               "a second id, 'twin', names the victim's column family",
               AddCatalogEntry("twin", "victim"),
               "ls=0 info=0 dump=0 export=0 load=0 mirror=0 rm=F keep=* gc=0",
               "w",
               {"twin"}});
  c.push_back({"catalog_absurd_numbers", "catalog",
               "the victim's catalog entry: 2^64-1 bytes and items, world "
               "size -2^31, created at -2^63 us",
               EditCatalog([](FCatalog& e) {
                 e.total_bytes = kU64Max;
                 e.num_items = kU64Max;
                 e.world_size = std::numeric_limits<int32_t>::min();
                 e.created_unix_micros = std::numeric_limits<int64_t>::min();
               }),
               "ls=0 info=0 dump=0 export=0 load=0 mirror=0 gc=0"});
  // Harmless: the newest by its created time, so keep-last 1 keeps it.
  c.push_back(
      {"catalog_created_far_future",
       "harmless",
       "the victim's catalog entry was created at 2^63-1 us",
       EditCatalog([](FCatalog& e) { e.created_unix_micros = kI64Max; }),
       "",
       "w",
       {},
       false,
       {"before", "after"},
       {"victim"}});
  c.push_back({"catalog_metadata_checksum_wrong", "metadata",
               "the victim's catalog entry records another metadata checksum",
               EditCatalog([](FCatalog& e) { e.metadata_xxh3 ^= 1; })});
  c.push_back({"catalog_key_control_char_id",
               "catalog",
               "an entry under key 'checkpoint/bad\\x01id' (an invalid id), "
               "naming a column family that does not exist",
               AddCatalogEntry("bad\x01id", "ghost"),
               "info=0 dump=0 export=0 load=0 mirror=0 gc=*",
               "w",
               {"bad", "ghost"}});
  c.push_back({"catalog_key_empty_id",
               "catalog",
               "a garbage value under key 'checkpoint/' (an empty id)",
               [](F& f) { f.PutCatalogValue("", Garbage(40, 2)); },
               "info=0 dump=0 export=0 load=0 mirror=0 gc=*",
               "w",
               {"checkpoint/", "''"}});
  c.push_back({"catalog_key_default_id",
               "catalog",
               "an entry for id 'default' (reserved) naming the 'default' "
               "column family",
               AddCatalogEntry("default", "default"),
               "info=0 dump=0 export=0 load=0 mirror=0 gc=*",
               "w",
               {"default"}});
  c.push_back({"catalog_huge_id",
               "catalog",
               "an entry whose id (and key) is 100,000 bytes, naming a column "
               "family that does not exist",
               AddCatalogEntry(std::string(100000, 'x'), "ghost"),
               "info=0 dump=0 export=0 load=0 mirror=0 gc=*",
               "w",
               {"xxxxxxxx", "ghost"}});
  c.push_back({"catalog_5000_aliases",
               "catalog",
               "5000 more ids, each naming the victim's column family",
               [](F& f) {
                 FCatalog e = f.Catalog();
                 for (int i = 0; i < 5000; ++i) {
                   const std::string id = "alias-" + std::to_string(i);
                   e.checkpoint_id = id;
                   f.PutCatalog(e, id);
                 }
               },
               "ls=0 info=0 dump=0 export=0 load=0 mirror=0 rm=F keep=* gc=0",
               "w",
               {"alias-"}});
  c.push_back({"catalog_victim_cf_dropped", "catalog",
               "the victim's column family is dropped; its entry remains",
               [](F& f) { f.raw().DropColumnFamily("victim"); }, "ls=0 gc=0"});

  // ================= The metadata =================
  c.push_back({"metadata_garbage", "metadata",
               "__metadata__ is 2000 random bytes (checksum fixed)",
               [](F& f) { f.PutMetadataValue(Garbage(2000, 3)); }});
  c.push_back({"metadata_garbage_stale_checksum", "metadata",
               "__metadata__ is 2000 random bytes (checksum not fixed)",
               [](F& f) { f.PutMetadataValue(Garbage(2000, 4), false); }});
  c.push_back({"metadata_empty_value", "metadata", "__metadata__ is empty",
               [](F& f) { f.PutMetadataValue(""); }});
  c.push_back(
      {"metadata_truncated", "metadata", "__metadata__ cut in half", [](F& f) {
         const std::string v = f.MetadataValue();
         f.PutMetadataValue(v.substr(0, v.size() / 2));
       }});
  c.push_back({"metadata_wrong_identifier", "metadata",
               "__metadata__ carries a piece's identifier", [](F& f) {
                 f.PutMetadataValue(WithIdentifier(f.MetadataValue(), "RDCP"));
               }});
  c.push_back({"metadata_is_catalog_entry", "metadata",
               "__metadata__ is a catalog entry with the metadata's identifier",
               [](F& f) {
                 f.PutMetadataValue(WithIdentifier(f.CatalogValue(), "RDCM"));
               }});
  c.push_back({"metadata_missing", "metadata", "__metadata__ is deleted",
               [](F& f) { f.Delete(kMetadataKey); }});
  // Issue #2: a byte item of 64 GiB. Its pieces are larger than any writer
  // writes (issue #38), so its storage info is refused alone: info lists
  // the item without a size, a dump of another item works, verify and the
  // loads of the whole checkpoint fail.
  c.push_back({"metadata_bytes_64gib_one_piece",
               "metadata",
               "byte item 'opt' claims 64 GiB in one piece",
               EditInfo("opt", std::nullopt,
                        [](FInfo& i) {
                          i.length = 64 * kGiB;
                          i.piece_bytes = 64 * kGiB;
                          i.num_pieces = 1;
                        }),
               "info=0 dump=0",
               "w",
               {"opt"}});
  // Byte item 'opt' claiming 64 GiB in 16,777,216 pieces of 4 KiB.
  auto claim_64gib = [](bool compressed) {
    return EditInfo("opt", std::nullopt, [compressed](FInfo& i) {
      i.length = 64 * kGiB;
      i.piece_bytes = 4096;
      i.num_pieces = 16777216;
      i.compressed = compressed;
    });
  };
  c.push_back({"metadata_bytes_64gib_small_pieces",
               "metadata",
               "byte item 'opt' claims 64 GiB in 16,777,216 pieces of 4 KiB",
               claim_64gib(false),
               "info=1 dump=1",
               "w",
               {"opt"}});
  c.push_back({"metadata_compressed_bytes_64gib",
               "metadata",
               "byte item 'opt' claims 64 GiB in pieces of 4 KiB, flagged "
               "compressed (so 2 MiB stored at the least)",
               claim_64gib(true),
               "info=1 dump=1",
               "w",
               {"opt"}});
  // Issue #38: the metadata in a compressed block of a few KiB that claims
  // 512 MiB. Checkpoint data is stored uncompressed: the block is refused
  // as it is read, before RocksDB decompresses it.
  c.push_back({"metadata_inflates_512mib",
               "metadata",
               "__metadata__ followed by 512 MiB of zeros, flushed "
               "zstd-compressed into a block of a few KiB",
               [](F& f) {
                 f.PutMetadataValue(f.MetadataValue() +
                                    std::string(512 << 20, '\0'));
               },
               "",
               "w",
               {"sst", "compress"},
               /*compress=*/true});
  // Issue #38: one compressed piece that claims 2 GiB, twice what any
  // writer writes, its zstd frame of 2 GiB of zeros stored (about 64 KiB):
  // refused from the storage info, before any piece is read.
  c.push_back({"metadata_bytes_2gib_compressed_piece",
               "metadata",
               "byte item 'opt' claims 2 GiB in one compressed piece, whose "
               "stored bytes are a zstd frame of 2 GiB of zeros",
               [](F& f) {
                 EditInfo("opt", std::nullopt, [](FInfo& i) {
                   i.length = 2 * kGiB;
                   i.piece_bytes = 2 * kGiB;
                   i.num_pieces = 1;
                   i.compressed = true;
                 })(f);
                 EditPiece(kOpt0, [](FPiece& p) {
                   const std::string frame = ZeroFrame(2 * kGiB);
                   p.format_version = 3;
                   p.codec = 1;
                   p.byte_length = 2 * kGiB;
                   p.plane_bytes = std::vector<uint32_t>{
                       static_cast<uint32_t>(frame.size())};
                   p.data = frame;
                   p.Rehash(kOpt0);
                 })(f);
               },
               "info=0 dump=0",
               "w",
               {"opt"}});
  c.push_back({"metadata_tensor_2gib_compressed_piece", "metadata",
               "tensor 'w' claims to be float16 [32768, 32768] in one "
               "compressed piece of 2 GiB",
               ReshapeW(32768, 32768, 2 * kGiB, /*compressed=*/true),
               "info=0"});
  // Issue #3: work bounded by what is stored, not by what is claimed.
  c.push_back({"metadata_bytes_4g_pieces",
               "metadata",
               "byte item 'opt' claims 2^32-1 pieces of 1 byte",
               EditInfo("opt", std::nullopt,
                        [](FInfo& i) {
                          i.length = 0xffffffffull;
                          i.piece_bytes = 1;
                          i.num_pieces = 0xffffffffu;
                        }),
               "info=1 dump=1",
               "w",
               {"opt"}});
  c.push_back(
      {"metadata_tensor_2g_pieces", "metadata",
       "tensor 'w' claims to be float16 [65536, 65535] in 2^31 pieces of "
       "4 bytes",
       ReshapeW(65536, 65535, 4), "info=1"});
  c.push_back(
      {"metadata_10m_chunks",
       "metadata",
       "0-d tensor 's' has 10,000,000 chunks (one word repeated, "
       "compressed to a few KiB)",
       EditTensor("s",
                  [](FTensor& t) { t.periodic_zero_d_chunks = 10'000'000; }),
       "info=* dump=*",
       "w",
       {"'s'", "\"s\""},
       /*compress=*/true});
  c.push_back(
      {"metadata_200k_chunk_refs", "metadata",
       "tensor 'w''s chunk vector references its one chunk table "
       "200,000 times",
       EditTensor("w", [](FTensor& t) { t.repeat_first_chunk = 200000; }),
       "info=*"});
  c.push_back(
      {"metadata_100k_entry_refs",
       "metadata",
       "the state_dict vector references the entry of 'b' 100,000 "
       "times",
       EditMetadata([](F&, FMetadata& m) { m.repeat_first_entry = 100000; }),
       "",
       "w",
       {"'b'", "\"b\""}});
  // Issue #4: whatever Load refuses, verify reports.
  c.push_back({"metadata_overlapping_chunks",
               "metadata",
               "tensor 'sharded' gets a third chunk, rows 2-5, overlapping "
               "both others (with its storage entry and a piece)",
               EditMetadata([](F& f, FMetadata& m) {
                 FTensor& t = m.Entry("sharded")->tensor;
                 t.chunks->push_back(
                     {std::vector<int64_t>{2, 0}, std::vector<int64_t>{4, 16}});
                 FStorage s = *m.Storage("sharded", kSh40);
                 s.index.offset = std::vector<int64_t>{2, 0};
                 s.index.index = 2;
                 m.storage->push_back(s);
                 FPiece p = f.Piece(kSh4);
                 p.chunk_offsets = std::vector<int64_t>{2, 0};
                 p.Rehash("sharded@2,0#00000000");
                 f.PutPiece("sharded@2,0#00000000", p);
               }),
               "info=0",
               "sharded",
               {"sharded"}});
  c.push_back({"metadata_chunk_hole",
               "metadata",
               "tensor 'sharded''s second chunk shrinks to rows 4-6, leaving "
               "row 7 in no chunk (storage and piece shrunk to match)",
               EditMetadata([](F& f, FMetadata& m) {
                 (*m.Entry("sharded")->tensor.chunks)[1].sizes =
                     std::vector<int64_t>{3, 16};
                 FInfo i = f.Info(m, "sharded", kSh40);
                 i.length = 3 * 16 * 4;
                 f.SetInfo(m, "sharded", kSh40, i);
                 FPiece p = f.Piece(kSh4);
                 p.chunk_sizes = std::vector<int64_t>{3, 16};
                 p.byte_length = 192;
                 p.data->resize(192);
                 p.Rehash(kSh4);
                 f.PutPiece(kSh4, p);
               }),
               "info=0",
               "sharded",
               {"sharded"}});
  c.push_back({"metadata_chunk_outside_tensor",
               "metadata",
               "tensor 'sharded''s second chunk starts at row 6 of 8, with 4 "
               "rows",
               EditTensor("sharded",
                          [](FTensor& t) {
                            (*t.chunks)[1].offsets = std::vector<int64_t>{6, 0};
                          }),
               "",
               "sharded",
               {"sharded"}});
  c.push_back({"metadata_chunk_no_storage",
               "metadata",
               "tensor 'sharded''s second chunk has no storage entry",
               EditMetadata([](F&, FMetadata& m) {
                 std::erase_if(*m.storage, [](const FStorage& s) {
                   return s.index.fqn == "sharded" && s.index.offset == kSh40;
                 });
               }),
               "info=0",
               "sharded",
               {"sharded"}});
  c.push_back({"metadata_bytes_no_storage",
               "metadata",
               "byte item 'opt' has no storage entry",
               EditMetadata([](F&, FMetadata& m) {
                 std::erase_if(*m.storage, [](const FStorage& s) {
                   return s.index.fqn == "opt";
                 });
               }),
               "info=0 dump=0",
               "w",
               {"opt"}});
  c.push_back({"metadata_storage_without_item",
               "metadata",
               "a storage entry for byte item 'ghost', which the state dict "
               "lacks and no key holds",
               EditMetadata([](F& f, FMetadata& m) {
                 FStorage s = *m.Storage("opt", std::nullopt);
                 s.index.fqn = "ghost";
                 FInfo i = ParseInfo(*s.info);
                 i.length = 10;
                 i.num_pieces = 1;
                 s.info = Encode(i);
                 m.storage->push_back(s);
               }),
               "info=0 dump=0 export=0 load=0 mirror=0",
               "w",
               {"ghost"}});
  c.push_back({"metadata_dtype_unknown", "metadata", "tensor 'w' has dtype 200",
               EditTensor("w", [](FTensor& t) { t.dtype = 200; })});
  c.push_back({"metadata_dtype_wider",
               "metadata",
               "tensor 'b' says float64; its storage and piece say 400 bytes "
               "of float32",
               EditTensor("b", [](FTensor& t) { t.dtype = 1; }),
               "info=0",
               "b",
               {"'b", "\"b"}});
  c.push_back({"metadata_dtype_same_width",
               "metadata",
               "tensor 'b' says int32; its piece says float32",
               EditTensor("b", [](FTensor& t) { t.dtype = 11; }),
               "info=0",
               "b",
               {"'b", "\"b"}});
  c.push_back(
      {"metadata_shape_overflow", "metadata",
       "tensor 'w' is [2^62, 2^62] (and so is its chunk)",
       EditTensor("w", [](FTensor& t) {
         t.size = std::vector<int64_t>{int64_t{1} << 62, int64_t{1} << 62};
         (*t.chunks)[0].sizes = t.size;
       })});
  c.push_back({"metadata_shape_negative", "metadata", "tensor 'w' is [-1, 100]",
               EditTensor("w", [](FTensor& t) {
                 t.size = std::vector<int64_t>{-1, 100};
               })});
  c.push_back({"metadata_rank_10000", "metadata",
               "tensor 'w' has 10,000 dimensions of 1 (and so has its chunk "
               "and storage index; no piece under the new key)",
               EditMetadata([](F& f, FMetadata& m) {
                 FTensor& t = m.Entry("w")->tensor;
                 t.size = Ones(10000);
                 (*t.chunks)[0] = {std::vector<int64_t>(10000, 0), Ones(10000)};
                 FStorage* s = m.Storage("w", kW00);
                 s->index.offset = std::vector<int64_t>(10000, 0);
                 FInfo i = ParseInfo(*s->info);
                 i.length = 2;
                 i.num_pieces = 1;
                 s->info = Encode(i);
               }),
               "info=*"});
  c.push_back(
      {"metadata_negative_storage_offset", "metadata",
       "the storage index of 'w' is at [-1, 0]",
       EditMetadata([](F&, FMetadata& m) {
         m.Storage("w", kW00)->index.offset = std::vector<int64_t>{-1, 0};
       })});
  c.push_back(
      {"metadata_huge_storage_offset", "metadata",
       "the storage index of 'w' is at [2^63-1, 0]",
       EditMetadata([](F&, FMetadata& m) {
         m.Storage("w", kW00)->index.offset = std::vector<int64_t>{kI64Max, 0};
       }),
       "info=0"});
  c.push_back({"metadata_index_hints_bogus", "harmless",
               "storage index hints 2^31-1 (w) and -7 (b): hints only",
               EditMetadata([](F&, FMetadata& m) {
                 m.Storage("w", kW00)->index.index =
                     std::numeric_limits<int32_t>::max();
                 m.Storage("b", kAt0)->index.index = -7;
               })});
  c.push_back({"metadata_version_future", "harmless",
               "metadata version \"9999.0\" (DCP's version string)",
               EditMetadata([](F&, FMetadata& m) { m.version = "9999.0"; })});
  c.push_back({"metadata_version_binary", "harmless",
               "metadata version is 64 KiB of every byte value",
               EditMetadata([](F&, FMetadata& m) {
                 std::string v(65536, '\0');
                 for (size_t i = 0; i < v.size(); ++i) v[i] = char(i);
                 m.version = v;
               })});
  c.push_back({"metadata_planner_data_700k", "harmless",
               "planner_data is 700 KB of random bytes",
               EditMetadata([](F&, FMetadata& m) {
                 m.planner_data = Garbage(700000, 5);
               })});
  c.push_back(
      {"metadata_60k_modules", "harmless", "storage_meta lists 60,000 modules",
       EditMetadata([](F&, FMetadata& m) {
         if (!m.storage_meta) m.storage_meta.emplace();
         m.storage_meta->modules = std::vector<std::string>(60000, "mod");
       })});
  c.push_back({"metadata_storage_info_garbage", "metadata",
               "the StorageInfo of 'w' is 40 random bytes",
               EditMetadata([](F&, FMetadata& m) {
                 m.Storage("w", kW00)->info = Garbage(40, 6);
               }),
               "info=0"});
  c.push_back({"metadata_storage_info_zero_piece_bytes", "metadata",
               "the StorageInfo of 'w' has piece_bytes 0",
               EditInfo("w", kW00, [](FInfo& i) { i.piece_bytes = 0; }),
               "info=0"});
  c.push_back({"metadata_storage_info_kind_bytes", "metadata",
               "the StorageInfo of tensor 'w' says bytes",
               EditInfo("w", kW00, [](FInfo& i) { i.kind = 1; }), "info=0"});
  c.push_back({"metadata_storage_info_odd_piece_bytes", "metadata",
               "the StorageInfo of float16 'w' has pieces of 4095 bytes",
               EditInfo("w", kW00, [](FInfo& i) { i.piece_bytes = 4095; }),
               "info=0"});
  c.push_back({"metadata_storage_info_future_version", "metadata",
               "the StorageInfo of 'w' has format_version 3",
               EditInfo("w", kW00, [](FInfo& i) { i.format_version = 3; }),
               "info=0"});
  c.push_back({"metadata_fqn_control_chars",
               "metadata",
               "tensor 'b' renamed 'b\\n\\x1b[31mred' (state dict and "
               "storage; the pieces keep their keys)",
               EditMetadata([](F&, FMetadata& m) {
                 m.Entry("b")->fqn = "b\n\x1b[31mred";
                 m.Storage("b", kAt0)->index.fqn = "b\n\x1b[31mred";
               }),
               "info=0 dump=0",
               "w",
               {"red"}});
  c.push_back({"metadata_duplicate_fqn", "metadata",
               "two state dict entries named 'w'",
               EditMetadata([](F&, FMetadata& m) {
                 m.state_dict->push_back(*m.Entry("w"));
               })});
  c.push_back({"metadata_union_type_mismatch", "metadata",
               "entry 'w' is tagged a tensor but points to a bytes table",
               EditMetadata([](F&, FMetadata& m) {
                 m.Entry("w")->table = FEntry::Table::kBytes;
               })});
  c.push_back(
      {"metadata_union_unknown_type", "metadata", "entry 'w' has union type 9",
       EditMetadata([](F&, FMetadata& m) { m.Entry("w")->value_type = 9; })});
  c.push_back({"metadata_no_state_dict", "metadata",
               "the metadata has no state_dict (storage entries remain)",
               EditMetadata([](F&, FMetadata& m) { m.state_dict.reset(); }),
               "info=0 export=* mirror=0"});

  // ================= The pieces =================
  // Issue #5: a piece must belong to its item.
  c.push_back({"piece_swap_same_size",
               "piece",
               "the pieces of 'b' and 'b2' (same size, same header) swapped, "
               "each checksum valid",
               [](F& f) {
                 const std::string b = f.Value(kB0);
                 f.PutValue(kB0, f.Value(kB20));
                 f.PutValue(kB20, b);
               },
               "",
               "b",
               {"'b", "\"b"}});
  // The binding of version 2 pieces, undone: version 1 pieces (seed 0)
  // still load, and nothing says this checkpoint was written with 2.
  c.push_back({"piece_swap_downgraded_to_v1",
               "piece",
               "the pieces of 'b' and 'b2' swapped and rewritten as format "
               "version 1, whose checksums are bound to no key",
               [](F& f) {
                 FPiece b = f.Piece(kB0);
                 FPiece b2 = f.Piece(kB20);
                 for (FPiece* p : {&b, &b2}) {
                   p->format_version = 1;
                   p->Rehash("");
                 }
                 f.PutPiece(kB0, b2);
                 f.PutPiece(kB20, b);
               },
               "",
               "b",
               {"'b", "\"b"}});
  c.push_back({"piece_swap_across_items", "piece",
               "piece 1 of 'w' and piece 0 of 'opt' swapped", [](F& f) {
                 const std::string w = f.Value(kW1);
                 f.PutValue(kW1, f.Value(kOpt0));
                 f.PutValue(kOpt0, w);
               }});
  c.push_back({"piece_data_flipped", "piece",
               "a data byte of piece 1 of 'w' flipped (checksum kept)",
               EditPiece(kW1, [](FPiece& p) { (*p.data)[100] ^= 0x5a; })});
  c.push_back({"piece_wrong_piece_number", "piece",
               "piece 1 of 'w' says it is piece 0",
               EditPiece(kW1, [](FPiece& p) { p.piece = 0; })});
  c.push_back({"piece_wrong_num_pieces", "piece",
               "piece 0 of 'w' says there are 5",
               EditPiece(kW0, [](FPiece& p) { p.num_pieces = 5; })});
  c.push_back({"piece_wrong_dtype", "piece",
               "piece 0 of float16 'w' says bfloat16",
               EditPiece(kW0, [](FPiece& p) { p.dtype = 4; })});
  c.push_back({"piece_wrong_chunk",
               "piece",
               "the piece of 'sharded''s second chunk says it is the first",
               EditPiece(kSh4,
                         [](FPiece& p) {
                           p.chunk_offsets = std::vector<int64_t>{0, 0};
                         }),
               "",
               "sharded",
               {"sharded"}});
  c.push_back({"piece_huge_byte_length", "piece",
               "piece 2 of 'w' says it holds 2^63 bytes",
               EditPiece(kW2, [](FPiece& p) { p.byte_length = 1ull << 63; })});
  c.push_back(
      {"piece_huge_byte_offset", "piece",
       "piece 2 of 'w' says it starts at byte 2^64-11",
       EditPiece(kW2, [](FPiece& p) { p.byte_offset = kU64Max - 10; })});
  c.push_back({"piece_truncated", "piece", "piece 1 of 'w' cut in half",
               EditValue(kW1, [](const std::string& v) {
                 return v.substr(0, v.size() / 2);
               })});
  c.push_back({"piece_empty_value", "piece", "piece 1 of 'w' is empty",
               [](F& f) { f.PutValue(kW1, ""); }});
  c.push_back({"piece_garbage", "piece", "piece 1 of 'w' is 4200 random bytes",
               [](F& f) { f.PutValue(kW1, Garbage(4200, 7)); }});
  c.push_back({"piece_wrong_identifier", "piece",
               "piece 1 of 'w' carries the metadata's identifier",
               EditValue(kW1, [](const std::string& v) {
                 return WithIdentifier(v, "RDCM");
               })});
  c.push_back({"piece_future_format_version", "piece",
               "piece 1 of 'w' has format_version 4, which no build knows",
               EditPiece(kW1, [](FPiece& p) { p.format_version = 4; })});
  c.push_back({"piece_version_3_uncompressed", "piece",
               "piece 1 of 'w' says format_version 3 (compressed) with no "
               "codec",
               EditPiece(kW1, [](FPiece& p) { p.format_version = 3; })});
  // ---- Compressed pieces (issue #17) ----
  c.push_back({"piece_compressed_sound", "harmless",
               "piece 1 of 'w' stored compressed, its planes as they are",
               CompressPiece(kW1, [](FPiece&) {})});
  c.push_back({"piece_compressed_decodes_to_other_bytes", "piece",
               "piece 1 of 'w' compressed, a byte of a plane flipped (the "
               "stored bytes' checksum kept right)",
               CompressPiece(kW1, [](FPiece& p) { (*p.data)[7] ^= 0x20; })});
  c.push_back({"piece_compressed_not_a_frame", "piece",
               "piece 1 of 'w' compressed into two planes of 5 bytes that "
               "are no zstd frames",
               CompressPiece(kW1, [](FPiece& p) {
                 p.plane_bytes = std::vector<uint32_t>{5, 5};
                 p.data = "zzzzzzzzzz";
               })});
  c.push_back({"piece_compressed_frame_declares_more", "piece",
               "piece 1 of 'w' compressed, its second plane a zstd frame of "
               "twice the plane's bytes",
               CompressPiece(kW1, [](FPiece& p) {
                 const uint32_t n = (*p.plane_bytes)[0];
                 const std::string frame = ZeroFrame(2 * n);
                 p.data = p.data->substr(0, n) + frame;
                 (*p.plane_bytes)[1] = static_cast<uint32_t>(frame.size());
               })});
  c.push_back({"piece_compressed_plane_sizes_wrong", "piece",
               "piece 1 of 'w' compressed, its plane sizes one byte short of "
               "what it stores",
               CompressPiece(kW1, [](FPiece& p) { --(*p.plane_bytes)[0]; })});
  c.push_back(
      {"piece_compressed_three_planes", "piece",
       "piece 1 of float16 'w' compressed in three planes",
       CompressPiece(kW1, [](FPiece& p) { p.plane_bytes->push_back(0); })});
  c.push_back({"piece_kind_tensor",
               "piece",
               "piece 0 of byte item 'opt' says it is a tensor's",
               EditPiece(kOpt0, [](FPiece& p) { p.kind = 0; }),
               "dump=0",
               "w",
               {"opt"}});
  c.push_back({"piece_missing", "piece", "piece 1 of 'w' is deleted",
               [](F& f) { f.Delete(kW1); }});
  c.push_back({"piece_missing_bytes_item",
               "piece",
               "both pieces of 'opt' are deleted",
               [](F& f) {
                 f.Delete(kOpt0);
                 f.Delete(kOpt1);
               },
               "dump=0",
               "w",
               {"opt"}});
  // Nothing lists it, so nothing reads it; verify may say so.
  c.push_back({"piece_extra_after_last", "harmless",
               "an extra piece 3 of 'w' (which has 3), well formed",
               [](F& f) {
                 FPiece p = f.Piece(kW2);
                 p.piece = 3;
                 p.Rehash("w@0,0#00000003");
                 f.PutPiece("w@0,0#00000003", p);
               },
               "verify=*"});
  c.push_back({"piece_data_longer", "piece",
               "piece 2 of 'w' holds 8000 bytes, its header and checksum "
               "agreeing",
               EditPiece(kW2, [](FPiece& p) {
                 p.data->resize(8000, 'x');
                 p.byte_length = 8000;
                 p.Rehash(kW2);
               })});
  c.push_back({"piece_oversized_700k", "piece",
               "piece 0 of 'w' holds 700 KB, its header and checksum agreeing",
               EditPiece(kW0, [](FPiece& p) {
                 *p.data = Garbage(700000, 8);
                 p.byte_length = 700000;
                 p.Rehash(kW0);
               })});
  c.push_back({"piece_empty_tensor_with_data",
               "piece",
               "the piece of empty tensor 'e' holds 16 bytes, header and "
               "checksum agreeing",
               EditPiece(kE0,
                         [](FPiece& p) {
                           p.data = Garbage(16, 9);
                           p.byte_length = 16;
                           p.Rehash(kE0);
                         }),
               // A load reads no piece of an empty tensor: only verify
               // can tell.
               "dump=0 export=0 load=0 mirror=0",
               "w",
               {"'e", "\"e"}});

  // ================= Keys =================
  c.push_back({"key_unparseable", "harmless",
               "keys no grammar allows in the victim's column family: "
               "'garbage\\xff\\x00', 'w@x,y#zz', '%G1@0#00000000', '#', '@'",
               [](F& f) {
                 int seed = 10;
                 for (const std::string& key :
                      {std::string("garbage\xff\x00", 9),
                       std::string("w@x,y#zz"), std::string("%G1@0#00000000"),
                       std::string("#"), std::string("@")}) {
                   f.PutValue(key, Garbage(100, seed++));
                 }
               },
               "verify=*"});
  c.push_back({"key_other_item", "harmless",
               "pieces of an item the metadata does not list ('ghost')",
               [](F& f) { f.PutValue("ghost@0#00000000", f.Value(kB0)); },
               "verify=*"});
  c.push_back({"key_pieces_rotated", "key",
               "the values of pieces 0, 1, 2 of 'w' rotated one key on",
               [](F& f) {
                 const std::string w0 = f.Value(kW0);
                 f.PutValue(kW0, f.Value(kW2));
                 f.PutValue(kW2, f.Value(kW1));
                 f.PutValue(kW1, w0);
               }});
  c.push_back({"key_item_under_other_key",
               "key",
               "piece 0 of 'w' also under the key of 'b''s piece",
               [](F& f) { f.PutValue(kB0, f.Value(kW0)); },
               "dump=0",
               "w",
               {"'b", "\"b"}});
  c.push_back({"key_metadata_under_piece_key", "key",
               "the metadata value under the key of piece 1 of 'w'",
               [](F& f) { f.PutValue(kW1, f.MetadataValue()); }});
  // A read-only open takes a committed checkpoint whose column family
  // holds its metadata but no piece for a save another process is
  // committing, and opens again (store.cc, ViewIsTorn): up to 32 times.
  c.push_back({"key_every_piece_deleted", "key",
               "every piece of the victim deleted; its metadata remains",
               [](F& f) {
                 for (const std::string& key : f.raw().Keys(kCf)) {
                   if (key != kMetadataKey) f.Delete(key);
                 }
               }});
  c.push_back(
      {"key_catalog_junk", "harmless",
       "keys 'zzz', 'checkpoint', 'checkpoint0' and '\\xff' in the "
       "default column family",
       [](F& f) {
         for (const char* key : {"zzz", "checkpoint", "checkpoint0", "\xff"}) {
           f.raw().Put("default", key, Garbage(50, 11));
         }
       }});
  c.push_back({"cf_orphan_with_garbage", "harmless",
               "a column family 'orphan' no catalog entry names, holding "
               "garbage keys (gc must drop it)",
               [](F& f) {
                 f.raw().CreateColumnFamily("orphan");
                 f.raw().Put("orphan", "__metadata__", Garbage(300, 12));
                 f.raw().Put("orphan", "x@0#00000000", Garbage(300, 13));
               }});
  return c;
}

}  // namespace

const std::vector<HostileCase>& HostileCases() {
  static const auto* kCases = new std::vector<HostileCase>(MakeCases());
  return *kCases;
}

}  // namespace rocksdcp::hostile
