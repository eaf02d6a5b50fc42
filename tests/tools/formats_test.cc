// tools/formats.h against the formats' specs, read back by independent
// readers written here: .npy 1.0 (and NumPy itself when python3 has it),
// safetensors (no Python package here).

#include "formats.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::ExampleStateDict;
using ::rocksdcp::testing::IsExampleState;
using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::RandomTensor;
using ::rocksdcp::testing::SameTensor;
using ::rocksdcp::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string Bytes(const TensorView& t) {
  return std::string(static_cast<const char*>(t.data), t.nbytes());
}

// ---- .npy, read per numpy/lib/format.py ----

struct Npy {
  std::string header;  // The dict, padding and newline.
  std::string data;
};

::testing::AssertionResult ParseNpy(const std::string& file, Npy* npy) {
  if (file.size() < 10 || file.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) != 0) {
    return ::testing::AssertionFailure() << "no .npy 1.0 magic";
  }
  const size_t len = static_cast<uint8_t>(file[8]) |
                     static_cast<uint8_t>(file[9]) << 8;
  if ((10 + len) % 64 != 0 || file.size() < 10 + len ||
      file[10 + len - 1] != '\n') {
    return ::testing::AssertionFailure() << "header length " << len;
  }
  npy->header = file.substr(10, len);
  npy->data = file.substr(10 + len);
  return ::testing::AssertionSuccess();
}

bool HavePythonNumpy() {
  return std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// ---- safetensors, read per the spec (github.com/huggingface/safetensors)
// with a JSON reader of its own, independent of formats.cc's. ----

struct J {
  std::string str;  // Strings; numbers as their text.
  std::vector<J> arr;
  std::map<std::string, J> obj;
};

class MiniJson {
 public:
  explicit MiniJson(const std::string& s) : s_(s) {}
  bool Parse(J* out) {
    if (!Val(out)) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Str(std::string* out) {
    if (s_[i_] != '"') return false;
    for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_) {
      if (s_[i_] == '\\') {
        const char e = s_[++i_];
        if (e == 'u') {
          *out += static_cast<char>(std::stoi(s_.substr(i_ + 1, 4), nullptr, 16));
          i_ += 4;
        } else {
          *out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        }
      } else {
        *out += s_[i_];
      }
    }
    return i_++ < s_.size();
  }
  bool Val(J* out) {
    Ws();
    if (i_ >= s_.size()) return false;
    if (s_[i_] == '"') return Str(&out->str);
    if (s_[i_] == '[' || s_[i_] == '{') {
      const char close = s_[i_] == '[' ? ']' : '}';
      ++i_;
      Ws();
      if (s_[i_] == close) return ++i_, true;
      while (true) {
        Ws();
        J v;
        if (close == '}') {
          std::string k;
          if (!Str(&k)) return false;
          Ws();
          if (s_[i_++] != ':' || !Val(&v)) return false;
          out->obj[k] = v;
        } else {
          if (!Val(&v)) return false;
          out->arr.push_back(v);
        }
        Ws();
        if (s_[i_] == close) return ++i_, true;
        if (s_[i_++] != ',') return false;
      }
    }
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      out->str += s_[i_++];
    }
    return !out->str.empty();
  }
  const std::string& s_;
  size_t i_ = 0;
};

struct StFile {
  uint64_t header_size = 0;
  J header;
  std::string data;
};

::testing::AssertionResult ParseSafetensors(const std::string& file,
                                            StFile* st) {
  if (file.size() < 8) return ::testing::AssertionFailure() << "short";
  for (int i = 7; i >= 0; --i) {
    st->header_size = st->header_size << 8 | static_cast<uint8_t>(file[i]);
  }
  if (8 + st->header_size > file.size()) {
    return ::testing::AssertionFailure() << "header size " << st->header_size;
  }
  if (!MiniJson(file.substr(8, st->header_size)).Parse(&st->header)) {
    return ::testing::AssertionFailure() << "bad JSON";
  }
  st->data = file.substr(8 + st->header_size);
  return ::testing::AssertionSuccess();
}

class FormatsTest : public ::rocksdcp::testing::StoreTest {
 protected:
  std::string Out(const std::string& name) const { return dir_.Sub(name); }

  // Saves ExampleStateDict(seed) plus a byte item of every byte value.
  void SaveExample(const std::string& id, uint64_t seed) {
    example_ = ExampleStateDict(seed);
    example_.dict["raw"] = all_bytes_;
    example_.dict["text"] = std::string("base64:not really\n\"q\"");
    ASSERT_OK(SaveDict(example_.dict, id));
  }

