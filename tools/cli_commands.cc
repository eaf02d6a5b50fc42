// The rocksdcp CLI's commands: see cli_commands.h and tools/README.md.

#include "cli_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>

#include "checkpoint_items.h"
#include "cli_output.h"
#include "json.h"
#include "npy.h"
#include "rocksdcp/rocksdcp.h"
#include "safetensors.h"

namespace rocksdcp::tools {
namespace {

int Fail(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "rocksdcp %s: %s\n", cmd, Printable(msg).c_str());
  return kExitFailed;
}

int Fail(const char* cmd, const Status& s) {
  return Fail(cmd, std::string(StatusCodeName(s.code())) + ": " + s.message());
}

// Opens `path` read-only (read commands) or read-write (commands that change
// the store). A missing store is never created, except by import.
// `reclaim`: StoreOptions::reclaim_torn_saves, for gc, which reports what
// it collects (the open must leave it there).
Result<std::unique_ptr<Store>> OpenStore(const char* cmd,
                                         const std::string& path,
                                         bool read_only, bool create = false,
                                         bool reclaim = true) {
  StoreOptions options;
  options.read_only = read_only;
  options.create_if_missing = create;
  options.reclaim_torn_saves = reclaim;
  Result<std::unique_ptr<Store>> store = Store::Open(path, options);
  if (store.ok()) return store;
  const Status& s = store.status();
  if (s.code() == StatusCode::kBusy) {
    return Status(
        StatusCode::kBusy,
        "store '" + path +
            "' is locked by another process (a "
            "trainer or another rocksdcp holds it open read-write); "
            "'" +
            cmd +
            "' changes the store, so it needs that process "
            "to close it first. Read commands (ls, info, verify, dump, "
            "export) work meanwhile. [" +
            s.message() + "]");
  }
  // The library's own "cannot open store '...': ..." says it already.
  if (s.message().rfind("cannot open ", 0) == 0) return s;
  return Status(s.code(), "cannot open store '" + path + "': " + s.message());
}

const char* StateName(CheckpointState s) {
  return s == CheckpointState::kCommitted ? "committed" : "unknown";
}

// A damaged catalog entry (CheckpointInfo::damage) has only its id: it is
// written as {"id", "state": "damaged", "damage"}.
void CheckpointJson(JsonWriter& j, const CheckpointInfo& c) {
  j.BeginObject();
  j.Key("id").String(c.id);
  if (!c.damage.empty()) {
    j.Key("state").String("damaged").Key("damage").String(c.damage);
    j.EndObject();
    return;
  }
  j.Key("state").String(StateName(c.state));
  j.Key("created_unix_micros").Int(c.created_unix_micros);
  j.Key("created").String(TimeString(c.created_unix_micros));
  j.Key("bytes").Uint(c.bytes);
  j.Key("items").Uint(c.items);
  j.Key("world_size").Int(c.world_size);
  j.Key("column_family").String(c.column_family);
  j.Key("stored_bytes").Uint(c.stored_bytes);
  j.Key("referenced_bytes").Uint(c.referenced_bytes);
  j.Key("referenced_column_families").BeginArray();
  for (const std::string& cf : c.referenced_column_families) j.String(cf);
  j.EndArray();
  j.Key("freed_by_delete").Uint(c.freed_by_delete);
  j.EndObject();
}

// Deletes `ids` (already checked to exist), reporting each.
// Prints what rm or keep-last deleted: a line each, or with --json one
// object with the ids deleted and kept.
void PrintDeleted(const Args& a, const std::vector<std::string>& deleted,
                  const std::vector<std::string>& kept) {
  if (!a.json) {
    for (const std::string& id : deleted) {
      Print("deleted %s\n", Printable(id).c_str());
    }
    return;
  }
  JsonWriter j;
  j.BeginObject().Key("store").String(a.positional[0]);
  j.Key("deleted").BeginArray();
  for (const std::string& id : deleted) j.String(id);
  j.EndArray().Key("kept").BeginArray();
  for (const std::string& id : kept) j.String(id);
  j.EndArray().EndObject();
  PrintJson(j);
}

int DeleteAll(const char* cmd, Store& store, const Args& a,
              const std::vector<std::string>& ids) {
  std::vector<std::string> deleted;
  Status failed;
  for (const std::string& id : ids) {
    failed = store.Delete(id);
    if (!failed.ok()) break;
    deleted.push_back(id);
  }
  PrintDeleted(a, deleted, {});
  return failed.ok() ? kExitOk : Fail(cmd, failed);
}

void StatsJson(JsonWriter& j, const TransferStats& st) {
  j.Key("tensors").Uint(st.tensors).Key("byte_items").Uint(st.byte_items);
  j.Key("bytes").Uint(st.bytes);
}

}  // namespace

