// The hostile-store suite (issue #13, "How to show it"): every case of
// hostile_cases.cc forges the victim checkpoint of a small store written
// by rocksdcp, then every command runs on it in a child process under
// limits, and must fail cleanly (or succeed, where the forgery is
// harmless): no signal, at most 10 s, at most 256 MiB of RSS over the same
// command on the pristine store, a message naming the checkpoint or the
// problem, and never a Load that returns OK with other bytes than were
// saved.
//
// Each (case, command) that fails today and is listed in
// known_failures.txt is reported as XFAIL instead of failing the test; a
// listed one that passes fails it, so that the list stays true: remove it
// once the library is fixed. ROCKSDCP_HOSTILE_STRICT=1 ignores the list.
//
// Environment:
//   ROCKSDCP_HOSTILE_REPORT=FILE   append one TSV line per command run
//   ROCKSDCP_HOSTILE_CORPUS=DIR    write each case's forged values as a
//                                  seed of fuzz/store_fuzzer.cc into DIR
//   ROCKSDCP_HOSTILE_KEEP=1        keep each case's stores
//   ROCKSDCP_HOSTILE_STRICT=1      ignore known_failures.txt

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "hostile/forge.h"
#include "hostile/hostile_cases.h"
#include "hostile/limited_run.h"
#include "hostile/victim.h"

