#include "rocksdcp/device_profile.h"

namespace rocksdcp {

DeviceProfile ServerProfile() { return DeviceProfile{}; }

DeviceProfile SmallDeviceProfile() {
  DeviceProfile p;
  p.store.max_background_jobs = 1;
  p.store.max_open_files = 64;
  p.store.read_buffer_pool_bytes = 8ull << 20;
  p.store.max_total_wal_size = 16ull << 20;
  p.writer.memory_budget = 32ull << 20;
  p.writer.write_threads = 2;
  p.reader.memory_budget = 16ull << 20;
  p.reader.read_threads = 2;
  p.reader.prefetch_bytes = 64ull << 20;
  p.reader.direct_span_bytes = 2ull << 20;
  p.async.staging_budget = 128ull << 20;
  return p;
}

}  // namespace rocksdcp
