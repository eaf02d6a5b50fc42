// Writes the seed corpora under corpus/ with the project's own encoders:
// small, valid values of every kind the fuzzers decode, so that fuzzing
// starts from the format rather than from random bytes.
//
//   rocksdcp_fuzz_make_seeds OUT_DIR     (writes OUT_DIR/<fuzzer>/<name>)
//
// Re-run it and commit the result when schema/ or the encoders change (see
// README.md).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "format/metadata_codec.h"
#include "format/piece_codec.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"

namespace rocksdcp::fuzz {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name,
           std::string_view bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
}

// Payload bytes that look like data, not a pattern.
std::string Payload(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (char& c : s) {
    seed = seed * 1103515245u + 12345u;
    c = static_cast<char>(seed >> 16);
  }
  return s;
}

std::string Piece(const format::PieceHeader& h, uint32_t seed) {
  const std::string payload = Payload(static_cast<size_t>(h.byte_length), seed);
  format::PieceEncoder encoder;
  // The piece fuzzer decodes every input under this key.
  return std::string(
      encoder.Encode(h, "fuzz#00000000", [&payload](uint8_t* out) {
        if (!payload.empty()) std::memcpy(out, payload.data(), payload.size());
      }));
}

// As Piece, compressed (format version 3): `payload` must compress.
std::string CompressedPiece(const format::PieceHeader& h,
                            const std::string& payload) {
  format::PieceEncoder encoder{format::PieceCompression{}};
  std::string value(
      encoder.Encode(h, "fuzz#00000000", [&payload](uint8_t* out) {
        std::memcpy(out, payload.data(), payload.size());
      }));
  if (!encoder.last_compressed()) {
    std::fprintf(stderr, "a compressed seed did not compress\n");
    std::exit(1);
  }
  return value;
}

// `n` elements of `elem` bytes whose high byte varies little, as the
// exponent bytes of trained weights do, and whose low bytes do not.
std::string WeightLike(size_t n, size_t elem, uint32_t seed) {
  std::string s = Payload(n * elem, seed);
  for (size_t i = 0; i < n; ++i) {
    s[i * elem + elem - 1] = static_cast<char>(0x3c + (s[i * elem] & 1));
  }
  return s;
}

format::PieceHeader TensorHeader(DType dtype, std::vector<int64_t> offsets,
                                 std::vector<int64_t> sizes, uint32_t piece,
                                 uint32_t num_pieces, uint64_t byte_offset,
                                 uint64_t byte_length) {
  format::PieceHeader h;
  h.kind = format::ItemKind::kTensor;
  h.dtype = dtype;
  h.chunk_offsets = std::move(offsets);
  h.chunk_sizes = std::move(sizes);
  h.piece = piece;
  h.num_pieces = num_pieces;
  h.byte_offset = byte_offset;
  h.byte_length = byte_length;
  return h;
}

void WritePieces(const fs::path& dir) {
  // Piece 1 of 3 of a 2x3 float32 chunk at [4, 0]: bytes [8, 16) of 24.
  Write(dir, "tensor_f32",
        Piece(TensorHeader(DType::kFloat32, {4, 0}, {2, 3}, 1, 3, 8, 8), 1));
  Write(
      dir, "tensor_i64_3d",
      Piece(TensorHeader(DType::kInt64, {0, 2, 0}, {2, 2, 2}, 0, 1, 0, 64), 2));
  Write(dir, "scalar_bf16",
        Piece(TensorHeader(DType::kBFloat16, {}, {}, 0, 1, 0, 2), 3));
  format::PieceHeader bytes;
  bytes.kind = format::ItemKind::kBytes;
  bytes.byte_length = 13;
  Write(dir, "bytes", Piece(bytes, 4));
  bytes.byte_length = 0;
  Write(dir, "bytes_empty", Piece(bytes, 5));

  // Compressed: a bf16 and a float32 piece of weight-like values, and
  // repetitive bytes.
  Write(dir, "compressed_bf16",
        CompressedPiece(
            TensorHeader(DType::kBFloat16, {0, 0}, {16, 32}, 0, 1, 0, 1024),
            WeightLike(512, 2, 6)));
  Write(
      dir, "compressed_f32",
      CompressedPiece(TensorHeader(DType::kFloat32, {8}, {256}, 1, 2, 512, 512),
                      WeightLike(128, 4, 7)));
  bytes.byte_length = 600;
  std::string text;
  while (text.size() < 600) text += "optimizer state, step 100; ";
  text.resize(600);
  Write(dir, "compressed_bytes", CompressedPiece(bytes, text));
}

