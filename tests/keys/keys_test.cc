#include "keys/keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"

namespace rocksdcp::keys {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

MetadataIndex Chunk(std::string fqn, std::vector<int64_t> offset) {
  return MetadataIndex(std::move(fqn), std::move(offset));
}
MetadataIndex ByteItem(std::string fqn) {
  return MetadataIndex(std::move(fqn));
}

bool IsPrintable(std::string_view key) {
  return std::all_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x21 &&
           static_cast<unsigned char>(c) <= 0x7e;
  });
}

class KeysTest : public ::testing::Test {
 protected:
  // Checks that the key of (index, piece) is printable and parses back.
  static void ExpectRoundTrip(const MetadataIndex& index, uint32_t piece) {
    const std::string key = PieceKey(index, piece);
    SCOPED_TRACE("key " + key);
    EXPECT_TRUE(IsPrintable(key));
    ASSERT_OK_AND_ASSIGN(ParsedPieceKey parsed, ParsePieceKey(key));
    EXPECT_EQ(parsed.index.fqn, index.fqn);
    EXPECT_EQ(parsed.index.offset, index.offset);
    EXPECT_EQ(parsed.piece, piece);
  }

  static void ExpectMalformed(std::string_view key) {
    SCOPED_TRACE("key " + std::string(key));
    EXPECT_THAT(ParsePieceKey(key), StatusIs(StatusCode::kCorruption,
                                             HasSubstr("malformed piece key")));
  }
};

TEST_F(KeysTest, TensorChunkKeyListsOffsetsAndPiece) {
  EXPECT_EQ(PieceKey(Chunk("model.layers.0.weight", {0, 128}), 3),
            "model.layers.0.weight@0,128#00000003");
  EXPECT_EQ(PieceKey(Chunk("w", {7}), 0xabcdef01), "w@7#abcdef01");
}

TEST_F(KeysTest, ZeroDimTensorKeyHasEmptyOffsets) {
  EXPECT_EQ(PieceKey(Chunk("step", {}), 0), "step@#00000000");
  ASSERT_OK_AND_ASSIGN(ParsedPieceKey parsed, ParsePieceKey("step@#00000000"));
  ASSERT_TRUE(parsed.index.offset.has_value());
  EXPECT_TRUE(parsed.index.offset->empty());
}

TEST_F(KeysTest, ByteItemKeyHasNoAt) {
  EXPECT_EQ(PieceKey(ByteItem("optim.state"), 0x1a), "optim.state#0000001a");
  ASSERT_OK_AND_ASSIGN(ParsedPieceKey parsed,
                       ParsePieceKey("optim.state#0000001a"));
  EXPECT_FALSE(parsed.index.offset.has_value());
  EXPECT_EQ(parsed.piece, 0x1au);
}

TEST_F(KeysTest, PieceKeyIgnoresIndexHint) {
  EXPECT_EQ(PieceKey(MetadataIndex("w", {1}, 5), 0),
            PieceKey(MetadataIndex("w", {1}), 0));
}

TEST_F(KeysTest, EscapesReservedAndNonPrintableBytes) {
  EXPECT_EQ(EscapeFqn("a@b#c%d e"), "a%40b%23c%25d%20e");
  EXPECT_EQ(EscapeFqn(std::string("\x00\x01\x1f\x7f", 4)), "%00%01%1F%7F");
  EXPECT_EQ(EscapeFqn("caf\xc3\xa9"), "caf%C3%A9");
  // Everything else printable, including '/', ',' and '.', is kept.
  EXPECT_EQ(EscapeFqn("a/b,c.d!~"), "a/b,c.d!~");
}

TEST_F(KeysTest, UnescapeInvertsEscape) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  ASSERT_OK_AND_ASSIGN(std::string back, UnescapeFqn(EscapeFqn(every_byte)));
  EXPECT_EQ(back, every_byte);
}

TEST_F(KeysTest, UnescapeRejectsNonCanonicalInput) {
  for (std::string_view bad : {"%", "a%4", "%4G", "%4a", "%41", "a b", "a@b",
                               "a#b", "\x01", "caf\xc3\xa9"}) {
    SCOPED_TRACE(std::string(bad));
    EXPECT_THAT(UnescapeFqn(bad),
                StatusIs(StatusCode::kCorruption, HasSubstr("escaped fqn")));
  }
}

