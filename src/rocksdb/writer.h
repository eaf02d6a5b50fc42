// RocksDBStorageWriterImpl: writes a rank's pieces into staging SST files
// (no DB handle needed), and on the coordinator commits them to the store.
//
// WriteData cuts the rank's key-sorted items into runs of about equal bytes
// and writes each run on a thread of its own, with its own SstFileWriter
// and PieceEncoder, so that every staging file holds ascending keys and
// every item lies within one file. The threads call the planner's
// ResolveData and ReleaseData for distinct items at once, as planner.h
// allows. Their buffers are bounded by RocksDBWriterOptions::memory_budget.

#ifndef ROCKSDCP_SRC_ROCKSDB_WRITER_H_
#define ROCKSDCP_SRC_ROCKSDB_WRITER_H_

#include <flatbuffers/flatbuffers.h>
#include <rocksdb/write_batch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "format/piece_codec.h"
#include "rocksdb/catalog_codec.h"
#include "rocksdcp/store.h"
#include "util/file_lock.h"

namespace rocksdcp {

class StoreImpl;
struct CommitRequest;

class RocksDBStorageWriterImpl final : public RocksDBStorageWriter {
 public:
  RocksDBStorageWriterImpl(StoreImpl* store, RocksDBWriterOptions options);
  ~RocksDBStorageWriterImpl() override;

  // InvalidArgument, naming the option, if `options` can't work: a
  // max_piece_bytes out of [1, 1 GiB], memory_budget smaller than one
  // writer thread's buffers, a negative write_threads, and the like. Every
  // check of a writer's options is here; Store::NewWriter makes them.
  static Status ValidateOptions(const RocksDBWriterOptions& options);

  // The memory one writer thread needs (see memory_budget) to write pieces
  // of up to `piece_bytes` bytes of data.
  static uint64_t ThreadMemory(const RocksDBWriterOptions& options,
                               uint64_t piece_bytes);

  Status Reset(std::string_view checkpoint_id) override;
  Status ResetWithSaveId(std::string_view checkpoint_id,
                         std::string_view save_id) override;
  Status SetUpStorageWriter(bool is_coordinator, int rank,
                            int world_size) override;
  Result<SavePlan> PrepareLocalPlan(SavePlan plan) override;
  Result<std::vector<SavePlan>> PrepareGlobalPlan(
      std::vector<SavePlan> plans) override;
  std::future<Result<std::vector<WriteResult>>> WriteData(
      const SavePlan& plan, SavePlanner& planner) override;
  Status Finish(Metadata* metadata,
                const std::vector<std::vector<WriteResult>>& results) override;
  std::optional<StorageMeta> GetStorageMeta() override;

 public:
  // What the planner resolved an item to, cut into pieces (write_data.cc).
  struct Payload;

 private:
  struct Job;
  struct Planned;
  struct Run;

