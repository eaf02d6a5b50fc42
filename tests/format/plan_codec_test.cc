#include "format/plan_codec.h"

#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/metadata_codec.h"
#include "schema/plans_generated.h"
#include "test_util.h"

namespace rocksdcp::format {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::string_literals;

std::string Bytes(const flatbuffers::FlatBufferBuilder& fbb) {
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

// ---- Equality, field by field ----

// MetadataIndex's operator== ignores the index hint, which must survive too.
void ExpectIndexEq(const MetadataIndex& got, const MetadataIndex& want) {
  EXPECT_EQ(got.fqn, want.fqn);
  EXPECT_EQ(got.offset, want.offset);
  EXPECT_EQ(got.index, want.index);
}

void ExpectWriteItemEq(const WriteItem& got, const WriteItem& want) {
  ExpectIndexEq(got.index, want.index);
  EXPECT_EQ(got.type, want.type);
  ASSERT_EQ(got.tensor_data.has_value(), want.tensor_data.has_value());
  if (!want.tensor_data) return;
  EXPECT_EQ(got.tensor_data->chunk.offsets, want.tensor_data->chunk.offsets);
  EXPECT_EQ(got.tensor_data->chunk.sizes, want.tensor_data->chunk.sizes);
  const TensorProperties& g = got.tensor_data->properties;
  const TensorProperties& w = want.tensor_data->properties;
  EXPECT_EQ(g.dtype, w.dtype);
  EXPECT_EQ(g.layout, w.layout);
  EXPECT_EQ(g.requires_grad, w.requires_grad);
  EXPECT_EQ(g.memory_format, w.memory_format);
  EXPECT_EQ(g.pin_memory, w.pin_memory);
  EXPECT_EQ(got.tensor_data->size, want.tensor_data->size);
}

void ExpectSavePlanEq(const SavePlan& got, const SavePlan& want) {
  ASSERT_EQ(got.items.size(), want.items.size());
  for (size_t i = 0; i < want.items.size(); ++i) {
    SCOPED_TRACE("item " + std::to_string(i));
    ExpectWriteItemEq(got.items[i], want.items[i]);
  }
  EXPECT_EQ(got.storage_data, want.storage_data);
  EXPECT_EQ(got.planner_data, want.planner_data);
  EXPECT_EQ(got.usable, want.usable);
}

void ExpectLoadPlanEq(const LoadPlan& got, const LoadPlan& want) {
  ASSERT_EQ(got.items.size(), want.items.size());
  for (size_t i = 0; i < want.items.size(); ++i) {
    SCOPED_TRACE("item " + std::to_string(i));
    const ReadItem& g = got.items[i];
    const ReadItem& w = want.items[i];
    EXPECT_EQ(g.type, w.type);
    ExpectIndexEq(g.dest_index, w.dest_index);
    EXPECT_EQ(g.dest_offsets, w.dest_offsets);
    ExpectIndexEq(g.storage_index, w.storage_index);
    EXPECT_EQ(g.storage_offsets, w.storage_offsets);
    EXPECT_EQ(g.lengths, w.lengths);
  }
  EXPECT_EQ(got.storage_data, want.storage_data);
  EXPECT_EQ(got.planner_data, want.planner_data);
}

void ExpectWriteResultsEq(const std::vector<WriteResult>& got,
                          const std::vector<WriteResult>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ExpectIndexEq(got[i].index, want[i].index);
    EXPECT_EQ(got[i].size_in_bytes, want[i].size_in_bytes);
    EXPECT_EQ(got[i].storage_data, want[i].storage_data);
  }
}

// ---- Values ----

WriteItem TensorItem(MetadataIndex index, ChunkStorageMetadata chunk,
                     std::vector<int64_t> size,
                     WriteItemType type = WriteItemType::kTensor) {
  WriteItem item;
  item.index = std::move(index);
  item.type = type;
  item.tensor_data = TensorWriteData{std::move(chunk), {}, std::move(size)};
  return item;
}

WriteItem BytesItem(std::string fqn) {
  WriteItem item;
  item.index = MetadataIndex(std::move(fqn));
  item.type = WriteItemType::kByteIO;
  return item;
}

// Every field set, and set away from its default, with NULs in the bytes.
SavePlan FullSavePlan() {
  SavePlan plan;
  WriteItem w = TensorItem(MetadataIndex("layers.0.w", {2, 0}, 1),
                           {{2, 0}, {2, 6}}, {4, 6}, WriteItemType::kShard);
  w.tensor_data->properties = {DType::kBFloat16, TensorLayout::kStrided,
                               /*requires_grad=*/true,
                               MemoryFormat::kChannelsLast,
                               /*pin_memory=*/true};
  plan.items.push_back(std::move(w));
  // A hint of 0 must not read back as absent.
  plan.items.push_back(
      TensorItem(MetadataIndex("layers.0.b", {0}, 0), {{0}, {6}}, {6}));
  // 0-d: an empty offset, a chunk with no dimensions, no size.
  WriteItem step = TensorItem(MetadataIndex("step", {}), {{}, {}}, {});
  step.tensor_data->properties.dtype = DType::kInt64;
  plan.items.push_back(std::move(step));
  // Bytes: no offset at all, and no tensor_data.
  plan.items.push_back(BytesItem("optim@state#0 \xc3\xa9"));
  // A tensor with no elements.
  plan.items.push_back(
      TensorItem(MetadataIndex("empty", {0, 0}), {{0, 0}, {0, 3}}, {0, 3}));
  plan.storage_data = std::string("storage\0data", 12);
  plan.planner_data = std::string("planner\0data\xff", 13);
  plan.usable = true;
  return plan;
}

// Its first-written (so last) bytes are the fqn "abc" with its terminator:
// FlatBuffers pads a value at its end when the first object it writes is
// not 4-byte sized, and cutting padding loses nothing.
SavePlan SmallSavePlan() {
  SavePlan plan;
  plan.items.push_back(
      TensorItem(MetadataIndex("abc", {0}, 0), {{0}, {2}}, {2}));
  plan.planner_data = "p";
  return plan;
}

ReadItem Read(LoadItemType type, MetadataIndex dest,
              std::vector<int64_t> dest_offsets, MetadataIndex storage,
              std::vector<int64_t> storage_offsets,
              std::vector<int64_t> lengths) {
  ReadItem item;
  item.type = type;
  item.dest_index = std::move(dest);
  item.dest_offsets = std::move(dest_offsets);
  item.storage_index = std::move(storage);
  item.storage_offsets = std::move(storage_offsets);
  item.lengths = std::move(lengths);
  return item;
}

LoadPlan FullLoadPlan() {
  LoadPlan plan;
  plan.items.push_back(
      Read(LoadItemType::kTensor, MetadataIndex("layers.0.w", {0, 0}, 3),
           {0, 1}, MetadataIndex("layers.0.w", {2, 0}, 0), {1, 0}, {1, 5}));
  plan.items.push_back(Read(LoadItemType::kTensor, MetadataIndex("step", {}),
                            {}, MetadataIndex("step", {}, 0), {}, {}));
  plan.items.push_back(Read(LoadItemType::kByteIO,
                            MetadataIndex("optim@state#0 \xc3\xa9"), {},
                            MetadataIndex("optim@state#0 \xc3\xa9"), {}, {}));
  plan.storage_data = std::string("\0s\0", 3);
  plan.planner_data = std::string("planner\0data\xff", 13);
  return plan;
}

LoadPlan SmallLoadPlan() {
  LoadPlan plan;
  plan.items.push_back(Read(LoadItemType::kTensor, MetadataIndex("abc", {0}),
                            {0}, MetadataIndex("abc", {0}, 0), {0}, {2}));
  return plan;
}

std::vector<WriteResult> FullWriteResults() {
  return {
      {MetadataIndex("layers.0.w", {2, 0}, 1), uint64_t{1} << 40,
       std::string("info\0a", 6)},
      {MetadataIndex("step", {}), 8, ""},
      {MetadataIndex("optim@state#0 \xc3\xa9"), 0, "info-c"},
      {MetadataIndex("max", {0}, 0), UINT64_MAX, "x"},
  };
}

std::vector<WriteResult> SmallWriteResults() {
  return {{MetadataIndex("abc", {0}, 0), 8, "s"}};
}

// ---- SavePlan ----

TEST(SavePlanCodecTest, RoundTripsEveryField) {
  const SavePlan plan = FullSavePlan();
  ASSERT_OK_AND_ASSIGN(SavePlan back, DecodeSavePlan(EncodeSavePlan(plan)));
  ExpectSavePlanEq(back, plan);
}

TEST(SavePlanCodecTest, KeepsAbsentOffsetApartFromEmptyOffset) {
  ASSERT_OK_AND_ASSIGN(SavePlan back,
                       DecodeSavePlan(EncodeSavePlan(FullSavePlan())));
  ASSERT_EQ(back.items.size(), 5u);
  // The 0-d tensor's chunk has an empty offset; the byte item has none.
  EXPECT_EQ(back.items[2].index.offset, std::vector<int64_t>{});
  EXPECT_EQ(back.items[3].index.offset, std::nullopt);
}

TEST(SavePlanCodecTest, KeepsIndexHintsIncludingZero) {
  ASSERT_OK_AND_ASSIGN(SavePlan back,
                       DecodeSavePlan(EncodeSavePlan(FullSavePlan())));
  ASSERT_EQ(back.items.size(), 5u);
  EXPECT_EQ(back.items[0].index.index, 1);
  EXPECT_EQ(back.items[1].index.index, 0);
  EXPECT_EQ(back.items[2].index.index, std::nullopt);
}

TEST(SavePlanCodecTest, RoundTripsEmptyPlan) {
  const SavePlan plan;
  ASSERT_OK_AND_ASSIGN(SavePlan back, DecodeSavePlan(EncodeSavePlan(plan)));
  ExpectSavePlanEq(back, plan);
  EXPECT_TRUE(back.usable);
}

TEST(SavePlanCodecTest, RoundTripsUnusablePlan) {
  SavePlan plan = FullSavePlan();
  plan.usable = false;
  ASSERT_OK_AND_ASSIGN(SavePlan back, DecodeSavePlan(EncodeSavePlan(plan)));
  EXPECT_FALSE(back.usable);
  ExpectSavePlanEq(back, plan);
}

TEST(SavePlanCodecTest, RoundTripsBytesMadeOfNuls) {
  SavePlan plan;
  plan.storage_data = std::string(5, '\0');
  plan.planner_data = std::string(1, '\0');
  ASSERT_OK_AND_ASSIGN(SavePlan back, DecodeSavePlan(EncodeSavePlan(plan)));
  EXPECT_EQ(back.storage_data, plan.storage_data);
  EXPECT_EQ(back.planner_data, plan.planner_data);
}

// ---- SavePlan: semantic checks on values EncodeSavePlan writes as given.

struct BadWriteItemCase {
  const char* name;
  std::function<void(WriteItem&)> mutate;
  const char* message;
};

class SavePlanCodecRejectTest
    : public ::testing::TestWithParam<BadWriteItemCase> {};

TEST_P(SavePlanCodecRejectTest, ReturnsCorruptionNamingTheItem) {
  // A valid 4x6 tensor's lower half, broken one way per case; it is the
  // second item, so the error must say which.
  SavePlan plan;
  plan.items.push_back(BytesItem("first"));
  plan.items.push_back(
      TensorItem(MetadataIndex("layer.w", {2, 0}), {{2, 0}, {2, 6}}, {4, 6}));
  ASSERT_OK(DecodeSavePlan(EncodeSavePlan(plan)));
  GetParam().mutate(plan.items[1]);
  EXPECT_THAT(DecodeSavePlan(EncodeSavePlan(plan)),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("save plan: item 1 \"layer.w\""),
                             HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Checks, SavePlanCodecRejectTest,
    ::testing::Values(
        BadWriteItemCase{
            "UnknownType",
            [](WriteItem& i) { i.type = static_cast<WriteItemType>(3); },
            "has unknown type 3"},
        BadWriteItemCase{"TensorWithoutTensorData",
                         [](WriteItem& i) { i.tensor_data.reset(); },
                         "is a tensor without tensor_data"},
        BadWriteItemCase{"ShardWithoutTensorData",
                         [](WriteItem& i) {
                           i.type = WriteItemType::kShard;
                           i.tensor_data.reset();
                         },
                         "is a tensor without tensor_data"},
        BadWriteItemCase{"UnknownDtype",
                         [](WriteItem& i) {
                           i.tensor_data->properties.dtype =
                               static_cast<DType>(0);
                         },
                         "has unknown dtype 0"},
        BadWriteItemCase{"DtypeFromTheFuture",
                         [](WriteItem& i) {
                           i.tensor_data->properties.dtype =
                               static_cast<DType>(kMaxDType + 1);
                         },
                         "has unknown dtype"},
        BadWriteItemCase{"UnknownLayout",
                         [](WriteItem& i) {
                           i.tensor_data->properties.layout =
                               static_cast<TensorLayout>(3);
                         },
                         "has unknown layout 3"},
        BadWriteItemCase{"UnknownMemoryFormat",
                         [](WriteItem& i) {
                           i.tensor_data->properties.memory_format =
                               static_cast<MemoryFormat>(9);
                         },
                         "has unknown memory_format 9"},
        BadWriteItemCase{"NegativeSize",
                         [](WriteItem& i) {
                           i.tensor_data->size = {4, -6};
                         },
                         "has a negative size"},
        BadWriteItemCase{
            "ChunkRanksDiffer",
            [](WriteItem& i) { i.tensor_data->chunk.offsets = {2}; },
            "has offsets of rank 1 but sizes of rank 2"},
        BadWriteItemCase{"NegativeChunkOffset",
                         [](WriteItem& i) {
                           i.tensor_data->chunk.offsets = {2, -1};
                         },
                         "negative offset or size in dimension 1"},
        BadWriteItemCase{"NegativeChunkSize",
                         [](WriteItem& i) {
                           i.tensor_data->chunk.sizes = {-2, 6};
                         },
                         "negative offset or size in dimension 0"}),
    [](const ::testing::TestParamInfo<BadWriteItemCase>& info) {
      return std::string(info.param.name);
    });

TEST(SavePlanCodecTest, RejectsNegativeIndexOffset) {
  SavePlan plan;
  plan.items.push_back(BytesItem("a"));
  plan.items.push_back(BytesItem("b"));
  plan.items[1].index.offset = std::vector<int64_t>{0, -4};
  EXPECT_THAT(DecodeSavePlan(EncodeSavePlan(plan)),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("save plan: item 1 \"b\" at [0, -4] has a "
                                 "negative offset")));
}

TEST(SavePlanCodecTest, ErrorsEscapeTheFqn) {
  SavePlan plan;
  plan.items.push_back(BytesItem("bad\nname"));
  plan.items[0].type = static_cast<WriteItemType>(7);
  EXPECT_THAT(
      DecodeSavePlan(EncodeSavePlan(plan)),
      StatusIs(StatusCode::kCorruption, AllOf(HasSubstr("\"bad%0Aname\""),
                                              HasSubstr("unknown type 7"))));
}

// ---- SavePlan: shapes only a hand-built buffer can have.

// One tensor item, with any part of its tensor_data left out.
struct RawSavePlan {
  uint16_t format_version = 1;
  bool with_properties = true;
  bool with_size = true;
  bool with_chunk = true;

