// The rocksdcp CLI's commands that read and write files outside the store
// (dump, export, import), and what every command owes a script: valid JSON
// whatever the names hold, a failure when its output is lost to a full
// disk, a quiet end when the reader of its pipe has gone, and ids named
// once.

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "rocksdb/child_process.h"
#include "tools/cli_runner.h"
#include "tools/tools_test_util.h"
#include "weights.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class CliFilesTest : public CliTest {
 protected:
  bool Exists(const std::string& path) {
    return access(path.c_str(), F_OK) == 0;
  }
};

TEST_F(CliFilesTest, DumpWritesOneTensor) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string npy = dir_.Sub("bias.npy");
  CliRun r =
      RunJson({"dump", store_path(), "ck", "model.norm.bias", "--npy", npy});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json["fqn"].str(), "model.norm.bias");
  EXPECT_EQ(r.json["npy"].str(), npy);
  const std::string file = tools::ReadFile(npy);
  EXPECT_EQ(file.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(file.size(), 128u + 100 * 4);  // Header padded to 64s.

  CliRun text = Run({"dump", store_path(), "ck", "step_counter", "--npy",
                     dir_.Sub("step.npy")});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("wrote step_counter to"));
}

TEST_F(CliFilesTest, ExportThenImportIntoANewStore) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string file = dir_.Sub("ck.safetensors");
  CliRun e = RunJson({"export", store_path(), "ck", "--safetensors", file});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(e.json["tensors"].num(), 3);
  EXPECT_EQ(e.json["byte_items"].num(), 1);
  EXPECT_EQ(e.json["bytes"].num(), 48 * 100 * 2 + 100 * 4 + 8);
  tools::Json report;
  EXPECT_TRUE(tools::ReadSafetensors(file, &report));

  // import creates the store it is given.
  const std::string other = dir_.Sub("other");
  CliRun i = RunJson({"import", file, other, "from-file"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(i.json["id"].str(), "from-file");
  EXPECT_EQ(i.json["tensors"].num(), 3);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(other));
  ExampleState loaded = EmptyExampleStateDict();
  StoreTest::store_ = std::move(store);
  ASSERT_OK(LoadDict(&loaded.dict, "from-file"));
  EXPECT_TRUE(IsExampleState(loaded, 1));
}

// An incremental checkpoint whose base is deleted dumps and exports the
// same bytes as a full save of the same state, and loads partially.
TEST_F(CliFilesTest, AnIncrementalCheckpointDumpsAndExportsAsAFullOne) {
  SaveExamples({"full"});
  ExampleState state = ExampleStateDict(1);
  ASSERT_OK(
      SaveDict(state.dict, "incr", {.base = "full", .max_piece_bytes = 4096}));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo incr, store_->Info("incr"));
  EXPECT_EQ(incr.referenced_bytes, incr.bytes);
  // A partial load: one tensor of it.
  OwnedTensor bias = ZeroTensor(DType::kFloat32, {100});
  StateDict part{{"model.norm.bias", bias.view}};
  ASSERT_OK(LoadDict(&part, "incr", /*allow_partial_load=*/true));
  EXPECT_TRUE(SameTensor(bias.view,
                         std::get<TensorView>(state.dict["model.norm.bias"])));
  ASSERT_OK(store_->Delete("full"));
  SaveExamples({"again"});  // The same state, saved whole.
  CloseStore();
  for (const char* fqn : {"model.norm.bias", "step_counter"}) {
    const std::string a = dir_.Sub("incr.npy"), b = dir_.Sub("again.npy");
    CliRun r = Run({"dump", store_path(), "incr", fqn, "--npy", a});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(Run({"dump", store_path(), "again", fqn, "--npy", b}).exit_code,
              0);
    EXPECT_EQ(tools::ReadFile(a), tools::ReadFile(b)) << fqn;
  }
  const std::string a = dir_.Sub("incr.safetensors");
  const std::string b = dir_.Sub("again.safetensors");
  ASSERT_EQ(Run({"export", store_path(), "incr", "--safetensors", a}).exit_code,
            0);
  ASSERT_EQ(
      Run({"export", store_path(), "again", "--safetensors", b}).exit_code, 0);
  EXPECT_EQ(tools::ReadFile(a), tools::ReadFile(b));
}

