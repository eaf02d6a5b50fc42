// The rocksdcp CLI, run as a subprocess against real stores made with the
// library: exit codes, readable output, and --json output parsed back.
// dump, export and import are only checked for --help and argument errors
// here; their file formats are tested with tools/formats.cc.

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "rocksdb/child_process.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// ---- A strict little JSON reader, enough to check the CLI's output. ----
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>,
               std::map<std::string, Json>>
      v;
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  const Json& operator[](const std::string& k) const {
    static const Json kNull;
    const auto* m = std::get_if<std::map<std::string, Json>>(&v);
    if (m == nullptr) return kNull;
    auto it = m->find(k);
    return it == m->end() ? kNull : it->second;
  }
  const std::vector<Json>& arr() const {
    static const std::vector<Json> kEmpty;
    const auto* a = std::get_if<std::vector<Json>>(&v);
    return a ? *a : kEmpty;
  }
  std::string str() const {
    const auto* s = std::get_if<std::string>(&v);
    return s ? *s : "<not a string>";
  }
  double num() const {
    const auto* d = std::get_if<double>(&v);
    return d ? *d : -1;
  }
  bool boolean() const {
    const auto* b = std::get_if<bool>(&v);
    return b && *b;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}
  // Parses one document with nothing after it but whitespace.
  bool Parse(Json* out) {
    if (!Value(out, 0)) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  bool Eat(char c) {
    Ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'n':
          *out += '\n';
          break;
        case 't':
          *out += '\t';
          break;
        case 'r':
          *out += '\r';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned cp = std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16);
          i_ += 4;
          if (cp >= 0x80) return false;  // The CLI escapes only controls.
          *out += static_cast<char>(cp);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return false;
    Ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      std::map<std::string, Json> m;
      if (!Eat('}')) {
        do {
          std::string k;
          Json v;
          if (!String(&k) || !Eat(':') || !Value(&v, depth + 1)) return false;
          if (!m.emplace(k, std::move(v)).second) return false;
        } while (Eat(','));
        if (!Eat('}')) return false;
      }
      out->v = std::move(m);
      return true;
    }
    if (c == '[') {
      ++i_;
      std::vector<Json> a;
      if (!Eat(']')) {
        do {
          Json v;
          if (!Value(&v, depth + 1)) return false;
          a.push_back(std::move(v));
        } while (Eat(','));
        if (!Eat(']')) return false;
      }
      out->v = std::move(a);
      return true;
    }
    if (c == '"') {
      std::string s;
      if (!String(&s)) return false;
      out->v = std::move(s);
      return true;
    }
    if (Lit("true")) {
      out->v = true;
      return true;
    }
    if (Lit("false")) {
      out->v = false;
      return true;
    }
    if (Lit("null")) {
      out->v = nullptr;
      return true;
    }
    size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])))
      ++i_;
    if (i_ == start) return false;
    out->v = std::stod(std::string(s_.substr(start, i_ - start)));
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ---- Running the CLI. ----
struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  Json json;  // stdout parsed, when the run was asked for --json.
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// In a forked child: runs the CLI with `args`, stdout and stderr on the
// given descriptors. Never returns.
[[noreturn]] void ExecCli(const std::vector<std::string>& args, int out_fd,
                          int err_fd) {
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  std::vector<std::string> copy = args;
  std::vector<char*> argv = {const_cast<char*>(ROCKSDCP_CLI)};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(ROCKSDCP_CLI, argv.data());
  _exit(127);
}

