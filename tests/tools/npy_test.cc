// tools/npy.h against the .npy format 1.0 (numpy/lib/format.py), read back
// by a parser written here and by NumPy's own numpy.load.

#include "npy.h"

#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "tools/tools_test_util.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::ExampleStateDict;
using ::rocksdcp::testing::FlipByte;
using ::rocksdcp::testing::OwnedTensor;
using ::rocksdcp::testing::RandomTensor;
using ::rocksdcp::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Npy {
  std::string header;  // The dict, padding and newline.
  std::string data;
};

::testing::AssertionResult ParseNpy(const std::string& file, Npy* npy) {
  if (file.size() < 10 ||
      file.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) != 0) {
    return ::testing::AssertionFailure() << "no .npy 1.0 magic";
  }
  const size_t len =
      static_cast<uint8_t>(file[8]) | static_cast<uint8_t>(file[9]) << 8;
  if ((10 + len) % 64 != 0 || file.size() < 10 + len ||
      file[10 + len - 1] != '\n') {
    return ::testing::AssertionFailure() << "header length " << len;
  }
  npy->header = file.substr(10, len);
  npy->data = file.substr(10 + len);
  return ::testing::AssertionSuccess();
}

class NpyTest : public ToolsTest {
 protected:
  // numpy.load(path) must give `shape`, `dtype` and, in C order, `bytes`.
  void ExpectNumpyLoads(const std::string& path, const std::string& shape,
                        const std::string& dtype, const std::string& bytes) {
    if (!HaveNumpy()) {
      GTEST_SKIP() << "no NumPy for python3 (scripts/install-deps.sh "
                      "installs python3-numpy)";
    }
    WriteFile(Out("want.bin"), bytes);
    std::string out;
    const int rc =
        RunPython({"-c",
                   "import sys, numpy\n"
                   "a = numpy.load(sys.argv[1], allow_pickle=False)\n"
                   "want = open(sys.argv[4], 'rb').read()\n"
                   "assert str(a.shape) == sys.argv[2], a.shape\n"
                   "assert a.dtype == numpy.dtype(sys.argv[3]), a.dtype\n"
                   "assert a.flags['C_CONTIGUOUS'] and a.tobytes() == want\n"
                   "print('ok')\n",
                   path, shape, dtype, Out("want.bin")},
                  &out);
    EXPECT_EQ(rc, 0) << "numpy.load refused or misread " << path;
    EXPECT_EQ(out, "ok\n");
  }
};

TEST_F(NpyTest, WritesHeaderAndDataThatNumpyLoads) {
  OwnedTensor t = RandomTensor(DType::kFloat32, {2, 3}, 1);
  ASSERT_OK(SaveDict({{"w", t.view}}, "ck"));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy")));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_THAT(npy.header, HasSubstr("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (2, 3), }"));
  EXPECT_EQ(npy.data, TensorBytes(t.view));
  ExpectNumpyLoads(Out("w.npy"), "(2, 3)", "<f4", TensorBytes(t.view));
}

TEST_F(NpyTest, ShapesAndDTypes) {
  OwnedTensor scalar = RandomTensor(DType::kInt64, {}, 2);
  OwnedTensor vec = RandomTensor(DType::kUInt8, {5}, 3);
  OwnedTensor c = RandomTensor(DType::kComplex128, {1, 2, 1}, 4);
  OwnedTensor empty = RandomTensor(DType::kFloat16, {3, 0}, 5);
  ASSERT_OK(SaveDict(
      {{"s", scalar.view}, {"v", vec.view}, {"c", c.view}, {"e", empty.view}},
      "ck"));
  const struct {
    std::string fqn, descr, shape;
    const OwnedTensor* t;
  } cases[] = {
      {"s", "<i8", "()", &scalar},
      {"v", "|u1", "(5,)", &vec},
      {"c", "<c16", "(1, 2, 1)", &c},
      {"e", "<f2", "(3, 0)", &empty},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.fqn);
    ASSERT_OK(DumpNpy(*store_, "ck", k.fqn, Out(k.fqn + ".npy")));
    Npy npy;
    ASSERT_TRUE(ParseNpy(ReadFile(Out(k.fqn + ".npy")), &npy));
    EXPECT_THAT(npy.header, HasSubstr("'descr': '" + k.descr +
                                      "', 'fortran_order': False, 'shape': " +
                                      k.shape + ", }"));
    EXPECT_EQ(npy.data, TensorBytes(k.t->view));
    ExpectNumpyLoads(Out(k.fqn + ".npy"), k.shape, k.descr,
                     TensorBytes(k.t->view));
  }
}

