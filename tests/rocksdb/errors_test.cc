// Every error a user of the RocksDB store can meet says what is wrong and
// names the checkpoint and item, and never hands back wrong bytes.

#include <fstream>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using ErrorsTest = StoreTest;

TEST_F(ErrorsTest, UnknownIdIsNotFound) {
  ExampleState into = EmptyExampleStateDict();
  EXPECT_THAT(
      LoadDict(&into.dict, "no-such"),
      StatusIs(StatusCode::kNotFound, AllOf(HasSubstr("'no-such' not found"),
                                            HasSubstr(store_path()))));
  EXPECT_THAT(store_->Info("no-such"),
              StatusIs(StatusCode::kNotFound, HasSubstr("'no-such'")));
}

TEST_F(ErrorsTest, InvalidIdsAreRefused) {
  ExampleState s = ExampleStateDict(1);
  const std::pair<std::string, const char*> cases[] = {
      {"", "empty"},
      {std::string(129, 'a'), "129 bytes; the limit is 128"},
      {"bad\x01id", "control character 0x01"},
      {"tab\tid", "control character 0x09"},
      {"default", "reserved"},
  };
  for (const auto& [id, why] : cases) {
    EXPECT_THAT(SaveDict(s.dict, id),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(why)))
        << id;
    EXPECT_THAT(RocksDBStorageWriter::ValidateCheckpointId(id),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(why)));
  }
  EXPECT_OK(RocksDBStorageWriter::ValidateCheckpointId(std::string(128, 'a')));
  EXPECT_OK(RocksDBStorageWriter::ValidateCheckpointId("run 7/step-100 ü"));
}

TEST_F(ErrorsTest, SavingAnExistingIdNeedsOverwrite) {
  ExampleState a = ExampleStateDict(1), b = ExampleStateDict(2);
  ASSERT_OK(SaveDict(a.dict, "x"));
  EXPECT_THAT(
      SaveDict(b.dict, "x"),
      StatusIs(StatusCode::kAlreadyExists,
               AllOf(HasSubstr("'x' already exists"), HasSubstr("overwrite"))));
  ExampleState into = EmptyExampleStateDict();
  ASSERT_OK(LoadDict(&into.dict, "x"));
  EXPECT_TRUE(IsExampleState(into, 1));  // The failed save changed nothing.
}

TEST_F(ErrorsTest, WrongDTypeOrShapeNamesFqnExpectedAndActual) {
  OwnedTensor w = RandomTensor(DType::kBFloat16, {4, 8}, 1);
  ASSERT_OK(SaveDict({{"layer.w", w.view}}, "c"));

  OwnedTensor wrong_dtype = ZeroTensor(DType::kFloat32, {4, 8});
  StateDict sd{{"layer.w", wrong_dtype.view}};
  EXPECT_THAT(LoadDict(&sd, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("layer.w"), HasSubstr("bfloat16"),
                             HasSubstr("float32"))));

  OwnedTensor wrong_shape = ZeroTensor(DType::kBFloat16, {8, 4});
  sd["layer.w"] = wrong_shape.view;
  EXPECT_THAT(
      LoadDict(&sd, "c"),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("layer.w"), HasSubstr("4"), HasSubstr("8"))));
}

TEST_F(ErrorsTest, MissingFqnIsNotFoundUnlessPartialLoad) {
  OwnedTensor w = RandomTensor(DType::kFloat32, {3}, 1);
  ASSERT_OK(SaveDict({{"present", w.view}}, "c"));
  OwnedTensor a = ZeroTensor(DType::kFloat32, {3});
  OwnedTensor b = ZeroTensor(DType::kFloat32, {3});
  StateDict sd{{"present", a.view},
               {"absent.one", b.view},
               {"absent.two", std::string()}};
  EXPECT_THAT(LoadDict(&sd, "c"),
              StatusIs(StatusCode::kNotFound, AllOf(HasSubstr("absent.one"),
                                                    HasSubstr("absent.two"))));
  ASSERT_OK(LoadDict(&sd, "c", /*allow_partial_load=*/true));
  EXPECT_TRUE(SameTensor(a.view, w.view));
}

TEST_F(ErrorsTest, FlippedByteInSstFileIsCorruptionNamingFqn) {
  OwnedTensor big = RandomTensor(DType::kFloat32, {256, 256}, 1);
  OwnedTensor small = RandomTensor(DType::kFloat32, {4}, 2);
  ASSERT_OK(
      SaveDict({{"encoder.weight", big.view}, {"z.bias", small.view}}, "c"));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  // The largest file holds the 256 KiB tensor; hit the middle of its data.
  FlipByte(ssts[0], 128 << 10);
  OpenStore();

  OwnedTensor into = ZeroTensor(DType::kFloat32, {256, 256});
  OwnedTensor into_small = ZeroTensor(DType::kFloat32, {4});
  StateDict sd{{"encoder.weight", into.view}, {"z.bias", into_small.view}};
  EXPECT_THAT(LoadDict(&sd, "c"),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("'c'"), HasSubstr("encoder.weight"))));
  // Items elsewhere in the checkpoint still load.
  StateDict only_small{{"z.bias", into_small.view}};
  ASSERT_OK(LoadDict(&only_small, "c"));
  EXPECT_TRUE(SameTensor(into_small.view, small.view));
}

TEST_F(ErrorsTest, CorruptionNeverReachesTheDestinationPiece) {
  // One piece per 64 KiB row block; corrupt one and check that the bytes
  // of that piece were never copied out.
  OwnedTensor big = RandomTensor(DType::kUInt8, {4, 65536}, 3);
  ASSERT_OK(SaveDict({{"t", big.view}}, "c", {.max_piece_bytes = 65536}));
  CloseStore();
  std::vector<std::string> ssts = SstFiles();
  ASSERT_FALSE(ssts.empty());
  FlipByte(ssts[0], 3 * 65536 + 1000);  // Inside the last piece.
  OpenStore();
  OwnedTensor into = ZeroTensor(DType::kUInt8, {4, 65536});
  StateDict sd{{"t", into.view}};
  EXPECT_THAT(LoadDict(&sd, "c"),
              StatusIs(StatusCode::kCorruption, HasSubstr("'t@[0, 0]'")));
  // Whatever was copied is the saved bytes; the rest is untouched zeros.
  for (size_t i = 0; i < into.bytes.size(); ++i) {
    if (into.bytes[i] != 0 && into.bytes[i] != big.bytes[i]) {
      FAIL() << "wrong byte at " << i;
    }
  }
}

TEST_F(ErrorsTest, PieceSizeOutOfRangeIsInvalidArgument) {
  EXPECT_THAT(
      store_->NewWriter({.max_piece_bytes = 0}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_piece_bytes")));
  EXPECT_THAT(
      store_->NewWriter({.max_piece_bytes = (1ull << 30) + 1}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_piece_bytes")));
}

TEST_F(ErrorsTest, NullDataIsInvalidArgumentNamingFqn) {
  TensorView bad = TensorView::Contiguous(DType::kFloat32, {2, 2}, nullptr);
  EXPECT_THAT(
      SaveDict({{"broken.tensor", bad}}, "c"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("broken.tensor")));
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_TRUE(list.empty());
}

}  // namespace
}  // namespace rocksdcp::testing