int RunLs(const Args& a) {
  auto store = OpenStore("ls", a.positional[0], /*read_only=*/true);
  if (!store.ok()) return Fail("ls", store.status());
  auto list = (*store)->List();
  if (!list.ok()) return Fail("ls", list.status());
  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("store").String(a.positional[0]);
    j.Key("checkpoints").BeginArray();
    for (const CheckpointInfo& c : *list) CheckpointJson(j, c);
    j.EndArray().EndObject();
    PrintJson(j);
    return kExitOk;
  }
  // BYTES is the payload; OWN what its column family takes on disk;
  // SHARED the payload it references in others; FREES what rm would free.
  PrintTable(
      {{"ID"},
       {"STATE"},
       {"CREATED"},
       {"BYTES", /*right=*/true},
       {"OWN", /*right=*/true},
       {"SHARED", /*right=*/true},
       {"FREES", /*right=*/true},
       {"ITEMS", /*right=*/true},
       {"WORLD", /*right=*/true}},
      [&](const auto& row) {
        for (const CheckpointInfo& c : *list) {
          if (!c.damage.empty()) {
            // An empty id (key "checkpoint/") shows as ''.
            row({c.id.empty() ? "''" : Printable(c.id), "DAMAGED", "-", "-",
                 "-", "-", "-", "-", "-"});
            continue;
          }
          row({Printable(c.id), StateName(c.state),
               TimeString(c.created_unix_micros), HumanBytes(c.bytes),
               HumanBytes(c.stored_bytes), HumanBytes(c.referenced_bytes),
               HumanBytes(c.freed_by_delete), std::to_string(c.items),
               std::to_string(c.world_size)});
        }
      });
  // What is wrong with each damaged entry, on stderr: the table stays one
  // row per checkpoint for whoever reads stdout.
  for (const CheckpointInfo& c : *list) {
    if (c.damage.empty()) continue;
    std::fprintf(stderr, "rocksdcp ls: checkpoint '%s' is damaged: %s\n",
                 Printable(c.id).c_str(), Printable(c.damage).c_str());
  }
  return kExitOk;
}

int RunInfo(const Args& a) {
  const std::string& path = a.positional[0];
  const std::string& id = a.positional[1];
  auto store = OpenStore("info", path, /*read_only=*/true);
  if (!store.ok()) return Fail("info", store.status());
  auto info = (*store)->Info(id);
  if (!info.ok()) return Fail("info", info.status());
  auto c = OpenForRead(**store, id);
  if (!c.ok()) return Fail("info", c.status());
  const Metadata& md = c->metadata;

  if (!a.json) {
    Print("checkpoint %s: %s, created %s, %s in %" PRIu64
          " items, world size %d\n",
          Printable(id).c_str(), StateName(info->state),
          TimeString(info->created_unix_micros).c_str(),
          HumanBytes(info->bytes).c_str(), info->items, info->world_size);
    // Where its bytes are: its own column family, and those it references.
    std::string shared;
    for (const std::string& cf : info->referenced_column_families) {
      shared += (shared.empty() ? "" : ", ") + Printable(cf);
    }
    Print(
        "stored: %s on disk in column family %s; %s referenced%s%s; "
        "rm frees %s\n",
        HumanBytes(info->stored_bytes).c_str(),
        Printable(info->column_family).c_str(),
        HumanBytes(info->referenced_bytes).c_str(),
        shared.empty() ? "" : " in ", shared.c_str(),
        HumanBytes(info->freed_by_delete).c_str());
    PrintTable(
        {{"FQN"},
         {"DTYPE"},
         {"SHAPE"},
         {"CHUNKS", /*right=*/true},
         {"BYTES", /*right=*/true}},
        [&](const auto& row) {
          for (const auto& [fqn, meta] : md.state_dict_metadata) {
            const auto* t = std::get_if<TensorStorageMetadata>(&meta);
            if (t == nullptr) {
              row({Printable(fqn), "bytes", "-", "1", "-"});
              continue;
            }
            std::optional<uint64_t> bytes =
                TensorBytes(t->properties.dtype, t->size);
            row({Printable(fqn), std::string(DTypeName(t->properties.dtype)),
                 ShapeText(t->size), std::to_string(t->chunks.size()),
                 bytes ? std::to_string(*bytes) : "?"});
          }
        });
    return kExitOk;
  }
  JsonWriter j;
  j.BeginObject().Key("store").String(path).Key("checkpoint");
  CheckpointJson(j, *info);
  j.Key("items").BeginArray();
  for (const auto& [fqn, meta] : md.state_dict_metadata) {
    j.BeginObject().Key("fqn").String(fqn);
    if (const auto* t = std::get_if<TensorStorageMetadata>(&meta)) {
      std::optional<uint64_t> bytes = TensorBytes(t->properties.dtype, t->size);
      j.Key("type").String("tensor");
      j.Key("dtype").String(DTypeName(t->properties.dtype));
      j.Key("shape").IntArray(t->size);
      j.Key("chunks").Uint(t->chunks.size());
      j.Key("bytes");
      if (bytes)
        j.Uint(*bytes);
      else
        j.Null();
    } else {
      j.Key("type").String("bytes");
      j.Key("dtype").Null().Key("shape").Null();
      j.Key("chunks").Uint(1).Key("bytes").Null();
    }
    j.EndObject();
  }
  j.EndArray().EndObject();
  PrintJson(j);
  return kExitOk;
}