TEST_F(KeysTest, RoundTripsAwkwardFqns) {
  const std::vector<std::string> fqns = {
      "model.layers.0.self_attn.q_proj.weight",
      "a@b#c%d/e",
      "with space",
      "caf\xc3\xa9.\xe6\x9d\x83\xe9\x87\x8d",  // UTF-8
      std::string("ctl\x00\x01\n\x7f\xff", 9),
      "%41",  // looks escaped already
      "@#%",
      "",
  };
  for (const std::string& fqn : fqns) {
    for (uint32_t piece : {0u, 1u, 0xffffffffu}) {
      ExpectRoundTrip(ByteItem(fqn), piece);
      ExpectRoundTrip(Chunk(fqn, {}), piece);
      ExpectRoundTrip(Chunk(fqn, {0, 4096, INT64_MAX}), piece);
    }
  }
}

TEST_F(KeysTest, ParseRejectsMalformedKeys) {
  for (std::string_view key : {
           "",
           "no-separator",
           "w@0,1",                           // no '#'
           "w@0,1#0000000",                   // 7 hex digits
           "w@0,1#000000000",                 // 9 hex digits
           "w@0,1#0000000g",                  // not hex
           "w@0,1#0000000A",                  // uppercase hex
           "w@0,1#-0000001",                  // signed piece
           "w@-1#00000000",                   // negative offset
           "w@+1#00000000",                   // signed offset
           "w@01#00000000",                   // leading zero
           "w@1,,2#00000000",                 // empty offset
           "w@1,#00000000",                   // trailing comma
           "w@,1#00000000",                   // leading comma
           "w@1 #00000000",                   // stray byte
           "w@9223372036854775808#00000000",  // INT64_MAX + 1
           "w@1@2#00000000",                  // second '@'
           "w@1#00000000#00000000",           // second '#'
           "a b#00000000",                    // unescaped space
           "a%4#00000000",                    // broken escape
           "__metadata__",                    // the metadata key
       }) {
    ExpectMalformed(key);
  }
}

TEST_F(KeysTest, ParseErrorQuotesKeyWithoutRawControlBytes) {
  const std::string key("bad\x01key\n", 8);
  EXPECT_THAT(ParsePieceKey(key),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("\"bad\\x01key\\x0a\""),
                             Not(HasSubstr("\x01")), Not(HasSubstr("\n")))));
}

TEST_F(KeysTest, PiecesOfOneItemSortInNumericOrder) {
  const std::vector<uint32_t> pieces = {
      0, 1, 2, 9, 10, 15, 16, 255, 256, 4096, 1u << 20, 0x7fffffff, 0xffffffff};
  for (const MetadataIndex& index :
       {Chunk("w", {0, 512}), Chunk("w", {}), ByteItem("w")}) {
    std::vector<std::string> keys;
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      keys.push_back(PieceKey(index, *it));
    }
    // std::string compares as unsigned bytes, as RocksDB's default
    // comparator does.
    std::sort(keys.begin(), keys.end());
    std::vector<uint32_t> sorted;
    for (const std::string& key : keys) {
      ASSERT_OK_AND_ASSIGN(ParsedPieceKey parsed, ParsePieceKey(key));
      sorted.push_back(parsed.piece);
    }
    EXPECT_EQ(sorted, pieces) << "item " << index.ToString();
  }
}

TEST_F(KeysTest, SetKeyPieceMakesTheKeyOfAnotherPieceOfTheItem) {
  for (const MetadataIndex& index :
       {Chunk("w", {0, 512}), Chunk("w", {}), ByteItem("a#b@c")}) {
    std::string key = PieceKey(index, 7);
    for (uint32_t p : {0u, 1u, 10u, 0xabcdu, 0xffffffffu}) {
      SetKeyPiece(&key, p);
      EXPECT_EQ(key, PieceKey(index, p)) << "item " << index.ToString();
    }
  }
}

TEST_F(KeysTest, MetadataKeyCannotBeAPieceKey) {
  EXPECT_EQ(kMetadataKey.find('#'), std::string_view::npos);
  EXPECT_EQ(kMetadataKey.find('@'), std::string_view::npos);
}

TEST_F(KeysTest, CatalogKeyRoundTrips) {
  EXPECT_EQ(CatalogKey("run-1/step-100"), "checkpoint/run-1/step-100");
  ASSERT_OK_AND_ASSIGN(std::string id,
                       ParseCatalogKey(CatalogKey("run-1/step-100")));
  EXPECT_EQ(id, "run-1/step-100");
}

TEST_F(KeysTest, ParseCatalogKeyRejectsOtherKeys) {
  for (std::string_view key :
       {"", "checkpoint/", "checkpoint", "checkpoints/x", "x/checkpoint/y"}) {
    SCOPED_TRACE(std::string(key));
    EXPECT_THAT(
        ParseCatalogKey(key),
        StatusIs(StatusCode::kCorruption, HasSubstr("malformed catalog key")));
  }
}

}  // namespace
}  // namespace rocksdcp::keys
