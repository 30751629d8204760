// KV block messages (see kv_block_message.h): the fixed header, its checks against the
// receiving cache, and the rows copied out of and into KvCache storage.
#include "kv/kv_block_message.h"

#include <bit>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kv/block_allocator.h"

namespace tandem {

namespace {

// Ranks of one job run the same build on the same kind of machine; fields are written in
// native order, which is little-endian wherever Tandem builds.
static_assert(std::endian::native == std::endian::little, "KV block messages are little-endian");

constexpr char kMagic[4] = {'T', 'K', 'V', 'B'};
// Bumped whenever the layout below changes: an older receiver refuses a newer message.
constexpr uint32_t kVersion = 1;

// The fixed header, field by field at these offsets (README.md has the table).
struct Header {
  uint32_t version = 0;
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int32_t block_size = 0;
  int32_t n_filled = 0;
  uint32_t key_type = 0;    // DType, numbered as ggml numbers it
  uint32_t value_type = 0;  // DType
  int64_t block_index = 0;
  uint64_t parent_hash = 0;
  uint64_t prefix_hash = 0;
};
constexpr size_t kHeaderBytes = 72;

// Sequential writes into and reads from a byte buffer; the reader is only ever asked for
// bytes the length check has already shown are there.
class ByteWriter {
 public:
  explicit ByteWriter(uint8_t* out) : out_(out) {}
  template <typename T>
  void put(const T& value) {
    put_bytes(&value, sizeof(T));
  }
  void put_bytes(const void* bytes, size_t n) {
    if (n > 0) std::memcpy(out_ + offset_, bytes, n);
    offset_ += n;
  }
  size_t offset() const { return offset_; }

