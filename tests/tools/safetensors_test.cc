// tools/safetensors.h against the safetensors format: what export writes is
// read back by tests/tools/read_safetensors.py, an independent reader
// written from the spec (no safetensors package is installed here), and
// import is fed files written by hand, as other writers make them.

#include "safetensors.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include "base64.h"
#include "tools/tools_test_util.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::EmptyExampleStateDict;
using ::rocksdcp::testing::ExampleStateDict;
using ::rocksdcp::testing::FlipByte;
using ::rocksdcp::testing::IsExampleState;
using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::RandomTensor;
using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// "1,1,...,1": n dimensions of size 1.
std::string Ones(int n) {
  std::string s = "1";
  for (int i = 1; i < n; ++i) s += ",1";
  return s;
}

// The header size a file's first 8 bytes give.
uint64_t HeaderSize(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file.at(i));
  return n;
}

// A file as another writer (e.g. Hugging Face's) makes it.
std::string MakeFile(const std::string& header, const std::string& data) {
  std::string size(8, '\0');
  for (int i = 0; i < 8; ++i) {
    size[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  }
  return size + header + data;
}

class SafetensorsTest : public ToolsTest {
 protected:
  // Saves ExampleStateDict(seed) plus byte items: every byte value (not
  // UTF-8), and text that looks like base64 but is not marked as such.
  void SaveExample(const std::string& id, uint64_t seed) {
    example_ = ExampleStateDict(seed);
    example_.dict["raw"] = all_bytes_;
    example_.dict["text"] = std::string("base64:not really\n\"q\" caf\xc3\xa9");
    ASSERT_OK(SaveDict(example_.dict, id));
  }

  std::string ExportedExample() {
    SaveExample("ck", 7);
    EXPECT_OK(ExportSafetensors(*store_, "ck", Out("ck.safetensors")));
    return ReadFile(Out("ck.safetensors"));
  }

  // Loads checkpoint `id` as byte items named `names`.
  std::vector<std::string> LoadBytes(const std::string& id,
                                     const std::vector<std::string>& names) {
    StateDict sd;
    for (const std::string& n : names) sd[n] = std::string();
    EXPECT_OK(LoadDict(&sd, id, /*allow_partial_load=*/true));
    std::vector<std::string> out;
    for (const std::string& n : names)
      out.push_back(std::get<std::string>(sd[n]));
    return out;
  }

  ::rocksdcp::testing::ExampleState example_;
  std::string all_bytes_ = [] {
    std::string s;
    for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
    return s;
  }();
};

TEST_F(SafetensorsTest, ExportFollowsTheSpec) {
  ExportedExample();
  Json r;
  ASSERT_TRUE(ReadSafetensors(Out("ck.safetensors"), &r));
  EXPECT_EQ(*Member(r, "header_size")->integer % 8, 0u);

  // Byte items: UTF-8 ones verbatim, others base64 and listed as such.
  const Json* meta = Member(r, "metadata");
  ASSERT_NE(meta, nullptr);
  ASSERT_EQ(meta->kind, Json::kObject);
  EXPECT_EQ(Member(*meta, "text")->string,
            std::get<std::string>(example_.dict["text"]));
  EXPECT_EQ(Member(*meta, "raw")->string,
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMD"
            "EyMzQ1Njc4OTo7PD0+"
            "P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3"
            "BxcnN0dXZ3eHl6e3x9fn+"
            "AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+"
            "wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/"
            "g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==");
  EXPECT_EQ(Member(*meta, std::string(kBase64ItemsKey))->string,
            "[\"optimizer/state\",\"raw\"]");

  // Tensors laid out as safetensors' writer does: 8-byte elements first,
  // then 4, then 2; each aligned, bit-exact, contiguous to the end.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"step_counter", "I64"},
      {"model.norm.bias", "F32"},
      {"model.layers.0.attn.w", "BF16"}};
  const Json* tensors = Member(r, "tensors");
  ASSERT_EQ(tensors->array.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Json& t = tensors->array[i];
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(Member(t, "name")->string, want[i].first);
    EXPECT_EQ(Member(t, "dtype")->string, want[i].second);
    EXPECT_TRUE(Member(t, "aligned")->boolean);
    const TensorView& v = std::get<TensorView>(example_.dict.at(want[i].first));
    const Json* shape = Member(t, "shape");
    ASSERT_EQ(shape->array.size(), v.sizes.size());
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      EXPECT_EQ(shape->array[d].integer, static_cast<uint64_t>(v.sizes[d]));
    }
    EXPECT_EQ(Member(t, "hex")->string, Hex(TensorBytes(v)));
  }
}