class CliTest : public StoreTest {
 protected:
  // Runs the CLI with `args`, stdout and stderr into files (not a terminal).
  CliRun Run(const std::vector<std::string>& args) {
    const std::string out = dir_.Sub("cli.out"), err = dir_.Sub("cli.err");
    pid_t pid = fork();
    if (pid == 0) {
      ExecCli(args, open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
              open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CliRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadAll(out);
    r.err = ReadAll(err);
    return r;
  }
  // Runs with --json appended; the output must parse.
  CliRun RunJson(std::vector<std::string> args) {
    args.push_back("--json");
    CliRun r = Run(args);
    EXPECT_TRUE(JsonParser(r.out).Parse(&r.json)) << "not JSON: " << r.out;
    return r;
  }

  // Runs the CLI with stderr on a pseudo-terminal; returns what it wrote
  // there (stdout goes to /dev/null).
  std::string RunWithTerminalStderr(const std::vector<std::string>& args) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    EXPECT_GE(master, 0);
    EXPECT_EQ(grantpt(master), 0);
    EXPECT_EQ(unlockpt(master), 0);
    // The parent holds the terminal open too, so that reading never sees
    // it closed (EIO) before the child has opened it.
    const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    EXPECT_GE(slave, 0);
    pid_t pid = fork();
    if (pid == 0) {
      ExecCli(args, open("/dev/null", O_WRONLY), slave);
    }
    // Drain the terminal while the child runs (it must never block on a
    // full buffer), then once more after it has exited.
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    std::string got;
    auto drain = [&] {
      char buf[4096];
      ssize_t n;
      while ((n = read(master, buf, sizeof(buf))) > 0) {
        got.append(buf, static_cast<size_t>(n));
      }
    };
    int status = 0;
    for (;;) {
      pollfd pfd = {master, POLLIN, 0};
      poll(&pfd, 1, 100);
      drain();
      if (waitpid(pid, &status, WNOHANG) == pid) break;
    }
    drain();
    close(slave);
    close(master);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
    return got;
  }

  void SaveExamples(const std::vector<std::string>& ids) {
    uint64_t seed = 0;
    for (const std::string& id : ids) {
      ASSERT_OK(SaveDict(ExampleStateDict(++seed).dict, id,
                         {.max_piece_bytes = 4096}));
    }
  }

  std::vector<std::string> ListedIds() {
    CliRun r = RunJson({"ls", store_path()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> ids;
    for (const Json& c : r.json["checkpoints"].arr()) {
      ids.push_back(c["id"].str());
    }
    return ids;
  }
};

constexpr int kUsage = 2;
constexpr int kFailed = 1;
constexpr int kCorrupt = 3;

TEST_F(CliTest, EveryCommandHasHelp) {
  for (const char* cmd : {"ls", "info", "verify", "rm", "keep-last", "gc",
                          "dump", "export", "import"}) {
    CliRun r = Run({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_THAT(r.out, HasSubstr(std::string("usage: rocksdcp ") + cmd + " "));
    EXPECT_THAT(r.out, HasSubstr("--json"));
  }
  CliRun top = Run({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, AllOf(HasSubstr("keep-last"), HasSubstr("import")));
}

TEST_F(CliTest, BadUsageExitsTwoSayingWhy) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, "usage: rocksdcp COMMAND"},
      {{"frobnicate", "x"}, "unknown command 'frobnicate'"},
      {{"ls"}, "expected STORE, got 0 arguments"},
      {{"info", store_path()}, "expected STORE ID"},
      {{"rm", store_path()}, "expected STORE ID..."},
      {{"keep-last", store_path(), "two"}, "N must be a non-negative integer"},
      {{"gc", store_path(), "--force"}, "unknown option '--force'"},
      {{"dump", store_path(), "ck", "w"}, "--npy is required"},
      {{"dump", store_path(), "ck", "w", "--npy"}, "--npy needs a value"},
      {{"export", store_path(), "ck"}, "--safetensors is required"},
      {{"import", "m.safetensors", store_path()}, "expected FILE.safetensors"},
  };
  for (const Case& c : cases) {
    CliRun r = Run(c.args);
    EXPECT_EQ(r.exit_code, kUsage) << ::testing::PrintToString(c.args);
    EXPECT_THAT(r.err, HasSubstr(c.says)) << ::testing::PrintToString(c.args);
  }
}

TEST_F(CliTest, LsListsEveryCheckpoint) {
  SaveExamples({"step-100", "step-200"});
  ASSERT_OK_AND_ASSIGN(CheckpointInfo want, store_->Info("step-200"));
  CloseStore();

  CliRun r = RunJson({"ls", store_path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto& cks = r.json["checkpoints"].arr();
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0]["id"].str(), "step-100");
  const Json& c = cks[1];
  EXPECT_EQ(c["id"].str(), "step-200");
  EXPECT_EQ(c["state"].str(), "committed");
  EXPECT_EQ(c["bytes"].num(), static_cast<double>(want.bytes));
  EXPECT_EQ(c["items"].num(), 4);
  EXPECT_EQ(c["world_size"].num(), 1);
  EXPECT_EQ(c["created_unix_micros"].num(),
            static_cast<double>(want.created_unix_micros));

  CliRun text = Run({"ls", store_path()});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, AllOf(HasSubstr("step-100"), HasSubstr("step-200"),
                              HasSubstr("committed")));
}

TEST_F(CliTest, InfoListsEveryItem) {
  SaveExamples({"ck"});
  CloseStore();
  CliRun r = RunJson({"info", store_path(), "ck"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json["checkpoint"]["id"].str(), "ck");
  std::map<std::string, Json> items;
  for (const Json& item : r.json["items"].arr())
    items[item["fqn"].str()] = item;
  ASSERT_EQ(items.size(), 4u);
  const Json& w = items["model.layers.0.attn.w"];
  EXPECT_EQ(w["dtype"].str(), DTypeName(DType::kBFloat16));
  ASSERT_EQ(w["shape"].arr().size(), 2u);
  EXPECT_EQ(w["shape"].arr()[0].num(), 48);
  EXPECT_EQ(w["shape"].arr()[1].num(), 100);
  EXPECT_EQ(w["chunks"].num(), 1);
  EXPECT_EQ(w["bytes"].num(), 9600);
  EXPECT_EQ(items["step_counter"]["bytes"].num(), 8);
  EXPECT_TRUE(items["step_counter"]["shape"].arr().empty());
  EXPECT_EQ(items["optimizer/state"]["type"].str(), "bytes");

  CliRun text = Run({"info", store_path(), "ck"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, AllOf(HasSubstr("model.norm.bias"),
                              HasSubstr("[48, 100]"), HasSubstr("9600")));
}

TEST_F(CliTest, BadStoreOrIdFailsNamingIt) {
  SaveExamples({"ck"});
  CloseStore();
  const std::string missing = dir_.Sub("no-such-store");
  for (const char* cmd : {"ls", "verify", "gc"}) {
    CliRun r = Run({cmd, missing});
    EXPECT_EQ(r.exit_code, kFailed) << cmd;
    EXPECT_THAT(r.err, HasSubstr(missing)) << cmd;
  }
  CliRun rm = Run({"rm", missing, "ck"});
  EXPECT_EQ(rm.exit_code, kFailed);
  EXPECT_EQ(access(missing.c_str(), F_OK), -1) << "rm created the store";

  CliRun info = Run({"info", store_path(), "nope"});
  EXPECT_EQ(info.exit_code, kFailed);
  EXPECT_THAT(info.err, AllOf(HasSubstr("NotFound"), HasSubstr("'nope'")));
  CliRun verify = Run({"verify", store_path(), "ck", "nope"});
  EXPECT_EQ(verify.exit_code, kFailed);
  EXPECT_THAT(verify.err, HasSubstr("'nope'"));
  CliRun bad_id = Run({"info", store_path(), "default"});
  EXPECT_EQ(bad_id.exit_code, kFailed);
  EXPECT_THAT(bad_id.err, HasSubstr("default"));
}

TEST_F(CliTest, VerifyOfASoundStoreIsOkWithoutABarOffATerminal) {
  SaveExamples({"a", "b"});
  CloseStore();
  CliRun r = RunJson({"verify", store_path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.json["ok"].boolean());
  const auto& cks = r.json["checkpoints"].arr();
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0]["id"].str(), "a");
  EXPECT_EQ(cks[0]["items_checked"].num(), 4);
  EXPECT_EQ(cks[0]["pieces_checked"].num(), 7);
  EXPECT_THAT(cks[0]["problems"].arr(), IsEmpty());
  EXPECT_THAT(r.err, Not(HasSubstr("verifying [")));

  CliRun one = Run({"verify", store_path(), "b"});
  EXPECT_EQ(one.exit_code, 0);
  EXPECT_THAT(one.out, AllOf(HasSubstr("b: ok"), Not(HasSubstr("a: ok"))));
}

TEST_F(CliTest, VerifyDrawsAProgressBarOnATerminal) {
  SaveExamples({"a"});
  CloseStore();
  const std::string err = RunWithTerminalStderr({"verify", store_path()});
  EXPECT_THAT(err, AllOf(HasSubstr("verifying ["), HasSubstr("100%"),
                         HasSubstr("4/4 items")));
}

TEST_F(CliTest, VerifyListsEveryCorruptedItemAndFails) {
  ExampleState victim = ExampleStateDict(9);
  SaveExamples({"good"});
  ASSERT_OK(SaveDict(victim.dict, "victim", {.max_piece_bytes = 4096}));
  CloseStore();
  // Flip a byte inside the first piece of the bf16 matrix.
  const std::string needle(
      reinterpret_cast<const char*>(victim.tensors[0].bytes.data()), 64);
  bool flipped = false;
  for (const std::string& file : SstFiles()) {
    size_t at = ReadAll(file).find(needle);
    if (at == std::string::npos) continue;
    FlipByte(file, static_cast<int64_t>(at) + 100);
    flipped = true;
    break;
  }
  ASSERT_TRUE(flipped);

  CliRun r = RunJson({"verify", store_path()});
  EXPECT_EQ(r.exit_code, kCorrupt);
  EXPECT_FALSE(r.json["ok"].boolean());
  const auto& cks = r.json["checkpoints"].arr();
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_TRUE(cks[0]["ok"].boolean());
  EXPECT_EQ(cks[1]["id"].str(), "victim");
  // The piece's RocksDB block may hold other pieces too: all are listed.
  const auto& problems = cks[1]["problems"].arr();
  ASSERT_FALSE(problems.empty()) << r.out;
  EXPECT_EQ(problems[0]["item"].str(), "model.layers.0.attn.w");
  EXPECT_EQ(problems[0]["piece"].num(), 0);
  for (const Json& p : problems) {
    EXPECT_EQ(p["code"].str(), "Corruption");
    EXPECT_THAT(p["message"].str(),
                AllOf(HasSubstr("'victim'"), HasSubstr(p["index"].str())));
  }

  CliRun text = Run({"verify", store_path()});
  EXPECT_EQ(text.exit_code, kCorrupt);
  EXPECT_THAT(text.out,
              AllOf(HasSubstr("good: ok"), HasSubstr("victim: CORRUPTED"),
                    HasSubstr("model.layers.0.attn.w")));
  EXPECT_THAT(text.err, HasSubstr("corrupted items"));
}

TEST_F(CliTest, RmDeletesTheNamedCheckpointsOrNoneIfOneIsMissing) {
  SaveExamples({"a", "b", "c"});
  CloseStore();
  CliRun typo = Run({"rm", store_path(), "a", "bb"});
  EXPECT_EQ(typo.exit_code, kFailed);
  EXPECT_THAT(typo.err,
              AllOf(HasSubstr("'bb'"), HasSubstr("nothing was deleted")));
  EXPECT_THAT(ListedIds(), ElementsAre("a", "b", "c"));

  CliRun r = RunJson({"rm", store_path(), "a", "c"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.json["deleted"].arr().size(), 2u);
  EXPECT_EQ(r.json["deleted"].arr()[1].str(), "c");
  EXPECT_THAT(ListedIds(), ElementsAre("b"));
}

TEST_F(CliTest, KeepLastKeepsTheNewestByCreatedTime) {
  // Saved in this order, so "m" is the oldest and "a" the newest: created
  // time, not id order, decides.
  SaveExamples({"m", "z", "a"});
  CloseStore();
  CliRun r = RunJson({"keep-last", store_path(), "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.json["deleted"].arr().size(), 1u);
  EXPECT_EQ(r.json["deleted"].arr()[0].str(), "m");
  EXPECT_THAT(ListedIds(), ElementsAre("z", "a"));

  CliRun again = Run({"keep-last", store_path(), "5"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_THAT(ListedIds(), ElementsAre("z", "a"));
}

TEST_F(CliTest, GcSaysWhatItWouldFreeAndFrees) {
  SaveExamples({"kept"});
  CloseStore();
  // A save that dies after creating its column family leaves it behind.
  ASSERT_EQ(RunChild({"save", store_path(), "torn", "5", "after_create_cf"}),
            0);

  CliRun dry = RunJson({"gc", store_path(), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_TRUE(dry.json["dry_run"].boolean());
  ASSERT_EQ(dry.json["dropped_column_families"].arr().size(), 1u);
  EXPECT_THAT(dry.json["dropped_column_families"].arr()[0].str(),
              HasSubstr("torn"));
  CliRun dry_text = Run({"gc", store_path(), "--dry-run"});
  EXPECT_THAT(dry_text.out, AllOf(HasSubstr("would drop column family"),
                                  HasSubstr("would free")));

  CliRun gc = Run({"gc", store_path()});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_THAT(gc.out,
              AllOf(HasSubstr("dropped column family"), HasSubstr("freed")));
  CliRun after = RunJson({"gc", store_path()});
  EXPECT_THAT(after.json["dropped_column_families"].arr(), IsEmpty());
  EXPECT_EQ(after.json["freed_bytes"].num(), 0);
  EXPECT_THAT(ListedIds(), ElementsAre("kept"));
}

// Another process (a trainer) holds the store read-write: read commands
// work, commands that change it say it is locked.
TEST_F(CliTest, ReadCommandsWorkOnALockedStoreAndWritesSaySoPlainly) {
  SaveExamples({"ck"});
  CloseStore();
  LockHolder holder(store_path());
  ASSERT_TRUE(holder.ready());

  EXPECT_THAT(ListedIds(), ElementsAre("ck"));
  EXPECT_EQ(Run({"info", store_path(), "ck"}).exit_code, 0);
  EXPECT_EQ(Run({"verify", store_path(), "ck"}).exit_code, 0);

  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"rm", store_path(), "ck"},
           {"keep-last", store_path(), "0"},
           {"gc", store_path()},
           {"import", dir_.Sub("m.safetensors"), store_path(), "x"}}) {
    CliRun r = Run(args);
    EXPECT_EQ(r.exit_code, kFailed) << args[0];
    EXPECT_THAT(r.err, AllOf(HasSubstr("is locked by another process"),
                             HasSubstr(store_path())))
        << args[0];
  }
  EXPECT_THAT(ListedIds(), ElementsAre("ck"));
}

}  // namespace
}  // namespace rocksdcp::testing