int RunDiff(const Args& a) {
  const std::string& path = a.positional[0];
  auto store = OpenStore("diff", path, /*read_only=*/true);
  if (!store.ok()) return Fail("diff", store.status());
  auto diff = DiffCheckpoints(**store, a.positional[1], a.positional[2]);
  if (!diff.ok()) return Fail("diff", diff.status());

  if (!a.json) {
    std::map<ItemChange, uint64_t> counts;
    uint64_t changed_bytes = 0;
    for (const ItemDiff& d : diff->items) {
      ++counts[d.change];
      changed_bytes += d.changed_bytes;
    }
    std::string summary;
    for (const auto& [change, n] : counts) {
      summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " +
                 std::string(ItemChangeName(change));
    }
    Print("%s -> %s: %s; %s changed\n", Printable(diff->from).c_str(),
          Printable(diff->to).c_str(),
          summary.empty() ? "no items" : summary.c_str(),
          HumanBytes(changed_bytes).c_str());
    PrintTable(
        {{"FQN"},
         {"CHANGE"},
         {"PIECES", /*right=*/true},
         {"BYTES", /*right=*/true}},
        [&](const auto& row) {
          for (const ItemDiff& d : diff->items) {
            row({Printable(d.fqn), std::string(ItemChangeName(d.change)),
                 std::to_string(d.changed_pieces) + "/" +
                     std::to_string(d.pieces),
                 HumanBytes(d.changed_bytes) + "/" + HumanBytes(d.bytes)});
          }
        });
    return kExitOk;
  }
  JsonWriter j;
  j.BeginObject().Key("store").String(path);
  j.Key("from").String(diff->from).Key("to").String(diff->to);
  j.Key("items").BeginArray();
  for (const ItemDiff& d : diff->items) {
    j.BeginObject().Key("fqn").String(d.fqn);
    j.Key("change").String(ItemChangeName(d.change));
    j.Key("pieces").Uint(d.pieces).Key("changed_pieces").Uint(d.changed_pieces);
    j.Key("bytes").Uint(d.bytes).Key("changed_bytes").Uint(d.changed_bytes);
    j.EndObject();
  }
  j.EndArray().EndObject();
  PrintJson(j);
  return kExitOk;
}

