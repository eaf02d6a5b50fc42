// Corruption (issue #5): damage one checkpoint of a store on disk, the way
// a failing disk or a careless hand would, and check that a load of it
// returns Corruption naming the checkpoint and the item and never hands
// back wrong bytes; that Store::Verify finds every damaged piece; and that
// the other checkpoints of the store still load bit-exact.
//
// Each piece of the damaged checkpoint's large items is a block of its own
// in its SST file (32 KiB pieces, 16 KiB blocks), and its bytes are stored
// as they are, so the test finds each piece in the file and knows exactly
// which pieces a flipped byte damages.

#include <rocksdb/db.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <set>

#include "format/checksum.h"
#include "format/metadata_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdb/raw_store.h"
#include "rocksdb/store_fixture.h"
#include "rocksdb/store_impl.h"
#include "weights.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kPiece = 32 << 10;
constexpr char kVictim[] = "victim";
constexpr char kW[] = "w@[0, 0]";
constexpr char kOpt[] = "opt";

// The checkpoint that gets damaged: a tensor of 12 pieces, a byte item of
// 3, and a small tensor that shares its block with other small values.
struct VictimState {
  OwnedTensor w;
  OwnedTensor bias;
  std::string opt;
  StateDict dict;
};

// With `weights`, w and opt hold the bytes of bf16 values drawn as trained
// weights are, which compress.
VictimState MakeVictim(bool zero, bool weights = false) {
  VictimState s;
  s.w = zero ? ZeroTensor(DType::kUInt8, {12, kPiece})
             : RandomTensor(DType::kUInt8, {12, kPiece}, 71);
  s.bias = zero ? ZeroTensor(DType::kFloat32, {100})
                : RandomTensor(DType::kFloat32, {100}, 72);
  s.opt = zero ? std::string() : RandomBytes(2 * kPiece + 5000, 73);
  if (weights && !zero) {
    FillWeights(WeightKind::kWeight, DType::kBFloat16, 71, s.w.bytes.data(),
                s.w.bytes.size() / 2);
    s.opt = WeightBytes(WeightKind::kWeight, DType::kBFloat16, 73,
                        s.opt.size() / 2);
  }
  s.dict = {{"w", s.w.view}, {"bias", s.bias.view}, {"opt", s.opt}};
  return s;
}

// A damaged piece, or one Verify reports: the item as MetadataIndex prints
// it, and the piece number.
using PieceId = std::pair<std::string, uint32_t>;

std::set<PieceId> BadPieces(const CheckpointVerifyReport& report) {
  std::set<PieceId> out;
  for (const VerifyProblem& p : report.problems) {
    if (p.item && p.piece) out.emplace(p.item->ToString(), *p.piece);
  }
  return out;
}

// How a flipped byte turned out.
struct FlipTally {
  int refused_open = 0;
  int caught = 0;
  // The load returned the saved bytes, and Verify found the damage: a
  // flip in the block of a piece the load read in place, outside its
  // payload (the entry's header, the key, the piece's own header, the
  // restart array, the trailer), which such a load does not read.
  int verify_only = 0;
  int harmless = 0;
  int total() const { return refused_open + caught + verify_only + harmless; }
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Rewrites the victim's catalog entry with `change` applied.
void EditCatalogEntry(const std::string& store,
                      const std::function<void(CheckpointInfo&)>& change) {
  testing::EditCatalogEntry(store, kVictim, change);
}

class CorruptionTest : public StoreTest {
 protected:
  // Three checkpoints; the middle one is damaged, and the two others must
  // still load bit-exact. The store is closed, ready to be damaged.
  void SetUp() override {
    StoreTest::SetUp();
    victim_ = MakeVictim(/*zero=*/false, compressed_);
    ASSERT_OK(SaveDict(ExampleStateDict(1).dict, "before"));
    const std::vector<std::string> before = SstFiles();
    ASSERT_OK(SaveDict(victim_.dict, kVictim,
                       {.compression = compressed_ ? Compression::kBytePlaneZstd
                                                   : Compression::kNone,
                        .max_piece_bytes = kPiece}));
    // The victim's data file: the largest its save added.
    for (const std::string& file : SstFiles()) {
      if (std::find(before.begin(), before.end(), file) == before.end()) {
        victim_file_ = file;
        break;
      }
    }
    ASSERT_FALSE(victim_file_.empty());
    ASSERT_OK(SaveDict(ExampleStateDict(3).dict, "after"));
    CloseStore();
  }