  Result<std::vector<WriteResult>> WriteDataSync(const SavePlan& plan,
                                                 SavePlanner& planner);
  // WriteDataSync's steps. The items of `plan` in key order;
  // InvalidArgument if it holds an item twice.
  Result<std::vector<Planned>> KeyOrder(const SavePlan& plan) const;
  // Fills in what the threads of one WriteData share: the progress totals,
  // the staging files' names and options, an incremental save's base.
  Status SetUpJob(const SavePlan& plan, format::RankPlan rank_plan,
                  Job* job) const;
  // The bounds of the runs `order` is written in, one thread each:
  // run r is [bounds[r], bounds[r + 1]).
  std::vector<size_t> SplitIntoRuns(const std::vector<Planned>& order) const;
  // How many threads write `order`: write_threads (or the machine's), at
  // most one per item (or per 32 MiB when automatic), and no more than fit
  // memory_budget.
  size_t ThreadCount(const std::vector<Planned>& order) const;
  // Writes items [begin, end) of job->order on the calling thread into
  // staging files named <prefix>-<run>-<n>.sst, appending their paths to
  // *files as it creates them. Sets *at to the item it is writing, so
  // that a caller who catches what escapes (std::bad_alloc) can name it.
  Status WriteRun(Job* job, size_t run, size_t begin, size_t end,
                  std::vector<std::string>* files, size_t* at);
  // Resolves item job->order[i], writes its pieces into the run's staging
  // file, and fills job->results[i].
  Status WriteItemOfRun(Job* job, Run* run, size_t i);
  // Writes piece `p` of `item`: encoded, or, identical to the piece of
  // `base` (an incremental save's, cut alike; or nullptr), a reference.
  Status WritePiece(Job* job, Run* run, const WriteItem& item, Payload* payload,
                    const format::StorageInfo* base, uint32_t p);
  // Where(), and the item.
  std::string ItemWhere(const WriteItem& item) const;
  // Whether pieces are compressed only while the disk bounds the save.
  bool Adaptive() const {
    return options_.compression != Compression::kNone &&
           options_.compression_policy == CompressionPolicy::kWhenDiskBound;
  }
  // A piece encoder from the pool (or a new one), and back.
  // A fresh encoder, compressing as options_ say.
  std::unique_ptr<format::PieceEncoder> NewEncoder() const;
  std::unique_ptr<format::PieceEncoder> TakeEncoder();
  void ReturnEncoder(std::unique_ptr<format::PieceEncoder> encoder);
  // Forgets the current save: releases the id and the base, and removes
  // staging files.
  void Abandon();
  // On the coordinator of an incremental save: finds the base, pins it
  // and what it references, and reads its metadata.
  Status SetUpBase();
  // The base's storage info of the items of `plan` that it has with the
  // same kind, dtype and chunk shape and piece hashes, each piece's source
  // named (see format::RankPlan).
  std::map<MetadataIndex, format::StorageInfo> BaseItemsFor(
      const SavePlan& plan);
  // Finish's steps. What the ranks' results add up to: the staging files'
  // key ranges and the column families referenced.
  struct CommitFiles;
  // Adds one rank's result `r` to the commit: its storage info (without
  // its file) to `metadata`, its file's key range and its references to
  // `files`, its bytes to `request`. InvalidArgument if it names a file
  // outside the staging area, a column family the base did not pin, or an
  // item another rank wrote.
  Status AddResult(const WriteResult& r, Metadata* metadata, CommitFiles* files,
                   CommitRequest* request) const;
  // Encodes `metadata` (of at most `metadata_bound` bytes) into
  // request->metadata_value and sets request->batch, through buffers kept
  // from one save to the next.
  void EncodeCommit(const Metadata& metadata, uint64_t metadata_bound,
                    CommitRequest* request);
  std::string Where() const;

  StoreImpl* const store_;
  const RocksDBWriterOptions options_;

  std::string checkpoint_id_;
  // This rank's, fresh for each Reset (or the caller's: ResetWithSaveId).
  // The staging directory is named by a random token of its own.
  std::string save_id_;
  // The coordinator's, from this rank's plan (WriteData): the one the
  // checkpoint records.
  std::string plan_save_id_;
  // What GetStorageMeta returns after the coordinator's Finish committed.
  std::optional<StorageMeta> committed_meta_;
  std::string staging_dir_;
  bool has_id_ = false;
  bool set_up_ = false;
  // BeginSave was called (and, on the coordinator, the id claimed).
  bool registered_ = false;
  // Held while staging_dir_ is in use; see StagingLockPath.
  std::optional<util::FileLock> staging_lock_;
  bool is_coordinator_ = false;
  int rank_ = 0;
  int world_size_ = 1;

  // An incremental save's base, on the coordinator: its id and column
  // family, its metadata (until PrepareGlobalPlan has used it), and the
  // column families pinned for the save (see StoreImpl::LookupCommitted).
  std::string base_id_;
  std::string base_cf_;
  std::optional<Metadata> base_metadata_;
  std::vector<std::string> pinned_;

  // Spare piece encoders, one per writer thread that has finished: reused
  // across pieces and saves (with reuse_buffers), so that encoding touches
  // fresh memory only when a piece outgrows every earlier one. At most as
  // many as threads ran at once, so bounded by memory_budget.
  std::mutex encoders_mu_;
  std::vector<std::unique_ptr<format::PieceEncoder>> encoders_;

  // The coordinator's metadata encoding and the batch that commits it,
  // kept for the next save with reuse_buffers (a 51,000-item metadata is
  // 16 MB; see CommitRequest::batch), released after each commit without.
  std::unique_ptr<flatbuffers::FlatBufferBuilder> metadata_fbb_;
  std::unique_ptr<rocksdb::WriteBatch> commit_batch_;
};

}  // namespace rocksdcp

#endif  // ROCKSDCP_SRC_ROCKSDB_WRITER_H_