namespace {

// One checkpoint's verify report, as an element of --json's "checkpoints".
void VerifyReportJson(const CheckpointVerifyReport& c, JsonWriter& j) {
  // A field that is the value, or null.
  auto or_null = [&j](bool has, auto write) {
    if (has) {
      write();
    } else {
      j.Null();
    }
  };
  j.BeginObject().Key("id").String(c.checkpoint_id);
  j.Key("ok").Bool(c.ok());
  j.Key("items_checked").Uint(c.items_checked);
  j.Key("pieces_checked").Uint(c.pieces_checked);
  j.Key("bytes_checked").Uint(c.bytes_checked);
  j.Key("problems").BeginArray();
  for (const VerifyProblem& p : c.problems) {
    j.BeginObject().Key("item");
    or_null(p.item.has_value(), [&] { j.String(p.item->fqn); });
    j.Key("index");
    or_null(p.item.has_value(), [&] { j.String(p.item->ToString()); });
    j.Key("piece");
    or_null(p.piece.has_value(), [&] { j.Uint(*p.piece); });
    j.Key("code").String(StatusCodeName(p.status.code()));
    j.Key("message").String(p.status.message());
    j.EndObject();
  }
  j.EndArray().Key("unlisted_problems").Uint(c.unlisted_problems);
  j.Key("damaged_items").BeginArray();
  for (const DamagedItem& d : c.damaged_items) {
    j.BeginObject().Key("fqn").String(d.fqn);
    j.Key("bad_pieces").Uint(d.bad_pieces).Key("problems").Uint(d.problems);
    j.Key("code").String(StatusCodeName(d.first_problem.code()));
    j.Key("message").String(d.first_problem.message());
    j.EndObject();
  }
  j.EndArray().EndObject();
}

// One checkpoint's verify report, as lines for a person: "ok" with what was
// checked, or one line per damaged item, every one of them (each piece's
// problem is in --json, up to VerifyOptions::max_problems).
void PrintVerifyReport(const CheckpointVerifyReport& c) {
  if (c.ok()) {
    Print("%s: ok (%" PRIu64 " items, %" PRIu64 " pieces, %s)\n",
          Printable(c.checkpoint_id).c_str(), c.items_checked, c.pieces_checked,
          HumanBytes(c.bytes_checked).c_str());
    return;
  }
  Print("%s: CORRUPTED (%zu damaged items, %" PRIu64 " problems)\n",
        Printable(c.checkpoint_id).c_str(), c.damaged_items.size(),
        c.problems.size() + c.unlisted_problems);
  for (const VerifyProblem& p : c.problems) {
    if (p.item) continue;
    Print("  (checkpoint): %s\n", Printable(p.status.message()).c_str());
  }
  for (const DamagedItem& d : c.damaged_items) {
    const std::string count = d.bad_pieces > 0
                                  ? std::to_string(d.bad_pieces) + " bad pieces"
                                  : std::to_string(d.problems) + " problems";
    Print("  %s: %s; first: %s\n", Printable(d.fqn).c_str(), count.c_str(),
          Printable(d.first_problem.message()).c_str());
  }
}

}  // namespace

int RunVerify(const Args& a) {
  const std::string& path = a.positional[0];
  // A fresh read-only Store: nothing cached, every byte read from disk.
  auto store = OpenStore("verify", path, /*read_only=*/true);
  if (!store.ok()) return Fail("verify", store.status());
  VerifyOptions options;
  options.checkpoint_ids.assign(a.positional.begin() + 1, a.positional.end());
  ProgressBar bar("verifying");
  options.progress = bar.Callback();
  auto report = (*store)->Verify(options);
  bar.Finish();
  if (!report.ok()) return Fail("verify", report.status());

  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("store").String(path);
    j.Key("ok").Bool(report->ok()).Key("checkpoints").BeginArray();
    for (const CheckpointVerifyReport& c : report->checkpoints) {
      VerifyReportJson(c, j);
    }
    j.EndArray().EndObject();
    PrintJson(j);
  } else {
    for (const CheckpointVerifyReport& c : report->checkpoints) {
      PrintVerifyReport(c);
    }
  }
  if (!report->ok()) {
    std::fprintf(stderr, "rocksdcp verify: store '%s' has corrupted items\n",
                 Printable(path).c_str());
    return kExitCorrupt;
  }
  return kExitOk;
}