  // The file holding `data` and its offset there. Pieces' bytes are
  // random, so 64 of them name one place.
  std::pair<std::string, int64_t> Locate(std::string_view data) const {
    const std::string_view needle = data.substr(0, 64);
    for (const std::string& file : SstFiles()) {
      const size_t at = ReadFile(file).find(needle);
      if (at != std::string::npos) return {file, static_cast<int64_t>(at)};
    }
    ADD_FAILURE() << "piece data not found in any SST file";
    return {"", 0};
  }
  std::string_view PieceData(const PieceId& piece) const {
    const std::string_view all =
        piece.first == kOpt
            ? std::string_view(victim_.opt)
            : std::string_view(
                  reinterpret_cast<const char*>(victim_.w.bytes.data()),
                  victim_.w.bytes.size());
    return all.substr(piece.second * kPiece, kPiece);
  }
  // Flips a byte in the middle of each piece's data.
  void DamagePieces(const std::set<PieceId>& pieces) {
    for (const PieceId& p : pieces) {
      auto [file, offset] = Locate(PieceData(p));
      FlipByte(file, offset + 1000);
    }
  }
  // The file holding the victim's data.
  std::string VictimDataFile() const { return victim_file_; }

  Result<CheckpointVerifyReport> VerifyOne(const std::string& id) {
    ROCKSDCP_ASSIGN_OR_RETURN(VerifyReport r,
                              store_->Verify({.checkpoint_ids = {id}}));
    return r.checkpoints.at(0);
  }

  // Loads the victim whole into zeros: Corruption naming it, and every
  // byte that landed is the saved byte.
  void ExpectVictimLoadFailsWithoutWrongBytes(const std::string& what) {
    VictimState into = MakeVictim(/*zero=*/true);
    EXPECT_THAT(LoadDict(&into.dict, kVictim),
                StatusIs(StatusCode::kCorruption,
                         AllOf(HasSubstr("'victim'"), HasSubstr(what))));
    ExpectNoWrongBytes(into);
  }
  void ExpectNoWrongBytes(const VictimState& into) const {
    const std::vector<uint8_t>& got = into.w.bytes;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != 0 && got[i] != victim_.w.bytes[i]) {
        FAIL() << "wrong byte " << i << " of w";
      }
    }
    const std::vector<uint8_t> zero_bias(into.bias.bytes.size(), 0);
    EXPECT_TRUE(into.bias.bytes == zero_bias ||
                into.bias.bytes == victim_.bias.bytes)
        << "wrong bytes of bias";
    const std::string& opt = std::get<std::string>(into.dict.at("opt"));
    EXPECT_TRUE(opt.empty() || opt == victim_.opt) << "wrong bytes of opt";
  }

  void ExpectOthersLoadBitExact() {
    for (const auto& [id, seed] :
         {std::pair<std::string, uint64_t>{"before", 1}, {"after", 3}}) {
      ExampleState into = EmptyExampleStateDict();
      ASSERT_OK(LoadDict(&into.dict, id));
      EXPECT_TRUE(IsExampleState(into, seed)) << id;
    }
    ASSERT_OK_AND_ASSIGN(VerifyReport all, store_->Verify());
    ASSERT_EQ(all.checkpoints.size(), 3u);
    for (const CheckpointVerifyReport& c : all.checkpoints) {
      if (c.checkpoint_id != kVictim) {
        EXPECT_TRUE(c.ok()) << c.checkpoint_id;
      }
    }
  }

  // Damage to the checkpoint itself rather than to a piece: the victim's
  // load fails naming `what`, Verify reports that one problem (having read
  // `pieces_checked` pieces), and the other checkpoints load.
  void ExpectCheckpointProblem(const std::string& what,
                               uint64_t pieces_checked) {
    ExpectVictimLoadFailsWithoutWrongBytes(what);
    ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
    ASSERT_EQ(report.problems.size(), 1u);
    EXPECT_FALSE(report.problems[0].item);
    EXPECT_THAT(report.problems[0].status,
                StatusIs(StatusCode::kCorruption,
                         AllOf(HasSubstr("'victim'"), HasSubstr(what))));
    EXPECT_EQ(report.pieces_checked, pieces_checked);
    ExpectOthersLoadBitExact();
  }

  void CheckFlip(const std::string& file, int64_t offset, FlipTally* tally);
  void RandomByteFlips();
  void FlipEveryByteAroundPiece5(FlipTally* tally);

  // Set by a test's constructor: the victim holds weights, saved with
  // compressed pieces.
  bool compressed_ = false;
  VictimState victim_;
  std::string victim_file_;
};

// The victim saved with compressed pieces (issue #17).
class CompressedCorruptionTest : public CorruptionTest {
 protected:
  CompressedCorruptionTest() { compressed_ = true; }
};

