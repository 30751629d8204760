// Slot files: what POST /slots/{id}?action=save writes and ?action=restore reads — a slot's
// tokens and the KV blocks of their whole-block prefix, each block one KV block message
// (kv/kv_block_message.h, which checks shape, types, block size and tokens when applied).
// Layout: the line "tandem-slot 1", a JSON line {"block_size", "tokens"}, then per block a
// little-endian uint64 byte count and the message. Only under --slot-save-path, by a bare name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

struct SlotFile {
  int64_t block_size = 0;
  // The blocks' tokens and one more (a restored prompt's last position is computed, not
  // imported: Engine::submit_imported's rule): blocks.size() * block_size + 1 of them.
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint8_t>> blocks;  // [n_blocks] KV block messages, in block order
};

// `filename` under `directory` (--slot-save-path). ApiError 400: no directory (naming the flag),
// or a name that is empty, too long, or has a path separator, "..", or a control character.
std::string slot_file_path(const std::string& directory, std::string_view filename);

// Bytes written. InputError when the file cannot be written.
int64_t write_slot_file(const std::string& path, const SlotFile& file);
// InputError naming the file when it is missing, not a slot file, or malformed (messages are
// checked only by the engine, when applied).
SlotFile read_slot_file(const std::string& path, int64_t* bytes_read = nullptr);

}  // namespace tandem::server