// A checkpoint of compressed pieces dumps and exports the bytes an
// uncompressed one does; import --compress stores them compressed, and
// they export back unchanged.
TEST_F(CliFilesTest, CompressedCheckpointsDumpExportAndImportAsPlainOnes) {
  OwnedTensor w = ZeroTensor(DType::kBFloat16, {128, 256});
  FillWeights(WeightKind::kWeight, DType::kBFloat16, 5, w.bytes.data(),
              128 * 256);
  OwnedTensor v = ZeroTensor(DType::kFloat32, {64, 256});  // NumPy has no bf16.
  FillWeights(WeightKind::kWeight, DType::kFloat32, 6, v.bytes.data(),
              64 * 256);
  const StateDict sd{
      {"w", w.view}, {"v", v.view}, {"config", std::string(3000, 'c')}};
  ASSERT_OK(SaveDict(sd, "plain", {.max_piece_bytes = 16384}));
  ASSERT_OK(SaveDict(
      sd, "packed",
      {.compression = Compression::kBytePlaneZstd, .max_piece_bytes = 16384}));
  CloseStore();
  const std::string a = dir_.Sub("a"), b = dir_.Sub("b");
  CliRun d = Run({"dump", store_path(), "packed", "v", "--npy", a});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  ASSERT_EQ(Run({"dump", store_path(), "plain", "v", "--npy", b}).exit_code, 0);
  EXPECT_EQ(tools::ReadFile(a), tools::ReadFile(b));
  ASSERT_EQ(
      Run({"export", store_path(), "packed", "--safetensors", a}).exit_code, 0);
  ASSERT_EQ(
      Run({"export", store_path(), "plain", "--safetensors", b}).exit_code, 0);
  EXPECT_EQ(tools::ReadFile(a), tools::ReadFile(b));

  // Imported compressed into a store of its own: smaller, and the same.
  const std::string plain = dir_.Sub("plain-store");
  const std::string packed = dir_.Sub("packed-store");
  ASSERT_EQ(Run({"import", b, plain, "x"}).exit_code, 0);
  CliRun i = Run({"import", b, packed, "x", "--compress"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(Run({"verify", packed}).exit_code, 0);
  const std::string again = dir_.Sub("again");
  ASSERT_EQ(Run({"export", packed, "x", "--safetensors", again}).exit_code, 0);
  EXPECT_EQ(tools::ReadFile(again), tools::ReadFile(b));
  auto sst_bytes = [](const std::string& dir) {
    uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".sst") n += e.file_size();
    }
    return n;
  };
  EXPECT_LT(sst_bytes(packed), sst_bytes(plain) * 85 / 100);
}

TEST_F(CliFilesTest, BadStoreIdFqnOrFileFailsNamingIt) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string missing = dir_.Sub("no-such-store");
  const std::string out = dir_.Sub("out");
  const std::string good_file = dir_.Sub("ck.safetensors");
  ASSERT_EQ(
      Run({"export", store_path(), "ck", "--safetensors", good_file}).exit_code,
      0);
  tools::WriteFile(dir_.Sub("bad.safetensors"),
                   "\x10\0\0\0\0\0\0\0{not json}   ");
  const struct {
    std::vector<std::string> args;
    std::string names;
  } cases[] = {
      {{"dump", missing, "ck", "w", "--npy", out}, missing},
      {{"dump", store_path(), "nope", "w", "--npy", out}, "'nope'"},
      {{"dump", store_path(), "ck", "no.such.fqn", "--npy", out},
       "'no.such.fqn'"},
      {{"export", missing, "ck", "--safetensors", out}, missing},
      {{"export", store_path(), "nope", "--safetensors", out}, "'nope'"},
      {{"import", dir_.Sub("none.safetensors"), store_path(), "x"},
       "none.safetensors"},
      {{"import", dir_.Sub("bad.safetensors"), store_path(), "x"},
       "bad.safetensors"},
      {{"import", good_file, store_path(), "ck"}, "'ck'"},  // Exists.
  };
  for (const auto& c : cases) {
    CliRun r = Run(c.args);
    EXPECT_EQ(r.exit_code, kFailed) << ::testing::PrintToString(c.args);
    EXPECT_THAT(r.err, HasSubstr(c.names)) << ::testing::PrintToString(c.args);
  }
  EXPECT_FALSE(Exists(out));
  EXPECT_FALSE(Exists(missing));
  EXPECT_THAT(ListedIds(), ElementsAre("ck"));
}