TEST_F(CorruptionTest, FlippedBytesInPiecesAreAllFoundAndNeverLoaded) {
  const std::set<PieceId> damaged = {{kW, 1}, {kW, 6}, {kW, 11}, {kOpt, 1}};
  DamagePieces(damaged);
  OpenStore();

  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  EXPECT_EQ(BadPieces(report), damaged);
  EXPECT_EQ(report.problems.size(), damaged.size());
  for (const VerifyProblem& p : report.problems) {
    EXPECT_THAT(p.status, StatusIs(StatusCode::kCorruption,
                                   AllOf(HasSubstr("'victim'"),
                                         HasSubstr(p.item->ToString()))));
  }
  EXPECT_EQ(report.items_checked, 3u);
  EXPECT_EQ(report.pieces_checked, 12u + 3u + 1u);

  ExpectVictimLoadFailsWithoutWrongBytes("piece");
  // Each damaged item alone: named, and its damaged pieces never land.
  VictimState into = MakeVictim(/*zero=*/true);
  StateDict only_w{{"w", into.w.view}};
  EXPECT_THAT(LoadDict(&only_w, kVictim),
              StatusIs(StatusCode::kCorruption, HasSubstr("'w@[0, 0]'")));
  ExpectNoWrongBytes(into);
  for (uint32_t p : {1, 6, 11}) {
    for (uint64_t i = p * kPiece; i < (p + 1) * kPiece; ++i) {
      ASSERT_EQ(into.w.bytes[i], 0) << "byte " << i << " of damaged piece";
    }
  }
  StateDict only_opt{{"opt", std::string()}};
  EXPECT_THAT(LoadDict(&only_opt, kVictim),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'opt'"), HasSubstr("piece 1 of 3"))));
  EXPECT_EQ(std::get<std::string>(only_opt.at("opt")), "");
  // The undamaged item still loads.
  StateDict only_bias{{"bias", into.bias.view}};
  ASSERT_OK(LoadDict(&only_bias, kVictim));
  EXPECT_TRUE(SameTensor(into.bias.view, victim_.bias.view));

  ExpectOthersLoadBitExact();
}

// A load verifies RocksDB's block checksum (verify_block_checksums, on
// by default), which finds damage first, and each piece by its own XXH3,
// which finds the same damage when the block checksum is turned off. (In
// that order: a block read without its checksum verified stays in the
// store's block cache, and is not read again.)
TEST_F(CorruptionTest, ALoadChecksBlockChecksumsUnlessTurnedOff) {
  DamagePieces({{kW, 6}});
  OpenStore();
  for (bool blocks : {true, false}) {
    SCOPED_TRACE(blocks ? "default" : "verify_block_checksums = false");
    VictimState into = MakeVictim(/*zero=*/true);
    RocksDBReaderOptions options;
    if (!blocks) options.verify_block_checksums = false;
    ASSERT_OK_AND_ASSIGN(auto reader, store_->NewReader(options));
    LoadOptions lo;
    lo.checkpoint_id = kVictim;
    EXPECT_THAT(
        Load(&into.dict, *reader, lo),
        StatusIs(StatusCode::kCorruption,
                 AllOf(HasSubstr("'w@[0, 0]'"), HasSubstr("piece 6 of 12"),
                       HasSubstr(blocks ? "block checksum mismatch"
                                        : "checksum mismatch: stored XXH3"))));
    ExpectNoWrongBytes(into);
  }
}

// Reader threads each take a share of the pieces; whichever share meets
// its damage first, the load names the earliest damaged piece in plan
// order, as a sequential read would, and no damaged byte lands.
TEST_F(CorruptionTest, ALoadNamesTheEarliestDamagedPieceWhateverTheThreads) {
  DamagePieces({{kW, 2}, {kW, 9}, {kW, 11}});
  OpenStore();
  for (int threads : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE(threads);
    VictimState into = MakeVictim(/*zero=*/true);
    ASSERT_OK_AND_ASSIGN(auto reader,
                         store_->NewReader({.read_threads = threads}));
    LoadOptions lo;
    lo.checkpoint_id = kVictim;
    EXPECT_THAT(
        Load(&into.dict, *reader, lo),
        StatusIs(StatusCode::kCorruption,
                 AllOf(HasSubstr("'w@[0, 0]'"), HasSubstr("piece 2 of 12"))));
    ExpectNoWrongBytes(into);
  }
}

TEST_F(CorruptionTest, ReadOnlyStoreVerifiesTheSame) {
  const std::set<PieceId> damaged = {{kW, 0}, {kOpt, 2}};
  DamagePieces(damaged);
  OpenStore({.read_only = true});
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  EXPECT_EQ(BadPieces(report), damaged);
}

TEST_F(CorruptionTest, MaxProblemsCapsTheListNotTheCount) {
  DamagePieces({{kW, 2}, {kW, 3}, {kW, 4}});
  OpenStore();
  ASSERT_OK_AND_ASSIGN(
      VerifyReport report,
      store_->Verify({.checkpoint_ids = {kVictim}, .max_problems = 1}));
  const CheckpointVerifyReport& c = report.checkpoints.at(0);
  EXPECT_THAT(BadPieces(c), ElementsAre(PieceId{kW, 2}));
  EXPECT_EQ(c.unlisted_problems, 2u);
  EXPECT_FALSE(report.ok());
}

// Flips the byte at `offset` of `file`, checks what a damaged store must
// do, and flips it back. Whatever the byte: the store opens or says
// Corruption; a load either returns the saved bytes or Corruption naming
// the victim and its item, never other bytes and never a crash; Verify
// finds a problem whenever the load fails, and otherwise only around a
// piece of `w` that the load read in place; the other checkpoints load.
void CorruptionTest::CheckFlip(const std::string& file, int64_t offset,
                               FlipTally* tally) {
  SCOPED_TRACE("byte " + std::to_string(offset) + " of " + file);
  FlipByte(file, offset);
  auto store = Store::Open(store_path());
  if (!store.ok()) {
    EXPECT_THAT(store, StatusIs(StatusCode::kCorruption,
                                HasSubstr("cannot open store")));
    ++tally->refused_open;
  } else {
    store_ = std::move(store).value();
    VictimState into = MakeVictim(/*zero=*/true);
    Status loaded = LoadDict(&into.dict, kVictim);
    ExpectNoWrongBytes(into);
    ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
    if (loaded.ok()) {
      EXPECT_EQ(into.w.bytes, victim_.w.bytes);
      if (report.ok()) {
        ++tally->harmless;
      } else {
        ++tally->verify_only;
        ASSERT_TRUE(load_options_.read_in_place);
        EXPECT_THAT(
            report.problems.at(0).status,
            StatusIs(StatusCode::kCorruption,
                     AllOf(HasSubstr("'victim'"), HasSubstr("'w@[0, 0]'"))));
      }
    } else {
      ++tally->caught;
      // The file holds items only (the metadata is in another): the
      // error names the item it hit.
      EXPECT_THAT(loaded, StatusIs(StatusCode::kCorruption,
                                   AllOf(HasSubstr("'victim'"),
                                         AnyOf(HasSubstr("'w@[0, 0]'"),
                                               HasSubstr("'bias@[0]'"),
                                               HasSubstr("'opt'")))));
      EXPECT_FALSE(report.ok());
    }
    ExpectOthersLoadBitExact();
    CloseStore();
  }
  FlipByte(file, offset);  // Undo: the next flip starts from a sound file.
}

// Flips one byte at a time at random offsets of the victim's data file:
// half anywhere (nearly always in a piece), half in its last 4 KiB (index,
// properties, footer: what DB::Open reads); CheckFlip says what each must
// do. ROCKSDCP_CORRUPTION_FLIPS sets how many bytes (default 100, about
// 2 s); a failure prints the seed, and ROCKSDCP_CORRUPTION_SEED replays it.
TEST_F(CorruptionTest, RandomByteFlipsAreCaughtOrHarmless) {
  RandomByteFlips();
}

// The same on compressed pieces: the stored bytes' checksum catches a flip
// before anything is decoded.
TEST_F(CompressedCorruptionTest, RandomByteFlipsAreCaughtOrHarmless) {
  RandomByteFlips();
}

TEST_F(CompressedCorruptionTest, TheVictimIsStoredCompressed) {
  OpenStore();
  const uintmax_t raw = victim_.w.bytes.size() + victim_.opt.size();
  EXPECT_LT(std::filesystem::file_size(VictimDataFile()), raw * 85 / 100);
  VictimState into = MakeVictim(/*zero=*/true);
  ASSERT_OK(LoadDict(&into.dict, kVictim));
  EXPECT_EQ(into.w.bytes, victim_.w.bytes);
  EXPECT_EQ(std::get<std::string>(into.dict.at("opt")), victim_.opt);
}

void CorruptionTest::RandomByteFlips() {
  const char* env = std::getenv("ROCKSDCP_CORRUPTION_FLIPS");
  const int flips = env != nullptr ? std::atoi(env) : 100;
  const char* seed_env = std::getenv("ROCKSDCP_CORRUPTION_SEED");
  const uint64_t seed = seed_env != nullptr
                            ? std::strtoull(seed_env, nullptr, 10)
                            : std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string file = VictimDataFile();
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(file));
  FlipTally tally;
  for (int i = 0; i < flips && !HasFatalFailure(); ++i) {
    const int64_t tail = std::min<int64_t>(size, 4096);
    const int64_t offset = i % 2 == 0
                               ? static_cast<int64_t>(rng() % size)
                               : size - 1 - static_cast<int64_t>(rng() % tail);
    CheckFlip(file, offset, &tally);
  }
  std::cout << flips << " byte flips: " << tally.refused_open
            << " refused at open, " << tally.caught << " caught by the load "
            << "and Verify, " << tally.verify_only
            << " by Verify around a piece read in place, " << tally.harmless
            << " harmless\n";
  EXPECT_EQ(tally.total(), flips);
}

