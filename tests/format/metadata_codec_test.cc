#include "format/metadata_codec.h"

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "rocksdb/catalog_codec.h"
#include "schema/checkpoint_generated.h"
#include "test_util.h"

namespace rocksdcp::format {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Every field set, and set away from its default.
Metadata FullMetadata() {
  Metadata m;
  TensorStorageMetadata w;
  w.properties = {DType::kBFloat16, TensorLayout::kStrided,
                  /*requires_grad=*/true, MemoryFormat::kChannelsLast,
                  /*pin_memory=*/true};
  w.size = {4, 6};
  w.chunks = {{{0, 0}, {2, 6}}, {{2, 0}, {2, 6}}};
  m.state_dict_metadata["layers.0.w"] = w;

  TensorStorageMetadata step;  // 0-d: no sizes, one chunk with no offsets.
  step.properties.dtype = DType::kInt64;
  step.chunks = {{{}, {}}};
  m.state_dict_metadata["step"] = step;

  TensorStorageMetadata empty;  // A tensor with no elements and no chunks.
  empty.size = {0, 3};
  m.state_dict_metadata["empty"] = empty;

  m.state_dict_metadata["optim@state#0 \xc3\xa9"] = BytesStorageMetadata{};

  m.planner_data = std::string("planner\0data\xff", 13);
  m.storage_data[MetadataIndex("layers.0.w", {0, 0}, 0)] =
      std::string("info\0a", 6);
  m.storage_data[MetadataIndex("layers.0.w", {2, 0}, 1)] = "info-b";
  m.storage_data[MetadataIndex("step", {})] = "";
  m.storage_data[MetadataIndex("optim@state#0 \xc3\xa9")] = "info-c";
  m.storage_meta =
      StorageMeta{"ckpt-1", "save-7", std::nullopt, {"model", "", "optim"}};
  m.version = "1.0.0";
  return m;
}

// Small, and its first-written (so last) bytes are the string "abc" with
// its terminator: FlatBuffers pads a value at its end when the first object
// it writes is not 4-byte sized, and cutting padding loses nothing.
Metadata SmallMetadata() {
  Metadata m;
  TensorStorageMetadata t;
  t.size = {2};
  t.chunks = {{{0}, {2}}};
  m.state_dict_metadata["abc"] = t;
  m.storage_data[MetadataIndex("abc", {0}, 0)] = "i";
  m.storage_meta = StorageMeta{"c", std::nullopt, std::nullopt, {}};
  return m;
}

class MetadataCodecTest : public ::testing::Test {
 protected:
  static Result<Metadata> RoundTrip(const Metadata& m) {
    return DecodeMetadata(EncodeMetadata(m));
  }
};

TEST_F(MetadataCodecTest, BoundCoversTheEncodedSize) {
  std::vector<Metadata> cases = {Metadata(), SmallMetadata(), FullMetadata()};
  // Many items with long names and wide chunk lists, as a sharded
  // optimizer state has.
  Metadata big;
  for (int i = 0; i < 2000; ++i) {
    TensorStorageMetadata t;
    t.size = {64, 64, 3};
    for (int64_t r = 0; r < 64; r += 16) {
      t.chunks.push_back({{r, 0, 0}, {16, 64, 3}});
    }
    const std::string fqn = "optim.state." + std::to_string(i) +
                            std::string(static_cast<size_t>(i % 97), 'x');
    big.state_dict_metadata[fqn] = t;
    for (size_t c = 0; c < t.chunks.size(); ++c) {
      big.storage_data[MetadataIndex(fqn, t.chunks[c].offsets,
                                     static_cast<int>(c))] =
          std::string(static_cast<size_t>(i % 41), 'v');
    }
  }
  big.planner_data = std::string(1000, 'p');
  cases.push_back(big);
  for (const Metadata& m : cases) {
    const uint64_t encoded = EncodeMetadata(m).size();
    const uint64_t bound = MetadataBytesBound(m);
    EXPECT_LE(encoded, bound);
    // Not so loose that it refuses what would fit many times over.
    EXPECT_LE(bound, 8 * encoded + 1024);
  }
}

TEST_F(MetadataCodecTest, MetadataOverTheLimitIsRefusedNamingWhatToDo) {
  const Metadata m = FullMetadata();
  EXPECT_OK(CheckMetadataFits(m));
  EXPECT_THAT(CheckMetadataFits(m, /*limit=*/100),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("4 items, 4 stored chunks"),
                             HasSubstr("over the limit of 100"),
                             HasSubstr("several checkpoints"))));
}

