// MappedFile: a read-only memory map of a whole file (RAII). Model weights are used in
// place from the map; nothing here interprets the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tandem {

class MappedFile {
 public:
  // Throws InputError naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Tells the OS the pages wholly inside [begin, begin + n_bytes) are not needed now (they
  // are read back from the file if touched again): used once weights have been repacked.
  void release_pages(const void* begin, size_t n_bytes) const;
  // Copies the n_bytes at `inside` (a pointer into bytes()) to `out` with pread, not through
  // the map: for rows read a few at a time from a large table (an embedding looked up by
  // token), where touching the map would fault in 64 KiB around each row and keep it
  // resident. Throws InputError when the file has shrunk under the map.
  void read(const void* inside, size_t n_bytes, void* out) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept open for read()
};

}  // namespace tandem