// The bytes FlipEveryByteAroundPiece5 flips: under a sanitizer every
// kSanitizerSweepDivisor-th of the `n` it sweeps (the first included), as
// in every exhaustive sweep there (test_util.h).
constexpr uint64_t kFlipStep = kSanitized ? kSanitizerSweepDivisor : 1;
constexpr int SweptBytes(int n) {
  return static_cast<int>((n + kFlipStep - 1) / kFlipStep);
}

// CheckFlip of every byte from 256 before piece 5 of `w` to the end of its
// block, but for all but the first 16 bytes of its payload (the random
// test's): 256 + 16 + 13 bytes (SweptBytes under a sanitizer).
void CorruptionTest::FlipEveryByteAroundPiece5(FlipTally* tally) {
  const auto [file, payload] = Locate(PieceData({kW, 5}));
  ASSERT_FALSE(file.empty());
  // After the payload: the restart array (one offset and the count, 4
  // bytes each) and the block trailer (type and checksum, 1 + 4 bytes).
  const int64_t end = payload + static_cast<int64_t>(kPiece) + 8 + 5;
  uint64_t swept = 0;
  for (int64_t offset = payload - 256; offset < end && !HasFatalFailure();
       ++offset) {
    if (offset >= payload + 16 && offset < payload + int64_t{kPiece}) {
      offset = payload + int64_t{kPiece} - 1;
      continue;
    }
    if (swept++ % kFlipStep == 0) CheckFlip(file, offset, tally);
  }
}