  std::string ExportedExample() {
    SaveExample("ck", 7);
    EXPECT_OK(ExportSafetensors(*store_, "ck", Out("ck.safetensors")));
    return ReadFile(Out("ck.safetensors"));
  }

  ::rocksdcp::testing::ExampleState example_;
  std::string all_bytes_ = [] {
    std::string s;
    for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
    return s;
  }();
};

TEST_F(FormatsTest, DumpNpyWritesHeaderAndData) {
  OwnedTensor t = RandomTensor(DType::kFloat32, {2, 3}, 1);
  ASSERT_OK(SaveDict({{"w", t.view}}, "ck"));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy")));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_THAT(npy.header,
              HasSubstr("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2, 3), }"));
  EXPECT_EQ(npy.data, Bytes(t.view));
  if (HavePythonNumpy()) {
    const float* f = static_cast<const float*>(t.view.data);
    std::ostringstream cmd;
    cmd.precision(9);
    cmd << "python3 -c 'import numpy; a = numpy.load(\"" << Out("w.npy")
        << "\"); assert a.shape == (2, 3) and a.dtype == numpy.float32; "
        << "assert a[1, 2] == numpy.float32(" << f[5] << ")'";
    EXPECT_EQ(std::system(cmd.str().c_str()), 0) << cmd.str();
  }
}

TEST_F(FormatsTest, DumpNpyShapesAndDTypes) {
  OwnedTensor scalar = RandomTensor(DType::kInt64, {}, 2);
  OwnedTensor vec = RandomTensor(DType::kUInt8, {5}, 3);
  OwnedTensor c = RandomTensor(DType::kComplex128, {1, 2, 1}, 4);
  ASSERT_OK(SaveDict({{"s", scalar.view}, {"v", vec.view}, {"c", c.view}},
                     "ck"));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"s", "'descr': '<i8', 'fortran_order': False, 'shape': (), }"},
      {"v", "'descr': '|u1', 'fortran_order': False, 'shape': (5,), }"},
      {"c", "'descr': '<c16', 'fortran_order': False, 'shape': (1, 2, 1), }"},
  };
  for (const auto& [fqn, header] : want) {
    ASSERT_OK(DumpNpy(*store_, "ck", fqn, Out(fqn + ".npy")));
    Npy npy;
    ASSERT_TRUE(ParseNpy(ReadFile(Out(fqn + ".npy")), &npy));
    EXPECT_THAT(npy.header, HasSubstr(header));
  }
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("c.npy")), &npy));
  EXPECT_EQ(npy.data, Bytes(c.view));
}

TEST_F(FormatsTest, DumpNpyReassemblesShards) {
  OwnedTensor whole = RandomTensor(DType::kFloat32, {4, 6}, 5);
  ShardedTensor st{DType::kFloat32, {4, 6}, {}};
  st.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {4, 2})});
  st.local_shards.push_back({{0, 2}, whole.view.Narrow({0, 2}, {4, 4})});
  ASSERT_OK(SaveDict({{"w", st}}, "ck"));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy")));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_EQ(npy.data, Bytes(whole.view));
}

TEST_F(FormatsTest, DumpNpyRefusesWhatNumpyCannotHold) {
  SaveExample("ck", 1);
  EXPECT_THAT(DumpNpy(*store_, "ck", "model.layers.0.attn.w", Out("x.npy")),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.layers.0.attn.w"),
                             HasSubstr("bfloat16"), HasSubstr("NumPy"))));
  EXPECT_THAT(DumpNpy(*store_, "ck", "raw", Out("x.npy")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("byte item")));
  EXPECT_THAT(DumpNpy(*store_, "ck", "nope", Out("x.npy")),
              StatusIs(StatusCode::kNotFound, HasSubstr("'nope'")));
  EXPECT_THAT(DumpNpy(*store_, "missing", "raw", Out("x.npy")),
              StatusIs(StatusCode::kNotFound, HasSubstr("missing")));
  EXPECT_FALSE(std::ifstream(Out("x.npy")).good());
}