TEST_F(MetadataCodecTest, RoundTripsEveryField) {
  const Metadata m = FullMetadata();
  ASSERT_OK_AND_ASSIGN(Metadata back, RoundTrip(m));
  EXPECT_TRUE(back == m);
  // Spelled out where operator== could hide a mix-up.
  EXPECT_EQ(back.planner_data, m.planner_data);
  EXPECT_EQ(back.version, "1.0.0");
  ASSERT_TRUE(back.storage_meta.has_value());
  EXPECT_EQ(back.storage_meta->checkpoint_id, "ckpt-1");
  EXPECT_EQ(back.storage_meta->save_id, "save-7");
  EXPECT_EQ(back.storage_meta->load_id, std::nullopt);
  EXPECT_EQ(back.storage_meta->modules,
            (std::vector<std::string>{"model", "", "optim"}));
  const auto& w = std::get<TensorStorageMetadata>(
      back.state_dict_metadata.at("layers.0.w"));
  EXPECT_EQ(w.properties.dtype, DType::kBFloat16);
  EXPECT_TRUE(w.properties.requires_grad);
  EXPECT_EQ(w.properties.memory_format, MemoryFormat::kChannelsLast);
  EXPECT_TRUE(w.properties.pin_memory);
  EXPECT_EQ(w.chunks.size(), 2u);
}

// An item's first storage_data index names the string of its state_dict
// entry's fqn: an item of one chunk has its fqn in the value once. An index
// whose fqn has no entry (which a planner of one's own may make) gets its
// own, wherever it sorts.
TEST_F(MetadataCodecTest, AnItemOfOneChunkHasItsFqnWrittenOnce) {
  constexpr size_t kItems = 100;
  constexpr size_t kNameBytes = 1000;
  Metadata m;
  std::vector<std::string> fqns;
  for (size_t i = 0; i < kItems; ++i) {
    // Every other name is a prefix of the one after it.
    const std::string base(kNameBytes, static_cast<char>('a' + i / 2 % 26));
    fqns.push_back(std::to_string(i / 2) + "." + base +
                   (i % 2 == 0 ? "" : "x"));
  }
  for (const std::string& fqn : fqns) {
    TensorStorageMetadata t;
    t.size = {4};
    t.chunks = {{{0}, {4}}};
    m.state_dict_metadata[fqn] = t;
    m.storage_data[MetadataIndex(fqn, {0}, 0)] = "info of " + fqn.substr(0, 3);
  }
  // Between the others in fqn order, and past the last.
  const std::string orphan = "5" + std::string(kNameBytes, '~');
  const std::string last = "~" + std::string(kNameBytes, '~');
  m.storage_data[MetadataIndex(orphan)] = "no entry";
  m.storage_data[MetadataIndex(last)] = "no entry either";
  const std::string encoded = EncodeMetadata(m);
  // Names take (kItems + 2) * kNameBytes; each item's tables and vectors
  // far less than another name.
  EXPECT_GT(encoded.size(), (kItems + 2) * kNameBytes);
  EXPECT_LT(encoded.size(), (kItems + 2) * kNameBytes * 3 / 2);
  ASSERT_OK_AND_ASSIGN(Metadata back, DecodeMetadata(encoded));
  EXPECT_TRUE(back == m);
  EXPECT_EQ(back.storage_data.at(MetadataIndex(orphan)), "no entry");
  EXPECT_EQ(back.storage_data.at(MetadataIndex(fqns[7], {0}, 0)),
            "info of " + fqns[7].substr(0, 3));
}

// A tensor of thousands of chunks with a long name: were every chunk's
// index to share the name, the value would decode to many times its size
// (a copy of the name per index), and readers refuse such a value as
// forged. Only the first index shares it, so it loads.
TEST_F(MetadataCodecTest, ALongNameOfManyChunksDecodes) {
  const std::string fqn = "layers." + std::string(4000, 'n');
  constexpr int64_t kChunks = 4096;
  Metadata m;
  TensorStorageMetadata t;
  t.size = {kChunks};
  for (int64_t c = 0; c < kChunks; ++c) {
    t.chunks.push_back({{c}, {1}});
    m.storage_data[MetadataIndex(fqn, {c}, static_cast<int>(c))] = "i";
  }
  m.state_dict_metadata[fqn] = t;
  const std::string encoded = EncodeMetadata(m);
  EXPECT_GT(encoded.size(), static_cast<size_t>(kChunks) * 4000);
  ASSERT_OK_AND_ASSIGN(Metadata back, DecodeMetadata(encoded));
  EXPECT_TRUE(back == m);
}