TEST_F(SafetensorsTest, ExportWithoutByteItemsHasNoMetadata) {
  OwnedTensor t = RandomTensor(DType::kUInt8, {3}, 1);
  ASSERT_OK(SaveDict({{"t", t.view}}, "ck"));
  ASSERT_OK(ExportSafetensors(*store_, "ck", Out("ck.safetensors")));
  Json r;
  ASSERT_TRUE(ReadSafetensors(Out("ck.safetensors"), &r));
  EXPECT_EQ(Member(r, "metadata")->kind, Json::kNull);
  const std::string json =
      "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}";
  EXPECT_EQ(*Member(r, "header_size")->integer, 56u);  // 53 + 3 spaces.
  EXPECT_EQ(ReadFile(Out("ck.safetensors")).substr(8, 56), json + "   ");
}

TEST_F(SafetensorsTest, ExportReportsProgressAndStats) {
  SaveExample("ck", 3);
  Progress last;
  int calls = 0;
  ASSERT_OK_AND_ASSIGN(
      TransferStats stats,
      ExportSafetensors(*store_, "ck", Out("ck.safetensors"),
                        [&](const Progress& p) { last = p, ++calls; }));
  EXPECT_EQ(stats.tensors, 3u);
  EXPECT_EQ(stats.byte_items, 3u);
  EXPECT_EQ(stats.bytes, 48u * 100 * 2 + 100 * 4 + 8);
  EXPECT_GE(calls, 2);
  EXPECT_EQ(last.bytes_done, stats.bytes);
  EXPECT_EQ(last.bytes_total, stats.bytes);
  EXPECT_EQ(last.items_done, 6u);
  EXPECT_EQ(last.items_total, 6u);
}

TEST_F(SafetensorsTest, ExportStreamsThroughItsBuffer) {
  // 256 KiB and 3 small tensors through 4 KiB of buffer.
  OwnedTensor big = RandomTensor(DType::kFloat32, {256, 256}, 2);
  OwnedTensor a = RandomTensor(DType::kInt16, {7}, 3);
  OwnedTensor b = RandomTensor(DType::kFloat64, {2, 3}, 4);
  OwnedTensor c = RandomTensor(DType::kBool, {5}, 5);
  RocksDBWriterOptions options;
  options.max_piece_bytes = 4096;
  ASSERT_OK(
      SaveDict({{"big", big.view}, {"a", a.view}, {"b", b.view}, {"c", c.view}},
               "ck", options));
  ASSERT_OK(ExportSafetensors(*store_, "ck", Out("ck.safetensors"), {},
                              /*buffer_bytes=*/4096));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile f,
                       SafetensorsFile::Open(Out("ck.safetensors")));
  ASSERT_EQ(f.tensors(), 4u);
  ASSERT_EQ(f.items().size(), 4u);
  const std::string file = ReadFile(Out("ck.safetensors"));
  const size_t data_start = 8 + HeaderSize(file);
  for (const auto& [name, value] : f.items()) {
    const OwnedTensor& want = name == "big" ? big
                              : name == "a" ? a
                              : name == "b" ? b
                                            : c;
    const TensorView& t = std::get<TensorView>(value);
    // A view of the file's data, where its data_offsets say.
    EXPECT_EQ(file.substr(data_start + f.DataOffset(t), t.nbytes()),
              TensorBytes(want.view))
        << name;
    EXPECT_EQ(TensorBytes(t), TensorBytes(want.view)) << name;
  }
}