TEST_F(FormatsTest, ExportFollowsTheSpec) {
  const std::string file = ExportedExample();
  StFile st;
  ASSERT_TRUE(ParseSafetensors(file, &st));
  EXPECT_EQ(st.header_size % 8, 0u);
  const auto& h = st.header.obj;
  ASSERT_EQ(h.count("__metadata__"), 1u);
  const auto& meta = h.at("__metadata__").obj;
  EXPECT_EQ(meta.at("optimizer/state").str.rfind("base64:", 0), 0u);
  EXPECT_EQ(meta.at("raw").str.rfind("base64:", 0), 0u);
  EXPECT_EQ(meta.at("text").str.rfind("base64:", 0), 0u);  // Has the prefix.

  // Tensors in name order, contiguous from 0 to the end of the file.
  const std::vector<std::pair<std::string, std::string>> tensors = {
      {"model.layers.0.attn.w", "BF16"},
      {"model.norm.bias", "F32"},
      {"step_counter", "I64"}};
  ASSERT_EQ(h.size(), 1 + tensors.size());
  uint64_t next = 0;
  for (const auto& [name, dtype] : tensors) {
    SCOPED_TRACE(name);
    const J& e = h.at(name);
    EXPECT_EQ(e.obj.at("dtype").str, dtype);
    const TensorView& want = std::get<TensorView>(example_.dict.at(name));
    ASSERT_EQ(e.obj.at("shape").arr.size(), want.sizes.size());
    for (size_t i = 0; i < want.sizes.size(); ++i) {
      EXPECT_EQ(e.obj.at("shape").arr[i].str, std::to_string(want.sizes[i]));
    }
    const uint64_t begin = std::stoull(e.obj.at("data_offsets").arr.at(0).str);
    const uint64_t end = std::stoull(e.obj.at("data_offsets").arr.at(1).str);
    EXPECT_EQ(begin, next);
    ASSERT_EQ(end - begin, want.nbytes());
    EXPECT_EQ(st.data.substr(begin, end - begin), Bytes(want));
    next = end;
  }
  EXPECT_EQ(next, st.data.size());
}