namespace rocksdcp::hostile {

// The ASan quarantine of this process and of the commands it runs (see
// __asan_default_options at the end of this file).
constexpr char kAsanQuarantine[] = "quarantine_size_mb=16";

namespace {

namespace fs = std::filesystem;

constexpr double kMaxSeconds = 10;
constexpr uint64_t kMaxAddedRss = 256ull << 20;
constexpr uint64_t kMaxStoreBytes = 1ull << 20;
// Seeds larger than this are left out of the corpus.
constexpr size_t kMaxSeedBytes = 100 << 10;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

bool IsMutation(const std::string& cmd) {
  return cmd == "rm" || cmd == "keep" || cmd == "gc";
}

// Whether case `c` runs `cmd`. A plain build runs every command on every
// case. A sanitizer build runs each case's read commands and one of its
// three mutations, in turn by the case's place in the table: each mutation
// is 2 of a case's 13 commands (it, then the survivors' verify) and a copy
// of the store, and under ASan the suite is a third of the whole ASan
// run's test time (CI, 2026-12-04). Every case and every command still
// runs under the sanitizer; the plain build runs every pair.
bool Runs(const HostileCase& c, const std::string& cmd) {
  if (!SanitizerBuild() || !IsMutation(cmd)) return true;
  static const std::string kMutations[] = {"rm", "keep", "gc"};
  const size_t place = static_cast<size_t>(&c - HostileCases().data());
  return cmd == kMutations[place % 3];
}

uint64_t TreeBytes(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

std::string OneLine(std::string s, size_t max) {
  if (s.size() > max) s = s.substr(0, max) + "...";
  for (char& ch : s) {
    if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
  }
  return s;
}

bool ContainsCaseless(const std::string& haystack, const std::string& needle) {
  auto lower = [](std::string s) {
    for (char& ch : s)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  return lower(haystack).find(lower(needle)) != std::string::npos;
}

// ---- What the suite shares: the pristine store, the limits, the list ----

struct Suite {
  fs::path dir;
  fs::path pristine;
  std::string setup_error;
  uint64_t address_space = 0;
  std::map<std::string, uint64_t> baseline_rss;
  std::set<std::pair<std::string, std::string>> known_failures;
  bool strict = false;
  // The worst run over the cases.
  double worst_seconds = 0;
  std::string worst_seconds_run;
  uint64_t worst_rss = 0;
  std::string worst_rss_run;
  int runs = 0, failures = 0, xfails = 0;
};

Suite* suite = nullptr;

std::vector<std::string> Argv(const std::string& cmd, const fs::path& store,
                              const fs::path& out, const HostileCase* c) {
  const std::string cli = ROCKSDCP_CLI;
  const std::string child = ROCKSDCP_HOSTILE_CHILD;
  const std::string s = store.string();
  if (cmd == "ls") return {cli, "ls", s};
  if (cmd == "info") return {cli, "info", s, kVictim};
  if (cmd == "verify") return {cli, "verify", s};
  if (cmd == "dump") {
    return {cli,
            "dump",
            s,
            kVictim,
            c ? c->dump_fqn : "w",
            "--npy",
            (out / "dump.npy").string()};
  }
  if (cmd == "export") {
    return {cli,     "export",        s,
            kVictim, "--safetensors", (out / "export.safetensors").string()};
  }
  if (cmd == "load") return {child, "load", s, kVictim};
  if (cmd == "mirror") return {child, "load-mirror", s, kVictim};
  if (cmd == "rm") return {cli, "rm", s, kVictim};
  if (cmd == "keep") return {cli, "keep-last", s, "1"};
  if (cmd == "gc") return {cli, "gc", s};
  ADD_FAILURE() << "unknown command " << cmd;
  return {cli};
}

Limits CommandLimits() {
  Limits l;
  l.address_space = suite->address_space;
  l.cpu_seconds = static_cast<uint64_t>(kMaxSeconds);
  l.kill_after_seconds = kMaxSeconds + 2;
  return l;
}

std::set<std::pair<std::string, std::string>> ReadKnownFailures() {
  std::set<std::pair<std::string, std::string>> out;
  std::ifstream in(std::string(ROCKSDCP_SOURCE_DIR) +
                   "/tests/hostile/known_failures.txt");
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name, cmd;
    if (words >> name >> cmd) out.emplace(name, cmd);
  }
  return out;
}

// ---- The seed corpus of fuzz/store_fuzzer.cc ----

// store_fuzzer's input: records of (u16 key length, key, u32 value
// length, value), little-endian. A key "checkpoint/<id>" goes into the
// catalog, any other into the victim's column family.
void AppendRecord(std::string& out, const std::string& key,
                  const std::string& value) {
  const uint16_t k =
      static_cast<uint16_t>(std::min<size_t>(key.size(), 0xffff));
  const uint32_t v = static_cast<uint32_t>(value.size());
  out.push_back(static_cast<char>(k & 0xff));
  out.push_back(static_cast<char>(k >> 8));
  out.append(key, 0, k);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  out.append(value);
}

std::string Seed(RawStore& raw, const Forge& f) {
  std::string seed;
  if (raw.HasColumnFamily(kVictim)) {
    for (const std::string& key : raw.Keys(kVictim)) {
      AppendRecord(seed, key, raw.Get(kVictim, key).value_or(""));
    }
  }
  // Column families of the victim's references (see
  // fuzz/store_fuzzer.cc's input), before the catalog, which may be cut.
  for (const std::string& cf : raw.ColumnFamilies()) {
    if (cf == kVictim || cf == kBefore || cf == kAfter || cf == "default") {
      continue;
    }
    for (const std::string& key : raw.Keys(cf)) {
      AppendRecord(seed, "\x7f" + cf + "\x7f" + key,
                   raw.Get(cf, key).value_or(""));
    }
  }
  if (f.catalog_forged()) {
    for (const std::string& key : raw.Keys("default")) {
      if (key.rfind("checkpoint/", 0) != 0 || key.size() > 0xffff) continue;
      if (key == "checkpoint/before" || key == "checkpoint/after") continue;
      std::string next = seed;
      AppendRecord(next, key, raw.Get("default", key).value_or(""));
      if (next.size() > kMaxSeedBytes) break;
      seed = std::move(next);
    }
  }
  return seed;
}

// Names the builds of the CLI and the child the calibration was made with.
std::string CalibrationKey() {
  std::string key;
  for (const char* bin : {ROCKSDCP_CLI, ROCKSDCP_HOSTILE_CHILD}) {
    std::error_code ec;
    const auto t = fs::last_write_time(bin, ec);
    key += std::to_string(t.time_since_epoch().count()) + "/" +
           std::to_string(fs::file_size(bin, ec)) + ";";
  }
  return key;
}

std::string SetUpSuite(Suite& s) {
  // ASan keeps up to 256 MiB of freed memory resident in quarantine, to
  // catch its use. The children run with 16 MiB, so that what they add is
  // measured as in a plain build (this process: __asan_default_options,
  // at the end of this file).
  // They also skip LeakSanitizer's scan at exit: it took a third of each
  // command's time (171 ms of `verify` on the pristine store, 117 ms
  // without), over the suite's 1,200 commands. What this suite judges is
  // crashes, hangs, memory and lies; leaks on the library's error paths are
  // the rest of the ASan suite's business, and the store fuzzer's, which
  // loads forged stores in one process with leak detection on.
  if (SanitizerBuild()) {
    const std::string options = Env("ASAN_OPTIONS") ? Env("ASAN_OPTIONS") : "";
    const std::string ours = std::string(kAsanQuarantine) + ":detect_leaks=0";
    setenv("ASAN_OPTIONS",
           (options.empty() ? ours : options + ":" + ours).c_str(), 1);
  }
  char pattern[] = "/tmp/rocksdcp-hostile-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return "mkdtemp failed";
  s.dir = pattern;
  s.pristine = s.dir / "pristine";
  if (Status st = SavePristineStore(s.pristine.string()); !st.ok()) {
    return "saving the pristine store: " + st.ToString();
  }
  s.known_failures = ReadKnownFailures();
  s.strict = Env("ROCKSDCP_HOSTILE_STRICT") != nullptr;

  // RLIMIT_AS: the address space the heaviest commands need on the
  // pristine store (RocksDB's threads' stacks and malloc's arenas, mostly
  // reserved, not resident), plus the 256 MiB a command may add.
  const fs::path out = s.dir / "pristine-out";
  fs::create_directories(out);
  // A read-write open (gc --dry-run, on a copy) starts more threads than a
  // read-only one. Measured once per build of the CLI and the child, and
  // kept beside the test binary: it takes a few seconds.
  if (!SanitizerBuild()) {
    const std::string key = CalibrationKey();
    const fs::path cache = fs::read_symlink("/proc/self/exe").parent_path() /
                           "rocksdcp_hostile_calibration.txt";
    std::string cached_key;
    uint64_t base = 0;
    std::ifstream(cache) >> cached_key >> base;
    if (cached_key != key || base == 0) {
      base = 0;
      const fs::path copy = s.dir / "pristine-calibrate";
      fs::copy(s.pristine, copy, fs::copy_options::recursive);
      for (const std::vector<std::string>& argv :
           {Argv("export", s.pristine, out, nullptr),
            Argv("load", s.pristine, out, nullptr),
            std::vector<std::string>{ROCKSDCP_CLI, "gc", copy.string(),
                                     "--dry-run"}}) {
        const uint64_t as = SmallestWorkingAddressSpace(
            argv, 64ull << 20, 4ull << 30, 16ull << 20);
        if (as == 0) return "'" + argv[1] + "' fails on the pristine store";
        base = std::max(base, as);
      }
      std::ofstream(cache) << key << ' ' << base << '\n';
    }
    // The minimum varies from run to run by tens of MiB (which threads
    // start before others finish): a margin for that, then the 256 MiB a
    // command may add.
    s.address_space = base + (64ull << 20) + kMaxAddedRss;
  }
  // The fuzzer's seed of the checkpoint as saved.
  if (const char* corpus = Env("ROCKSDCP_HOSTILE_CORPUS")) {
    const fs::path copy = s.dir / "pristine-seed";
    fs::copy(s.pristine, copy, fs::copy_options::recursive);
    RawStore raw(copy.string());
    Forge unforged(raw);
    fs::create_directories(corpus);
    std::ofstream(fs::path(corpus) / "pristine", std::ios::binary)
        << Seed(raw, unforged);
  }
  // Each command on the pristine store must succeed; its RSS is the
  // baseline a case's run is measured against.
  for (const std::string& cmd : kCommands) {
    fs::path store = s.pristine;
    if (IsMutation(cmd)) {
      store = s.dir / ("pristine-" + cmd);
      fs::copy(s.pristine, store, fs::copy_options::recursive);
    }
    const RunOutcome r =
        RunLimited(Argv(cmd, store, out, nullptr), CommandLimits());
    if (r.exit_code != 0) {
      return "'" + cmd + "' on the pristine store: " + r.Describe() + ": " +
             r.err;
    }
    s.baseline_rss[cmd] = r.max_rss;
  }
  std::cout << "[ hostile  ] pristine store " << TreeBytes(s.pristine)
            << " bytes; RLIMIT_AS "
            << (s.address_space ? std::to_string(s.address_space >> 20) + " MiB"
                                : std::string("none (sanitizer build)"))
            << "; baseline RSS of verify " << (s.baseline_rss["verify"] >> 20)
            << " MiB\n";
  return "";
}

// ---- One command's verdict ----

std::vector<std::string> Check(const HostileCase& c, const std::string& cmd,
                               const RunOutcome& r) {
  std::vector<std::string> problems;
  const char e = c.Expect(cmd);
  char buf[160];
  if (r.killed) {
    std::snprintf(buf, sizeof(buf), "HANG: still running after %.1f s, killed",
                  r.seconds);
    problems.push_back(buf);
  } else if (r.signal == SIGXCPU) {
    problems.push_back("HANG: used up its 10 s of CPU (SIGXCPU)");
  } else if (r.signal != 0) {
    problems.push_back("CRASH: " + r.Describe() + ": \"" + OneLine(r.err, 200) +
                       "\"");
  }
  if (!r.killed && r.seconds > kMaxSeconds) {
    std::snprintf(buf, sizeof(buf), "took %.1f s (limit %.0f s)", r.seconds,
                  kMaxSeconds);
    problems.push_back(buf);
  }
  const uint64_t base = suite->baseline_rss[cmd];
  if (r.max_rss > base + kMaxAddedRss) {
    std::snprintf(buf, sizeof(buf), "added %llu MiB of RSS (limit 256 MiB)",
                  static_cast<unsigned long long>((r.max_rss - base) >> 20));
    problems.push_back(buf);
  }
  if (r.killed || r.signal != 0) return problems;

  const int x = r.exit_code;
  const bool child = cmd == "load" || cmd == "mirror";
  if (child && x == 4) {
    problems.push_back(
        "WRONG ANSWER: Load returned OK with bytes other than those saved");
    return problems;
  }
  bool ok = false;
  std::string want;
  switch (e) {
    case '0':
      ok = x == 0, want = "0";
      break;
    case '1':
      ok = x == 1, want = "1";
      break;
    case '3':
      ok = x == 3, want = "3 (corrupted items listed)";
      break;
    case 'F':
      ok = child ? x == 1 : (x == 1 || x == 3);
      want = "a clean failure (1 or 3)";
      break;
    case '*':
      ok = x == 0 || x == 1 || x == 3, want = "0, 1 or 3";
      break;
    case 'D':
      ok = x == 0 && ContainsCaseless(r.out, "damage");
      want = "0, listing the entry as damaged";
      break;
    default:
      want = std::string("? (no expectation '") + e + "')";
  }
  if (!ok) {
    problems.push_back("exit " + std::to_string(x) + ", expected " + want);
  }
  // A failure says what failed and where.
  std::vector<std::string> names = c.names;
  names.push_back(kVictim);
  auto names_it = [&](const std::string& text) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return text.find(n) != std::string::npos;
    });
  };
  // verify's stderr sums up (the report on stdout names each checkpoint).
  if (cmd == "verify" && x == 3) names.push_back("corrupted");
  if (x != 0 && !names_it(r.err)) {
    problems.push_back(
        "its message names neither the checkpoint nor the "
        "problem: \"" +
        OneLine(r.err, 300) + "\"");
  }
  if (x == 3 && !names_it(r.out)) {
    problems.push_back(
        "verify's report names neither the checkpoint nor "
        "the problem");
  }
  return problems;
}

