#include "rocksdb/store_log.h"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

namespace rocksdcp {

namespace {

namespace fs = std::filesystem;

class StoreLogger final : public rocksdb::Logger {
 public:
  StoreLogger(std::string dir, uint64_t max_bytes)
      : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL),
        path_(std::move(dir) + "/LOG"),
        max_bytes_(max_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    OpenFile();
  }
  ~StoreLogger() override {
    if (fd_ >= 0) close(fd_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    // RocksDB's own line prefix: local time with microseconds, thread id.
    char line[4096];
    struct timeval now {};
    gettimeofday(&now, nullptr);
    struct tm t {};
    localtime_r(&now.tv_sec, &t);
    int n = std::snprintf(
        line, sizeof(line), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %zx ",
        t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min,
        t.tm_sec, static_cast<long>(now.tv_usec),
        std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffffff);
    if (n < 0) return;
    va_list copy;
    va_copy(copy, ap);
    const int m = std::vsnprintf(line + n, sizeof(line) - n, format, copy);
    va_end(copy);
    if (m < 0) return;
    size_t len = std::min(sizeof(line) - 2, static_cast<size_t>(n + m));
    if (line[len - 1] != '\n') line[len++] = '\n';
    Write(line, len);
  }

  size_t GetLogFileSize() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return size_;
  }

 private:
  // REQUIRES: mu_ held.
  void OpenFile() {
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    size_ = 0;
    if (fd_ >= 0) {
      const off_t end = lseek(fd_, 0, SEEK_END);
      if (end > 0) size_ = static_cast<uint64_t>(end);
    }
  }

  void Write(const char* data, size_t len) {
    std::lock_guard<std::mutex> lock(mu_);
    if (size_ + len > max_bytes_) {
      // LOG becomes LOG.old, replacing the one before; a failed rename
      // leaves LOG to grow no further: lines are dropped instead.
      if (fd_ >= 0) close(fd_);
      fd_ = -1;
      std::error_code ec;
      fs::rename(path_, path_ + ".old", ec);
      if (!ec) OpenFile();
    }
    if (fd_ < 0) return;
    while (len > 0) {
      const ssize_t w = write(fd_, data, len);
      if (w < 0 && errno == EINTR) continue;
      // A full disk or any other failure: the line is dropped, and the
      // file keeps whole lines only as far as the kernel let it.
      if (w <= 0) return;
      size_ += static_cast<uint64_t>(w);
      data += w;
      len -= static_cast<size_t>(w);
    }
  }

  const std::string path_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class NullLogger final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

}  // namespace

std::shared_ptr<rocksdb::Logger> OpenStoreLog(const std::string& dir,
                                              uint64_t max_bytes) {
  // RocksDB's own logger left one LOG.old.<microseconds> per open.
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("LOG.old.", 0) == 0) fs::remove(e.path(), ec);
  }
  return std::make_shared<StoreLogger>(dir, max_bytes);
}

std::shared_ptr<rocksdb::Logger> NullStoreLog() {
  return std::make_shared<NullLogger>();
}

}  // namespace rocksdcp