TEST_F(MetadataCodecTest, KeepsAbsentOffsetApartFromEmptyOffset) {
  ASSERT_OK_AND_ASSIGN(Metadata back, RoundTrip(FullMetadata()));
  // The 0-d tensor's chunk has an empty offset; the byte item has none.
  EXPECT_EQ(back.storage_data.count(MetadataIndex("step", {})), 1u);
  EXPECT_EQ(back.storage_data.count(MetadataIndex("step")), 0u);
  const std::string bytes_fqn = "optim@state#0 \xc3\xa9";
  EXPECT_EQ(back.storage_data.count(MetadataIndex(bytes_fqn)), 1u);
  EXPECT_EQ(back.storage_data.count(MetadataIndex(bytes_fqn, {})), 0u);
}

TEST_F(MetadataCodecTest, KeepsIndexHintsIncludingZero) {
  ASSERT_OK_AND_ASSIGN(Metadata back, RoundTrip(FullMetadata()));
  auto hint = [&](const MetadataIndex& i) {
    return back.storage_data.find(i)->first.index;
  };
  EXPECT_EQ(hint(MetadataIndex("layers.0.w", {0, 0})), 0);
  EXPECT_EQ(hint(MetadataIndex("layers.0.w", {2, 0})), 1);
  EXPECT_EQ(hint(MetadataIndex("step", {})), std::nullopt);
}

TEST_F(MetadataCodecTest, RoundTripsEmptyMetadata) {
  const Metadata m;
  ASSERT_OK_AND_ASSIGN(Metadata back, RoundTrip(m));
  EXPECT_TRUE(back == m);
  EXPECT_FALSE(back.storage_meta.has_value());
}

TEST_F(MetadataCodecTest, RoundTripsStorageMetaWithNothingSet) {
  Metadata m;
  m.storage_meta = StorageMeta{};
  ASSERT_OK_AND_ASSIGN(Metadata back, RoundTrip(m));
  ASSERT_TRUE(back.storage_meta.has_value());
  EXPECT_TRUE(*back.storage_meta == StorageMeta{});
}

TEST_F(MetadataCodecTest, EncodingIsDeterministic) {
  const Metadata m = FullMetadata();
  EXPECT_EQ(EncodeMetadata(m), EncodeMetadata(m));

  // The same value built with storage_data in another insertion order and
  // bucket count iterates differently but must encode the same.
  Metadata shuffled = m;
  shuffled.storage_data.clear();
  shuffled.storage_data.reserve(1000);
  std::vector<std::pair<MetadataIndex, std::string>> entries(
      m.storage_data.begin(), m.storage_data.end());
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    shuffled.storage_data.insert(*it);
  }
  ASSERT_TRUE(shuffled == m);
  EXPECT_EQ(EncodeMetadata(shuffled), EncodeMetadata(m));
}

TEST_F(MetadataCodecTest, RejectsEveryTruncation) {
  const std::string value = EncodeMetadata(SmallMetadata());
  ASSERT_OK(DecodeMetadata(value));
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_THAT(DecodeMetadata(value.substr(0, n)),
                StatusIs(StatusCode::kCorruption, ::testing::_))
        << "prefix of " << n << " bytes";
  }
}

TEST_F(MetadataCodecTest, FlippedBytesNeverCrash) {
  const std::string value = EncodeMetadata(SmallMetadata());
  int corrupt = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] ^= 0xff;
    Result<Metadata> m = DecodeMetadata(bad);
    if (!m.ok()) {
      EXPECT_THAT(m, StatusIs(StatusCode::kCorruption, ::testing::_));
      ++corrupt;
    }
  }
  EXPECT_GT(corrupt, 0);
}

TEST_F(MetadataCodecTest, RejectsWrongIdentifier) {
  EXPECT_THAT(DecodeMetadata(EncodeStorageInfo(StorageInfo{})),
              StatusIs(StatusCode::kCorruption, HasSubstr("identifier")));
}

TEST_F(MetadataCodecTest, ErrorsEscapeTheFqn) {
  Metadata m;
  TensorStorageMetadata t;
  t.size = {-1};
  m.state_dict_metadata["bad\nname"] = t;
  EXPECT_THAT(RoundTrip(m), StatusIs(StatusCode::kCorruption,
                                     AllOf(HasSubstr("\"bad%0Aname\""),
                                           HasSubstr("negative size"))));
}

// ---- Semantic checks on values EncodeMetadata writes as given. ----