TEST_F(SafetensorsTest, ExportsEveryDTypeSafetensorsHas) {
  const DType dtypes[] = {DType::kComplex64,      DType::kFloat8E8M0FNU,
                          DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                          DType::kUInt64,         DType::kBool};
  StateDict sd;
  std::vector<OwnedTensor> owned;
  for (DType d : dtypes) {
    owned.push_back(RandomTensor(d, {2, 3}, static_cast<uint64_t>(d)));
    sd[std::string(DTypeName(d))] = owned.back().view;
  }
  ASSERT_OK(SaveDict(sd, "ck"));
  ASSERT_OK(ExportSafetensors(*store_, "ck", Out("ck.safetensors")));
  Json r;
  ASSERT_TRUE(ReadSafetensors(Out("ck.safetensors"), &r));
  ASSERT_OK(ImportSafetensors(Out("ck.safetensors"), *store_, "back"));
  StateDict loaded;
  std::vector<OwnedTensor> into;
  for (DType d : dtypes) {
    into.push_back(RandomTensor(d, {2, 3}, 999));
    loaded[std::string(DTypeName(d))] = into.back().view;
  }
  ASSERT_OK(LoadDict(&loaded, "back"));
  for (size_t i = 0; i < into.size(); ++i) {
    EXPECT_EQ(TensorBytes(into[i].view), TensorBytes(owned[i].view))
        << DTypeName(dtypes[i]);
  }
}

TEST_F(SafetensorsTest, ExportRefusesWhatSafetensorsCannotHold) {
  OwnedTensor c = RandomTensor(DType::kComplex128, {2}, 1);
  OwnedTensor t = RandomTensor(DType::kUInt8, {2}, 1);
  ASSERT_OK(SaveDict({{"c", c.view}}, "complex128"));
  ASSERT_OK(SaveDict({{"caf\xe9", t.view}}, "latin1"));
  ASSERT_OK(SaveDict({{"__metadata__", t.view}}, "reserved"));
  ASSERT_OK(
      SaveDict({{std::string(kBase64ItemsKey), std::string("x")}}, "marker"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"complex128", "has no safetensors dtype"},
      {"latin1", "not a name safetensors can hold"},
      {"reserved", "not a name safetensors can hold"},
      {"marker", "export's own"},
  };
  for (const auto& [id, why] : cases) {
    EXPECT_THAT(
        ExportSafetensors(*store_, id, Out("x.safetensors")),
        StatusIs(StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("checkpoint '" + id + "'"), HasSubstr(why))));
  }
  EXPECT_THAT(ExportSafetensors(*store_, "nope", Out("x.safetensors")),
              StatusIs(StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store"));
}

TEST_F(SafetensorsTest, ExportRefusesByteItemsPastTheHeaderLimit) {
  ASSERT_OK(
      SaveDict({{"blob", std::string(kMaxSafetensorsHeaderBytes, 'x')}}, "ck"));
  EXPECT_THAT(
      ExportSafetensors(*store_, "ck", Out("x.safetensors")),
      StatusIs(StatusCode::kInvalidArgument,
               AllOf(HasSubstr("checkpoint 'ck'"), HasSubstr("100000000"))));
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store"));
}

TEST_F(SafetensorsTest, AFailedExportLeavesTheTargetAsItWas) {
  OwnedTensor big = RandomTensor(DType::kFloat32, {256, 256}, 2);
  RocksDBWriterOptions options;
  options.max_piece_bytes = 4096;
  ASSERT_OK(SaveDict({{"big", big.view}}, "ck", options));
  WriteFile(Out("ck.safetensors"), "old");
  CloseStore();
  FlipByte(SstFiles().at(0), 128 * 1024);
  OpenStore();
  EXPECT_THAT(ExportSafetensors(*store_, "ck", Out("ck.safetensors"), {},
                                /*buffer_bytes=*/8192),
              StatusIs(StatusCode::kCorruption, HasSubstr("item 'big@")));
  EXPECT_EQ(ReadFile(Out("ck.safetensors")), "old");
  EXPECT_THAT(ListDir(dir_.path().string()),
              ElementsAre("ck.safetensors", "store"));
}

TEST_F(SafetensorsTest, ExportImportRoundTripIsBitExact) {
  ExportedExample();
  ASSERT_OK_AND_ASSIGN(
      TransferStats stats,
      ImportSafetensors(Out("ck.safetensors"), *store_, "imported"));
  EXPECT_EQ(stats.tensors, 3u);
  EXPECT_EQ(stats.byte_items, 3u);
  auto loaded = EmptyExampleStateDict();
  loaded.dict["raw"] = std::string();
  loaded.dict["text"] = std::string();
  ASSERT_OK(LoadDict(&loaded.dict, "imported"));
  EXPECT_TRUE(IsExampleState(loaded, 7));
  EXPECT_EQ(std::get<std::string>(loaded.dict["raw"]), all_bytes_);
  EXPECT_EQ(std::get<std::string>(loaded.dict["text"]),
            std::get<std::string>(example_.dict["text"]));
  // The marker is no item of the import.
  ASSERT_OK_AND_ASSIGN(CheckpointInfo info, store_->Info("imported"));
  EXPECT_EQ(info.items, 6u);

  // Exporting the import gives the same file.
  ASSERT_OK(ExportSafetensors(*store_, "imported", Out("again.safetensors")));
  EXPECT_EQ(ReadFile(Out("again.safetensors")),
            ReadFile(Out("ck.safetensors")));
}

TEST_F(SafetensorsTest, ImportRefusesAnExistingIdUnlessOverwrite) {
  ExportedExample();
  EXPECT_THAT(ImportSafetensors(Out("ck.safetensors"), *store_, "ck"),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("ck")));
  EXPECT_OK(ImportSafetensors(Out("ck.safetensors"), *store_, "ck",
                              /*overwrite=*/true));
}