  std::string Build() const {
    flatbuffers::FlatBufferBuilder fbb;
    const auto fqn = fbb.CreateString("w");
    const auto index =
        fb::CreateMetadataIndex(fbb, fqn, fbb.CreateVector<int64_t>({0}));
    flatbuffers::Offset<fb::TensorProperties> properties;
    if (with_properties) {
      properties = fb::CreateTensorProperties(fbb, fb::DType::Float32);
    }
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> size;
    if (with_size) size = fbb.CreateVector<int64_t>({2});
    flatbuffers::Offset<fb::ChunkStorageMetadata> chunk;
    if (with_chunk) {
      chunk = fb::CreateChunkStorageMetadata(
          fbb, fbb.CreateVector<int64_t>({0}), fbb.CreateVector<int64_t>({2}));
    }
    const auto data = fb::CreateTensorWriteData(fbb, chunk, properties, size);
    const auto item = fb::CreateWriteItem(
        fbb, index, static_cast<uint8_t>(WriteItemType::kTensor), data);
    const auto items =
        fbb.CreateVector(std::vector<flatbuffers::Offset<fb::WriteItem>>{item});
    fbb.Finish(fb::CreateSavePlan(fbb, format_version, items),
               kSavePlanIdentifier);
    return Bytes(fbb);
  }
};

TEST(SavePlanCodecTest, AcceptsTheRawDefaults) {
  // Guards the cases below: each breaks exactly one thing.
  ASSERT_OK_AND_ASSIGN(SavePlan plan, DecodeSavePlan(RawSavePlan{}.Build()));
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].tensor_data->size, std::vector<int64_t>{2});
}

