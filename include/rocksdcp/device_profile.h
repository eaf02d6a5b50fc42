// One set of options for each kind of machine rocksdcp runs on: the store's,
// the writer's, the reader's and the AsyncCheckpointer's, chosen together.
//
//   DeviceProfile p = SmallDeviceProfile();
//   auto store = Store::Open(path, p.store);
//   auto writer = (*store)->NewWriter(p.writer);
//   auto checkpointer = AsyncCheckpointer::Create(p.async);
//
// Each field stays an ordinary options struct: change what your device
// needs after taking the profile.

#ifndef ROCKSDCP_DEVICE_PROFILE_H_
#define ROCKSDCP_DEVICE_PROFILE_H_

#include "rocksdcp/async_checkpoint.h"
#include "rocksdcp/store_options.h"

namespace rocksdcp {

struct DeviceProfile {
  StoreOptions store;
  RocksDBWriterOptions writer;
  RocksDBReaderOptions reader;
  AsyncCheckpointer::Options async;
};

// The defaults of every options struct: a server or workstation with many
// GiB of memory and an NVMe-class disk. A save's writer may hold up to
// 512 MiB, a load's reader 512 MiB plus the store's 256 MiB buffer pool,
// and an AsyncCheckpointer 1 GiB of staging memory.
DeviceProfile ServerProfile();

// A board with about 2 GiB of memory, 2-8 cores and an SD card or eMMC
// that moves 20-100 MB/s, such as an aarch64 single-board computer
// training or fine-tuning at the edge. A save or load adds at most about
// 64 MiB of memory above the state dict, and an AsyncCheckpointer holds
// 128 MiB of staging memory on top. On such storage a save or load waits
// for the disk, not the CPU, so two threads each keep it busy; fewer
// buffers cost no speed there.
//
// - store: one background job; a read buffer pool of 8 MiB (it serves
//   pieces of 1 MiB and more, which this profile does not write, and the
//   readers' O_DIRECT buffers, 2 MiB each); at most
//   16 MiB of write-ahead log, and of metadata held in memory for it; at
//   most 64 files open, each holding its table index in memory. The
//   checkpoints' block cache is 8 MiB under every profile, small enough
//   for a board already.
// - writer: memory_budget 32 MiB, two write threads, 128 KiB pieces (the
//   default).
// - reader: memory_budget 16 MiB, two read threads; up to 64 MiB read
//   ahead into the page cache while a load plans (prefetch_bytes); what
//   is not cached read with O_DIRECT 2 MiB at a time (direct_span_bytes).
// - async: staging_budget 128 MiB, prefaulted: a save of a larger state
//   dict blocks until all but 128 MiB of it is written.
DeviceProfile SmallDeviceProfile();

}  // namespace rocksdcp

#endif  // ROCKSDCP_DEVICE_PROFILE_H_