TEST_F(SafetensorsTest, ImportsAForeignFileVerbatim) {
  // Out of order, unpadded, with escapes, and a value that merely starts
  // with "base64:".
  const std::string header =
      "{\"b\": {\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [4, 8]},"
      " \"a\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, "
      "4]},"
      " \"__metadata__\": {\"format\": \"pt\", \"n\\u00e9\": "
      "\"\\ud83d\\ude00\","
      " \"note\": \"base64:AAAA\"}}";
  WriteFile(Out("f.safetensors"),
            MakeFile(header, std::string("ABCD\x01\x00\x02\x00", 8)));
  ASSERT_OK(ImportSafetensors(Out("f.safetensors"), *store_, "hf"));
  std::vector<uint8_t> a(4);
  std::vector<int16_t> b(2);
  StateDict sd = {
      {"a", TensorView::Contiguous(DType::kUInt8, {2, 2}, a.data())},
      {"b", TensorView::Contiguous(DType::kInt16, {2}, b.data())}};
  ASSERT_OK(LoadDict(&sd, "hf", /*allow_partial_load=*/true));
  EXPECT_EQ(std::string(a.begin(), a.end()), "ABCD");
  EXPECT_EQ(b, (std::vector<int16_t>{1, 2}));
  EXPECT_THAT(LoadBytes("hf", {"format", "n\xc3\xa9", "note"}),
              ElementsAre("pt", "\xf0\x9f\x98\x80", "base64:AAAA"));
}

TEST_F(SafetensorsTest, ImportsEdgeCasesTheSpecAllows) {
  const struct {
    std::string name, header, data;
    uint64_t tensors;
  } cases[] = {
      {"empty", "{}", "", 0},
      {"null metadata", "{\"__metadata__\": null}", "", 0},
      {"zero-size tensors at one offset",
       "{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [0, "
       "0]},"
       " \"y\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]},"
       " \"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
       "abcd", 3},
      {"0-d",
       "{\"s\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [0, 8]}}",
       std::string(8, '\x01'), 1},
      {"fields safetensors ignores",
       "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1],"
       " \"extra\": {\"x\": [1]}}}",
       "q", 1},
      {"64 dims",
       "{\"d\": {\"dtype\": \"U8\", \"shape\": [" + Ones(64) +
           "], \"data_offsets\": [0, 1]}}",
       "q", 1},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    WriteFile(Out("e.safetensors"), MakeFile(c.header, c.data));
    auto r = ImportSafetensors(Out("e.safetensors"), *store_,
                               "e" + std::to_string(n++));
    ASSERT_OK(r.status());
    EXPECT_EQ(r->tensors, c.tensors);
  }
}