TEST_F(CliFilesTest, ImportChecksFileAndIdBeforeCreatingTheStore) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string good = dir_.Sub("ck.safetensors");
  ASSERT_EQ(
      Run({"export", store_path(), "ck", "--safetensors", good}).exit_code, 0);
  const std::string fresh = dir_.Sub("fresh");
  tools::WriteFile(dir_.Sub("bad.safetensors"), std::string(7, '\0'));
  const struct {
    std::string file, id, says;
  } cases[] = {
      {dir_.Sub("none.safetensors"), "x", "none.safetensors"},
      {dir_.Sub("bad.safetensors"), "x", "bad.safetensors"},
      {good, "default", "default"},  // RocksDB's own column family.
      {good, "", "empty"},
  };
  for (const auto& c : cases) {
    CliRun r = Run({"import", c.file, fresh, c.id});
    EXPECT_EQ(r.exit_code, kFailed) << c.file << " " << c.id;
    EXPECT_THAT(r.err, HasSubstr(c.says));
    EXPECT_FALSE(Exists(fresh)) << "a failed import created the store";
  }
}

// Another process (a trainer) holds the store read-write: dump and export
// read it; import says it is locked, for a file that would import.
TEST_F(CliFilesTest, ReadsWorkOnALockedStoreAndImportSaysItIsLocked) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string file = dir_.Sub("ck.safetensors");
  ASSERT_EQ(
      Run({"export", store_path(), "ck", "--safetensors", file}).exit_code, 0);
  LockHolder holder(store_path());
  ASSERT_TRUE(holder.ready());

  CliRun dump = Run({"dump", store_path(), "ck", "model.norm.bias", "--npy",
                     dir_.Sub("b.npy")});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  CliRun e = Run({"export", store_path(), "ck", "--safetensors",
                  dir_.Sub("again.safetensors")});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(tools::ReadFile(dir_.Sub("again.safetensors")),
            tools::ReadFile(file));

  CliRun i = Run({"import", file, store_path(), "copy"});
  EXPECT_EQ(i.exit_code, kFailed);
  EXPECT_THAT(i.err, AllOf(HasSubstr("is locked by another process"),
                           HasSubstr(store_path())));
}

TEST_F(CliFilesTest, ExportAndImportDrawAProgressBarOnATerminal) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string file = dir_.Sub("ck.safetensors");
  EXPECT_THAT(RunWithTerminalStderr(
                  {"export", store_path(), "ck", "--safetensors", file}),
              AllOf(HasSubstr("exporting ["), HasSubstr("100%"),
                    HasSubstr("4/4 items")));
  EXPECT_THAT(RunWithTerminalStderr({"import", file, store_path(), "again"}),
              AllOf(HasSubstr("importing ["), HasSubstr("100%")));
  CliRun quiet = Run({"export", store_path(), "ck", "--safetensors", file});
  EXPECT_THAT(quiet.err, Not(HasSubstr("exporting [")));
}