// The bytes of a data block that RocksDB itself parses on a read, before
// rocksdcp sees the value: the block's entry (key lengths, the key, the
// value's length) ahead of a piece, and its restart array and trailer after
// it. Unverified, a flip there made Debian's RocksDB (built with its
// assertions on) abort the process in DecodeEntry or ExtractUserKey; a
// load through RocksDB verifies each block's checksum first, so each of
// these is caught. Every byte from 256 before piece 5 of `w` to the end of
// its block.
TEST_F(CorruptionTest, EveryByteRocksDBParsesAroundAPieceIsCaught) {
  load_options_.read_in_place = false;
  FlipTally tally;
  FlipEveryByteAroundPiece5(&tally);
  EXPECT_EQ(tally.harmless, 0) << "every byte here belongs to a block";
  EXPECT_EQ(tally.verify_only, 0);
  EXPECT_EQ(tally.total(), SweptBytes(256 + 16 + 13));
}

// The same bytes under a load that reads `w`'s pieces in place (the
// default): it reads only their payloads, checked against the metadata's
// hashes, so RocksDB parses none of these blocks. A flip in a payload is
// caught by the load (the piece, read again through RocksDB, fails its
// block checksum); one around it leaves the load's bytes right, and Verify
// reports it. None is harmless.
TEST_F(CorruptionTest, EveryByteAroundAPieceReadInPlaceIsCaughtByVerify) {
  FlipTally tally;
  FlipEveryByteAroundPiece5(&tally);
  EXPECT_EQ(tally.harmless, 0) << "every byte here belongs to a block";
  EXPECT_GE(tally.caught, SweptBytes(16)) << "piece 5's payload bytes";
  EXPECT_GT(tally.verify_only, SweptBytes(100));
  EXPECT_EQ(tally.total(), SweptBytes(256 + 16 + 13));
}

// RocksDB 7.8's DB::Open, with paranoid_checks (its default, and the
// store's), opens every live SST file, read-only too: a truncated or
// deleted file of one checkpoint makes it refuse the whole store, naming
// the file, and the other checkpoints are out of reach through Store until
// the file is restored. (With paranoid_checks off it opens, and only the
// damaged checkpoint's reads fail.)
// A file of the victim is truncated or gone: RocksDB's open checks make a
// read-write open refuse the store, naming the file and saying what to do;
// a read-only open (no such checks) opens it, the victim's load and Verify
// report Corruption, and the other checkpoints load.
class DamagedFileTest : public CorruptionTest {
 protected:
  void ExpectIsolated(const std::string& file) {
    const std::string number = std::filesystem::path(file).stem().string();
    EXPECT_THAT(
        Store::Open(store_path()),
        StatusIs(StatusCode::kCorruption,
                 AllOf(HasSubstr("cannot open store"), HasSubstr(number),
                       HasSubstr("read_only = true"))));
    OpenStore({.read_only = true});
    ExpectVictimLoadFailsWithoutWrongBytes("");
    ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
    EXPECT_FALSE(report.ok());
    ExpectOthersLoadBitExact();
  }
};

TEST_F(DamagedFileTest, TruncatedSstFileIsolatesItsCheckpointReadOnly) {
  const std::string file = VictimDataFile();
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  ExpectIsolated(file);
}

TEST_F(DamagedFileTest, DeletedSstFileIsolatesItsCheckpointReadOnly) {
  const std::string file = VictimDataFile();
  std::filesystem::remove(file);
  ExpectIsolated(file);
}