// ---- The test ----

class HostileStoreTest : public ::testing::TestWithParam<const HostileCase*> {
 protected:
  static void SetUpTestSuite() {
    suite = new Suite;
    suite->setup_error = SetUpSuite(*suite);
  }
  static void TearDownTestSuite() {
    std::cout << "[ hostile  ] " << suite->runs << " command runs, "
              << suite->failures << " failed, " << suite->xfails
              << " known failures (XFAIL); slowest " << suite->worst_seconds
              << " s (" << suite->worst_seconds_run << "), largest RSS "
              << (suite->worst_rss >> 20) << " MiB (" << suite->worst_rss_run
              << ")\n";
    std::error_code ec;
    if (Env("ROCKSDCP_HOSTILE_KEEP") == nullptr) fs::remove_all(suite->dir, ec);
    delete suite;
    suite = nullptr;
  }

  void Report(const HostileCase& c, const std::string& cmd, const RunOutcome& r,
              const std::string& verdict,
              const std::vector<std::string>& problems) {
    ++suite->runs;
    const std::string run = c.name + " " + cmd;
    if (r.seconds > suite->worst_seconds) {
      suite->worst_seconds = r.seconds;
      suite->worst_seconds_run = run;
    }
    if (r.max_rss > suite->worst_rss) {
      suite->worst_rss = r.max_rss;
      suite->worst_rss_run = run;
    }
    const char* path = Env("ROCKSDCP_HOSTILE_REPORT");
    if (path == nullptr) return;
    std::ofstream f(path, std::ios::app);
    std::string joined;
    for (const std::string& p : problems)
      joined += (joined.empty() ? "" : "; ") + p;
    const uint64_t base = suite->baseline_rss[cmd];
    f << c.name << '\t' << c.area << '\t' << cmd << '\t' << c.Expect(cmd)
      << '\t' << r.Describe() << '\t' << r.seconds << '\t' << (r.max_rss >> 20)
      << '\t' << (r.max_rss > base ? (r.max_rss - base) >> 20 : 0) << '\t'
      << verdict << '\t' << OneLine(joined, 600) << '\t' << OneLine(r.err, 600)
      << '\n';
  }

