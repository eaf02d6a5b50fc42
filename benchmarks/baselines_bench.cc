// The baselines rocksdcp is measured against, on the same workload data
// (workloads.h) and in the same run: these VMs are noisy enough that only a
// ratio to a baseline of the same run means much.
//
//   BM_RawFileWriteFsync/wl:N       the physical limit of a save: the
//                                   workload's bytes, writev'd in order into
//                                   one new file, fsync, close
//   BM_RawFileRead/wl:N/cold:C      and of a load: readv of that file into
//                                   the destination; cold first evicts the
//                                   file with posix_fadvise(DONTNEED)
//   BM_Memcpy/wl:N                  memcpy of every tensor into its
//                                   destination: what a warm load could
//                                   reach with no I/O at all
//   BM_PerRankFilesSave/wl:N        PyTorch FileSystemWriter's layout: the
//                                   rank's items pwrite'n back to back into
//                                   its own file, fsync, then an index file
//                                   (fqn -> file, offset, length) written to
//                                   a temporary name, fsync'd and renamed,
//                                   and the directory fsync'd
//   BM_PerRankFilesLoad/wl:N/cold:C FileSystemReader's: read the index, then
//                                   pread every item into its destination
//   BM_NaiveRocksDBSave/wl:N        a naive RocksDB design: one Put per
//                                   piece (tensors cut at 8 MiB; rocksdcp
//                                   cuts 128 KiB pieces) with the WAL on,
//                                   then an index key Put with sync = true,
//                                   which syncs the WAL
//   BM_NaiveRocksDBLoad/wl:N/cold:C Get of every piece, copied into its
//                                   destination
//
// One rank in every case: the rank-per-file layout has one file. The
// RocksDB of the naive design has default options except
// disable_auto_compactions, as rocksdcp's checkpoint column families do:
// the checkpoints are never rewritten, and nothing compacts the earlier
// iterations' data during the later ones. Its memtable flushes still run
// in the background, during the save as in a real one.
//
// Conventions (README.md): inputs built before the loop, a new file,
// directory or key prefix per save, cold iterations timed with the
// posix_fadvise(DONTNEED) that empties the page cache, no PauseTiming.

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "workloads.h"

