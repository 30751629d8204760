// Slot files (see slot_file.h).
#include "server/slot_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "server/openai_protocol.h"

namespace tandem::server {

namespace {

constexpr std::string_view kMagic = "tandem-slot 1\n";

// A file as messages name it: its name alone (the directory is the operator's, not the client's).
std::string name_of(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

std::string slot_file_path(const std::string& directory, std::string_view filename) {
  if (directory.empty())
    throw ApiError(400, "invalid_request_error",
                   "saving and restoring slots needs the server started with --slot-save-path DIR (the directory slot "
                   "files are kept in)");
  bool control = false;
  for (const char c : filename) control |= static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (filename.empty() || filename.size() > 255 || filename.find_first_of("/\\") != std::string_view::npos ||
      filename.find("..") != std::string_view::npos || control)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("'filename' must be a bare file name in --slot-save-path (no path separator, no '..', "
                               "at most 255 bytes), not \"{}\"",
                               filename.substr(0, 80)),
                   "filename", ErrorCode::InvalidValue);
  return directory + "/" + std::string(filename);
}

int64_t write_slot_file(const std::string& path, const SlotFile& file) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TANDEM_CHECK_INPUT(out.good(), "cannot write the slot file {}", name_of(path));
  const std::string header = nlohmann::json{{"block_size", file.block_size}, {"tokens", file.tokens}}.dump() + "\n";
  out.write(kMagic.data(), static_cast<std::streamsize>(kMagic.size()));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  int64_t bytes = static_cast<int64_t>(kMagic.size() + header.size());
  for (const std::vector<uint8_t>& block : file.blocks) {
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(block.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size()));
    bytes += 8 + static_cast<int64_t>(block.size());
  }
  out.flush();
  TANDEM_CHECK_INPUT(out.good(), "writing the slot file {} failed", name_of(path));
  return bytes;
}

SlotFile read_slot_file(const std::string& path, int64_t* bytes_read) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_INPUT(in.good(), "there is no slot file {}", name_of(path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes_read != nullptr) *bytes_read = static_cast<int64_t>(bytes.size());
  TANDEM_CHECK_INPUT(bytes.starts_with(kMagic), "{} is not a Tandem slot file", name_of(path));
  const size_t header_end = bytes.find('\n', kMagic.size());
  TANDEM_CHECK_INPUT(header_end != std::string::npos, "{}: the slot file's header is cut short", name_of(path));
  SlotFile file;
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(kMagic.size(), header_end - kMagic.size()), nullptr,
                                                      /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(header.is_object() && header.contains("block_size") && header["block_size"].is_number_integer() &&
                         header.contains("tokens") && header["tokens"].is_array(),
                     "{}: the slot file's header is malformed", name_of(path));
  file.block_size = header["block_size"].get<int64_t>();
  for (const nlohmann::json& id : header["tokens"]) {
    TANDEM_CHECK_INPUT(id.is_number_integer(), "{}: the slot file's tokens are malformed", name_of(path));
    file.tokens.push_back(id.get<int32_t>());
  }
  for (size_t at = header_end + 1; at < bytes.size();) {
    TANDEM_CHECK_INPUT(bytes.size() - at >= 8, "{}: a block's length is cut short", name_of(path));
    uint64_t length = 0;
    for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
    at += 8;
    TANDEM_CHECK_INPUT(length <= bytes.size() - at, "{}: a block is cut short", name_of(path));
    file.blocks.emplace_back(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  TANDEM_CHECK_INPUT(file.block_size > 0 && static_cast<int64_t>(file.tokens.size()) ==
                                                static_cast<int64_t>(file.blocks.size()) * file.block_size + 1,
                     "{}: the slot file holds {} tokens for {} blocks of {}", name_of(path), file.tokens.size(),
                     file.blocks.size(), file.block_size);
  return file;
}

}  // namespace tandem::server