void WriteMetadata(const fs::path& dir) {
  Write(dir, "empty", format::EncodeMetadata(Metadata{}));

  Metadata m;
  TensorStorageMetadata weight;
  weight.properties.dtype = DType::kFloat32;
  weight.properties.requires_grad = true;
  weight.size = {4, 6};
  weight.chunks = {{{0, 0}, {2, 6}}, {{2, 0}, {2, 6}}};
  m.state_dict_metadata["model.layers.0.weight"] = weight;
  TensorStorageMetadata norm;
  norm.properties.dtype = DType::kBFloat16;
  norm.size = {8};
  norm.chunks = {{{0}, {8}}};
  m.state_dict_metadata["model.norm"] = norm;
  TensorStorageMetadata step;
  step.properties.dtype = DType::kInt64;
  step.chunks = {{{}, {}}};
  m.state_dict_metadata["scalar step"] = step;
  m.state_dict_metadata["optimizer/rng"] = BytesStorageMetadata{};

  format::StorageInfo info;
  info.length = 48;
  info.num_pieces = 2;
  info.piece_bytes = 32;
  m.storage_data[MetadataIndex("model.layers.0.weight", {0, 0})] =
      format::EncodeStorageInfo(info);
  m.storage_data[MetadataIndex("model.layers.0.weight", {2, 0})] =
      format::EncodeStorageInfo(info);
  info.length = 16;
  info.num_pieces = 1;
  m.storage_data[MetadataIndex("model.norm", {0})] =
      format::EncodeStorageInfo(info);
  info.length = 8;
  m.storage_data[MetadataIndex("scalar step", std::vector<int64_t>{})] =
      format::EncodeStorageInfo(info);
  info.kind = format::ItemKind::kBytes;
  info.length = 5;
  m.storage_data[MetadataIndex("optimizer/rng")] =
      format::EncodeStorageInfo(info);
  m.planner_data = "planner";
  m.storage_meta = StorageMeta{"step-100", "save-1", std::nullopt, {"model"}};
  Write(dir, "state_dict", format::EncodeMetadata(m));
}

void WriteCatalog(const fs::path& dir) {
  CheckpointInfo entry;
  entry.id = "step-100";
  entry.column_family = "step-100";
  entry.created_unix_micros = 1764489600000000;
  entry.bytes = 268435456;
  entry.items = 70;
  entry.world_size = 2;
  entry.metadata_checksum = 0x0123456789abcdefULL;
  Write(dir, "entry", format::EncodeCatalogEntry(entry));
  entry.column_family = "step-100~2";
  Write(dir, "entry_overwritten", format::EncodeCatalogEntry(entry));

  format::StorageInfo info;
  info.length = 24;
  info.num_pieces = 3;
  info.piece_bytes = 8;
  Write(dir, "info_tensor", format::EncodeStorageInfo(info));
  info.piece_hashes = {{1, 2}, {3, 4}, {5, 6}};
  Write(dir, "info_tensor_hashed", format::EncodeStorageInfo(info));
  info.piece_hashes.clear();
  info.kind = format::ItemKind::kBytes;
  info.length = 0;
  info.num_pieces = 1;
  info.file = "staging/step-100.1/rank0-0.sst";
  Write(dir, "info_bytes_staged", format::EncodeStorageInfo(info));
}

void WriteKeys(const fs::path& dir) {
  const std::vector<int64_t> two_d = {0, 0};
  Write(dir, "tensor",
        keys::PieceKey(MetadataIndex("model.embed.weight", two_d), 1));
  Write(dir, "sharded",
        keys::PieceKey(MetadataIndex("layer", {1024, 0, 7}), 42));
  Write(dir, "scalar",
        keys::PieceKey(MetadataIndex("scalar", std::vector<int64_t>{}), 0));
  Write(dir, "bytes", keys::PieceKey(MetadataIndex("optimizer/step"), 0));
  Write(dir, "escaped",
        keys::PieceKey(MetadataIndex("with space@\xc3\xbc#%", {0}), 0));
  Write(dir, "catalog", keys::CatalogKey("step-100"));
  Write(dir, "metadata", keys::kMetadataKey);
}

}  // namespace
}  // namespace rocksdcp::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  rocksdcp::fuzz::WritePieces(out / "piece");
  rocksdcp::fuzz::WriteMetadata(out / "metadata");
  rocksdcp::fuzz::WriteCatalog(out / "catalog");
  rocksdcp::fuzz::WriteKeys(out / "keys");
  return 0;
}
