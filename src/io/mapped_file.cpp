// MappedFile over POSIX mmap. An empty file maps to an empty span (mmap rejects length 0).
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace tandem {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  TANDEM_CHECK_INPUT(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("'{}' is not a regular file", path));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    if (map == MAP_FAILED) ::close(fd);
    TANDEM_CHECK_INPUT(map != MAP_FAILED, "cannot map '{}': {}", path, std::strerror(map_errno));
    data_ = static_cast<const uint8_t*>(map);
    fd_ = fd;
  } else {
    ::close(fd);
  }
}

void MappedFile::release_pages(const void* begin, size_t n_bytes) const {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t first = (start + page - 1) / page * page;
  const uintptr_t last = (start + n_bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void MappedFile::read(const void* inside, size_t n_bytes, void* out) const {
  const auto* at = static_cast<const uint8_t*>(inside);
  TANDEM_ASSERT(at >= data_ && at + n_bytes <= data_ + size_);
  auto offset = static_cast<off_t>(at - data_);
  auto* destination = static_cast<uint8_t*>(out);
  while (n_bytes > 0) {
    const ssize_t got = ::pread(fd_, destination, n_bytes, offset);
    if (got < 0 && errno == EINTR) continue;
    TANDEM_CHECK_INPUT(got > 0, "cannot read '{}' at byte {}: {}", path_, offset,
                       got < 0 ? std::strerror(errno) : "the file is shorter than when it was opened");
    destination += got;
    offset += got;
    n_bytes -= static_cast<size_t>(got);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tandem
