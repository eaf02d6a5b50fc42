// The rocksdcp CLI, run as a subprocess against real stores made with the
// library: ls, info, verify, rm, keep-last and gc; exit codes, readable
// output, and --json output parsed back. cli_files_test.cc runs dump,
// export and import; their formats are tested in npy_test.cc and
// safetensors_test.cc.

#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "keys/keys.h"
#include "rocksdb/child_process.h"
#include "rocksdb/raw_store.h"
#include "tools/cli_runner.h"
#include "tools/tools_test_util.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

TEST_F(CliTest, EveryCommandHasHelp) {
  for (const char* cmd : {"ls", "info", "diff", "verify", "rm", "keep-last",
                          "gc", "dump", "export", "import"}) {
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
      {{"diff", store_path(), "a"}, "expected STORE FROM TO"},
      {{"rm", store_path()}, "expected STORE ID..."},
      {{"keep-last", store_path(), "two"}, "N must be an integer from 0 to"},
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

// The cells of a line of a text table, each with the column it starts
// at: the text between runs of two or more spaces (the tests' cells hold
// at most single spaces, as "[4, 8]" does).
std::vector<std::pair<size_t, std::string>> Cells(const std::string& line) {
  std::vector<std::pair<size_t, std::string>> cells;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find("  ", at);
    if (end == std::string::npos) end = line.size();
    cells.emplace_back(at, line.substr(at, end - at));
    at = line.find_first_not_of(' ', end);
    if (at == std::string::npos) break;
  }
  return cells;
}

// Checks that every row of `table` (its first line the titles) has a cell
// per column, each starting where its title starts (left-aligned columns)
// or ending where it ends (right-aligned ones); returns the rows' cells.
std::vector<std::vector<std::string>> AlignedRows(
    const std::vector<std::string>& table, const std::vector<bool>& right) {
  std::vector<std::vector<std::string>> rows;
  if (table.empty()) {
    ADD_FAILURE() << "no table";
    return rows;
  }
  const auto titles = Cells(table[0]);
  EXPECT_EQ(titles.size(), right.size()) << table[0];
  for (size_t r = 1; r < table.size(); ++r) {
    const auto cells = Cells(table[r]);
    EXPECT_EQ(cells.size(), titles.size()) << table[r];
    std::vector<std::string> row;
    for (size_t i = 0; i < cells.size() && i < titles.size(); ++i) {
      const auto& [at, text] = cells[i];
      const auto& [title_at, title] = titles[i];
      if (right[i]) {
        EXPECT_EQ(at + text.size(), title_at + title.size()) << title << " in\n"
                                                             << table[0] << "\n"
                                                             << table[r];
      } else {
        EXPECT_EQ(at, title_at) << title << " in\n"
                                << table[0] << "\n"
                                << table[r];
      }
      row.push_back(text);
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

TEST_F(CliTest, InfoColumnsFitTheirWidestCell) {
  OwnedTensor w = RandomTensor(DType::kFloat32, {4, 8}, 1);
  OwnedTensor b = RandomTensor(DType::kBFloat16, {3}, 2);
  ASSERT_OK(
      SaveDict({{"model.layers.0.post_attention_layernorm.weight", w.view},
                {"b", b.view},
                {"step", std::string("7")}},
               "ck"));
  CloseStore();
  CliRun r = Run({"info", store_path(), "ck"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  // The checkpoint, where its bytes are, titles, 3 items.
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_THAT(lines[1], HasSubstr("in column family ck; 0 B referenced"));
  lines.erase(lines.begin(), lines.begin() + 2);
  EXPECT_THAT(
      AlignedRows(lines, {false, false, false, true, true}),
      ElementsAre(ElementsAre("b", "bfloat16", "[3]", "1", "6"),
                  ElementsAre("model.layers.0.post_attention_layernorm.weight",
                              "float32", "[4, 8]", "1", "128"),
                  ElementsAre("step", "bytes", "-", "1", "-")));
}

TEST_F(CliTest, LsColumnsFitTheirWidestCell) {
  SaveExamples({"a", "checkpoint-of-a-long-run-at-step-00000100"});
  CloseStore();
  CliRun r = Run({"ls", store_path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = AlignedRows(
      Lines(r.out), {false, false, false, true, true, true, true, true, true});
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[1][0], "checkpoint-of-a-long-run-at-step-00000100");
  EXPECT_EQ(rows[1][1], "committed");
  EXPECT_EQ(rows[1][5], "0 B");       // SHARED: a full save references nothing.
  EXPECT_EQ(rows[1][6], rows[1][4]);  // FREES: all it holds.
  EXPECT_EQ(rows[1][7], "4");
}

// One catalog entry that does not decode: ls lists the others, marks it
// DAMAGED (state "damaged" with --json) and says what is wrong on stderr.
TEST_F(CliTest, LsMarksADamagedEntryAndListsTheOthers) {
  SaveExamples({"step-100", "step-200"});
  CloseStore();
  RawStore(store_path())
      .Put(rocksdb::kDefaultColumnFamilyName, keys::CatalogKey("step-100"),
           "not a catalog entry");

  CliRun r = RunJson({"ls", store_path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto& cks = r.json["checkpoints"].arr();
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0]["id"].str(), "step-100");
  EXPECT_EQ(cks[0]["state"].str(), "damaged");
  EXPECT_THAT(cks[0]["damage"].str(), Not(IsEmpty()));
  EXPECT_EQ(cks[1]["id"].str(), "step-200");
  EXPECT_EQ(cks[1]["state"].str(), "committed");

  CliRun text = Run({"ls", store_path()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto rows =
      AlignedRows(Lines(text.out),
                  {false, false, false, true, true, true, true, true, true});
  ASSERT_EQ(rows.size(), 2u) << text.out;
  EXPECT_THAT(rows[0], ElementsAre("step-100", "DAMAGED", "-", "-", "-", "-",
                                   "-", "-", "-"));
  EXPECT_EQ(rows[1][1], "committed");
  // While an entry is damaged, a delete drops no column family (the
  // damaged one may reference it), so it frees nothing.
  EXPECT_EQ(rows[1][6], "0 B");
  EXPECT_THAT(text.err, AllOf(HasSubstr("checkpoint 'step-100' is damaged: "),
                              HasSubstr(cks[0]["damage"].str())));

  CliRun verify = Run({"verify", store_path()});
  EXPECT_EQ(verify.exit_code, 3) << verify.err;
  EXPECT_THAT(verify.out + verify.err, HasSubstr("step-100"));
}

// docs/incremental.md's commands: ls and info show what each checkpoint
// holds, shares and would free; rm of a referenced base keeps its column
// family; materialize copies what is referenced and frees it; gc then has
// nothing to drop.
TEST_F(CliTest, IncrementalSavesAreAccountedAndMaterialized) {
  SaveExamples({"step-100"});
  ExampleState next = ExampleStateDict(1);
  static_cast<uint8_t*>(
      std::get<TensorView>(next.dict["model.layers.0.attn.w"]).data)[5000] ^= 1;
  ASSERT_OK(SaveDict(next.dict, "step-200",
                     {.base = "step-100", .max_piece_bytes = 4096}));
  ASSERT_OK_AND_ASSIGN(CheckpointInfo want, store_->Info("step-200"));
  CloseStore();

  CliRun ls = RunJson({"ls", store_path()});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const auto& cks = ls.json["checkpoints"].arr();
  ASSERT_EQ(cks.size(), 2u);
  const Json& base = cks[0];
  const Json& incr = cks[1];
  // All of step-200 but one 4 KiB piece is step-100's.
  EXPECT_EQ(incr["referenced_bytes"].num(), want.bytes - 4096.0);
  ASSERT_EQ(incr["referenced_column_families"].arr().size(), 1u);
  EXPECT_EQ(incr["referenced_column_families"].arr()[0].str(), "step-100");
  EXPECT_EQ(base["referenced_bytes"].num(), 0);
  EXPECT_EQ(base["freed_by_delete"].num(), 0);  // step-200 needs it.
  EXPECT_LT(incr["stored_bytes"].num(), base["stored_bytes"].num());
  CliRun text = Run({"ls", store_path()});
  EXPECT_THAT(text.out,
              AllOf(HasSubstr("OWN"), HasSubstr("SHARED"), HasSubstr("FREES")));
  CliRun info = Run({"info", store_path(), "step-200"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("referenced in step-100"));

  ASSERT_EQ(Run({"rm", store_path(), "step-100"}).exit_code, 0);
  CliRun gc = RunJson({"gc", store_path()});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_TRUE(gc.json["dropped_column_families"].arr().empty());
  CliRun m = RunJson({"materialize", store_path(), "step-200"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(m.json["bytes"].num(), want.bytes - 4096.0);
  ASSERT_EQ(m.json["dropped_column_families"].arr().size(), 1u);
  EXPECT_EQ(m.json["dropped_column_families"].arr()[0].str(), "step-100");
  CliRun text_m = Run({"materialize", store_path(), "step-200"});
  EXPECT_THAT(text_m.out, HasSubstr("copied 0 referenced pieces"));
  EXPECT_EQ(Run({"verify", store_path()}).exit_code, 0);
  CliRun after = RunJson({"ls", store_path()});
  ASSERT_EQ(after.json["checkpoints"].arr().size(), 1u);
  EXPECT_EQ(after.json["checkpoints"].arr()[0]["referenced_bytes"].num(), 0);
}

// diff names each item's change from the piece hashes, in text and JSON.
TEST_F(CliTest, DiffSaysWhichItemsChanged) {
  SaveExamples({"a"});
  ExampleState next = ExampleStateDict(1);
  // One byte of the weight's second 4 KiB piece.
  static_cast<uint8_t*>(
      std::get<TensorView>(next.dict["model.layers.0.attn.w"]).data)[5000] ^= 1;
  ASSERT_OK(SaveDict(next.dict, "b", {.max_piece_bytes = 4096}));
  CloseStore();

  CliRun r = RunJson({"diff", store_path(), "a", "b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json["from"].str(), "a");
  EXPECT_EQ(r.json["to"].str(), "b");
  std::map<std::string, Json> items;
  for (const Json& item : r.json["items"].arr()) {
    items[item["fqn"].str()] = item;
  }
  ASSERT_EQ(items.size(), 4u);
  const Json& w = items["model.layers.0.attn.w"];
  EXPECT_EQ(w["change"].str(), "changed");
  EXPECT_EQ(w["pieces"].num(), 3);
  EXPECT_EQ(w["changed_pieces"].num(), 1);
  EXPECT_EQ(w["changed_bytes"].num(), 4096);
  for (const auto& [fqn, item] : items) {
    if (fqn != "model.layers.0.attn.w") {
      EXPECT_EQ(item["change"].str(), "unchanged") << fqn;
    }
  }

  CliRun text = Run({"diff", store_path(), "a", "b"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("a -> b: 3 unchanged, 1 changed; 4.0 KiB"));
  EXPECT_THAT(text.out, HasSubstr("FQN"));
  bool found = false;
  for (const std::string& line : Lines(text.out)) {
    if (line.rfind("model.layers.0.attn.w ", 0) != 0) continue;
    found = true;
    EXPECT_THAT(line, AllOf(HasSubstr("changed"), HasSubstr("1/3")));
  }
  EXPECT_TRUE(found) << text.out;

  CliRun missing = Run({"diff", store_path(), "a", "nope"});
  EXPECT_EQ(missing.exit_code, kFailed);
  EXPECT_THAT(missing.err,
              AllOf(HasSubstr("rocksdcp diff: NotFound"), HasSubstr("'nope'")));
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
    size_t at = tools::ReadFile(file).find(needle);
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

  // Every damaged item once, with its bad pieces: the items the problems
  // name, and their counts.
  std::map<std::string, double> want_bad;
  for (const Json& p : problems) ++want_bad[p["item"].str()];
  std::map<std::string, double> got_bad;
  for (const Json& d : cks[1]["damaged_items"].arr()) {
    EXPECT_EQ(d["code"].str(), "Corruption");
    EXPECT_TRUE(got_bad.emplace(d["fqn"].str(), d["bad_pieces"].num()).second);
  }
  EXPECT_EQ(got_bad, want_bad);

  CliRun text = Run({"verify", store_path()});
  EXPECT_EQ(text.exit_code, kCorrupt);
  EXPECT_THAT(text.out,
              HasSubstr("victim: CORRUPTED (" +
                        std::to_string(want_bad.size()) + " damaged items"));
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
  EXPECT_THAT(dry_text.out,
              AllOf(HasSubstr("would drop column family"),
                    HasSubstr("(no committed checkpoint holds or references "
                              "it: a save that never committed"),
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

// An overwrite that dies between its commit and dropping the column family
// it replaced leaves that one behind, under the checkpoint's own name: gc
// must not read as if it would delete the live checkpoint.
TEST_F(CliTest, GcSaysAnOverwrittenCheckpointsOldColumnFamilyIsNotTheLiveOne) {
  SaveExamples({"step-62"});
  CloseStore();
  ASSERT_EQ(RunChild({"save", store_path(), "step-62", "5", "after_write"}), 0);
  // The overwrite committed into a fresh column family.
  const std::string live = "step-62~1";
  ASSERT_THAT(Run({"info", store_path(), "step-62"}).out, HasSubstr(live));

  CliRun dry = Run({"gc", store_path(), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("would drop column family step-62 (an old "
                                 "copy of checkpoint step-62, which stays: "
                                 "it lives in column family " +
                                 live + ")"));
  CliRun gc = Run({"gc", store_path()});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_THAT(gc.out, HasSubstr("dropped column family step-62 (an old copy"));
  EXPECT_THAT(ListedIds(), ElementsAre("step-62"));
  CliRun verify = Run({"verify", store_path(), "step-62"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// Another process (a trainer) holds the store read-write: read commands
// work, commands that change it say it is locked (import, with a file to
// import: cli_files_test.cc).
TEST_F(CliTest, ReadCommandsWorkOnALockedStoreAndWritesSaySoPlainly) {
  SaveExamples({"ck"});
  CloseStore();
  LockHolder holder(store_path());
  ASSERT_TRUE(holder.ready());

  EXPECT_THAT(ListedIds(), ElementsAre("ck"));
  EXPECT_EQ(Run({"info", store_path(), "ck"}).exit_code, 0);
  EXPECT_EQ(Run({"verify", store_path(), "ck"}).exit_code, 0);

  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"rm", store_path(), "ck"},
                                             {"keep-last", store_path(), "0"},
                                             {"gc", store_path()}}) {
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