TEST(SavePlanCodecTest, RejectsTensorDataWithoutAPart) {
  RawSavePlan no_properties;
  no_properties.with_properties = false;
  EXPECT_THAT(DecodeSavePlan(no_properties.Build()),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("item 0 \"w\" at [0] has no properties")));
  RawSavePlan no_size;
  no_size.with_size = false;
  EXPECT_THAT(DecodeSavePlan(no_size.Build()),
              StatusIs(StatusCode::kCorruption, HasSubstr("has no size")));
  RawSavePlan no_chunk;
  no_chunk.with_chunk = false;
  EXPECT_THAT(DecodeSavePlan(no_chunk.Build()),
              StatusIs(StatusCode::kCorruption, HasSubstr("has no chunk")));
}

TEST(SavePlanCodecTest, RejectsItemWithoutIndex) {
  // `index` is required: the Verifier refuses the item. The generated
  // builder asserts that it is set, so the table is built by hand.
  flatbuffers::FlatBufferBuilder fbb;
  const flatbuffers::uoffset_t start = fbb.StartTable();
  fbb.AddElement<uint8_t>(fb::WriteItem::VT_TYPE,
                          static_cast<uint8_t>(WriteItemType::kByteIO), 0);
  const flatbuffers::Offset<fb::WriteItem> item(fbb.EndTable(start));
  const auto items =
      fbb.CreateVector(std::vector<flatbuffers::Offset<fb::WriteItem>>{item});
  fbb.Finish(fb::CreateSavePlan(fbb, 1, items), kSavePlanIdentifier);
  EXPECT_THAT(DecodeSavePlan(Bytes(fbb)),
              StatusIs(StatusCode::kCorruption, HasSubstr("verification")));
}

