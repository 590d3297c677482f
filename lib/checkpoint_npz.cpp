// .npz (numpy's np.savez, np.savez_compressed): a zip archive of NAME.npy members, read and
// written through libzip (ZIP64 and deflate included). Each member goes through xgrad's .npy
// reader and writer (lib/npy.cpp). xgrad's metadata is one more member, __metadata__.json.
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include <zip.h>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/op.hpp>
#include <xgrad/lib/checkpoint_formats.hpp>
#include <xgrad/lib/files.hpp>

namespace xgrad::checkpoint_detail {

namespace {

const std::string metadata_member = "__metadata__.json";

// deflate expands at most 1032:1; a member that claims more than that of its compressed size
// (plus a little) is refused before anything of its size is allocated.
constexpr std::size_t max_deflate_ratio = 1032;
// A .npy member: the largest array xgrad reads and a generous header.
constexpr std::size_t max_member_bytes = max_array_elements * 8 + (std::size_t(1) << 20);
// All members together: the element limit in float64, the metadata, and per member a header of
// up to 4 KiB (np.save writes 128 bytes).
constexpr std::size_t max_npz_bytes = max_array_elements * 8 + max_checkpoint_header;
constexpr std::size_t max_npz_header_bytes = 4096;

struct ArchiveCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;
using MemberFile = std::unique_ptr<zip_file_t, FileCloser>;

// Opens the archive on `source` (which it then owns, even on failure).
Archive open_archive(zip_source_t* source, const std::string& what) {
  zip_error_t e;
  zip_error_init(&e);
  zip_t* z = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &e);
  if (!z && zip_error_code_zip(&e) == ZIP_ER_EXISTS) {
    // Two members of one name: open it again without that check, for read_archive to name it.
    zip_error_fini(&e);
    zip_error_init(&e);
    z = zip_open_from_source(source, ZIP_RDONLY, &e);
  }
  if (!z) {
    zip_source_free(source);
    const std::string text = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw error(what + ": not a readable zip archive (.npz): " + text);
  }
  zip_error_fini(&e);
  return Archive(z);
}

// The member's bytes, after checking its declared size against the archive's size and the limits.
std::string read_member(zip_t* z, zip_uint64_t index, const zip_stat_t& st, std::size_t archive_size,
                        std::size_t limit, const std::string& what) {
  const auto fail = [&](const std::string& problem) { throw error(what + ": " + problem); };
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) fail("is encrypted");
  if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE) {
    fail("is compressed with zip method " + std::to_string(st.comp_method) +
         "; xgrad reads stored and deflated members (np.savez, np.savez_compressed)");
  }
  const std::size_t bound = st.comp_method == ZIP_CM_STORE ? st.comp_size : st.comp_size * max_deflate_ratio + 1024;
  if (st.comp_size > archive_size || st.size > bound) {
    fail("declares " + std::to_string(st.size) + " bytes (" + std::to_string(st.comp_size) + " compressed) in an archive of " +
         std::to_string(archive_size) + " bytes (truncated or corrupt)");
  }
  if (st.size > limit) {
    fail("declares " + std::to_string(st.size) + " bytes, more than the " + std::to_string(limit) + " xgrad reads");
  }
  const MemberFile f(zip_fopen_index(z, index, 0));
  if (!f) fail(std::string("cannot read it: ") + zip_error_strerror(zip_get_error(z)));
  std::string bytes(static_cast<std::size_t>(st.size), '\0');
  std::size_t done = 0;
  char extra;
  for (;;) {
    const bool full = done == bytes.size();
    const zip_int64_t n = full ? zip_fread(f.get(), &extra, 1) : zip_fread(f.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) fail(std::string("cannot read it: ") + zip_error_strerror(zip_file_get_error(f.get())));
    if (n == 0) break;
    if (full) fail("holds more than the " + std::to_string(st.size) + " bytes it declares");
    done += static_cast<std::size_t>(n);
  }
  if (done != bytes.size()) {
    fail("holds " + std::to_string(done) + " of the " + std::to_string(st.size) + " bytes it declares (truncated)");
  }
  return bytes;
}

// Member i's entry, with every field read_member needs.
zip_stat_t member_entry(zip_t* z, zip_int64_t i, const std::string& what) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
      !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD)) {
    throw error(what + ": member " + std::to_string(i) + ": cannot read its entry: " + zip_error_strerror(zip_get_error(z)));
  }
  return st;
}