  // Records the verdict of one command: a failure, unless listed as known.
  void Judge(const HostileCase& c, const std::string& cmd, const RunOutcome& r,
             const std::vector<std::string>& problems) {
    const bool known =
        !suite->strict && suite->known_failures.count({c.name, cmd}) > 0;
    std::string text;
    for (const std::string& p : problems) text += "\n    " + p;
    const std::string what = c.name + " / " + cmd + " (" + r.Describe() + ")";
    if (problems.empty() && !known) {
      Report(c, cmd, r, "PASS", problems);
    } else if (problems.empty()) {
      Report(c, cmd, r, "XPASS", problems);
      ADD_FAILURE() << what << " passes now: remove '" << c.name << " " << cmd
                    << "' from tests/hostile/known_failures.txt";
      ++suite->failures;
    } else if (known) {
      Report(c, cmd, r, "XFAIL", problems);
      std::cout << "[  XFAIL   ] " << what << text << "\n";
      ++suite->xfails;
    } else {
      Report(c, cmd, r, "FAIL", problems);
      ADD_FAILURE() << what << text << "\n  stderr: " << OneLine(r.err, 1000);
      ++suite->failures;
    }
  }
};

TEST_P(HostileStoreTest, EveryCommandFailsCleanlyOrIsUnharmed) {
  const HostileCase& c = *GetParam();
  ASSERT_EQ(suite->setup_error, "");
  const fs::path dir = suite->dir / c.name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path store = dir / "store";
  fs::copy(suite->pristine, store, fs::copy_options::recursive);

  std::string seed;
  {
    RawStore raw(store.string(), c.compress);
    Forge f(raw);
    c.forge(f);
    seed = Seed(raw, f);
  }
  ASSERT_FALSE(HasFailure()) << c.name << ": forging failed";
  EXPECT_LE(TreeBytes(store), kMaxStoreBytes) << c.name << ": the forged store";
  if (const char* corpus = Env("ROCKSDCP_HOSTILE_CORPUS")) {
    if (seed.size() <= kMaxSeedBytes) {
      fs::create_directories(corpus);
      std::ofstream(fs::path(corpus) / c.name, std::ios::binary) << seed;
    } else {
      std::cout << "[ hostile  ] " << c.name << ": seed of " << seed.size()
                << " bytes left out of the corpus\n";
    }
  }
  // The seed holds the forged values as RocksDB returns them (a bomb's
  // whole 512 MiB): every command below is forked from this process, and
  // counts what this process holds as its own RSS.
  std::string().swap(seed);
  for (const std::string& cmd : kCommands) {
    if (IsMutation(cmd) && Runs(c, cmd)) {
      fs::copy(store, dir / cmd, fs::copy_options::recursive);
    }
  }

  for (const std::string& cmd : kCommands) {
    if (!Runs(c, cmd)) continue;
    const fs::path target = IsMutation(cmd) ? dir / cmd : store;
    const RunOutcome r =
        RunLimited(Argv(cmd, target, dir, &c), CommandLimits());
    std::vector<std::string> problems = Check(c, cmd, r);
    const std::vector<std::string>& survivors = cmd == "rm" ? c.rm_survivors
                                                : cmd == "keep"
                                                    ? c.keep_survivors
                                                    : c.gc_survivors;
    // Whatever it did, the other checkpoints are intact (a case that
    // names none leaves a store that can't be verified: see its comment).
    if (IsMutation(cmd) && !survivors.empty()) {
      std::vector<std::string> argv = {ROCKSDCP_CLI, "verify", target.string()};
      argv.insert(argv.end(), survivors.begin(), survivors.end());
      const RunOutcome after = RunLimited(argv, CommandLimits());
      if (after.exit_code != 0) {
        problems.push_back(
            "afterwards, 'verify' of the checkpoints that must "
            "survive it: " +
            after.Describe() + ": " + OneLine(after.err + after.out, 400));
      }
    }
    Judge(c, cmd, r, problems);
  }
  if (Env("ROCKSDCP_HOSTILE_KEEP") == nullptr) fs::remove_all(dir);
}