TEST_F(CliFilesTest, JsonIsValidAndTextIsSafeWhateverTheNamesHold) {
  // A Latin-1 byte, a control character and an escape sequence that would
  // turn a terminal red: the library takes any bytes as an fqn.
  const std::string fqn = "caf\xe9\x01\x1b[31m";
  ASSERT_OK(SaveDict({{fqn, std::string("v")}}, "ck"));
  CloseStore();
  CliRun r = RunJson({"info", store_path(), "ck"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.json["items"].arr().size(), 1u);
  // Each byte outside UTF-8 shows as U+FFFD; controls are escaped.
  EXPECT_EQ(r.json["items"].arr()[0]["fqn"].str(),
            "caf\xef\xbf\xbd\x01\x1b[31m");
  EXPECT_THAT(r.out, HasSubstr("caf\\ufffd\\u0001\\u001b[31m"));

  CliRun text = Run({"info", store_path(), "ck"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, AllOf(HasSubstr("caf\\xe9\\x01\\x1b[31m"),
                              Not(HasSubstr("\x1b")), Not(HasSubstr("\xe9"))));
  CliRun missing =
      Run({"dump", store_path(), "ck", "\x1b[2J", "--npy", dir_.Sub("x.npy")});
  EXPECT_EQ(missing.exit_code, kFailed);
  EXPECT_THAT(missing.err,
              AllOf(HasSubstr("\\x1b[2J"), Not(HasSubstr("\x1b"))));
}

TEST_F(CliFilesTest, IdsOutsideUtf8ListAsValidJsonAndSafeText) {
  // An id is any bytes but controls: Latin-1, and a C1 CSI (U+009B).
  ASSERT_OK(SaveDict({{"w", std::string("v")}}, "caf\xe9"));
  ASSERT_OK(SaveDict({{"w", std::string("v")}}, "x\xc2\x9by"));
  CloseStore();
  EXPECT_THAT(ListedIds(), ElementsAre("caf\xef\xbf\xbd", "x\xc2\x9by"));
  CliRun text = Run({"ls", store_path()});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, AllOf(HasSubstr("caf\\xe9"), HasSubstr("x\\xc2\\x9by"),
                              Not(HasSubstr("\x9b"))));
}

TEST_F(CliFilesTest, ARepeatedIdIsDeletedOnce) {
  SaveExamples({"a", "b", "c"});
  CloseStore();
  CliRun r = RunJson({"rm", store_path(), "a", "b", "a"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.json["deleted"].arr().size(), 2u);
  EXPECT_THAT(ListedIds(), ElementsAre("c"));
}

TEST_F(CliFilesTest, AFullDiskFailsTheCommand) {
  SaveExamples({"ck"});
  CloseStore();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls", store_path(), "--json"},
                                             {"info", store_path(), "ck"}}) {
    CliRun full = Run(args, "/dev/full");
    EXPECT_EQ(full.exit_code, kFailed) << args[0];
    EXPECT_EQ(full.err, "rocksdcp " + args[0] +
                            ": cannot write the output: No space left on "
                            "device\n");
  }
}

TEST_F(CliFilesTest, AClosedPipeEndsTheCommandQuietly) {
  // As ls, grep and git: no message, and the end a shell reports as 141
  // (128 + SIGPIPE), which `set -o pipefail` sees.
  SaveExamples({"ck"});
  CloseStore();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls", store_path()},
                                             {"ls", store_path(), "--json"},
                                             {"info", store_path(), "ck"},
                                             {"verify", store_path()}}) {
    SCOPED_TRACE(::testing::PrintToString(args));
    CliRun pipe = RunIntoClosedPipe(args);
    EXPECT_EQ(pipe.signal, SIGPIPE);
    EXPECT_EQ(pipe.err, "");
  }
}

TEST_F(CliFilesTest, AClosedPipeHidesNoFailure) {
  SaveExamples({"ck"});
  CloseStore();
  CliRun pipe = RunIntoClosedPipe({"info", store_path(), "nope"});
  EXPECT_EQ(pipe.signal, 0);
  EXPECT_EQ(pipe.exit_code, kFailed);
  EXPECT_THAT(pipe.err,
              AllOf(HasSubstr("rocksdcp info: NotFound"), HasSubstr("'nope'")));
}

TEST_F(CliFilesTest, ACommandIntoAClosedPipeStillDoesItsWork) {
  // Only the output is lost: rm has deleted, and closed the store.
  SaveExamples({"a", "b"});
  CloseStore();
  CliRun pipe = RunIntoClosedPipe({"rm", store_path(), "a"});
  EXPECT_EQ(pipe.signal, SIGPIPE);
  EXPECT_THAT(ListedIds(), ElementsAre("b"));
}

}  // namespace
}  // namespace rocksdcp::testing