namespace rocksdcp::bench {
namespace {

// The naive design's pieces: 8 MiB (rocksdcp cuts 128 KiB ones by default).
constexpr uint64_t kPieceBytes = 8ull << 20;
// memcpy takes a fraction of a second even at 1 GiB: more iterations.
constexpr int kMemcpyIterations = 10;

Status FromRocks(const rocksdb::Status& s) {
  return s.ok() ? Status::OK() : Status::IOError("rocksdb: " + s.ToString());
}

// The fqns of StateData::Payload()'s entries, in its order.
std::vector<std::string> PayloadNames(const WorkloadSpec& spec) {
  std::vector<std::string> names;
  for (const TensorSpec& t : spec.tensors) names.push_back(t.fqn);
  for (const BytesSpec& b : spec.byte_items) names.push_back(b.fqn);
  return names;
}

}  // namespace

// ---- Raw file ----

void RawFileWriteFsync(benchmark::State& state, WorkloadData& data) {
  // A new file per iteration, as each save writes new files; the files are
  // deleted after the loop, as the save cases delete checkpoints.
  const std::vector<iovec> iov = data.source.Payload();
  TimeWrites(
      state, data, "raw-write", Status::OK(),
      [&](const std::string& path) { return WriteFileFsync(path, iov); });
}

void RawFileRead(benchmark::State& state, WorkloadData& data, bool cold) {
  const std::vector<iovec> dest = data.destination().Payload();
  const std::string dir = FreshDir("raw-read");
  const std::string path = dir + "/file";
  Status s = WriteFileFsync(path, data.source.Payload());
  const RssMeter rss;  // Before the first read, as in BM_Load.
  // One untimed read, so a warm run starts warm.
  if (s.ok()) s = ReadFile(path, dest);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  for (auto _ : state) {
    if (cold) s = DropPageCache(path);
    if (s.ok()) s = ReadFile(path, dest);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, cold);
  RemoveDir(dir);
}

namespace {

// Args: wl.
void BM_RawFileWriteFsync(benchmark::State& state, const Config& config) {
  RawFileWriteFsync(state,
                    GetWorkload(static_cast<int>(state.range(0)), config));
}

// Args: wl, cold.
void BM_RawFileRead(benchmark::State& state, const Config& config) {
  RawFileRead(state, GetWorkload(static_cast<int>(state.range(0)), config),
              state.range(1) != 0);
}

// Args: wl.
void BM_Memcpy(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const std::vector<iovec> src = data.source.Payload();
  const std::vector<iovec> dst = data.dest->Payload();
  const RssMeter rss;
  for (auto _ : state) {
    for (size_t i = 0; i < src.size(); ++i) {
      std::memcpy(dst[i].iov_base, src[i].iov_base, src[i].iov_len);
    }
    benchmark::ClobberMemory();
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
}

// ---- PyTorch FileSystemWriter's layout ----

constexpr char kRankFile[] = "__0_0.distcp";
constexpr char kIndexFile[] = ".metadata";

struct IndexEntry {
  std::string file;
  uint64_t offset = 0;
  uint64_t length = 0;
};

Status PwriteAll(int fd, const void* buf, size_t len, uint64_t offset,
                 const std::string& path) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("pwrite", path);
    p += n;
    len -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

Status PreadAll(int fd, void* buf, size_t len, uint64_t offset,
                const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t n = ::pread(fd, p, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Status::IOError("short read of " + path);
    if (n < 0) return Errno("pread", path);
    p += n;
    len -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

// Saves `data` into the new directory `dir` as FileSystemWriter lays it
// out for one rank.
Status PerRankFilesSave(StateData& data, const std::string& dir) {
  const std::vector<iovec> iov = data.Payload();
  const std::vector<std::string> names = PayloadNames(data.spec());
  const std::string path = dir + "/" + kRankFile;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Errno("open", path);
  std::string index;
  uint64_t offset = 0;
  Status s;
  for (size_t i = 0; i < iov.size() && s.ok(); ++i) {
    s = PwriteAll(fd, iov[i].iov_base, iov[i].iov_len, offset, path);
    index += names[i] + '\t' + kRankFile + '\t' + std::to_string(offset) +
             '\t' + std::to_string(iov[i].iov_len) + '\n';
    offset += iov[i].iov_len;
  }
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", path);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", path);
  ROCKSDCP_RETURN_IF_ERROR(s);
  // The coordinator's finish: the index goes to a temporary name and is
  // renamed, so that a crash never leaves a partial index.
  const std::string tmp = dir + "/" + kIndexFile + ".tmp";
  iovec index_iov{index.data(), index.size()};
  ROCKSDCP_RETURN_IF_ERROR(WriteFileFsync(tmp, {index_iov}));
  if (::rename(tmp.c_str(), (dir + "/" + kIndexFile).c_str()) != 0) {
    return Errno("rename", tmp);
  }
  return FsyncDir(dir);
}

// Loads what PerRankFilesSave wrote in `dir` into `data`.
Status PerRankFilesLoad(const std::string& dir, StateData& data) {
  const std::string index_path = dir + "/" + kIndexFile;
  std::string index(std::filesystem::file_size(index_path), '\0');
  ROCKSDCP_RETURN_IF_ERROR(
      ReadFile(index_path, {iovec{index.data(), index.size()}}));
  std::unordered_map<std::string, IndexEntry> entries;
  for (size_t pos = 0; pos < index.size();) {
    const size_t end = index.find('\n', pos);
    const size_t t1 = index.find('\t', pos);
    const size_t t2 = index.find('\t', t1 + 1);
    const size_t t3 = index.find('\t', t2 + 1);
    if (end == std::string::npos || t3 == std::string::npos || t3 > end) {
      return Status::Corruption("bad index line in " + index_path);
    }
    entries[index.substr(pos, t1 - pos)] = {
        index.substr(t1 + 1, t2 - t1 - 1),
        std::strtoull(index.c_str() + t2 + 1, nullptr, 10),
        std::strtoull(index.c_str() + t3 + 1, nullptr, 10)};
    pos = end + 1;
  }
  const std::vector<iovec> iov = data.Payload();
  const std::vector<std::string> names = PayloadNames(data.spec());
  const std::string path = dir + "/" + kRankFile;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Errno("open", path);
  Status s;
  for (size_t i = 0; i < iov.size() && s.ok(); ++i) {
    auto it = entries.find(names[i]);
    if (it == entries.end() || it->second.length != iov[i].iov_len) {
      s = Status::Corruption("index of " + dir + " lacks " + names[i]);
    } else {
      s = PreadAll(fd, iov[i].iov_base, iov[i].iov_len, it->second.offset,
                   path);
    }
  }
  ::close(fd);
  return s;
}

// Args: wl.
void BM_PerRankFilesSave(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  // A directory of files per iteration, as each save writes new files.
  TimeWrites(state, data, "per-rank-save", Status::OK(),
             [&](const std::string& dir) {
               std::filesystem::create_directory(dir);
               return PerRankFilesSave(data.source, dir);
             });
}

// Args: wl, cold.
void BM_PerRankFilesLoad(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const bool cold = state.range(1) != 0;
  const std::string dir = FreshDir("per-rank-load");
  data.dest->Zero();
  Status s = PerRankFilesSave(data.source, dir);
  const RssMeter rss;  // Before the first load, as in BM_Load.
  // One untimed load: it checks the setup and makes a warm run warm.
  if (s.ok()) s = PerRankFilesLoad(dir, *data.dest);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  for (auto _ : state) {
    if (cold) s = DropDirCache(dir);
    if (s.ok()) s = PerRankFilesLoad(dir, *data.dest);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  if (s.ok() && !data.dest->SameAs(data.source)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, cold);
  RemoveDir(dir);
}

// ---- A naive RocksDB design ----

std::unique_ptr<rocksdb::DB> OpenNaiveDb(const std::string& dir,
                                         Status* status) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.disable_auto_compactions = true;
  rocksdb::DB* db = nullptr;
  *status = FromRocks(rocksdb::DB::Open(options, dir, &db));
  return std::unique_ptr<rocksdb::DB>(db);
}

std::string PieceKey(const std::string& prefix, const std::string& fqn,
                     uint64_t piece) {
  return prefix + fqn + '#' + std::to_string(piece);
}

// Puts every piece of `data` under `prefix`, WAL on and unsynced, then the
// index key with sync = true: the commit.
Status NaiveSave(rocksdb::DB& db, StateData& data, const std::string& prefix) {
  const std::vector<iovec> iov = data.Payload();
  const std::vector<std::string> names = PayloadNames(data.spec());
  std::string index;
  for (size_t i = 0; i < iov.size(); ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    uint64_t piece = 0;
    for (uint64_t off = 0; off < iov[i].iov_len; off += kPieceBytes) {
      const uint64_t len = std::min(kPieceBytes, iov[i].iov_len - off);
      ROCKSDCP_RETURN_IF_ERROR(FromRocks(
          db.Put(rocksdb::WriteOptions(), PieceKey(prefix, names[i], piece++),
                 rocksdb::Slice(p + off, len))));
    }
    index += names[i] + '\t' + std::to_string(iov[i].iov_len) + '\n';
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return FromRocks(db.Put(sync, prefix + "__metadata__", index));
}

// Gets every piece of `data` from under `prefix` into it.
Status NaiveLoad(rocksdb::DB& db, StateData& data, const std::string& prefix) {
  std::string index;
  ROCKSDCP_RETURN_IF_ERROR(FromRocks(
      db.Get(rocksdb::ReadOptions(), prefix + "__metadata__", &index)));
  const std::vector<iovec> iov = data.Payload();
  const std::vector<std::string> names = PayloadNames(data.spec());
  rocksdb::PinnableSlice value;
  for (size_t i = 0; i < iov.size(); ++i) {
    char* p = static_cast<char*>(iov[i].iov_base);
    uint64_t piece = 0;
    for (uint64_t off = 0; off < iov[i].iov_len; off += kPieceBytes) {
      value.Reset();
      ROCKSDCP_RETURN_IF_ERROR(
          FromRocks(db.Get(rocksdb::ReadOptions(), db.DefaultColumnFamily(),
                           PieceKey(prefix, names[i], piece++), &value)));
      const uint64_t len = std::min(kPieceBytes, iov[i].iov_len - off);
      if (value.size() != len) {
        return Status::Corruption("naive design: piece of " + names[i] +
                                  " has the wrong size");
      }
      std::memcpy(p + off, value.data(), len);
    }
  }
  return Status::OK();
}

// Args: wl.
void BM_NaiveRocksDBSave(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const std::string dir = FreshDir("naive-save");
  Status s;
  std::unique_ptr<rocksdb::DB> db = OpenNaiveDb(dir, &s);
  const RssMeter rss;
  TimeEach(state, s, [&](int n) {
    return NaiveSave(*db, data.source, "iter-" + std::to_string(n) + "/");
  }).IgnoreError();
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id);
  db.reset();
  RemoveDir(dir);
}

// Args: wl, cold.
void BM_NaiveRocksDBLoad(benchmark::State& state, const Config& config) {
  WorkloadData& data = GetWorkload(static_cast<int>(state.range(0)), config);
  const bool cold = state.range(1) != 0;
  const std::string dir = FreshDir("naive-load");
  Status s;
  std::unique_ptr<rocksdb::DB> db = OpenNaiveDb(dir, &s);
  data.dest->Zero();
  if (s.ok()) s = NaiveSave(*db, data.source, "ckpt/");
  // Loads read SST files, as they would after a restart, not the memtable.
  if (s.ok()) s = FromRocks(db->Flush(rocksdb::FlushOptions()));
  const RssMeter rss;  // Before the first load, as in BM_Load.
  // One untimed load: it checks the setup and makes a warm run warm.
  if (s.ok()) s = NaiveLoad(*db, *data.dest, "ckpt/");
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  for (auto _ : state) {
    if (cold) s = DropDirCache(dir);
    if (s.ok()) s = NaiveLoad(*db, *data.dest, "ckpt/");
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  if (s.ok() && !data.dest->SameAs(data.source)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
  rss.Report(state);
  SetCounters(state, data.source.total_bytes(), data.source.items(),
              data.source.spec().id, cold);
  db.reset();
  RemoveDir(dir);
}

}  // namespace

void RegisterBaselineBenchmarks(const Config& c, int wl) {
  const int it = c.iterations;
  SetCommon(Register("BM_RawFileWriteFsync", BM_RawFileWriteFsync, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            it);
  SetCommon(Register("BM_RawFileRead", BM_RawFileRead, c)
                ->ArgNames({"wl", "cold"})
                ->Args({wl, 0})
                ->Args({wl, 1}),
            it);
  SetCommon(Register("BM_Memcpy", BM_Memcpy, c)->ArgNames({"wl"})->Arg(wl),
            c.quick ? 1 : kMemcpyIterations);
  // The other designs on the LLM-like and the many-small-items workloads;
  // W1's few large tensors would tell nothing W2 doesn't.
  if (wl == 1) return;
  SetCommon(Register("BM_PerRankFilesSave", BM_PerRankFilesSave, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            it);
  SetCommon(Register("BM_PerRankFilesLoad", BM_PerRankFilesLoad, c)
                ->ArgNames({"wl", "cold"})
                ->Args({wl, 0})
                ->Args({wl, 1}),
            it);
  SetCommon(Register("BM_NaiveRocksDBSave", BM_NaiveRocksDBSave, c)
                ->ArgNames({"wl"})
                ->Arg(wl),
            it);
  SetCommon(Register("BM_NaiveRocksDBLoad", BM_NaiveRocksDBLoad, c)
                ->ArgNames({"wl", "cold"})
                ->Args({wl, 0})
                ->Args({wl, 1}),
            it);
}

}  // namespace rocksdcp::bench