TEST_F(CorruptionTest, FlippedMetadataValueIsAChecksumMismatch) {
  {
    RawStore raw(store_path());
    std::string value = raw.Get(kVictim, keys::kMetadataKey);
    value[value.size() / 2] ^= 0x5a;
    raw.Put(kVictim, keys::kMetadataKey, value);
  }
  OpenStore();
  ExpectVictimLoadFailsWithoutWrongBytes("metadata checksum mismatch");
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  ASSERT_FALSE(report.problems.empty());
  EXPECT_FALSE(report.problems[0].item);
  EXPECT_THAT(report.problems[0].status,
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'victim'"),
                             HasSubstr("metadata checksum mismatch"))));
  ExpectOthersLoadBitExact();
}

TEST_F(CorruptionTest, MissingMetadataKeyIsFound) {
  RawStore(store_path()).Delete(kVictim, keys::kMetadataKey);
  OpenStore();
  ExpectCheckpointProblem("__metadata__ is missing", 0);
}

// Metadata rewritten with its checksum in the catalog to match, as a buggy
// or hostile writer could: opt's pieces no longer match what it says, and
// the piece headers catch it, piece by piece.
TEST_F(CorruptionTest, MetadataThatDisagreesWithThePiecesIsCaught) {
  std::string value;
  {
    RawStore raw(store_path());
    auto metadata =
        format::DecodeMetadata(raw.Get(kVictim, keys::kMetadataKey));
    ASSERT_OK(metadata);
    std::string& opt = metadata->storage_data.at(MetadataIndex("opt"));
    auto info = format::DecodeStorageInfo(opt);
    ASSERT_OK(info);
    info->piece_bytes = kPiece / 2;
    info->num_pieces = 5;
    // Hashes and offsets must number the pieces: a forger who changes the
    // cut drops them, or the metadata is refused whole.
    info->piece_hashes.clear();
    info->piece_offsets.clear();
    info->file_first_key_xxh3 = 0;
    opt = format::EncodeStorageInfo(*info);
    value = format::EncodeMetadata(*metadata);
    raw.Put(kVictim, keys::kMetadataKey, value);
  }
  EditCatalogEntry(store_path(), [&](CheckpointInfo& e) {
    e.metadata_checksum = format::Xxh3(value);
  });
  OpenStore();
  ExpectVictimLoadFailsWithoutWrongBytes("'opt'");
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  // Pieces 0-2 are there with other headers; 3 and 4 are missing.
  EXPECT_EQ(BadPieces(report),
            (std::set<PieceId>{
                {kOpt, 0}, {kOpt, 1}, {kOpt, 2}, {kOpt, 3}, {kOpt, 4}}));
  EXPECT_THAT(report.problems[0].status,
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("header does not match the metadata")));
  EXPECT_THAT(report.problems[4].status,
              StatusIs(StatusCode::kCorruption, HasSubstr("is missing")));
  ExpectOthersLoadBitExact();
}

// Rewrites the victim's metadata with `change` applied, and its checksum in
// the catalog to match, as a buggy or hostile writer could.
void RewriteVictimMetadata(const std::string& store,
                           const std::function<void(Metadata&)>& change) {
  RewriteMetadata(store, kVictim, change);
}

// Whatever a load refuses before it reads a piece, Verify reports too,
// naming the item: here chunks that overlap.
TEST_F(CorruptionTest, OverlappingChunksFailVerifyAsTheyFailALoad) {
  RewriteVictimMetadata(store_path(), [](Metadata& md) {
    auto& bias =
        std::get<TensorStorageMetadata>(md.state_dict_metadata.at("bias"));
    bias.chunks = {{{0}, {60}}, {{40}, {60}}};
  });
  OpenStore();
  ExpectVictimLoadFailsWithoutWrongBytes("'bias'");
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  ASSERT_FALSE(report.ok());
  bool named = false;
  for (const DamagedItem& d : report.damaged_items) {
    if (d.fqn == "bias") {
      named = true;
      EXPECT_THAT(d.first_problem,
                  StatusIs(StatusCode::kCorruption, HasSubstr("overlap")));
    }
  }
  EXPECT_TRUE(named);
  ExpectOthersLoadBitExact();
}

// ...and a chunk the metadata lists with no storage entry.
TEST_F(CorruptionTest, AChunkWithoutStorageFailsVerifyAsItFailsALoad) {
  RewriteVictimMetadata(store_path(), [](Metadata& md) {
    md.storage_data.erase(MetadataIndex("bias", {0}));
  });
  OpenStore();
  ExpectVictimLoadFailsWithoutWrongBytes("'bias");
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  ASSERT_EQ(report.damaged_items.size(), 1u);
  EXPECT_EQ(report.damaged_items[0].fqn, "bias");
  EXPECT_THAT(report.damaged_items[0].first_problem,
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("the metadata records no storage for it")));
  ExpectOthersLoadBitExact();
}

