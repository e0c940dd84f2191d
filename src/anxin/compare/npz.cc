#include "anxin/compare/npz.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace anxin::compare {
namespace {

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kLocalSig = 0x04034b50;

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Member {
  std::string name;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

Result<int> OpenTempFile() {
  const char* dir = std::getenv("TMPDIR");
  std::string d = dir && *dir ? dir : "/tmp";
  int fd = ::open(d.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string tmpl = d + "/anxin-npz-XXXXXX";
  fd = ::mkstemp(tmpl.data());
  if (fd < 0) return std::unexpected(ErrnoError(errno, "create a temporary file in " + d));
  ::unlink(tmpl.c_str());
  return fd;
}

// Inflates a raw deflate stream into an unlinked temporary file and maps it.
Result<std::shared_ptr<const MappedFile>> Inflate(const std::string& label,
                                                  std::span<const uint8_t> in, uint64_t offset,
                                                  const Member& m) {
  ANXIN_ASSIGN_OR_RETURN(int fd, OpenTempFile());
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
    ::close(fd);
    return Internal("zlib inflateInit2 failed");
  }
  std::vector<uint8_t> buf(1 << 20);
  uint64_t produced = 0;
  uLong crc = crc32(0, nullptr, 0);
  size_t consumed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0) {
      size_t chunk = std::min<size_t>(in.size() - consumed, 1 << 30);
      zs.next_in = const_cast<Bytef*>(in.data() + consumed);
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    zs.next_out = buf.data();
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    size_t got = buf.size() - zs.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END) {
      if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == in.size() && got == 0) {
        inflateEnd(&zs);
        ::close(fd);
        return Corrupt(label, offset + in.size(), "deflated member is truncated");
      }
      if (rc != Z_BUF_ERROR) {
        uint64_t at = offset + (consumed - zs.avail_in);
        inflateEnd(&zs);
        ::close(fd);
        return Corrupt(
            label, at,
            std::string("corrupt deflate data: ") + (zs.msg ? zs.msg : "inflate failed"));
      }
    }
    if (produced + got > m.uncompressed) {
      inflateEnd(&zs);
      ::close(fd);
      return Corrupt(label, offset,
                     fmt::format("member inflates past its recorded size {}", m.uncompressed));
    }
    crc = crc32(crc, buf.data(), static_cast<uInt>(got));
    for (size_t w = 0; w < got;) {
      ssize_t n = ::write(fd, buf.data() + w, got - w);
      if (n < 0) {
        int e = errno;
        inflateEnd(&zs);
        ::close(fd);
        return std::unexpected(ErrnoError(e, "write the inflated " + label));
      }
      w += static_cast<size_t>(n);
    }
    produced += got;
  }
  inflateEnd(&zs);
  if (produced != m.uncompressed) {
    ::close(fd);
    return Corrupt(label, offset,
                   fmt::format("member inflates to {} bytes, the directory says {}", produced,
                               m.uncompressed));
  }
  if (crc != m.crc) {
    ::close(fd);
    return Corrupt(label, offset, "CRC-32 mismatch in deflated member");
  }
  return MappedFile::FromFd(label, fd, produced);
}

}  // namespace

