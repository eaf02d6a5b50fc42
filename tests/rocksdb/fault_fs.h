// FaultFs: a rocksdb::FileSystem for reliability tests, which a Store opens
// through StoreImpl::Open(path, options, fs). It
//   - counts the operations it sees, by kind;
//   - fails the n-th operation of chosen kinds with ENOSPC or EIO (once, or
//     from then on, as a full disk does), naming the operation;
//   - models a power loss: SimulatePowerLoss() leaves the disk as it would
//     be after the power came back, every write that was not synced
//     dropped and every directory entry that was not fsynced undone.
//
// The durability model is POSIX's, as RocksDB's FaultInjectionTestFS has
// it, with one step further: data of a file is durable up to the size it
// had at its last fsync/fdatasync (by inode, so hard links share it), and a
// directory's entries are durable as they were at the directory's last
// fsync, creations, deletions, renames and links alike. A removed file is
// kept alive by a hard link in a hidden trash directory until its removal
// is durable, so that a power loss can bring it back. Files and
// directories under `root` that the FaultFs has not seen change count as
// durable.

#ifndef ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_H_
#define ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_H_

#include <rocksdb/file_system.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp::testing {

// Kinds of operation, as bits of a mask.
enum OpKind : uint32_t {
  kOpCreate = 1u << 0,      // create or reopen a file; create a directory
  kOpWrite = 1u << 1,       // append, positioned write, truncate
  kOpSync = 1u << 2,        // fsync / fdatasync of a file
  kOpDirSync = 1u << 3,     // fsync of a directory
  kOpLinkRename = 1u << 4,  // hard link, rename
  kOpRead = 1u << 5,        // read from a file
  kOpDelete = 1u << 6,      // unlink a file, remove a directory
};
constexpr int kNumOpKinds = 7;
constexpr uint32_t kOpAll = (1u << kNumOpKinds) - 1;
// What a power cut counts: everything that changes the disk.
constexpr uint32_t kOpMutating = kOpAll & ~kOpRead;

// "write", "dir-fsync", ...: the name of one kind.
const char* OpKindName(uint32_t kind);

