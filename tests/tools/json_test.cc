// tools/json.h: what the CLI's --json prints is valid JSON for any bytes it
// is given, and the reader refuses what RFC 8259 refuses.

#include "json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::HasSubstr;

TEST(JsonTest, IsUtf8FollowsRfc3629) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain ascii"));
  EXPECT_TRUE(IsUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("caf\xe9"));               // Latin-1.
  EXPECT_FALSE(IsUtf8("\xc0\x80"));              // Overlong NUL.
  EXPECT_FALSE(IsUtf8("\xe0\x80\xaf"));          // Overlong '/'.
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));          // A surrogate, U+D800.
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));      // Past U+10FFFF.
  EXPECT_FALSE(IsUtf8("\xe2\x82"));              // Truncated.
  EXPECT_FALSE(IsUtf8("\x80"));                  // A lone continuation.
  EXPECT_FALSE(IsUtf8("\xf8\x88\x80\x80\x80"));  // Five bytes.
}

TEST(JsonTest, StringsAreEscapedAndAlwaysUtf8) {
  EXPECT_EQ(JsonString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonString("\n\r\t\x01\x7f"), R"("\n\r\t\u0001\u007f")");
  EXPECT_EQ(JsonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  // Bytes outside UTF-8 become U+FFFD, one each.
  EXPECT_EQ(JsonString("caf\xe9"), R"("caf\ufffd")");
  EXPECT_EQ(JsonString("\xed\xa0\x80x"), R"("\ufffd\ufffd\ufffdx")");
  EXPECT_EQ(JsonString("\xe2\x82"), R"("\ufffd\ufffd")");
  EXPECT_EQ(JsonString(std::string("a\0b", 3)), R"("a\u0000b")");
}

TEST(JsonTest, WriterNestsAndSeparates) {
  JsonWriter w;
  w.BeginObject()
      .Key("a")
      .Int(-1)
      .Key("b")
      .BeginArray()
      .Uint(2)
      .Bool(true)
      .Null()
      .EndArray()
      .Key("c")
      .IntArray({3, 4})
      .Key("d")
      .BeginObject()
      .EndObject()
      .Key("\xff")
      .String("x")
      .EndObject();
  EXPECT_EQ(w.str(),
            R"({"a":-1,"b":[2,true,null],"c":[3,4],"d":{},"\ufffd":"x"})");
}

TEST(JsonTest, ParsesWhatTheWriterWrites) {
  JsonWriter w;
  w.BeginObject()
      .Key("name")
      .String("caf\xc3\xa9\n\x01\"")
      .Key("shape")
      .IntArray({2, 3})
      .EndObject();
  ASSERT_OK_AND_ASSIGN(Json v, ParseJson(w.str(), "the test"));
  ASSERT_EQ(v.kind, Json::kObject);
  ASSERT_EQ(v.object.size(), 2u);
  EXPECT_EQ(v.object[0].first, "name");
  EXPECT_EQ(v.object[0].second.string, "caf\xc3\xa9\n\x01\"");
  ASSERT_EQ(v.object[1].second.array.size(), 2u);
  EXPECT_EQ(v.object[1].second.array[1].integer, 3u);
}

TEST(JsonTest, DecodesEscapesAndNumbers) {
  ASSERT_OK_AND_ASSIGN(
      Json v, ParseJson(R"([ "\u00e9\ud83d\ude00\/", 18446744073709551615,
                            -1, 1.5, 2e3, true, false, null ])",
                        "x"));
  ASSERT_EQ(v.array.size(), 8u);
  EXPECT_EQ(v.array[0].string, "\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_EQ(v.array[1].integer, 18446744073709551615u);
  for (int i = 2; i <= 4; ++i) {
    EXPECT_EQ(v.array[i].kind, Json::kNumber);
    EXPECT_FALSE(v.array[i].integer.has_value()) << i;
  }
  EXPECT_TRUE(v.array[5].boolean);
  EXPECT_EQ(v.array[7].kind, Json::kNull);
}

TEST(JsonTest, RefusesWhatRfc8259Refuses) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  const struct {
    std::string text;
    std::string why;
  } cases[] = {
      {"", "unexpected end"},
      {"{\"a\":1,}", "expected a key"},
      {"[1,]", "unexpected character"},
      {"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
      {"{\"a\":1} x", "trailing characters"},
      {"\"a", "unterminated string"},
      {"\"a\nb\"", "control character"},
      {"\"\\x\"", "bad escape"},
      {"\"\\ud800\"", "lone surrogate"},
      {"\"\\udc00\"", "lone surrogate"},
      {"\"\xe9\"", "not UTF-8"},
      {"01", "leading zero"},
      {"1.", "malformed number"},
      {"18446744073709551616", "integer too large"},
      {deep, "nested too deeply"},
      {"// c\n{}", "unexpected character"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(
        ParseJson(c.text, "the test").status(),
        StatusIs(StatusCode::kCorruption,
                 ::testing::AllOf(HasSubstr("of the test"), HasSubstr(c.why))))
        << c.text;
  }
}

TEST(JsonTest, AllowsSixtyFourLevels) {
  EXPECT_OK(
      ParseJson(std::string(64, '[') + std::string(64, ']'), "x").status());
}

TEST(JsonTest, FindsADuplicateAmongManyKeys) {
  // 200,000 members, the duplicate last: found through a set, not a scan of
  // the members so far (a scan would take 2*10^10 comparisons).
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) {
    text += "\"k" + std::to_string(i) + "\":0,";
  }
  ASSERT_OK(ParseJson(text + "\"end\":0}", "x").status());
  EXPECT_THAT(
      ParseJson(text + "\"k7\":0}", "x").status(),
      StatusIs(StatusCode::kCorruption, HasSubstr("duplicate key \"k7\"")));
}