// ---- LoadPlan ----

TEST(LoadPlanCodecTest, RoundTripsEveryField) {
  const LoadPlan plan = FullLoadPlan();
  ASSERT_OK_AND_ASSIGN(LoadPlan back, DecodeLoadPlan(EncodeLoadPlan(plan)));
  ExpectLoadPlanEq(back, plan);
  // Spelled out where the helper could hide a mix-up.
  ASSERT_EQ(back.items.size(), 3u);
  EXPECT_EQ(back.items[1].dest_index.offset, std::vector<int64_t>{});
  EXPECT_EQ(back.items[2].dest_index.offset, std::nullopt);
  EXPECT_EQ(back.items[0].dest_index.index, 3);
  EXPECT_EQ(back.items[0].storage_index.index, 0);
  EXPECT_EQ(back.items[1].dest_index.index, std::nullopt);
}

TEST(LoadPlanCodecTest, RoundTripsEmptyPlan) {
  const LoadPlan plan;
  ASSERT_OK_AND_ASSIGN(LoadPlan back, DecodeLoadPlan(EncodeLoadPlan(plan)));
  ExpectLoadPlanEq(back, plan);
}

struct BadReadItemCase {
  const char* name;
  std::function<void(ReadItem&)> mutate;
  const char* message;
};