 private:
  uint8_t* out_;
  size_t offset_ = 0;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get() {
    T value;
    TANDEM_ASSERT(offset_ + sizeof(T) <= in_.size());
    std::memcpy(&value, in_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  const uint8_t* take(size_t n) {
    TANDEM_ASSERT(offset_ + n <= in_.size());
    const uint8_t* at = in_.data() + offset_;
    offset_ += n;
    return at;
  }

 private:
  std::span<const uint8_t> in_;
  size_t offset_ = 0;
};

int64_t key_bytes(const KvCache& cache) { return dtype_row_bytes(cache.types().k, cache.shape().kv_width()); }
int64_t value_bytes(const KvCache& cache) { return dtype_row_bytes(cache.types().v, cache.shape().kv_width()); }

// As the command line names KV types ("q8_0"), or any other type's name, or its bare id.
std::string type_name(uint32_t type_id) {
  const auto traits = dtype_traits(type_id);
  if (!traits) return "type id " + std::to_string(type_id);
  const auto type = static_cast<DType>(type_id);
  return std::string(kv_type_supported(type) ? kv_type_name(type) : traits->name);
}

Header read_header(std::span<const uint8_t> message) {
  TANDEM_CHECK_INPUT(message.size() >= kHeaderBytes, "KV block message of {} bytes is shorter than its {}-byte header",
                     message.size(), kHeaderBytes);
  TANDEM_CHECK_INPUT(std::memcmp(message.data(), kMagic, sizeof(kMagic)) == 0,
                     "not a KV block message (its first 4 bytes are not TKVB)");
  ByteReader reader(message.subspan(sizeof(kMagic)));
  Header header;
  header.version = reader.get<uint32_t>();
  header.n_layers = reader.get<int64_t>();
  header.n_kv_heads = reader.get<int64_t>();
  header.head_dim = reader.get<int64_t>();
  header.block_size = reader.get<int32_t>();
  header.n_filled = reader.get<int32_t>();
  header.key_type = reader.get<uint32_t>();
  header.value_type = reader.get<uint32_t>();
  header.block_index = reader.get<int64_t>();
  header.parent_hash = reader.get<uint64_t>();
  header.prefix_hash = reader.get<uint64_t>();
  return header;
}

// Everything in the header that must match the receiving cache, checked before the length
// (which is computed from the cache's geometry, so only once the geometry is known equal).
void check_header(const Header& header, const KvCache& cache) {
  TANDEM_CHECK_INPUT(header.version == kVersion, "KV block message version {}, this build reads version {}",
                     header.version, kVersion);
  const KvShape& shape = cache.shape();
  TANDEM_CHECK_INPUT(
      header.n_layers == shape.n_layers && header.n_kv_heads == shape.n_kv_heads && header.head_dim == shape.head_dim,
      "KV block message for {} layers x {} KV heads x {} head_dim, this cache holds {} x {} x {}", header.n_layers,
      header.n_kv_heads, header.head_dim, shape.n_layers, shape.n_kv_heads, shape.head_dim);
  TANDEM_CHECK_INPUT(header.key_type == static_cast<uint32_t>(cache.types().k) &&
                         header.value_type == static_cast<uint32_t>(cache.types().v),
                     "KV block message stores K {}, V {}; this cache stores {}", type_name(header.key_type),
                     type_name(header.value_type), kv_types_description(cache.types()));
  TANDEM_CHECK_INPUT(header.block_size == cache.block_size(),
                     "KV block message for blocks of {} positions, this cache's blocks hold {}", header.block_size,
                     cache.block_size());
  TANDEM_CHECK_INPUT(header.n_filled >= 1 && header.n_filled <= header.block_size,
                     "KV block message fills {} positions of a {}-position block", header.n_filled, header.block_size);
  TANDEM_CHECK_INPUT(header.block_index >= 0, "KV block message for block {} of its sequence", header.block_index);
}

}  // namespace

int64_t kv_block_message_bytes(const KvCache& cache, int32_t n_filled) {
  const int64_t row_pair = key_bytes(cache) + value_bytes(cache);
  return static_cast<int64_t>(kHeaderBytes) + n_filled * static_cast<int64_t>(sizeof(int32_t)) +
         cache.shape().n_layers * n_filled * row_pair;
}

void pack_kv_block(const KvCache& cache, int32_t block, int64_t block_index, uint64_t parent_hash,
                   std::span<const int32_t> tokens, std::vector<uint8_t>& out) {
  const auto n_filled = static_cast<int32_t>(tokens.size());
  TANDEM_ASSERT(block >= 0 && block < cache.n_blocks() && block_index >= 0);
  TANDEM_ASSERT(n_filled >= 1 && n_filled <= cache.block_size());
  const uint64_t prefix_hash =
      n_filled == cache.block_size() ? BlockAllocator::hash_block(parent_hash, tokens) : kNoPrefixHash;
  const KvShape& shape = cache.shape();
  out.resize(static_cast<size_t>(kv_block_message_bytes(cache, n_filled)));
  ByteWriter writer(out.data());
  writer.put_bytes(kMagic, sizeof(kMagic));
  writer.put(kVersion);
  writer.put(shape.n_layers);
  writer.put(shape.n_kv_heads);
  writer.put(shape.head_dim);
  writer.put(cache.block_size());
  writer.put(n_filled);
  writer.put(static_cast<uint32_t>(cache.types().k));
  writer.put(static_cast<uint32_t>(cache.types().v));
  writer.put(block_index);
  writer.put(parent_hash);
  writer.put(prefix_hash);
  TANDEM_ASSERT(writer.offset() == kHeaderBytes);
  writer.put_bytes(tokens.data(), tokens.size_bytes());
  const int64_t first_slot = static_cast<int64_t>(block) * cache.block_size();
  for (int64_t layer = 0; layer < shape.n_layers; ++layer) {
    const KvRows keys = cache.keys(layer);
    const KvRows values = cache.values(layer);
    for (int64_t i = 0; i < n_filled; ++i)
      writer.put_bytes(keys.data + (first_slot + i) * keys.row_bytes, static_cast<size_t>(key_bytes(cache)));
    for (int64_t i = 0; i < n_filled; ++i)
      writer.put_bytes(values.data + (first_slot + i) * values.row_bytes, static_cast<size_t>(value_bytes(cache)));
  }
  TANDEM_ASSERT(writer.offset() == out.size());
}

KvBlockInfo read_kv_block_info(std::span<const uint8_t> message, const KvCache& cache) {
  const Header header = read_header(message);
  check_header(header, cache);
  const int64_t expected = kv_block_message_bytes(cache, header.n_filled);
  TANDEM_CHECK_INPUT(static_cast<int64_t>(message.size()) == expected,
                     "KV block message of {} bytes, but its header describes {} bytes", message.size(), expected);
  KvBlockInfo info;
  info.block_index = header.block_index;
  info.parent_hash = header.parent_hash;
  info.prefix_hash = header.prefix_hash;
  info.tokens.resize(static_cast<size_t>(header.n_filled));
  std::memcpy(info.tokens.data(), message.data() + kHeaderBytes, info.tokens.size() * sizeof(int32_t));
  for (int32_t token : info.tokens)
    TANDEM_CHECK_INPUT(token >= 0, "KV block message carries the negative token id {}", token);
  // The hash is what a decode rank publishes the block under: a message whose hash does not
  // follow from its tokens would put wrong K/V behind a prefix other requests then reuse.
  const uint64_t expected_hash = header.n_filled == header.block_size
                                     ? BlockAllocator::hash_block(header.parent_hash, info.tokens)
                                     : kNoPrefixHash;
  TANDEM_CHECK_INPUT(header.prefix_hash == expected_hash,
                     "KV block message's prefix hash {:016x} does not follow from its parent hash and tokens "
                     "({:016x})",
                     header.prefix_hash, expected_hash);
  return info;
}

KvBlockInfo apply_kv_block(std::span<const uint8_t> message, KvCache& cache, int32_t block) {
  KvBlockInfo info = read_kv_block_info(message, cache);
  TANDEM_ASSERT(block >= 0 && block < cache.n_blocks());
  const auto n_filled = static_cast<size_t>(info.n_filled());
  ByteReader reader(message.subspan(kHeaderBytes + n_filled * sizeof(int32_t)));
  const auto key_row = static_cast<size_t>(key_bytes(cache));
  const auto value_row = static_cast<size_t>(value_bytes(cache));
  const int64_t first_slot = static_cast<int64_t>(block) * cache.block_size();
  for (int64_t layer = 0; layer < cache.shape().n_layers; ++layer) {
    const uint8_t* keys = reader.take(n_filled * key_row);
    const uint8_t* values = reader.take(n_filled * value_row);
    for (size_t i = 0; i < n_filled; ++i)
      cache.store_converted(layer, first_slot + static_cast<int64_t>(i), keys + i * key_row, values + i * value_row);
  }
  return info;
}

}  // namespace tandem