int RunRm(const Args& a) {
  auto store = OpenStore("rm", a.positional[0], /*read_only=*/false);
  if (!store.ok()) return Fail("rm", store.status());
  // Each id once, in the order given: `rm S a b a` deletes a and b.
  std::vector<std::string> ids;
  for (auto it = a.positional.begin() + 1; it != a.positional.end(); ++it) {
    if (std::find(ids.begin(), ids.end(), *it) == ids.end()) {
      ids.push_back(*it);
    }
  }
  // Every id must exist before anything is deleted: a typo deletes nothing.
  // A damaged catalog entry exists too (List marks it), and rm removes it.
  auto list = (*store)->List();
  if (!list.ok()) return Fail("rm", list.status());
  for (const std::string& id : ids) {
    const bool listed =
        std::any_of(list->begin(), list->end(),
                    [&id](const CheckpointInfo& c) { return c.id == id; });
    if (listed) continue;
    auto info = (*store)->Info(id);  // Says why it is not there.
    const Status why =
        info.ok() ? Status::NotFound("checkpoint '" + id + "' is not listed")
                  : info.status();
    return Fail("rm",
                Status(why.code(), why.message() + "; nothing was deleted"));
  }
  return DeleteAll("rm", **store, a, ids);
}

int RunKeepLast(const Args& a) {
  const std::string& n_arg = a.positional[1];
  uint64_t n = 0;
  if (n_arg.empty() || n_arg.size() > 9 ||
      !std::all_of(n_arg.begin(), n_arg.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    std::fprintf(stderr,
                 "rocksdcp keep-last: N must be an integer from 0 to "
                 "999999999, not '%s'\n",
                 Printable(n_arg).c_str());
    return kExitUsage;
  }
  n = std::stoull(n_arg);
  auto store = OpenStore("keep-last", a.positional[0], /*read_only=*/false);
  if (!store.ok()) return Fail("keep-last", store.status());
  auto report = (*store)->KeepLast(n);
  if (!report.ok()) return Fail("keep-last", report.status());
  if (!a.json) {
    for (const std::string& id : report->kept) {
      Print("keeping %s\n", Printable(id).c_str());
    }
  }
  PrintDeleted(a, report->deleted, report->kept);
  return kExitOk;
}

// Why GC drops orphan column family `cf`, for a person reading `gc` (a
// name like "step-62" or "step-62~1" can be a live checkpoint's).
std::string OrphanColumnFamilyNote(const std::string& cf,
                                   const std::vector<CheckpointInfo>& list) {
  for (const CheckpointInfo& c : list) {
    if (!c.damage.empty() || c.column_family == cf) continue;
    const bool generation =
        cf.size() > c.id.size() + 1 && cf.compare(0, c.id.size(), c.id) == 0 &&
        cf[c.id.size()] == '~' &&
        std::all_of(cf.begin() + c.id.size() + 1, cf.end(),
                    [](char ch) { return ch >= '0' && ch <= '9'; });
    if (cf == c.id || generation) {
      return "an old copy of checkpoint " + Printable(c.id) +
             ", which stays: it lives in column family " +
             Printable(c.column_family);
    }
  }
  return "no committed checkpoint holds or references it: a save that "
         "never committed, or a deleted checkpoint's";
}

int RunGc(const Args& a) {
  bool dry = a.has("--dry-run");
  auto store = OpenStore("gc", a.positional[0], /*read_only=*/false,
                         /*create=*/false, /*reclaim=*/false);
  if (!store.ok()) return Fail("gc", store.status());
  auto report = (*store)->CollectGarbage(dry);
  if (!report.ok()) return Fail("gc", report.status());
  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("store").String(a.positional[0]);
    j.Key("dry_run").Bool(dry);
    j.Key("dropped_column_families").BeginArray();
    for (const auto& cf : report->dropped_column_families) j.String(cf);
    j.EndArray().Key("deleted_staging_files").BeginArray();
    for (const auto& f : report->deleted_staging_files) j.String(f);
    j.EndArray().Key("freed_bytes").Uint(report->freed_bytes).EndObject();
    PrintJson(j);
    return kExitOk;
  }
  // A column family named after a live checkpoint reads as that
  // checkpoint: say whose it was, and that the checkpoint stays.
  auto list = (*store)->List();
  if (!list.ok()) return Fail("gc", list.status());
  const char* verb = dry ? "would drop" : "dropped";
  for (const auto& cf : report->dropped_column_families) {
    Print("%s column family %s (%s)\n", verb, Printable(cf).c_str(),
          OrphanColumnFamilyNote(cf, *list).c_str());
  }
  for (const auto& f : report->deleted_staging_files) {
    Print("%s staging file %s\n", dry ? "would delete" : "deleted",
          Printable(f).c_str());
  }
  Print("%s %s (%" PRIu64 " bytes)\n", dry ? "would free" : "freed",
        HumanBytes(report->freed_bytes).c_str(), report->freed_bytes);
  return kExitOk;
}