class LoadPlanCodecRejectTest
    : public ::testing::TestWithParam<BadReadItemCase> {};

TEST_P(LoadPlanCodecRejectTest, ReturnsCorruptionNamingTheItem) {
  LoadPlan plan = FullLoadPlan();
  ASSERT_OK(DecodeLoadPlan(EncodeLoadPlan(plan)));
  GetParam().mutate(plan.items[0]);
  EXPECT_THAT(
      DecodeLoadPlan(EncodeLoadPlan(plan)),
      StatusIs(StatusCode::kCorruption, AllOf(HasSubstr("load plan: item 0"),
                                              HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Checks, LoadPlanCodecRejectTest,
    ::testing::Values(
        BadReadItemCase{
            "UnknownType",
            [](ReadItem& i) { i.type = static_cast<LoadItemType>(2); },
            "\"layers.0.w\" at [0, 0] has unknown type 2"},
        BadReadItemCase{"DestOffsetsRank",
                        [](ReadItem& i) { i.dest_offsets = {0}; },
                        "has dest_offsets of rank 1, storage_offsets of rank "
                        "2 and lengths of rank 2"},
        BadReadItemCase{"StorageOffsetsRank",
                        [](ReadItem& i) { i.storage_offsets = {}; },
                        "storage_offsets of rank 0"},
        BadReadItemCase{"LengthsRank",
                        [](ReadItem& i) {
                          i.lengths = {1, 5, 1};
                        },
                        "lengths of rank 3"},
        BadReadItemCase{"NegativeDestOffset",
                        [](ReadItem& i) {
                          i.dest_offsets = {0, -1};
                        },
                        "negative offset or length in dimension 1"},
        BadReadItemCase{"NegativeStorageOffset",
                        [](ReadItem& i) {
                          i.storage_offsets = {-1, 0};
                        },
                        "negative offset or length in dimension 0"},
        BadReadItemCase{"NegativeLength",
                        [](ReadItem& i) {
                          i.lengths = {1, INT64_MIN};
                        },
                        "negative offset or length in dimension 1"},
        BadReadItemCase{
            "NegativeDestIndexOffset",
            [](ReadItem& i) { i.dest_index.offset = std::vector<int64_t>{-3}; },
            "dest_index \"layers.0.w\" at [-3] has a negative "
            "offset"},
        BadReadItemCase{"NegativeStorageIndexOffset",
                        [](ReadItem& i) {
                          i.storage_index.offset = std::vector<int64_t>{-3};
                        },
                        "storage_index \"layers.0.w\" at [-3] has a negative "
                        "offset"}),
    [](const ::testing::TestParamInfo<BadReadItemCase>& info) {
      return std::string(info.param.name);
    });

// ---- WriteResults ----

TEST(WriteResultsCodecTest, RoundTripsEveryField) {
  const std::vector<WriteResult> results = FullWriteResults();
  ASSERT_OK_AND_ASSIGN(std::vector<WriteResult> back,
                       DecodeWriteResults(EncodeWriteResults(results)));
  ExpectWriteResultsEq(back, results);
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back[1].index.offset, std::vector<int64_t>{});
  EXPECT_EQ(back[2].index.offset, std::nullopt);
}

TEST(WriteResultsCodecTest, RoundTripsNoResults) {
  ASSERT_OK_AND_ASSIGN(std::vector<WriteResult> back,
                       DecodeWriteResults(EncodeWriteResults({})));
  EXPECT_TRUE(back.empty());
}

TEST(WriteResultsCodecTest, RejectsNegativeIndexOffset) {
  std::vector<WriteResult> results = FullWriteResults();
  results[3].index.offset = std::vector<int64_t>{-1};
  EXPECT_THAT(DecodeWriteResults(EncodeWriteResults(results)),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("write results: result 3 \"max\" at [-1] "
                                 "has a negative offset")));
}

// ---- StepOutcome ----

std::string RawOutcome(int32_t code, const char* message,
                       std::string_view payload, uint16_t version = 1) {
  flatbuffers::FlatBufferBuilder fbb;
  const auto m = message ? fbb.CreateString(message) : 0;
  const auto p = fbb.CreateVector(
      reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  fbb.Finish(fb::CreateStepOutcome(fbb, version, code, m, p),
             kStepOutcomeIdentifier);
  return Bytes(fbb);
}

TEST(StepOutcomeCodecTest, RoundTripsEveryStatusCode) {
  for (int code = static_cast<int>(StatusCode::kOk);
       code <= static_cast<int>(kLastStatusCode); ++code) {
    const auto status_code = static_cast<StatusCode>(code);
    SCOPED_TRACE(std::string(StatusCodeName(status_code)));
    const bool ok = status_code == StatusCode::kOk;
    const Status status =
        ok ? Status::OK()
           : Status(status_code, "rank 3 failed: \"x\"\n\0y"s +
                                     std::string(StatusCodeName(status_code)));
    ASSERT_OK_AND_ASSIGN(StepOutcome back,
                         DecodeStepOutcome(EncodeStepOutcome(status, "pay")));
    EXPECT_EQ(back.status, status);
    EXPECT_EQ(back.payload, ok ? "pay" : "");
  }
}

TEST(StepOutcomeCodecTest, RoundTripsPayloadWithNuls) {
  const std::string payload("\0plan\0\xff", 7);
  ASSERT_OK_AND_ASSIGN(StepOutcome back, DecodeStepOutcome(EncodeStepOutcome(
                                             Status::OK(), payload)));
  EXPECT_OK(back.status);
  EXPECT_EQ(back.payload, payload);
}

TEST(StepOutcomeCodecTest, CarriesAnEncodedPlan) {
  const SavePlan plan = FullSavePlan();
  ASSERT_OK_AND_ASSIGN(
      StepOutcome outcome,
      DecodeStepOutcome(EncodeStepOutcome(Status::OK(), EncodeSavePlan(plan))));
  ASSERT_OK_AND_ASSIGN(SavePlan back, DecodeSavePlan(outcome.payload));
  ExpectSavePlanEq(back, plan);
}

TEST(StepOutcomeCodecTest, KeepsAnEmptyMessage) {
  ASSERT_OK_AND_ASSIGN(StepOutcome back, DecodeStepOutcome(EncodeStepOutcome(
                                             Status::Aborted(""), "")));
  EXPECT_THAT(back.status, StatusIs(StatusCode::kAborted, ""));
}

TEST(StepOutcomeCodecTest, OkOutcomeCarriesNoMessage) {
  // A Status can be OK with a message; on the wire OK has none.
  ASSERT_OK_AND_ASSIGN(
      StepOutcome back,
      DecodeStepOutcome(EncodeStepOutcome(Status(StatusCode::kOk, "hi"), "")));
  EXPECT_EQ(back.status, Status::OK());
  EXPECT_THAT(
      DecodeStepOutcome(RawOutcome(0, "hi", "")),
      StatusIs(StatusCode::kCorruption, HasSubstr("OK outcome has a message")));
}

TEST(StepOutcomeCodecTest, FailedOutcomeCarriesNoPayload) {
  EXPECT_THAT(DecodeStepOutcome(RawOutcome(
                  static_cast<int32_t>(StatusCode::kIOError), "disk", "p")),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("failed outcome has a payload")));
}

TEST(StepOutcomeCodecTest, AcceptsTheRawDefaults) {
  ASSERT_OK_AND_ASSIGN(StepOutcome back,
                       DecodeStepOutcome(RawOutcome(0, nullptr, "")));
  EXPECT_OK(back.status);
  EXPECT_EQ(back.payload, "");
}

TEST(StepOutcomeCodecTest, RejectsUnknownStatusCode) {
  for (int32_t code :
       {-1, static_cast<int32_t>(kLastStatusCode) + 1, INT32_MAX, INT32_MIN}) {
    EXPECT_THAT(DecodeStepOutcome(RawOutcome(code, "m", "")),
                StatusIs(StatusCode::kCorruption,
                         HasSubstr("step outcome: unknown status code " +
                                   std::to_string(code))));
  }
}

// ---- Every codec: truncated, flipped, another codec's value, another
// format version ----

// What the typed suite below needs of a codec: what its errors call a
// value, values of it whose every proper prefix is damaged (none ends in
// padding), its decoder, and a value of another format_version.
struct SavePlanCodec {
  static constexpr const char* kWhat = "save plan";
  static std::vector<std::string> Values() {
    return {EncodeSavePlan(SmallSavePlan())};
  }
  static Status Decode(std::string_view v) {
    return DecodeSavePlan(v).status();
  }
  static std::string OfVersion(uint16_t version) {
    RawSavePlan raw;
    raw.format_version = version;
    return raw.Build();
  }
};

struct LoadPlanCodec {
  static constexpr const char* kWhat = "load plan";
  static std::vector<std::string> Values() {
    return {EncodeLoadPlan(SmallLoadPlan())};
  }
  static Status Decode(std::string_view v) {
    return DecodeLoadPlan(v).status();
  }
  static std::string OfVersion(uint16_t version) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fb::CreateLoadPlan(fbb, version), kLoadPlanIdentifier);
    return Bytes(fbb);
  }
};