Result<std::vector<Tensor>> ParseNpz(std::shared_ptr<const MappedFile> file,
                                     const NpyOptions& options) {
  const std::string& path = file->path();
  std::span<const uint8_t> b = file->bytes();
  const uint8_t* p = b.data();
  const uint64_t size = b.size();
  if (size < 22) return Corrupt(path, size, "truncated: too short for a zip archive");
  // The end-of-central-directory record sits in the last 22 + 65535 bytes.
  int64_t eocd = -1;
  for (int64_t i = static_cast<int64_t>(size) - 22;
       i >= 0 && i >= static_cast<int64_t>(size) - 22 - 65535; --i) {
    if (Le(p + i, 4) == kEocdSig) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0)
    return Corrupt(path, size, "no zip end-of-central-directory record (truncated or not a .npz)");
  uint64_t entries = Le(p + eocd + 10, 2);
  uint64_t cd_size = Le(p + eocd + 12, 4);
  uint64_t cd_offset = Le(p + eocd + 16, 4);
  if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    if (eocd < 20 || Le(p + eocd - 20, 4) != kZip64LocatorSig)
      return Corrupt(path, eocd, "ZIP64 fields without a ZIP64 locator");
    uint64_t z64 = Le(p + eocd - 20 + 8, 8);
    if (size < 56 || z64 > size - 56 || Le(p + z64, 4) != kZip64EocdSig)
      return Corrupt(path, eocd - 20, "ZIP64 locator points at no ZIP64 end record");
    entries = Le(p + z64 + 32, 8);
    cd_size = Le(p + z64 + 40, 8);
    cd_offset = Le(p + z64 + 48, 8);
  }
  if (cd_offset > size || cd_size > size - cd_offset)
    return Corrupt(path, eocd, "central directory lies outside the file (truncated archive?)");

  std::vector<Member> members;
  uint64_t pos = cd_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (pos + 46 > cd_offset + cd_size || Le(p + pos, 4) != kCentralSig)
      return Corrupt(path, pos, "bad central directory entry");
    Member m;
    m.method = static_cast<uint16_t>(Le(p + pos + 10, 2));
    m.crc = static_cast<uint32_t>(Le(p + pos + 16, 4));
    m.compressed = Le(p + pos + 20, 4);
    m.uncompressed = Le(p + pos + 24, 4);
    uint64_t name_len = Le(p + pos + 28, 2), extra_len = Le(p + pos + 30, 2),
             comment_len = Le(p + pos + 32, 2);
    m.local_offset = Le(p + pos + 42, 4);
    uint64_t next = pos + 46 + name_len + extra_len + comment_len;
    if (next > cd_offset + cd_size) return Corrupt(path, pos, "central directory entry overruns");
    m.name.assign(reinterpret_cast<const char*>(p + pos + 46), name_len);
    // ZIP64 extra field: the 8-byte values present are those whose 4-byte
    // field is all ones, in this order.
    const uint8_t* x = p + pos + 46 + name_len;
    for (uint64_t xo = 0; xo + 4 <= extra_len;) {
      uint64_t id = Le(x + xo, 2), len = Le(x + xo + 2, 2);
      if (xo + 4 + len > extra_len) return Corrupt(path, pos, "bad extra field");
      if (id == 1) {
        uint64_t q = xo + 4;
        auto take = [&](uint64_t& field) -> bool {
          if (field != 0xffffffff) return true;
          if (q + 8 > xo + 4 + len) return false;
          field = Le(x + q, 8);
          q += 8;
          return true;
        };
        if (!take(m.uncompressed) || !take(m.compressed) || !take(m.local_offset))
          return Corrupt(path, pos, "short ZIP64 extra field");
      }
      xo += 4 + len;
    }
    members.push_back(std::move(m));
    pos = next;
  }

  std::vector<Tensor> out;
  for (const Member& m : members) {
    std::string label = path + ":" + m.name;
    if (m.local_offset > size || size - m.local_offset < 30 ||
        Le(p + m.local_offset, 4) != kLocalSig)
      return Corrupt(path, m.local_offset, "bad local header for member '" + m.name + "'");
    uint64_t data =
        m.local_offset + 30 + Le(p + m.local_offset + 26, 2) + Le(p + m.local_offset + 28, 2);
    if (data > size || m.compressed > size - data)
      return Corrupt(path, size,
                     fmt::format("truncated: member '{}' needs {} bytes from offset {}", m.name,
                                 m.compressed, data));
    std::span<const uint8_t> raw(p + data, m.compressed);
    Result<Tensor> t = [&]() -> Result<Tensor> {
      if (m.method == 0) {
        // Offsets in errors are relative to the member: say where it starts.
        auto r = ParseNpy(file, raw,
                          label + " (member data at offset " + std::to_string(data) + ")", options);
        if (r) r->source = path, r->data_offset += data;
        return r;
      }
      if (m.method == 8) {
        ANXIN_ASSIGN_OR_RETURN(auto inflated, Inflate(label, raw, data, m));
        auto r = ParseNpy(inflated, inflated->bytes(), label, options);
        inflated->ReleasePages();
        return r;
      }
      return InvalidArgument(
          fmt::format("{}: compression method {} is not supported "
                      "(only stored and deflated)",
                      label, m.method));
    }();
    if (!t) return std::unexpected(std::move(t).error());
    std::string name = m.name;
    if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
    t->name = name;
    out.push_back(std::move(*t));
  }
  return out;
}

Result<std::vector<Tensor>> ReadNpzFile(const std::string& path, const NpyOptions& options) {
  NpyOptions opts = options;
  if (!opts.void_as) {
    ANXIN_ASSIGN_OR_RETURN(opts.void_as, ReadDTypeSidecar(path));
  }
  ANXIN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  auto ts = ParseNpz(file, opts);
  file->ReleasePages();
  return ts;
}

}  // namespace anxin::compare