// Rewrites the storage entry of `index` in the victim's metadata, as a
// forger who keeps it self-consistent would: a changed cut drops the
// pieces' file offsets (a decoder refuses offsets that don't match
// num_pieces before any other check could see the claim).
void RewriteVictimStorage(
    const std::string& store, const MetadataIndex& index,
    const std::function<void(format::StorageInfo&)>& change) {
  RewriteVictimMetadata(store, [&](Metadata& md) {
    std::string& value = md.storage_data.at(index);
    auto info = format::DecodeStorageInfo(value);
    ASSERT_OK(info);
    change(*info);
    if (info->piece_offsets.size() != info->num_pieces) {
      info->piece_offsets.clear();
    }
    value = format::EncodeStorageInfo(*info);
  });
}

// Forged claims are checked against what the checkpoint holds before
// anything is allocated or read for an item: a byte item of 64 GiB in a
// store of a few hundred KiB fails at once, naming it, and Verify reads
// no piece rather than look for two million of them.
TEST_F(CorruptionTest, AByteItemClaimingMoreThanTheStoreHoldsIsRefusedAtOnce) {
  RewriteVictimStorage(store_path(), MetadataIndex(kOpt),
                       [](format::StorageInfo& info) {
                         info.length = uint64_t{64} << 30;
                         info.num_pieces = 1 << 21;  // Of 32 KiB.
                       });
  OpenStore();
  ExpectCheckpointProblem(
      "item 'opt' alone 68719476736 bytes in 2097152 pieces", 0);
}

// The same for a tensor whose metadata claims 2 GiB (65,536 pieces).
TEST_F(CorruptionTest, ATensorClaimingMoreThanTheStoreHoldsIsRefusedAtOnce) {
  RewriteVictimMetadata(store_path(), [](Metadata& md) {
    auto& w = std::get<TensorStorageMetadata>(md.state_dict_metadata.at("w"));
    w.size = {65536, kPiece};
    w.chunks = {{{0, 0}, {65536, kPiece}}};
    std::string& value = md.storage_data.at(MetadataIndex("w", {0, 0}));
    auto info = format::DecodeStorageInfo(value);
    ASSERT_OK(info);
    info->length = uint64_t{65536} * kPiece;
    info->num_pieces = 65536;
    info->piece_offsets.clear();
    value = format::EncodeStorageInfo(*info);
  });
  OpenStore();
  ExpectCheckpointProblem(
      "item 'w@[0, 0]' alone 2147483648 bytes in 65536 pieces", 0);
}

// Pieces so small that their count alone can't be stored: 393,216 pieces
// of one byte need far more than the store holds.
TEST_F(CorruptionTest, MorePiecesThanTheStoreCanHoldAreRefusedAtOnce) {
  RewriteVictimStorage(store_path(), MetadataIndex("w", {0, 0}),
                       [](format::StorageInfo& info) {
                         info.piece_bytes = 1;
                         info.num_pieces = static_cast<uint32_t>(info.length);
                       });
  OpenStore();
  ExpectCheckpointProblem("in 393216 pieces", 0);
}

// Chunks beyond what the store could hold (each needs a piece): refused
// while decoding, before they are built.
TEST_F(CorruptionTest, MoreChunksThanTheStoreCanHoldAreRefusedAtOnce) {
  RewriteVictimMetadata(store_path(), [](Metadata& md) {
    auto& bias =
        std::get<TensorStorageMetadata>(md.state_dict_metadata.at("bias"));
    bias.size = {100000};
    bias.chunks.clear();
    for (int64_t i = 0; i < 100000; ++i) bias.chunks.push_back({{i}, {1}});
  });
  OpenStore();
  ExpectCheckpointProblem("metadata: it lists 100002 chunks and byte items", 0);
}

TEST_F(CorruptionTest, GarbageCatalogEntryIsFound) {
  RawStore(store_path())
      .Put(rocksdb::kDefaultColumnFamilyName, keys::CatalogKey(kVictim),
           RandomBytes(64, 9));
  OpenStore();
  ExpectCheckpointProblem("catalog entry", 0);
}

// One bad entry does not hide the store: List shows the others, and the
// bad one marked; retention leaves it alone, GC refuses to guess.
TEST_F(CorruptionTest, ADamagedCatalogEntryIsListedMarkedBesideTheOthers) {
  RawStore(store_path())
      .Put(rocksdb::kDefaultColumnFamilyName, keys::CatalogKey(kVictim),
           RandomBytes(64, 9));
  OpenStore();
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].id, kVictim);
  EXPECT_THAT(list[0].damage,
              HasSubstr("key 'checkpoint/victim': catalog entry: "));
  EXPECT_EQ(list[1].id, "before");
  EXPECT_EQ(list[2].id, "after");
  EXPECT_TRUE(list[1].damage.empty() && list[2].damage.empty());
  EXPECT_THAT(
      store_->CollectGarbage(),
      StatusIs(StatusCode::kCorruption, HasSubstr("nothing was collected")));
  ASSERT_OK_AND_ASSIGN(RetentionReport kept, store_->KeepLast(1));
  EXPECT_THAT(kept.kept, ElementsAre("after"));
  EXPECT_THAT(kept.deleted, ElementsAre("before"));
  ASSERT_OK(store_->Delete(kVictim));  // The entry goes; GC takes the rest.
  // With it, the column family of "before": while an entry was damaged,
  // the delete could not tell whether it referenced that one (incremental
  // saves), so it left it to GC.
  ASSERT_OK_AND_ASSIGN(GcReport gc, store_->CollectGarbage());
  EXPECT_THAT(gc.dropped_column_families,
              UnorderedElementsAre("before", kVictim));
}