struct WriteResultsCodec {
  static constexpr const char* kWhat = "write results";
  static std::vector<std::string> Values() {
    return {EncodeWriteResults(SmallWriteResults())};
  }
  static Status Decode(std::string_view v) {
    return DecodeWriteResults(v).status();
  }
  static std::string OfVersion(uint16_t version) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fb::CreateWriteResultList(fbb, version),
               kWriteResultsIdentifier);
    return Bytes(fbb);
  }
};

struct StepOutcomeCodec {
  static constexpr const char* kWhat = "step outcome";
  // Payload and message are 4 bytes with no terminator or 3 with one, so
  // neither leaves padding at the end of the value.
  static std::vector<std::string> Values() {
    return {EncodeStepOutcome(Status::OK(), "abcd"),
            EncodeStepOutcome(Status::NotFound("abc"), "")};
  }
  static Status Decode(std::string_view v) {
    return DecodeStepOutcome(v).status();
  }
  static std::string OfVersion(uint16_t version) {
    return RawOutcome(0, nullptr, "", version);
  }
};

// A value of every codec, and of the metadata, whose identifier differs.
std::vector<std::pair<std::string, std::string>> EveryOtherValue() {
  return {{"save plan", EncodeSavePlan(SavePlan{})},
          {"load plan", EncodeLoadPlan(LoadPlan{})},
          {"write results", EncodeWriteResults({})},
          {"step outcome", EncodeStepOutcome(Status::OK(), "")},
          {"metadata", EncodeMetadata(Metadata{})}};
}