struct BadMetadataCase {
  const char* name;
  std::function<void(TensorStorageMetadata&)> mutate;
  const char* message;
};

class MetadataCodecRejectTest
    : public ::testing::TestWithParam<BadMetadataCase> {};

TEST_P(MetadataCodecRejectTest, ReturnsCorruptionNamingTheTensor) {
  // A valid 4x6 tensor with one chunk, broken one way per case.
  Metadata m;
  TensorStorageMetadata t;
  t.size = {4, 6};
  t.chunks = {{{2, 0}, {2, 6}}};
  m.state_dict_metadata["layer.w"] = t;
  ASSERT_OK(DecodeMetadata(EncodeMetadata(m)));
  GetParam().mutate(t);
  m.state_dict_metadata["layer.w"] = t;
  EXPECT_THAT(
      DecodeMetadata(EncodeMetadata(m)),
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("\"layer.w\""), HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Checks, MetadataCodecRejectTest,
    ::testing::Values(
        BadMetadataCase{"UnknownDtype",
                        [](TensorStorageMetadata& t) {
                          t.properties.dtype = static_cast<DType>(0);
                        },
                        "unknown dtype 0"},
        BadMetadataCase{"UnknownLayout",
                        [](TensorStorageMetadata& t) {
                          t.properties.layout = static_cast<TensorLayout>(3);
                        },
                        "unknown layout 3"},
        BadMetadataCase{"UnknownMemoryFormat",
                        [](TensorStorageMetadata& t) {
                          t.properties.memory_format =
                              static_cast<MemoryFormat>(9);
                        },
                        "unknown memory_format 9"},
        BadMetadataCase{"NegativeSize",
                        [](TensorStorageMetadata& t) {
                          t.size = {4, -6};
                        },
                        "negative size"},
        BadMetadataCase{"TooManyBytes",
                        [](TensorStorageMetadata& t) {
                          // 4 * 2^61 bytes: fits in 64 bits, not in 63.
                          t.size = {int64_t{1} << 31, int64_t{1} << 30};
                          t.chunks.clear();
                        },
                        "larger than 2^63 bytes"},
        BadMetadataCase{"ProductOverflows",
                        [](TensorStorageMetadata& t) {
                          t.size = {INT64_MAX, INT64_MAX};
                          t.chunks.clear();
                        },
                        "larger than 2^63 bytes"},
        BadMetadataCase{
            "ChunkOffsetsRank",
            [](TensorStorageMetadata& t) { t.chunks[0].offsets = {2}; },
            "chunk 0 has offsets of rank 1"},
        BadMetadataCase{"ChunkSizesRank",
                        [](TensorStorageMetadata& t) {
                          t.chunks[0].sizes = {2, 6, 1};
                        },
                        "sizes of rank 3"},
        BadMetadataCase{"NegativeChunkOffset",
                        [](TensorStorageMetadata& t) {
                          t.chunks[0].offsets = {-2, 0};
                        },
                        "negative offset or size"},
        BadMetadataCase{"NegativeChunkSize",
                        [](TensorStorageMetadata& t) {
                          t.chunks[0].sizes = {2, -6};
                        },
                        "negative offset or size"},
        BadMetadataCase{"ChunkPastTheEnd",
                        [](TensorStorageMetadata& t) {
                          t.chunks.push_back({{3, 0}, {2, 6}});
                        },
                        "chunk 1 exceeds the tensor in dimension 0"},
        BadMetadataCase{"ChunkBiggerThanTensor",
                        [](TensorStorageMetadata& t) {
                          t.chunks[0] = {{0, 0}, {4, 7}};
                        },
                        "exceeds the tensor in dimension 1"},
        BadMetadataCase{"ChunkEndOverflows",
                        [](TensorStorageMetadata& t) {
                          t.size = {INT64_MAX};
                          t.properties.dtype = DType::kUInt8;
                          t.chunks = {{{INT64_MAX}, {1}}};
                        },
                        "exceeds the tensor"}),
    [](const ::testing::TestParamInfo<BadMetadataCase>& info) {
      return std::string(info.param.name);
    });

TEST_F(MetadataCodecTest, RejectsNegativeStorageOffset) {
  Metadata m;
  m.storage_data[MetadataIndex("layer.w", {0, -1})] = "x";
  EXPECT_THAT(RoundTrip(m), StatusIs(StatusCode::kCorruption,
                                     AllOf(HasSubstr("\"layer.w\""),
                                           HasSubstr("negative offset"))));
}

// ---- Shapes only a hand-built buffer can have. ----

// Builds fb::Metadata values entry by entry.
class RawMetadata {
 public:
  RawMetadata& AddEntry(std::string_view fqn, fb::StorageMetadata type,
                        flatbuffers::Offset<void> value) {
    const auto name = fbb_.CreateString(fqn);
    entries_.push_back(fb::CreateStateDictEntry(fbb_, name, type, value));
    return *this;
  }
  RawMetadata& AddBytesItem(std::string_view fqn) {
    return AddEntry(fqn, fb::StorageMetadata::BytesStorageMetadata,
                    fb::CreateBytesStorageMetadata(fbb_).Union());
  }
  RawMetadata& AddStorage(std::string_view fqn, std::vector<int64_t> offset,
                          int32_t hint) {
    const auto name = fbb_.CreateString(fqn);
    const auto off = fbb_.CreateVector(offset);
    const auto index = fb::CreateMetadataIndex(fbb_, name, off, hint);
    storage_.push_back(fb::CreateStorageDataEntry(fbb_, index));
    return *this;
  }
  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

  std::string Finish() {
    const auto entries = fbb_.CreateVector(entries_);
    const auto storage = fbb_.CreateVector(storage_);
    fbb_.Finish(fb::CreateMetadata(fbb_, 0, entries, 0, storage),
                kMetadataIdentifier);
    return std::string(reinterpret_cast<const char*>(fbb_.GetBufferPointer()),
                       fbb_.GetSize());
  }

 private:
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<flatbuffers::Offset<fb::StateDictEntry>> entries_;
  std::vector<flatbuffers::Offset<fb::StorageDataEntry>> storage_;
};

TEST_F(MetadataCodecTest, RejectsDuplicateFqn) {
  RawMetadata raw;
  raw.AddBytesItem("a").AddBytesItem("dup").AddBytesItem("dup");
  EXPECT_THAT(DecodeMetadata(raw.Finish()),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("duplicate state_dict entry \"dup\"")));
}