TEST_F(SafetensorsTest, ImportRejectsBadHeaders) {
  const std::string ok_entry =
      "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}";
  const std::string data(8, 'x');
  const std::string dims65 = Ones(65);
  const std::string marker = "\"" + std::string(kBase64ItemsKey) + "\": ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + ok_entry + ",}", "invalid JSON"},
      {"{" + ok_entry, "invalid JSON"},
      {"[1]", "not a JSON object"},
      {"{\"a\": {\"dtype\": \"F31\", \"shape\": [2], \"data_offsets\": [0, "
       "8]}}",
       "unknown dtype"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, "
       "8]}}",
       "shape"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, "
       "8]}}",
       "need 12"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, "
       "16]}}",
       "outside the data"},
      {"{" + ok_entry +
           ", \"b\": {\"dtype\": \"U8\", \"shape\": [4], "
           "\"data_offsets\": [4, 8]}}",
       "overlaps"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, "
       "4]}}",
       "cover 4 bytes"},
      {"{" + ok_entry + ", " + ok_entry + "}", "duplicate key"},
      {"{" + ok_entry + ", \"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}",
       "duplicate key"},
      {"{" + ok_entry + ", \"__metadata__\": {\"k\": 1}}", "not a string"},
      {"{" + ok_entry + ", \"__metadata__\": [\"k\"]}", "not an object"},
      {"{" + ok_entry + ", \"__metadata__\": {\"k\": \"@@\", " + marker +
           "\"[\\\"k\\\"]\"}}",
       "is not base64"},
      {"{" + ok_entry + ", \"__metadata__\": {" + marker +
           "\"[\\\"gone\\\"]\"}}",
       "lacks"},
      {"{" + ok_entry + ", \"__metadata__\": {" + marker + "\"{}\"}}",
       "not an array of names"},
      {"{" + ok_entry + ", \"__metadata__\": {" + marker + "\"[\"}}",
       "invalid JSON"},
      {"{" + ok_entry + ", \"__metadata__\": {\"a\": \"x\"}}",
       "name of a tensor"},
      {"{\"a\": {\"dtype\": \"U8\", \"shape\": [" + dims65 +
           "], \"data_offsets\": [0, 1]}, \"b\": {\"dtype\": \"U8\", "
           "\"shape\": [7],"
           " \"data_offsets\": [1, 8]}}",
       "65 dimensions"},
      {"{" + ok_entry + "}\xff", "invalid JSON"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [0, 4611686018427387904, "
       "4611686018427387904], \"data_offsets\": [0, 0]}, \"b\": {\"dtype\": "
       "\"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}}",
       "shape too large"},
  };
  for (const auto& [header, what] : cases) {
    SCOPED_TRACE(header);
    WriteFile(Out("bad.safetensors"), MakeFile(header, data));
    EXPECT_THAT(ImportSafetensors(Out("bad.safetensors"), *store_, "bad"),
                StatusIs(StatusCode::kCorruption,
                         AllOf(HasSubstr("bad.safetensors"), HasSubstr(what))));
  }
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_TRUE(list.empty());
}

TEST_F(SafetensorsTest, ImportBoundsWhatAHeaderCanMakeItBuild) {
  // 3 million dims in 6 MB of header: refused by the JSON value bound
  // before it becomes 3 million parsed values.
  const std::string dims = Ones(3'000'000);
  WriteFile(Out("big.safetensors"),
            MakeFile("{\"a\": {\"dtype\": \"U8\", \"shape\": [" + dims +
                         "], \"data_offsets\": [0, 1]}}",
                     "x"));
  EXPECT_THAT(
      ImportSafetensors(Out("big.safetensors"), *store_, "big"),
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("big.safetensors"), HasSubstr("values"))));
}

