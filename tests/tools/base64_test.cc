// tools/base64.h against RFC 4648's test vectors (section 10).

#include "base64.h"

#include <gtest/gtest.h>

#include <string>

namespace rocksdcp::tools {
namespace {

TEST(Base64Test, EncodesTheRfcVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, RoundTripsEveryByteValue) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 17) {
    const std::string in = all.substr(0, n);
    EXPECT_EQ(Base64Decode(Base64Encode(in)), in) << n << " bytes";
  }
}

TEST(Base64Test, DecodeIsStrict) {
  EXPECT_EQ(Base64Decode("Zm9vYmFy"), "foobar");
  for (const char* bad :
       {"Zg", "Zg=", "Zh==", "Zm9=", "Zg==Zg==", "=Zg=", "Zm9v\n", " Zm9v",
        "Zm9v YmFy", "Zm-v", "Z===", "===="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(Base64Decode(std::string("Zm\0v", 4)).has_value());
}

}  // namespace
}  // namespace rocksdcp::tools