TEST_F(MetadataCodecTest, RejectsDuplicateStorageIndex) {
  // Entries that differ only in their index hint are the same item.
  RawMetadata raw;
  raw.AddStorage("w", {0, 4}, 0).AddStorage("w", {0, 4}, 1);
  EXPECT_THAT(DecodeMetadata(raw.Finish()),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("duplicate storage_data index \"w\" at [0, "
                                 "4]")));
}

TEST_F(MetadataCodecTest, RejectsUnknownUnionType) {
  RawMetadata raw;
  raw.AddEntry("x", static_cast<fb::StorageMetadata>(9),
               fb::CreateBytesStorageMetadata(raw.fbb()).Union());
  EXPECT_THAT(DecodeMetadata(raw.Finish()),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("\"x\" has unknown storage metadata type 9")));
}

TEST_F(MetadataCodecTest, RejectsEntryWithoutValue) {
  RawMetadata raw;
  raw.AddEntry("x", fb::StorageMetadata::TensorStorageMetadata, 0);
  EXPECT_THAT(DecodeMetadata(raw.Finish()),
              StatusIs(StatusCode::kCorruption, HasSubstr("has no value")));
  RawMetadata none;
  none.AddEntry("y", fb::StorageMetadata::NONE, 0);
  EXPECT_THAT(DecodeMetadata(none.Finish()),
              StatusIs(StatusCode::kCorruption, HasSubstr("\"y\"")));
}

TEST_F(MetadataCodecTest, RejectsTensorWithoutPropertiesOrSize) {
  RawMetadata no_properties;
  const auto size = no_properties.fbb().CreateVector(std::vector<int64_t>{1});
  no_properties.AddEntry(
      "x", fb::StorageMetadata::TensorStorageMetadata,
      fb::CreateTensorStorageMetadata(no_properties.fbb(), 0, size).Union());
  EXPECT_THAT(DecodeMetadata(no_properties.Finish()),
              StatusIs(StatusCode::kCorruption, HasSubstr("no properties")));

  RawMetadata no_size;
  const auto properties =
      fb::CreateTensorProperties(no_size.fbb(), fb::DType::Float32);
  no_size.AddEntry(
      "x", fb::StorageMetadata::TensorStorageMetadata,
      fb::CreateTensorStorageMetadata(no_size.fbb(), properties).Union());
  EXPECT_THAT(DecodeMetadata(no_size.Finish()),
              StatusIs(StatusCode::kCorruption, HasSubstr("no size")));
}

}  // namespace
}  // namespace rocksdcp::format