TEST_F(SafetensorsTest, ReadsMoreTensorsThanOneJsonTreeCouldHold) {
  // 300,000 tensors: 2.4 million JSON values, past what one parsed tree
  // may hold (kDefaultMaxJsonValues); parsed member by member they are
  // read, each checked.
  constexpr int kTensors = 300'000;
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i) {
    header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
              "\":{\"dtype\":\"U8\",\"shape\":[1,0],\"data_offsets\":[0,0]}";
  }
  header +=
      ",\"last\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  std::vector<SafetensorsTensor> tensors;
  std::vector<std::pair<std::string, std::string>> items;
  ASSERT_OK(ParseSafetensors(MakeFile(header, "x"), &tensors, &items).status());
  ASSERT_EQ(tensors.size(), kTensors + 1u);
  EXPECT_EQ(tensors.back().name, "last");
}

TEST_F(SafetensorsTest, ExportRefusesWhatImportCouldNotRead) {
  std::vector<int64_t> dims(kMaxSafetensorsDims + 1, 1);
  uint8_t one = 1;
  ASSERT_OK(SaveDict(
      {{"deep", TensorView::Contiguous(DType::kUInt8, dims, &one)}}, "ck"));
  EXPECT_THAT(ExportSafetensors(*store_, "ck", Out("x.safetensors")),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'deep'"), HasSubstr("65 dimensions"))));
}

TEST_F(SafetensorsTest, ImportRejectsTruncationsAndHugeHeaderSize) {
  const std::string file = ExportedExample();
  std::string huge = file;
  huge[7] = '\x7f';
  WriteFile(Out("t.safetensors"), huge);
  EXPECT_THAT(
      ImportSafetensors(Out("t.safetensors"), *store_, "t"),
      StatusIs(StatusCode::kCorruption,
               AllOf(HasSubstr("t.safetensors"), HasSubstr("header size"))));
  // Cutting the file anywhere (the size, the JSON, the data) leaves a file
  // that does not add up.
  for (size_t len = 0; len < file.size(); len += len < 16 ? 1 : 37) {
    SCOPED_TRACE(len);
    WriteFile(Out("t.safetensors"), file.substr(0, len));
    EXPECT_THAT(ImportSafetensors(Out("t.safetensors"), *store_, "t"),
                StatusIs(StatusCode::kCorruption, HasSubstr("t.safetensors")));
  }
}

TEST_F(SafetensorsTest, ImportSaysWhatTheHeaderSizeIsAndWhatItMayBe) {
  // A header past safetensors' limit, however much of the file follows.
  std::string over = MakeFile("{}", "");
  over.replace(0, 8, std::string("\x70\xe1\xf5\x05\0\0\0\0", 8));
  ASSERT_EQ(HeaderSize(over), 100'000'112u);
  WriteFile(Out("over.safetensors"), over);
  EXPECT_THAT(ImportSafetensors(Out("over.safetensors"), *store_, "t"),
              StatusIs(StatusCode::kCorruption,
                       "safetensors file '" + Out("over.safetensors") +
                           "': the header size is 100000112 bytes, over "
                           "safetensors' limit of 100000000 bytes"));
  // A header size the file does not hold.
  std::string cut = MakeFile(std::string(300, ' '), "");
  cut[0] = static_cast<char>(500 & 0xff);
  cut[1] = static_cast<char>(500 >> 8);
  WriteFile(Out("cut.safetensors"), cut);
  EXPECT_THAT(ImportSafetensors(Out("cut.safetensors"), *store_, "t"),
              StatusIs(StatusCode::kCorruption,
                       "safetensors file '" + Out("cut.safetensors") +
                           "': the header size is 500 bytes, but only 300 "
                           "bytes follow it: the file is cut short, or not "
                           "safetensors"));
}

// The header entries of `n` one-byte U8 tensors named t0, t1, ..., whose
// data is n bytes.
std::string TensorEntries(int n) {
  std::string entries;
  for (int i = 0; i < n; ++i) {
    entries += (i ? ",\"t" : "\"t") + std::to_string(i) +
               "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
               std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  return entries;
}

// A file of those tensors.
std::string ManyTensors(int n) {
  return MakeFile("{" + TensorEntries(n) + "}", std::string(n, 'x'));
}

TEST_F(SafetensorsTest, ImportRefusesAFileWhoseItemsWouldTakeTooMuchMemory) {
  // 100,000 tensors: over 200 MB to import (the library's plan and
  // metadata of each item, mostly), past the 192 MiB import allows. The
  // whole header is read, to say what it holds.
  WriteFile(Out("many.safetensors"), ManyTensors(100'000));
  EXPECT_THAT(
      ImportSafetensors(Out("many.safetensors"), *store_, "many"),
      StatusIs(StatusCode::kInvalidArgument,
               "safetensors file '" + Out("many.safetensors") +
                   "': 100000 tensors and 0 byte items (588890 bytes of "
                   "names, 100000 of tensor data, 0 of byte items) would "
                   "take about 217 MiB of memory to import, more than its "
                   "limit of 192 MiB; import it as several smaller files"));
  ASSERT_OK_AND_ASSIGN(auto list, store_->List());
  EXPECT_TRUE(list.empty());
}

TEST(SafetensorsImportMemoryTest, CountsItemsNamesPiecesAndByteItems) {
  const uint64_t piece = RocksDBWriterOptions().max_piece_bytes;
  ImportMemory m;
  m.AddTensor("w", 0);  // An empty tensor is still one piece.
  uint64_t want = kImportBytesPerItem + kImportBytesPerNameByte +
                  kImportBytesPerPiece + kImportBytesPerPieceNameByte;
  EXPECT_EQ(m.estimate(), want);
  // Each piece names the item: a long name costs with every piece of it.
  const std::string name(1000, 'n');
  m.AddTensor(name, 8 * piece + 1);
  want += kImportBytesPerItem + 1000 * kImportBytesPerNameByte +
          9 * (kImportBytesPerPiece + 1000 * kImportBytesPerPieceNameByte);
  EXPECT_EQ(m.estimate(), want);
  // A byte item's value is held too.
  m.AddByteItem("k", 100);
  want += kImportBytesPerItem + kImportBytesPerNameByte + 100 +
          kImportBytesPerPiece + kImportBytesPerPieceNameByte;
  EXPECT_EQ(m.estimate(), want);
  EXPECT_OK(m.Check(want));
  EXPECT_THAT(m.Check(want - 1),
              StatusIs(StatusCode::kInvalidArgument,
                       "2 tensors and 1 byte item (1002 bytes of names, " +
                           std::to_string(8 * piece + 1) +
                           " of tensor data, 100 of byte items) would take "
                           "about 1 MiB of memory to import, more than its "
                           "limit of " +
                           std::to_string(want - 1) + " bytes"));
  // Sums saturate, whatever a header claims.
  m.AddByteItem(name, UINT64_MAX);
  EXPECT_EQ(m.estimate(), UINT64_MAX);
}

TEST_F(SafetensorsTest, ImportCountsEveryItemOfTheFileAgainstItsLimit) {
  WriteFile(Out("ten.safetensors"),
            MakeFile("{\"__metadata__\":{\"k\":\"" + std::string(1000, 'v') +
                         "\"}," + TensorEntries(10) + "}",
                     std::string(10, 'x')));
  ImportMemory want;
  want.AddByteItem("k", 1000);
  for (int i = 0; i < 10; ++i) want.AddTensor("t" + std::to_string(i), 1);
  ASSERT_OK_AND_ASSIGN(
      SafetensorsFile f,
      SafetensorsFile::Open(Out("ten.safetensors"), want.estimate()));
  EXPECT_EQ(f.tensors(), 10u);
  EXPECT_EQ(f.byte_items(), 1u);
  EXPECT_THAT(
      SafetensorsFile::Open(Out("ten.safetensors"), want.estimate() - 1)
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("10 tensors and 1 byte item (21 bytes of names, 10 "
                         "of tensor data, 1000 of byte items)")));
}

TEST_F(SafetensorsTest, ImportedTensorsAreViewsOfTheFileNotCopies) {
  WriteFile(Out("ten.safetensors"), ManyTensors(10));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile f,
                       SafetensorsFile::Open(Out("ten.safetensors")));
  const TensorView& t3 = std::get<TensorView>(f.items().at("t3"));
  EXPECT_EQ(f.DataOffset(t3), 3u);
  const TensorView& t4 = std::get<TensorView>(f.items().at("t4"));
  EXPECT_EQ(static_cast<const uint8_t*>(t4.data),
            static_cast<const uint8_t*>(t3.data) + 1);
}

TEST_F(SafetensorsTest, ExportRefusesWhatImportWouldRefuseForItsMemory) {
  ExportedExample();
  // What import counts: each item, and a byte item's value as the header
  // holds it (base64 unless UTF-8).
  ImportMemory want;
  for (const auto& [name, value] : example_.dict) {
    if (const auto* bytes = std::get_if<std::string>(&value)) {
      want.AddByteItem(
          name, IsUtf8(*bytes) ? bytes->size() : Base64Encode(*bytes).size());
    } else {
      want.AddTensor(name, TensorBytes(std::get<TensorView>(value)).size());
    }
  }
  EXPECT_OK(ExportSafetensors(*store_, "ck", Out("fits.safetensors"), {},
                              kDefaultBufferBytes, want.estimate()));
  EXPECT_OK(
      SafetensorsFile::Open(Out("fits.safetensors"), want.estimate()).status());
  EXPECT_THAT(
      ExportSafetensors(*store_, "ck", Out("x.safetensors"), {},
                        kDefaultBufferBytes, want.estimate() - 1),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("checkpoint 'ck': import could not read it back: 3 "
                         "tensors and 3 byte items")));
  EXPECT_THAT(
      SafetensorsFile::Open(Out("fits.safetensors"), want.estimate() - 1)
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("3 tensors and 3 byte items")));
  EXPECT_THAT(ListDir(dir_.path().string()),
              ElementsAre("ck.safetensors", "fits.safetensors", "store"));
}