std::vector<const HostileCase*> CasePointers() {
  std::vector<const HostileCase*> out;
  for (const HostileCase& c : HostileCases()) out.push_back(&c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HostileStoreTest, ::testing::ValuesIn(CasePointers()),
    [](const ::testing::TestParamInfo<const HostileCase*>& info) {
      return info.param->name;
    });

// The table itself: enough cases in every area, distinct names, and an
// expectation for every command.
TEST(HostileCasesTest, TableCoversEveryAreaAndCommand) {
  std::map<std::string, int> areas;
  std::set<std::string> names;
  for (const HostileCase& c : HostileCases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    ++areas[c.area];
    for (const std::string& cmd : kCommands) {
      EXPECT_NE(std::string("01F3*D").find(c.Expect(cmd)), std::string::npos)
          << c.name << " / " << cmd;
    }
  }
  EXPECT_GE(HostileCases().size(), 50u);
  EXPECT_GE(areas["catalog"], 10);
  EXPECT_GE(areas["metadata"], 20);
  EXPECT_GE(areas["piece"], 10);
  // known_failures.txt names only cases and commands that exist.
  for (const auto& [name, cmd] : ReadKnownFailures()) {
    EXPECT_EQ(names.count(name), 1u) << "known_failures.txt: no case " << name;
    EXPECT_NE(std::find(kCommands.begin(), kCommands.end(), cmd),
              kCommands.end())
        << "known_failures.txt: no command " << cmd;
  }
}

}  // namespace
}  // namespace rocksdcp::hostile

// A child's peak RSS (ru_maxrss, from wait4) counts the pages it shares
// with this process between fork and exec: this process must stay small.
// Under ASan, freeing what a forge built (10 million chunks for
// metadata_10m_chunks) would leave up to 256 MiB resident in quarantine,
// and every command forked after it looked 200 MiB heavier (272 MiB added
// under clang's ASan, 78 MiB in Release). ASan reads this at start-up.
#ifdef ROCKSDCP_SANITIZED
extern "C" const char* __asan_default_options() {
  return rocksdcp::hostile::kAsanQuarantine;
}
#endif
