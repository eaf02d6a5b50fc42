#include "codec/plane_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "weights.h"

namespace rocksdcp::codec {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::rocksdcp::testing::WeightBytes;
using ::rocksdcp::testing::WeightKind;
using ::testing::HasSubstr;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

const uint8_t* Bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

class PlaneCodecTest : public ::testing::Test {
 protected:
  // Encodes `data` of `elem`-byte elements, and checks that it decodes
  // back.
  void RoundTrip(const std::string& data, size_t elem) {
    ASSERT_OK(encoder_.Encode(Bytes(data), data.size(), elem));
    ASSERT_EQ(encoder_.plane_sizes().size(), elem);
    std::string out(data.size(), '\xee');
    ASSERT_OK(
        Decode(std::string(encoder_.stored()), encoder_.plane_sizes(), &out));
    EXPECT_EQ(out, data);
  }

  Status Decode(const std::string& stored, const std::vector<uint32_t>& sizes,
                std::string* out) {
    return decoder_.Decode(stored, sizes.data(), sizes.size(),
                           reinterpret_cast<uint8_t*>(out->data()),
                           out->size());
  }

  PlaneEncoder encoder_{1};
  PlaneDecoder decoder_;
};

TEST_F(PlaneCodecTest, RoundTripsEveryElementSize) {
  for (size_t elem : {1, 2, 3, 4, 8, 16}) {
    SCOPED_TRACE("elem " + std::to_string(elem));
    for (size_t n : {0, 1, 2, 7, 64, 4096, 33333}) {
      RoundTrip(RandomBytes(n * elem, n), elem);
      RoundTrip(std::string(n * elem, 'a'), elem);
    }
  }
}

TEST_F(PlaneCodecTest, KeepsIncompressiblePlanesAsTheyAre) {
  const std::string data = RandomBytes(4 * 10000, 7);
  ASSERT_OK(encoder_.Encode(Bytes(data), data.size(), 4));
  for (uint32_t size : encoder_.plane_sizes()) EXPECT_EQ(size, 10000u);
  EXPECT_EQ(encoder_.stored().size(), data.size());
}

TEST_F(PlaneCodecTest, CompressesTheExponentPlaneOfWeights) {
  const std::string data =
      WeightBytes(WeightKind::kWeight, DType::kBFloat16, 1, 65536);
  ASSERT_OK(encoder_.Encode(Bytes(data), data.size(), 2));
  const std::vector<uint32_t>& sizes = encoder_.plane_sizes();
  // Byte 1 holds the sign and 7 of the 8 exponent bits.
  EXPECT_LT(sizes[1], 65536u * 6 / 10);
  EXPECT_LT(encoder_.stored().size(), data.size() * 8 / 10);
  RoundTrip(data, 2);
}

TEST_F(PlaneCodecTest, ReusesItsBuffersForSmallerPayloads) {
  RoundTrip(RandomBytes(8 * 5000, 1), 8);
  RoundTrip(std::string(2 * 10, 'x'), 2);
  RoundTrip(WeightBytes(WeightKind::kNorm, DType::kFloat32, 2, 100), 4);
}

TEST_F(PlaneCodecTest, RefusesPayloadsOfPartElements) {
  const std::string data(10, 'a');
  EXPECT_THAT(encoder_.Encode(Bytes(data), data.size(), 4),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("4-byte")));
  EXPECT_THAT(encoder_.Encode(Bytes(data), data.size(), 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("0-byte")));
}

// ---- Forged stored planes: refused before anything is decoded. ----

class ForgedPlanesTest : public PlaneCodecTest {
 protected:
  void SetUp() override {
    data_ = WeightBytes(WeightKind::kWeight, DType::kBFloat16, 3, 4096);
    ASSERT_OK(encoder_.Encode(Bytes(data_), data_.size(), 2));
    stored_ = std::string(encoder_.stored());
    sizes_ = encoder_.plane_sizes();
    ASSERT_LT(sizes_[1], 4096u);  // Plane 1 is a zstd frame.
  }

  Status DecodeForged() {
    std::string out(data_.size(), '\0');
    return Decode(stored_, sizes_, &out);
  }

  std::string data_;
  std::string stored_;
  std::vector<uint32_t> sizes_;
};

TEST_F(ForgedPlanesTest, WrongPlaneCount) {
  sizes_.push_back(0);
  EXPECT_THAT(DecodeForged(), StatusIs(StatusCode::kCorruption,
                                       HasSubstr("3 planes for 8192 bytes")));
}

TEST_F(ForgedPlanesTest, PlaneLargerThanItsElements) {
  sizes_[0] = 4097;
  EXPECT_THAT(DecodeForged(),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("plane 0 stores 4097 bytes, more than")));
}

TEST_F(ForgedPlanesTest, SizesThatDoNotAddUp) {
  stored_.push_back('x');
  EXPECT_THAT(DecodeForged(),
              StatusIs(StatusCode::kCorruption, HasSubstr("add up to")));
}

TEST_F(ForgedPlanesTest, AFrameDeclaringMoreBytes) {
  // A frame that decodes to twice the plane: a decompression bomb, refused
  // by its declared size before it is decoded.
  std::string big(8192, '\0');
  std::string frame(ZSTD_compressBound(big.size()), '\0');
  frame.resize(
      ZSTD_compress(frame.data(), frame.size(), big.data(), big.size(), 1));
  stored_ = stored_.substr(0, sizes_[0]) + frame;
  sizes_[1] = static_cast<uint32_t>(frame.size());
  EXPECT_THAT(DecodeForged(),
              StatusIs(StatusCode::kCorruption,
                       HasSubstr("plane 1 is not a zstd frame of 4096 bytes")));
}

TEST_F(ForgedPlanesTest, TwoFramesInOnePlane) {
  // The plane's frame, then a second one; sizes still add up, as forged.
  const std::string frame = stored_.substr(sizes_[0]);
  stored_ += frame.substr(0, 8);
  sizes_[1] += 8;
  EXPECT_THAT(DecodeForged(), StatusIs(StatusCode::kCorruption,
                                       HasSubstr("more than one zstd frame")));
}

TEST_F(ForgedPlanesTest, FlippedByteInsideTheFrame) {
  // Past the frame header: the content size still reads right.
  stored_[sizes_[0] + sizes_[1] / 2] ^= 0x5a;
  std::string out(data_.size(), '\0');
  const Status s = Decode(stored_, sizes_, &out);
  // zstd either refuses the frame or decodes it to other bytes (the
  // piece's payload checksum then catches it); it never overruns.
  if (s.ok()) {
    EXPECT_NE(out, data_);
  } else {
    EXPECT_THAT(s, StatusIs(StatusCode::kCorruption, HasSubstr("plane 1")));
  }
}

TEST_F(ForgedPlanesTest, TruncatedFrame) {
  stored_.resize(stored_.size() - 3);
  sizes_[1] -= 3;
  EXPECT_THAT(DecodeForged(),
              StatusIs(StatusCode::kCorruption, HasSubstr("plane 1")));
}

}  // namespace
}  // namespace rocksdcp::codec