TEST_F(NpyTest, ReassemblesShards) {
  OwnedTensor whole = RandomTensor(DType::kFloat32, {4, 6}, 5);
  ShardedTensor st{DType::kFloat32, {4, 6}, {}};
  st.local_shards.push_back({{0, 0}, whole.view.Narrow({0, 0}, {4, 2})});
  st.local_shards.push_back({{0, 2}, whole.view.Narrow({0, 2}, {4, 4})});
  ASSERT_OK(SaveDict({{"w", st}}, "ck"));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy")));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_EQ(npy.data, TensorBytes(whole.view));
}

TEST_F(NpyTest, StreamsATensorLargerThanItsBuffer) {
  // 96 KiB through 1 KiB: slabs of 4 rows of 64 floats, reassembled from
  // pieces of 4 KiB.
  OwnedTensor t = RandomTensor(DType::kFloat32, {384, 64}, 6);
  RocksDBWriterOptions options;
  options.max_piece_bytes = 4096;
  ASSERT_OK(SaveDict({{"w", t.view}}, "ck", options));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy"), /*buffer_bytes=*/1024));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_EQ(npy.data, TensorBytes(t.view));
  ExpectNumpyLoads(Out("w.npy"), "(384, 64)", "<f4", TensorBytes(t.view));
}

TEST_F(NpyTest, RefusesWhatNumpyCannotHold) {
  auto example = ExampleStateDict(1);
  std::vector<int64_t> many_dims(kMaxNpyDims + 1, 1);
  uint8_t one = 7;
  example.dict["deep"] = TensorView::Contiguous(DType::kUInt8, many_dims, &one);
  ASSERT_OK(SaveDict(example.dict, "ck"));
  EXPECT_THAT(DumpNpy(*store_, "ck", "model.layers.0.attn.w", Out("x.npy")),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.layers.0.attn.w"),
                             HasSubstr("bfloat16"), HasSubstr("NumPy"))));
  EXPECT_THAT(DumpNpy(*store_, "ck", "optimizer/state", Out("x.npy")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("byte item")));
  EXPECT_THAT(DumpNpy(*store_, "ck", "deep", Out("x.npy")),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'deep'"), HasSubstr("33 dimensions"))));
  EXPECT_THAT(
      DumpNpy(*store_, "ck", "nope", Out("x.npy")),
      StatusIs(StatusCode::kNotFound,
               AllOf(HasSubstr("checkpoint 'ck'"), HasSubstr("'nope'"))));
  EXPECT_THAT(DumpNpy(*store_, "missing", "w", Out("x.npy")),
              StatusIs(StatusCode::kNotFound, HasSubstr("missing")));
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store"));
}

TEST_F(NpyTest, AFailedDumpLeavesTheTargetAsItWas) {
  OwnedTensor t = RandomTensor(DType::kFloat32, {256, 256}, 7);
  RocksDBWriterOptions options;
  options.max_piece_bytes = 4096;
  ASSERT_OK(SaveDict({{"w", t.view}}, "ck", options));

  // A directory, and a file the user may not write, are refused and kept.
  ASSERT_EQ(::mkdir(Out("dir").c_str(), 0755), 0);
  EXPECT_THAT(
      DumpNpy(*store_, "ck", "w", Out("dir")),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  WriteFile(Out("ro.npy"), "precious");
  ASSERT_EQ(::chmod(Out("ro.npy").c_str(), 0444), 0);
  if (::access(Out("ro.npy").c_str(), W_OK) != 0) {  // Not as root.
    EXPECT_THAT(DumpNpy(*store_, "ck", "w", Out("ro.npy")),
                StatusIs(StatusCode::kIOError, HasSubstr("ro.npy")));
  }
  EXPECT_EQ(ReadFile(Out("ro.npy")), "precious");

  // A read that fails half-way (a flipped byte in the middle of the data)
  // keeps the old file and leaves no temporary one.
  WriteFile(Out("w.npy"), "old");
  CloseStore();
  FlipByte(SstFiles().at(0), 128 * 1024);
  OpenStore();
  EXPECT_THAT(DumpNpy(*store_, "ck", "w", Out("w.npy"), /*buffer_bytes=*/8192),
              StatusIs(StatusCode::kCorruption, HasSubstr("item 'w@")));
  EXPECT_EQ(ReadFile(Out("w.npy")), "old");
  EXPECT_THAT(ListDir(dir_.path().string()),
              ElementsAre("dir", "ro.npy", "store", "w.npy"));
}

TEST_F(NpyTest, ReplacesAnExistingFileWhole) {
  OwnedTensor t = RandomTensor(DType::kInt32, {10}, 8);
  ASSERT_OK(SaveDict({{"w", t.view}}, "ck"));
  WriteFile(Out("w.npy"), std::string(100000, 'x'));
  ASSERT_OK(DumpNpy(*store_, "ck", "w", Out("w.npy")));
  Npy npy;
  ASSERT_TRUE(ParseNpy(ReadFile(Out("w.npy")), &npy));
  EXPECT_EQ(npy.data, TensorBytes(t.view));
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store", "w.npy"));
}

}  // namespace
}  // namespace rocksdcp::tools