TEST_F(SafetensorsTest, ImportSurvivesFlippedHeaderBytes) {
  const std::string file = ExportedExample();
  const uint64_t header_size = HeaderSize(file);
  int rejected = 0;
  // About 200 flips spread over the header (a flip that keeps it valid,
  // e.g. in a name, imports: each such import is a whole Save).
  for (uint64_t i = 8; i < 8 + header_size; i += header_size / 200 + 1) {
    std::string bad = file;
    bad[i] ^= 0x5a;
    WriteFile(Out("f.safetensors"), bad);
    auto r = ImportSafetensors(Out("f.safetensors"), *store_, "f",
                               /*overwrite=*/true);
    if (!r.ok()) {
      ++rejected;
      EXPECT_THAT(r.status().code(),
                  AnyOf(StatusCode::kCorruption, StatusCode::kInvalidArgument))
          << "byte " << i << ": " << r.status().ToString();
      EXPECT_THAT(r.status().message(), HasSubstr("f.safetensors"));
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(SafetensorsTest, ImportOfAMissingFileOrADirectoryFailsNamingIt) {
  EXPECT_THAT(ImportSafetensors(Out("none.safetensors"), *store_, "x"),
              StatusIs(StatusCode::kNotFound, HasSubstr("none.safetensors")));
  ASSERT_EQ(::mkdir(Out("d.safetensors").c_str(), 0755), 0);
  EXPECT_THAT(ImportSafetensors(Out("d.safetensors"), *store_, "x"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("d.safetensors"),
                             HasSubstr("not a regular file"))));
}

}  // namespace
}  // namespace rocksdcp::tools