TEST_F(FormatsTest, ExportReportsProgressAndStats) {
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

TEST_F(FormatsTest, ExportRefusesDTypesSafetensorsLacks) {
  OwnedTensor c = RandomTensor(DType::kComplex64, {2}, 1);
  ASSERT_OK(SaveDict({{"c", c.view}}, "ck"));
  EXPECT_THAT(ExportSafetensors(*store_, "ck", Out("c.safetensors")),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'c'"), HasSubstr("safetensors"))));
  EXPECT_FALSE(std::ifstream(Out("c.safetensors")).good());
  EXPECT_THAT(ExportSafetensors(*store_, "nope", Out("c.safetensors")),
              StatusIs(StatusCode::kNotFound, HasSubstr("nope")));
}

TEST_F(FormatsTest, ExportImportRoundTripIsBitExact) {
  ExportedExample();
  ASSERT_OK_AND_ASSIGN(TransferStats stats,
                       ImportSafetensors(Out("ck.safetensors"), *store_,
                                         "imported"));
  EXPECT_EQ(stats.tensors, 3u);
  EXPECT_EQ(stats.byte_items, 3u);
  auto loaded = ::rocksdcp::testing::EmptyExampleStateDict();
  loaded.dict["raw"] = std::string();
  loaded.dict["text"] = std::string();
  ASSERT_OK(LoadDict(&loaded.dict, "imported"));
  EXPECT_TRUE(IsExampleState(loaded, 7));
  EXPECT_EQ(std::get<std::string>(loaded.dict["raw"]), all_bytes_);
  EXPECT_EQ(std::get<std::string>(loaded.dict["text"]),
            std::get<std::string>(example_.dict["text"]));

  // Exporting the import gives the same file.
  ASSERT_OK(ExportSafetensors(*store_, "imported", Out("again.safetensors")));
  EXPECT_EQ(ReadFile(Out("again.safetensors")), ReadFile(Out("ck.safetensors")));
}

TEST_F(FormatsTest, ImportRefusesAnExistingIdUnlessOverwrite) {
  ExportedExample();
  EXPECT_THAT(ImportSafetensors(Out("ck.safetensors"), *store_, "ck"),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("ck")));
  EXPECT_OK(ImportSafetensors(Out("ck.safetensors"), *store_, "ck",
                              /*overwrite=*/true));
}

// A hand-written file, as another writer (e.g. Hugging Face's) makes it.
std::string MakeFile(const std::string& header, const std::string& data) {
  std::string size(8, '\0');
  for (int i = 0; i < 8; ++i) {
    size[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  }
  return size + header + data;
}

TEST_F(FormatsTest, ImportsAForeignFile) {
  const std::string header =
      "{\"b\": {\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [4, 8]},"
      " \"a\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]},"
      " \"__metadata__\": {\"format\": \"pt\", \"n\\u00e9\": \"\\ud83d\\ude00\"}}";
  WriteFile(Out("f.safetensors"), MakeFile(header, std::string("ABCD\x01\x00\x02\x00", 8)));
  ASSERT_OK(ImportSafetensors(Out("f.safetensors"), *store_, "hf"));
  std::vector<uint8_t> a(4);
  std::vector<int16_t> b(2);
  StateDict sd = {
      {"a", TensorView::Contiguous(DType::kUInt8, {2, 2}, a.data())},
      {"b", TensorView::Contiguous(DType::kInt16, {2}, b.data())},
      {"format", std::string()},
      {"n\xc3\xa9", std::string()}};
  ASSERT_OK(LoadDict(&sd, "hf"));
  EXPECT_EQ(std::string(a.begin(), a.end()), "ABCD");
  EXPECT_EQ(b, (std::vector<int16_t>{1, 2}));
  EXPECT_EQ(std::get<std::string>(sd["format"]), "pt");
  EXPECT_EQ(std::get<std::string>(sd["n\xc3\xa9"]), "\xf0\x9f\x98\x80");
}

TEST_F(FormatsTest, ImportRejectsBadHeaders) {
  const std::string ok_entry =
      "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}";
  const std::string data(8, 'x');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + ok_entry + ",}", "invalid JSON"},
      {"{" + ok_entry, "invalid JSON"},
      {"[1]", "not a JSON object"},
      {"{\"a\": {\"dtype\": \"F31\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
       "unknown dtype"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}",
       "shape"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}",
       "need 12"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
       "outside the data"},
      {"{" + ok_entry + ", \"b\": {\"dtype\": \"U8\", \"shape\": [4], "
       "\"data_offsets\": [4, 8]}}", "overlaps"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
       "cover 4 bytes"},
      {"{" + ok_entry + ", " + ok_entry + "}", "duplicate key"},
      {"{" + ok_entry + ", \"__metadata__\": {\"k\": 1}}", "not a string"},
      {"{" + ok_entry + ", \"__metadata__\": {\"k\": \"base64:@@\"}}",
       "bad base64"},
      {"{" + ok_entry + ", \"__metadata__\": {\"a\": \"x\"}}",
       "name of a tensor"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8],"
       " \"extra\": 1}}", "unknown field"},
      {"{" + ok_entry + "}\xff", "invalid JSON"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [0, 4611686018427387904, "
       "4611686018427387904], \"data_offsets\": [0, 0]}, \"b\": {\"dtype\": "
       "\"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}}", "shape too large"},
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

TEST_F(FormatsTest, ImportRejectsTruncationsAndHugeHeaderSize) {
  const std::string file = ExportedExample();
  std::string huge = file;
  huge[7] = '\x7f';
  WriteFile(Out("t.safetensors"), huge);
  EXPECT_THAT(ImportSafetensors(Out("t.safetensors"), *store_, "t"),
              StatusIs(StatusCode::kCorruption,
                       AllOf(HasSubstr("t.safetensors"),
                             HasSubstr("header size"))));
  // Cutting the file anywhere (the size, the JSON, the data) leaves a file
  // that does not add up.
  for (size_t len = 0; len < file.size(); len += len < 16 ? 1 : 37) {
    SCOPED_TRACE(len);
    WriteFile(Out("t.safetensors"), file.substr(0, len));
    EXPECT_THAT(ImportSafetensors(Out("t.safetensors"), *store_, "t"),
                StatusIs(StatusCode::kCorruption, HasSubstr("t.safetensors")));
  }
}

TEST_F(FormatsTest, ImportSurvivesFlippedHeaderBytes) {
  const std::string file = ExportedExample();
  StFile st;
  ASSERT_TRUE(ParseSafetensors(file, &st));
  int rejected = 0;
  // About 200 flips spread over the header (a flip that keeps it valid,
  // e.g. in a name, imports: each such import is a whole Save).
  for (uint64_t i = 8; i < 8 + st.header_size; i += st.header_size / 200 + 1) {
    std::string bad = file;
    bad[i] ^= 0x5a;
    WriteFile(Out("f.safetensors"), bad);
    auto r = ImportSafetensors(Out("f.safetensors"), *store_, "f",
                               /*overwrite=*/true);
    if (!r.ok()) {
      ++rejected;
      EXPECT_THAT(r.status().code(), AnyOf(StatusCode::kCorruption,
                                           StatusCode::kInvalidArgument))
          << "byte " << i << ": " << r.status().ToString();
      EXPECT_THAT(r.status().message(), HasSubstr("f.safetensors"));
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(FormatsTest, ImportMissingFileIsNotFound) {
  EXPECT_THAT(ImportSafetensors(Out("none.safetensors"), *store_, "x"),
              StatusIs(StatusCode::kNotFound, HasSubstr("none.safetensors")));
}

}  // namespace
}  // namespace rocksdcp::tools