TEST(JsonReaderTest, ReadsAnObjectMemberByMember) {
  // 1,000 members of 3 values each, each read through a bound of 3 values.
  std::string text = "{";
  for (int i = 0; i < 1000; ++i) {
    text += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":[" +
            std::to_string(i) + ",1]";
  }
  text += "}";
  JsonReader reader(text, "x");
  std::vector<std::string> keys;
  uint64_t sum = 0;
  ASSERT_OK(reader.ReadObject([&](std::string key) -> Status {
    keys.push_back(std::move(key));
    Json value;
    ROCKSDCP_RETURN_IF_ERROR(reader.ReadValue(&value, 3));
    sum += *value.array.at(0).integer;
    return Status::OK();
  }));
  ASSERT_OK(reader.Finish());
  ASSERT_EQ(keys.size(), 1000u);
  EXPECT_EQ(keys[999], "k999");
  EXPECT_EQ(sum, 999u * 1000 / 2);
}

TEST(JsonReaderTest, ReadsNestedObjectsAndStringsAsTheyCome) {
  JsonReader reader(R"( {"a": {"x": "1", "y": "caf\u00e9"}, "b": null} )", "x");
  std::vector<std::string> seen;
  ASSERT_OK(reader.ReadObject([&](std::string key) -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(Json::Kind kind, reader.Peek());
    if (kind != Json::kObject) {
      Json v;
      seen.push_back(key + "=null");
      return reader.ReadValue(&v, 1);
    }
    return reader.ReadObject([&](std::string inner) -> Status {
      std::string value;
      ROCKSDCP_RETURN_IF_ERROR(reader.ReadString(&value));
      seen.push_back(key + "." + inner + "=" + value);
      return Status::OK();
    });
  }));
  ASSERT_OK(reader.Finish());
  EXPECT_THAT(seen,
              ::testing::ElementsAre("a.x=1", "a.y=caf\xc3\xa9", "b=null"));
}

TEST(JsonReaderTest, RefusesWhatParseJsonRefuses) {
  auto read_all = [](const std::string& text,
                     bool check_duplicate_keys = true) {
    JsonReader reader(text, "x");
    Status s = reader.ReadObject(
        [&](std::string) {
          Json v;
          return reader.ReadValue(&v, 3);
        },
        check_duplicate_keys);
    return s.ok() ? reader.Finish() : s;
  };
  EXPECT_THAT(
      read_all("{\"a\":[1,2,3]}"),
      StatusIs(StatusCode::kCorruption, HasSubstr("more than 3 values")));
  EXPECT_THAT(read_all("{\"a\":1,\"a\":2}"),
              StatusIs(StatusCode::kCorruption, HasSubstr("duplicate key")));
  EXPECT_THAT(read_all("[1]"), StatusIs(StatusCode::kCorruption,
                                        HasSubstr("not a JSON object")));
  EXPECT_THAT(read_all("{} {}"),
              StatusIs(StatusCode::kCorruption, HasSubstr("trailing")));
  EXPECT_THAT(read_all("{\"a\":1,}"),
              StatusIs(StatusCode::kCorruption, HasSubstr("expected a key")));
  // Left to the caller, which keeps the keys anyway.
  EXPECT_OK(read_all("{\"a\":1,\"a\":2}", /*check_duplicate_keys=*/false));

  JsonReader not_string("[1]", "x");
  std::string s;
  EXPECT_THAT(
      not_string.ReadString(&s),
      StatusIs(StatusCode::kCorruption, HasSubstr("expected a string")));
}

TEST(JsonReaderTest, StopsAtTheFirstErrorOfTheCaller) {
  JsonReader reader("{\"a\":1,\"b\":2,\"c\":3}", "x");
  std::vector<std::string> keys;
  EXPECT_THAT(reader.ReadObject([&](std::string key) -> Status {
    keys.push_back(key);
    if (key == "b") return Status::NotFound("no b");
    Json v;
    return reader.ReadValue(&v, 1);
  }),
              StatusIs(StatusCode::kNotFound, HasSubstr("no b")));
  EXPECT_THAT(keys, ::testing::ElementsAre("a", "b"));
}

TEST(JsonTest, BoundsTheValuesItBuilds) {
  // [1,1,1,1]: five values, the array included.
  ASSERT_OK(ParseJson("[1,1,1,1]", "x", 5).status());
  EXPECT_THAT(
      ParseJson("[1,1,1,1,1]", "x", 5).status(),
      StatusIs(StatusCode::kCorruption, HasSubstr("more than 5 values")));
  EXPECT_THAT(
      ParseJson("{\"a\":[1,{\"b\":2}]}", "x", 4).status(),
      StatusIs(StatusCode::kCorruption, HasSubstr("more than 4 values")));
}

}  // namespace
}  // namespace rocksdcp::tools