StoredCheckpoint read_archive(zip_t* z, std::size_t archive_size, const std::string& what) {
  StoredCheckpoint out;
  std::set<std::string> members;
  const zip_int64_t count = zip_get_num_entries(z, 0);
  // The members' declared sizes together, before any is inflated: at most max_npz_bytes and
  // max_npz_header_bytes a member (each member alone is bounded too, in read_member).
  double declared = 0;
  for (zip_int64_t i = 0; i < count; ++i) declared += static_cast<double>(member_entry(z, i, what).size);
  const double bound = static_cast<double>(max_npz_bytes) + static_cast<double>(count) * max_npz_header_bytes;
  if (declared > bound) {
    char text[200];
    std::snprintf(text, sizeof text, ": its %lld members declare %.0f bytes in all, more than the %.0f xgrad reads from one archive",
                  static_cast<long long>(count), declared, bound);
    throw error(what + text + " (" + std::to_string(max_array_elements) + " float64 elements and their headers)");
  }
  std::size_t elements = 0;  // of the tensors read so far
  for (zip_int64_t i = 0; i < count; ++i) {
    const zip_stat_t st = member_entry(z, i, what);
    const auto index = static_cast<zip_uint64_t>(i);
    const std::string member = st.name;
    const std::string member_what = what + ": member '" + member + "'";
    if (!members.insert(member).second) {
      const bool tensor = member.size() > 4 && member.compare(member.size() - 4, 4, ".npy") == 0;
      throw error(tensor ? what + ": tensor '" + member.substr(0, member.size() - 4) + "' (" + member + ") appears twice"
                         : member_what + ": appears twice");
    }
    if (member == metadata_member) {
      out.metadata = parse_metadata_json(read_member(z, index, st, archive_size, max_checkpoint_header, member_what),
                                         member_what);
      continue;
    }
    if (member.size() < 4 || member.compare(member.size() - 4, 4, ".npy") != 0) {
      throw error(member_what + ": is not NAME.npy (an .npz holds .npy members, and xgrad's " + metadata_member + ")");
    }
    const std::string name = member.substr(0, member.size() - 4);
    check_tensor_name(name, what);
    const std::string tensor_what = what + ": tensor '" + name + "' (" + member + ")";
    StoredArray a = parse_npy(read_member(z, index, st, archive_size, max_member_bytes, tensor_what), tensor_what);
    elements += a.values.size();
    if (elements > max_array_elements) {
      throw error(tensor_what + ": the tensors so far hold " + std::to_string(elements) + " elements, more than the " +
                  std::to_string(max_array_elements) + " xgrad reads from one archive");
    }
    out.tensors.emplace_back(name, std::move(a));
  }
  return out;
}

void check_archive_size(std::size_t size, const std::string& what) {
  if (size < 22) {
    throw error(what + ": too short for a zip archive (.npz) (" + std::to_string(size) +
                " bytes; the end record alone takes 22)");
  }
}

}  // namespace

StoredCheckpoint read_npz_file(const std::string& path) {
  const std::size_t size = regular_file_size(path);
  check_archive_size(size, path);
  zip_error_t e;
  zip_error_init(&e);
  zip_source_t* source = zip_source_file_create(path.c_str(), 0, -1, &e);
  if (!source) {
    const std::string text = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw error(path + ": cannot open the file: " + text);
  }
  zip_error_fini(&e);
  const Archive z = open_archive(source, path);
  return read_archive(z.get(), size, path);
}

StoredCheckpoint parse_npz(std::string_view bytes, const std::string& what) {
  check_archive_size(bytes.size(), what);
  zip_error_t e;
  zip_error_init(&e);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &e);
  zip_error_fini(&e);
  if (!source) throw std::bad_alloc();
  const Archive z = open_archive(source, what);
  return read_archive(z.get(), bytes.size(), what);
}

std::string npz_bytes(const std::vector<EncodedTensor>& tensors, const CheckpointMetadata& metadata,
                      const std::string& what) {
  std::vector<std::pair<std::string, const std::string*>> members;
  for (const EncodedTensor& t : tensors) {
    if (t.name.find('\0') != std::string::npos) throw error(what + ": tensor name holds a NUL byte, which a zip member name cannot");
    members.emplace_back(t.name + ".npy", &t.bytes);
  }
  const std::string json = metadata_json(metadata, what);
  if (!metadata.empty()) members.emplace_back(metadata_member, &json);
  // What Python's zipfile writes for an archive of nothing; libzip would write no bytes at all.
  if (members.empty()) return std::string("PK\x05\x06", 4) + std::string(18, '\0');

  const auto fail = [&](const std::string& problem) -> void { throw error(what + ": cannot build the .npz: " + problem); };
  zip_error_t e;
  zip_error_init(&e);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &e);
  zip_error_fini(&e);
  if (!out) throw std::bad_alloc();
  zip_error_init(&e);
  zip_t* z = zip_open_from_source(out, ZIP_TRUNCATE, &e);
  const std::string open_error = z ? "" : zip_error_strerror(&e);
  zip_error_fini(&e);
  if (!z) {
    zip_source_free(out);
    fail(open_error);
  }
  zip_source_keep(out);  // it outlives the archive: the bytes are read from it after zip_close
  const std::unique_ptr<zip_source_t, void (*)(zip_source_t*)> keep(out, zip_source_free);
  Archive archive(z);
  for (const auto& [member, bytes] : members) {
    zip_source_t* s = zip_source_buffer(z, bytes->data(), bytes->size(), 0);
    if (!s) fail(zip_error_strerror(zip_get_error(z)));
    const zip_int64_t index = zip_file_add(z, member.c_str(), s, ZIP_FL_ENC_GUESS);
    if (index < 0) {
      zip_source_free(s);
      fail("member '" + member + "': " + zip_error_strerror(zip_get_error(z)));
    }
    const auto i = static_cast<zip_uint64_t>(index);
    // Stored, as np.savez writes; a fixed time, so that the same tensors give the same bytes.
    if (zip_set_file_compression(z, i, ZIP_CM_STORE, 0) != 0 || zip_file_set_mtime(z, i, 315705600, 0) != 0) {
      fail("member '" + member + "': " + zip_error_strerror(zip_get_error(z)));
    }
  }
  if (zip_close(z) != 0) fail(zip_error_strerror(zip_get_error(z)));
  archive.release();  // zip_close freed it
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_open(out) != 0) fail("cannot read the archive back");
  if (zip_source_stat(out, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    zip_source_close(out);
    fail("cannot read the archive back");
  }
  std::string result(static_cast<std::size_t>(st.size), '\0');
  std::size_t done = 0;
  while (done < result.size()) {
    const zip_int64_t n = zip_source_read(out, result.data() + done, result.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  zip_source_close(out);
  if (done != result.size()) fail("cannot read the archive back");
  return result;
}

}  // namespace xgrad::checkpoint_detail