template <typename Codec>
class CodecRobustnessTest : public ::testing::Test {};

struct CodecNames {
  template <typename Codec>
  static std::string GetName(int) {
    std::string name = Codec::kWhat;
    std::replace(name.begin(), name.end(), ' ', '_');
    return name;
  }
};

using Codecs = ::testing::Types<SavePlanCodec, LoadPlanCodec, WriteResultsCodec,
                                StepOutcomeCodec>;
TYPED_TEST_SUITE(CodecRobustnessTest, Codecs, CodecNames);

TYPED_TEST(CodecRobustnessTest, RejectsEveryTruncation) {
  for (const std::string& value : TypeParam::Values()) {
    ASSERT_OK(TypeParam::Decode(value));
    for (size_t n = 0; n < value.size(); ++n) {
      EXPECT_THAT(TypeParam::Decode(value.substr(0, n)),
                  StatusIs(StatusCode::kCorruption, ::testing::_))
          << "prefix of " << n << " bytes";
    }
  }
}

TYPED_TEST(CodecRobustnessTest, FlippedBytesNeverCrash) {
  for (const std::string& value : TypeParam::Values()) {
    int corrupt = 0;
    for (size_t i = 0; i < value.size(); ++i) {
      std::string bad = value;
      bad[i] ^= 0xff;
      const Status s = TypeParam::Decode(bad);
      if (!s.ok()) {
        EXPECT_THAT(s, StatusIs(StatusCode::kCorruption, ::testing::_));
        ++corrupt;
      }
    }
    // The identifier's bytes at least.
    EXPECT_GE(corrupt, 4);
  }
}

TYPED_TEST(CodecRobustnessTest, RejectsWrongIdentifier) {
  for (const auto& [what, other] : EveryOtherValue()) {
    if (what == TypeParam::kWhat) continue;
    EXPECT_THAT(TypeParam::Decode(other),
                StatusIs(StatusCode::kCorruption,
                         AllOf(HasSubstr(TypeParam::kWhat),
                               HasSubstr("wrong file identifier"))))
        << "a " << what;
  }
}

TYPED_TEST(CodecRobustnessTest, RejectsOtherFormatVersions) {
  for (uint16_t version : {0, 2}) {
    EXPECT_THAT(TypeParam::Decode(TypeParam::OfVersion(version)),
                StatusIs(StatusCode::kCorruption,
                         HasSubstr(std::string(TypeParam::kWhat) +
                                   ": unsupported format_version " +
                                   std::to_string(version))));
  }
  ASSERT_OK(TypeParam::Decode(TypeParam::OfVersion(1)));
}

}  // namespace
}  // namespace rocksdcp::format