// The damage may be in the entry rather than in the metadata: Verify says
// so and still checks every piece against the metadata, which decodes.
TEST_F(CorruptionTest, CatalogEntryWithWrongChecksumIsFound) {
  EditCatalogEntry(store_path(),
                   [](CheckpointInfo& e) { e.metadata_checksum ^= 1; });
  OpenStore();
  ExpectCheckpointProblem("metadata checksum mismatch", 16);
}

TEST_F(CorruptionTest, CatalogEntryNamingAMissingColumnFamilyIsFound) {
  EditCatalogEntry(store_path(),
                   [](CheckpointInfo& e) { e.column_family = "gone"; });
  OpenStore();
  ExpectCheckpointProblem("column family 'gone'", 0);
}

// Two ids that name one column family: only a damaged (or forged) catalog
// has them. Verify names both; deleting one would drop the column family
// under the other, so it is refused and nothing changes.
TEST_F(CorruptionTest, AliasedCatalogEntriesAreFoundAndNotDeleted) {
  {
    RawStore raw(store_path());
    auto entry = format::DecodeCatalogEntry(
        raw.Get(rocksdb::kDefaultColumnFamilyName, keys::CatalogKey(kVictim)));
    ASSERT_OK(entry);
    entry->id = "alias";
    raw.Put(rocksdb::kDefaultColumnFamilyName, keys::CatalogKey("alias"),
            format::EncodeCatalogEntry(*entry));
  }
  OpenStore();
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  int aliased = 0;
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    if (c.checkpoint_id != kVictim && c.checkpoint_id != "alias") {
      EXPECT_TRUE(c.ok()) << c.checkpoint_id;
      continue;
    }
    ASSERT_FALSE(c.problems.empty()) << c.checkpoint_id;
    EXPECT_THAT(
        c.problems[0].status,
        StatusIs(StatusCode::kCorruption,
                 HasSubstr("shares its column family '" + std::string(kVictim) +
                           "' with checkpoint")));
    ++aliased;
  }
  EXPECT_EQ(aliased, 2);
  EXPECT_THAT(store_->Delete("alias"),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("shares its column family"),
                             HasSubstr("nothing was deleted"))));
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_EQ(list.size(), 4u);  // Nothing was deleted.
  for (const auto& [id, seed] :
       {std::pair<std::string, uint64_t>{"before", 1}, {"after", 3}}) {
    ExampleState into = EmptyExampleStateDict();
    ASSERT_OK(LoadDict(&into.dict, id));
    EXPECT_TRUE(IsExampleState(into, seed)) << id;
  }
}

// A catalog key no save could have written: a finding of Verify, which
// goes on to check the real checkpoints.
TEST_F(CorruptionTest, CatalogKeyWithAnInvalidIdIsFound) {
  RawStore(store_path())
      .Put(rocksdb::kDefaultColumnFamilyName, "checkpoint/default", "x");
  OpenStore();
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  ASSERT_EQ(report.checkpoints.size(), 4u);
  uint64_t pieces = 0;
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    pieces += c.pieces_checked;
    if (c.checkpoint_id != "default") continue;
    ASSERT_EQ(c.problems.size(), 1u);
    EXPECT_THAT(c.problems[0].status,
                StatusIs(StatusCode::kCorruption, HasSubstr("invalid id")));
  }
  EXPECT_EQ(pieces, 4u + 16u + 4u);  // One piece per item in the others.
}

// Totals a load does not use: the data is sound and loads, and Verify
// reports the entry that disagrees with the metadata.
TEST_F(CorruptionTest, CatalogEntryWithWrongTotalsIsFoundByVerifyOnly) {
  EditCatalogEntry(store_path(), [](CheckpointInfo& e) { ++e.bytes; });
  OpenStore();
  VictimState into = MakeVictim(/*zero=*/true);
  ASSERT_OK(LoadDict(&into.dict, kVictim));
  EXPECT_EQ(into.w.bytes, victim_.w.bytes);
  ASSERT_OK_AND_ASSIGN(CheckpointVerifyReport report, VerifyOne(kVictim));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_THAT(report.problems[0].status,
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("catalog entry records"),
                             HasSubstr("its metadata lists 3 items"))));
  EXPECT_EQ(report.pieces_checked, 16u);
}

}  // namespace
}  // namespace rocksdcp::testing