enum class FaultType { kNoSpace, kIOError };

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  // Models durability under `root`; paths elsewhere pass through untracked.
  // With `real_syncs` false, syncs are counted and modelled but not made,
  // which spares the disk: durability is what the model says it is.
  explicit FaultFs(const std::string& root, bool real_syncs = false);

  static const char* kClassName() { return "RocksdcpFaultFs"; }
  const char* Name() const override { return kClassName(); }

  // ---- Counting ----

  // Operations of any of `kinds` seen since construction or ResetCounts.
  uint64_t Count(uint32_t kinds) const;
  void ResetCounts();

  // ---- I/O faults ----

  // The n-th operation (1-based, counted from now) of any of `kinds` fails
  // with `type`, and so does every later one of those kinds if `sticky`,
  // until ClearFault. The error names the operation and the file.
  void InjectFault(uint64_t n, uint32_t kinds, FaultType type, bool sticky);
  void ClearFault();
  // From now on, opening a file for O_DIRECT reads fails with
  // InvalidArgument (as on a file system without O_DIRECT), if `refuse`.
  void RefuseDirectReads(bool refuse) { refuse_direct_reads_ = refuse; }
  // Operations failed on purpose since construction.
  uint64_t faults_injected() const;
  // The latest of them, e.g. "sync /tmp/.../000012.sst".
  std::string last_fault() const;

  // ---- Power loss ----

  // After `n` more operations that change the disk, the power goes: every
  // later operation fails and changes nothing, until SimulatePowerLoss.
  void CutPowerAfter(uint64_t n);
  bool power_is_off() const;
  // Turns the disk into what survives a power loss (see the top of this
  // file) and switches the power back on. Call it with no file of this
  // FaultFs open (close or abandon the store first).
  Status SimulatePowerLoss();
  // Takes the disk as it is as durable, forgetting what was not synced: for
  // a test that changes files under `root` itself.
  void AssumeDurable();

  // ---- rocksdb::FileSystem ----

  rocksdb::IOStatus NewSequentialFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSSequentialFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewWritableFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& f, const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& f, const std::string& old_f,
      const rocksdb::FileOptions& o,
      std::unique_ptr<rocksdb::FSWritableFile>* r,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& f,
                                    const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& d,
                                 const rocksdb::IOOptions& o,
                                 std::unique_ptr<rocksdb::FSDirectory>* r,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d,
                                       const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& f,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& s, const std::string& t,
                               const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& s, const std::string& t,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& f, size_t size,
                             const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewLogger(const std::string& f, const rocksdb::IOOptions& o,
                              std::shared_ptr<rocksdb::Logger>* r,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o,
                             rocksdb::FileLock** l,
                             rocksdb::IODebugContext* dbg) override;

  // ---- For the file wrappers (fault_fs.cc). ----

  // Counts an operation of `kind` (0: none, only the power check) on
  // `path` and says whether it may run: not if the power is off or a fault
  // hits it.
  rocksdb::IOStatus Admit(uint32_t kind, std::string_view verb,
                          const std::string& path);
  // The file at `path` (open for writing) was synced: its data so far is
  // durable.
  void FileSynced(const std::string& path);
  // The directory `dir` was fsynced: its entries are durable.
  void DirSynced(const std::string& dir);
  bool real_syncs() const { return real_syncs_; }

  // The wrappers of open files (fault_fs_files.cc).
  std::unique_ptr<rocksdb::FSWritableFile> Wrap(
      std::unique_ptr<rocksdb::FSWritableFile> f, const std::string& path);
  std::unique_ptr<rocksdb::FSRandomAccessFile> Wrap(
      std::unique_ptr<rocksdb::FSRandomAccessFile> f, const std::string& path);
  std::unique_ptr<rocksdb::FSSequentialFile> Wrap(
      std::unique_ptr<rocksdb::FSSequentialFile> f, const std::string& path);
  std::unique_ptr<rocksdb::FSRandomRWFile> Wrap(
      std::unique_ptr<rocksdb::FSRandomRWFile> f, const std::string& path);
  std::unique_ptr<rocksdb::FSDirectory> Wrap(
      std::unique_ptr<rocksdb::FSDirectory> d, const std::string& path);

 private:
  struct Entry {
    bool is_dir = false;
    uint64_t inode = 0;
  };
  using Listing = std::map<std::string, Entry>;

  // Admits an operation of `kind` on `path` that changes directory
  // entries; records the entries of the directories holding `changed` and
  // keeps the inodes of `unlinked`, then runs `op`.
  template <typename Op>
  rocksdb::IOStatus ChangeEntries(uint32_t kind, std::string_view verb,
                                  const std::string& path,
                                  std::initializer_list<std::string> changed,
                                  std::initializer_list<std::string> unlinked,
                                  Op op);
  // Admits opening `f` for writing (an operation of `kind`), records its
  // directory's entries, runs `open` and wraps what it opened into *r. With
  // `fresh`, or if `f` did not exist, none of its data is durable yet.
  template <typename File, typename Op>
  rocksdb::IOStatus OpenForWriting(uint32_t kind, std::string_view verb,
                                   const std::string& f, bool fresh,
                                   std::unique_ptr<File>* r, Op open);
  bool Tracked(const std::string& path) const;
  // Before a change to the entries of the directory holding `path`:
  // records them as durable if nothing changed them before.
  void BeforeEntryChange(const std::string& path);
  // Before `path` loses a name: keeps its inode alive in the trash.
  void BeforeUnlink(const std::string& path);
  // A file was created (or truncated) at `path`: none of its data is
  // durable yet.
  void FileCreated(const std::string& path);
  Status RestoreDir(const std::string& dir);
  std::string TrashPath(uint64_t inode) const;

  const std::string root_;
  const std::string trash_;
  const bool real_syncs_;
  std::atomic<bool> refuse_direct_reads_{false};

  mutable std::mutex mu_;  // Guards everything below.
  std::array<uint64_t, kNumOpKinds> counts_{};
  uint32_t fault_kinds_ = 0;
  uint64_t fault_n_ = 0;
  uint64_t fault_seen_ = 0;
  FaultType fault_type_ = FaultType::kIOError;
  bool fault_sticky_ = false;
  uint64_t faults_injected_ = 0;
  std::string last_fault_;
  std::optional<uint64_t> ops_until_power_cut_;
  bool power_off_ = false;
  // Directory -> its entries as a power loss leaves them; absent: as they
  // are on disk (nothing changed them).
  std::map<std::string, Listing> durable_entries_;
  // Inode -> bytes of it that are durable; absent: all of them.
  std::map<uint64_t, uint64_t> durable_size_;
};

}  // namespace rocksdcp::testing

#endif  // ROCKSDCP_TESTS_ROCKSDB_FAULT_FS_H_