int RunMaterialize(const Args& a) {
  const std::string& path = a.positional[0];
  const std::string& id = a.positional[1];
  auto store = OpenStore("materialize", path, /*read_only=*/false);
  if (!store.ok()) return Fail("materialize", store.status());
  ProgressBar bar("materializing");
  auto report = (*store)->Materialize(id, bar.Callback());
  bar.Finish();
  if (!report.ok()) return Fail("materialize", report.status());
  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("store").String(path).Key("checkpoint").String(id);
    j.Key("pieces").Uint(report->pieces).Key("bytes").Uint(report->bytes);
    j.Key("dropped_column_families").BeginArray();
    for (const auto& cf : report->dropped_column_families) j.String(cf);
    j.EndArray().EndObject();
    PrintJson(j);
    return kExitOk;
  }
  Print("copied %" PRIu64 " referenced pieces (%s) into checkpoint %s\n",
        report->pieces, HumanBytes(report->bytes).c_str(),
        Printable(id).c_str());
  for (const auto& cf : report->dropped_column_families) {
    Print("dropped column family %s\n", Printable(cf).c_str());
  }
  return kExitOk;
}

int RunDump(const Args& a) {
  auto store = OpenStore("dump", a.positional[0], /*read_only=*/true);
  if (!store.ok()) return Fail("dump", store.status());
  const std::string& out = a.flags.at("--npy");
  Status s = DumpNpy(**store, a.positional[1], a.positional[2], out);
  if (!s.ok()) return Fail("dump", s);
  if (a.json) {
    JsonWriter j;
    j.BeginObject()
        .Key("fqn")
        .String(a.positional[2])
        .Key("npy")
        .String(out)
        .EndObject();
    PrintJson(j);
  } else {
    Print("wrote %s to %s\n", Printable(a.positional[2]).c_str(),
          Printable(out).c_str());
  }
  return kExitOk;
}

int RunExport(const Args& a) {
  auto store = OpenStore("export", a.positional[0], /*read_only=*/true);
  if (!store.ok()) return Fail("export", store.status());
  const std::string& out = a.flags.at("--safetensors");
  ProgressBar bar("exporting");
  auto st = ExportSafetensors(**store, a.positional[1], out, bar.Callback());
  bar.Finish();
  if (!st.ok()) return Fail("export", st.status());
  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("safetensors").String(out);
    StatsJson(j, *st);
    PrintJson(j.EndObject());
  } else {
    Print("wrote %" PRIu64 " tensors, %" PRIu64 " byte items (%s) to %s\n",
          st->tensors, st->byte_items, HumanBytes(st->bytes).c_str(),
          Printable(out).c_str());
  }
  return kExitOk;
}

int RunImport(const Args& a) {
  // The file is checked whole before the store is opened: a mistyped or
  // damaged file creates no store and changes none.
  auto file = SafetensorsFile::Open(a.positional[0]);
  if (!file.ok()) return Fail("import", file.status());
  if (Status s = ValidateCheckpointId(a.positional[2]); !s.ok()) {
    return Fail("import", s);
  }
  auto store = OpenStore("import", a.positional[1], /*read_only=*/false,
                         /*create=*/true);
  if (!store.ok()) return Fail("import", store.status());
  ProgressBar bar("importing");
  auto st = file->SaveTo(
      **store, a.positional[2], a.has("--overwrite"), bar.Callback(),
      a.has("--compress") ? Compression::kBytePlaneZstd : Compression::kNone);
  bar.Finish();
  if (!st.ok()) return Fail("import", st.status());
  if (a.json) {
    JsonWriter j;
    j.BeginObject().Key("id").String(a.positional[2]);
    StatsJson(j, *st);
    PrintJson(j.EndObject());
  } else {
    Print("imported %" PRIu64 " tensors, %" PRIu64 " byte items (%s) as %s\n",
          st->tensors, st->byte_items, HumanBytes(st->bytes).c_str(),
          Printable(a.positional[2]).c_str());
  }
  return kExitOk;
}

}  // namespace rocksdcp::tools
