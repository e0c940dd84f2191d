// Every reader on files written by NumPy (tests/fixtures/compare/reader_cases.py),
// and truncated or corrupt files giving errors that name the file and offset.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "anxin/base/testing.h"
#include "anxin/compare/dump.h"
#include "anxin/compare/dump_compare.h"
#include "anxin/compare/npy.h"
#include "anxin/compare/npz.h"
#include "anxin/compare/safetensors.h"
#include "anxin/compare/testing_util.h"

namespace anxin::compare {
namespace {

using ::anxin::testing::HasCode;
using ::anxin::testing::IsOk;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

class Readers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir();
    ASSERT_EQ(testing::RunPython({testing::FixturePath("reader_cases.py"), dir_->path()}), 0);
    expected_ = new json(json::parse(testing::ReadAll(*dir_ / "expected.json")));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete dir_;
  }
  static void WriteBytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  static testing::ScratchDir* dir_;
  static json* expected_;
};
testing::ScratchDir* Readers::dir_ = nullptr;
json* Readers::expected_ = nullptr;

TEST_F(Readers, ReadEveryFileNumpyWrote) {
  ASSERT_GE(expected_->size(), 30u);
  for (auto it = expected_->begin(); it != expected_->end(); ++it) {
    SCOPED_TRACE(it.key());
    auto dump = LoadDump(*dir_ / it.key(), {});
    ASSERT_THAT(dump, IsOk());
    const json& want = it.value();
    ASSERT_EQ(dump->tensors.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const Tensor& t = dump->tensors[i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, want[i]["name"].get<std::string>());
      ASSERT_TRUE(t.dtype.has_value());
      EXPECT_EQ(DTypeName(*t.dtype), want[i]["dtype"].get<std::string>());
      EXPECT_EQ(t.shape, want[i]["shape"].get<std::vector<int64_t>>());
      ASSERT_TRUE(t.HasData());
      std::vector<double> got(t.NumElements());
      if (!got.empty()) t.ReadDoubles(0, got.size(), got.data());
      const json& vals = want[i]["values"];
      ASSERT_EQ(got.size(), vals.size());
      for (size_t k = 0; k < got.size(); ++k) {
        if (vals[k].is_string()) {
          std::string s = vals[k].get<std::string>();
          if (s == "nan")
            EXPECT_TRUE(std::isnan(got[k])) << k;
          else
            EXPECT_EQ(got[k], s == "inf" ? HUGE_VAL : -HUGE_VAL) << k;
        } else {
          EXPECT_EQ(got[k], vals[k].get<double>()) << k;
        }
      }
    }
  }
}

TEST_F(Readers, RawTwoByteVoidNeedsToBeNamed) {
  std::string path = *dir_ / "raw_v2.npy";
  EXPECT_THAT(ReadNpyFile(path, {}),
              HasCode(ErrorCode::kInvalidArgument, AllOf(HasSubstr(path), HasSubstr("--void-as"))));
  auto t = ReadNpyFile(path, {.void_as = DType::kBFloat16});
  ASSERT_THAT(t, IsOk());
  double v;
  t->ReadDoubles(0, 1, &v);
  EXPECT_EQ(v, 1.0);
}

TEST_F(Readers, ObjectArraysAndPickleFilesAreRejected) {
  EXPECT_THAT(ReadNpyFile(*dir_ / "object.npy", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("Python objects")));
  WriteBytes(*dir_ / "t.pt", "PK\x03\x04");
  EXPECT_THAT(LoadDump(*dir_ / "t.pt", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("torch.load")));
}

TEST_F(Readers, AFifoIsRefusedNotWaitedOn) {
  // Opening a FIFO for reading blocks until a writer comes: without care, a
  // FIFO named like a tensor file would hang the comparison for good.
  const std::string fifo = *dir_ / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(ReadNpyFile(fifo, {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr(fifo + ": not a regular file")));
  // The same file named by an msprobe dump.json.
  const std::string dump = *dir_ / "fifo_dump";
  std::filesystem::create_directories(dump + "/dump_tensor_data");
  WriteBytes(dump + "/dump.json",
             R"({"task": "tensor", "data": {"op": {"output": [{"type": "torch.Tensor", )"
             R"("dtype": "torch.float32", "shape": [4], "data_name": "x.npy"}]}}})");
  ASSERT_EQ(::mkfifo((dump + "/dump_tensor_data/x.npy").c_str(), 0600), 0);
  EXPECT_THAT(LoadDump(dump, {}), HasCode(ErrorCode::kInvalidArgument,
                                          HasSubstr("dump_tensor_data/x.npy: not a regular file")));
}

TEST_F(Readers, TruncatedFilesNameTheFileAndTheOffset) {
  for (const char* name : {"float32_le.npy", "version2.npy", "stored.npz", "deflated.npz",
                           "zip64.npz", "model.safetensors"}) {
    std::string bytes = testing::ReadAll(*dir_ / name);
    std::string cut = *dir_ / (std::string("cut_") + name);
    for (size_t len = 0; len < bytes.size(); len += std::max<size_t>(1, bytes.size() / 60)) {
      SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(len));
      WriteBytes(cut, bytes.substr(0, len));
      auto d = LoadDump(cut, {});
      ASSERT_FALSE(d.has_value());
      EXPECT_THAT(d.error().Describe(), AllOf(HasSubstr(cut), HasSubstr("offset")));
      EXPECT_EQ(d.error().code(), ErrorCode::kDataLoss) << d.error().Describe();
    }
  }
}

TEST_F(Readers, CorruptBytesAreErrorsNotCrashes) {
  std::string bytes = testing::ReadAll(*dir_ / "deflated.npz");
  std::string bad = *dir_ / "bad.npz";
  // Flip bytes inside the first member's deflate stream.
  std::string b = bytes;
  for (size_t i = 60; i < 120; ++i) b[i] = static_cast<char>(b[i] ^ 0x5a);
  WriteBytes(bad, b);
  auto d = LoadDump(bad, {});
  ASSERT_FALSE(d.has_value());
  EXPECT_THAT(d.error().Describe(), AllOf(HasSubstr(bad), HasSubstr("offset")));

  std::string npy = testing::ReadAll(*dir_ / "float32_le.npy");
  npy[0] = 'X';
  WriteBytes(*dir_ / "bad.npy", npy);
  EXPECT_THAT(LoadDump(*dir_ / "bad.npy", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("offset 0: not a .npy file")));
  npy = testing::ReadAll(*dir_ / "float32_le.npy");
  npy.replace(npy.find("shape"), 5, "shope");
  WriteBytes(*dir_ / "bad.npy", npy);
  EXPECT_THAT(LoadDump(*dir_ / "bad.npy", {}),
              HasCode(ErrorCode::kDataLoss, HasSubstr("unexpected key 'shope'")));

  std::string st = testing::ReadAll(*dir_ / "model.safetensors");
  st.replace(st.find("\"F32\""), 5, "\"C64\"");
  WriteBytes(*dir_ / "bad.safetensors", st);
  EXPECT_THAT(LoadDump(*dir_ / "bad.safetensors", {}),
              HasCode(ErrorCode::kInvalidArgument, HasSubstr("dtype C64 is not supported")));
}

// Resident kilobytes of the mappings of path in this process (/proc/self/smaps).
uint64_t MappedKiB(const std::string& path) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t kib = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      ours = line.size() >= path.size() &&
             line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (ours && line.rfind("Rss:", 0) == 0) {
      kib += std::stoull(line.substr(4));
    }
  }
  return kib;
}

// Opening a tensor maps none of its pages; reading maps them; releasing a
// range drops it (rounded out to 2 MiB blocks) and the rest stays, with one
// batched call or with one madvise per range.
TEST(PageRelease, OpeningMapsNothingAndReleasesDropWhatWasRead) {
  testing::ScratchDir dir;
  const std::string path = dir / "big.npy";
  constexpr uint64_t kN = uint64_t{4} << 20;  // float32: 16 MiB of data
  {
    std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(kN) + ",), }";
    header.resize(118, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    f.write(reinterpret_cast<const char*>(&len), 2);
    f << header;
    std::vector<float> v(kN, 1.5f);
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(kN * 4));
  }
  for (bool batched : {true, false}) {
    SCOPED_TRACE(batched ? "process_madvise" : "madvise");
    auto t = ReadNpyFile(path, {});
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(MappedKiB(path), 0u);
    double sum = 0;
    std::vector<double> buf(4096);
    for (uint64_t i = 0; i < kN; i += buf.size()) {
      t->ReadDoubles(i, buf.size(), buf.data());
      sum += buf[0];
    }
    EXPECT_EQ(sum, 1.5 * static_cast<double>(kN / buf.size()));
    EXPECT_GE(MappedKiB(path), 15u << 10);
    {
      PageReleaser releaser(uint64_t{64} << 20, batched);
      releaser.Add(*t, 0, kN / 4);       // the first 4 MiB...
      releaser.Add(*t, kN / 4, kN / 4);  // ...and the next, merged into one range
      releaser.Flush();
      // Data bytes [0, 8 MiB) lie at file offsets [128, 8 MiB + 128): rounded
      // out, [0, 10 MiB) of the file is dropped and the last 6 MiB stay.
      const uint64_t left = MappedKiB(path);
      EXPECT_GE(left, 6u << 10);
      EXPECT_LE(left, (6u << 10) + 4);
      releaser.Add(*t, kN / 2, kN / 2);
    }  // the destructor flushes the rest
    EXPECT_EQ(MappedKiB(path), 0u);
  }
}

TEST_F(Readers, PlainDirectoryListsTensorsInPathOrder) {
  testing::ScratchDir d;
  std::filesystem::create_directories(d / "layer1");
  std::filesystem::copy_file(*dir_ / "float32_le.npy", d / "layer1/out.npy");
  std::filesystem::copy_file(*dir_ / "stored.npz", d / "a.npz");
  std::filesystem::copy_file(*dir_ / "model.safetensors", d / "m.safetensors");
  auto dump = LoadDump(d.path(), {});
  ASSERT_THAT(dump, IsOk());
  ASSERT_GE(dump->tensors.size(), 4u);
  EXPECT_EQ(dump->tensors[0].name, "a/a");
  EXPECT_EQ(dump->tensors[1].name, "a/b");
  EXPECT_EQ(dump->tensors[2].name, "layer1/out");
  EXPECT_EQ(dump->tensors[3].name, "m/w.f32");
  EXPECT_THAT(LoadDump(d / "missing", {}), HasCode(ErrorCode::kNotFound));
}

// A checkpoint cut into shards (model-00001-of-00002.safetensors, ...) is
// named without the shard part, so two checkpoints match tensor by tensor
// whatever their number of shards.
TEST_F(Readers, ShardedCheckpointsMatchWhateverTheShardCount) {
  auto write = [](const std::string& path, const std::vector<std::string>& names) {
    std::string header = "{";
    for (size_t i = 0; i < names.size(); ++i)
      header += (i ? ", " : "") + fmt::format(R"("{}": {{"dtype": "F32", "shape": [2], )"
                                              R"("data_offsets": [{}, {}]}})",
                                              names[i], 8 * i, 8 * i + 8);
    header += "}";
    std::string bytes(8, '\0');
    for (int k = 0; k < 8; ++k) bytes[k] = static_cast<char>(header.size() >> (8 * k));
    bytes += header;
    for (size_t i = 0; i < names.size(); ++i) {
      // The values follow the name, not the position in the file.
      const float v[2] = {static_cast<float>(std::hash<std::string>{}(names[i]) % 1000), 2.0f};
      bytes.append(reinterpret_cast<const char*>(v), sizeof(v));
    }
    WriteBytes(path, bytes);
  };
  testing::ScratchDir a, b;
  write(a / "model-00001-of-00002.safetensors", {"layers.0.w"});
  write(a / "model-00002-of-00002.safetensors", {"layers.1.w"});
  write(b / "model-00001-of-00001.safetensors", {"layers.0.w", "layers.1.w"});
  write(b / "extra-1-of.safetensors", {"x"});  // not a shard name: kept whole
  auto da = LoadDump(a.path(), {}), db = LoadDump(b.path(), {});
  ASSERT_THAT(da, IsOk());
  ASSERT_THAT(db, IsOk());
  ASSERT_EQ(da->tensors.size(), 2u);
  EXPECT_EQ(da->tensors[0].name, "model/layers.0.w");
  EXPECT_EQ(da->tensors[1].name, "model/layers.1.w");
  ASSERT_EQ(db->tensors.size(), 3u);
  EXPECT_EQ(db->tensors[0].name, "extra-1-of/x");
  EXPECT_EQ(db->tensors[1].name, "model/layers.0.w");
  CompareReport r = CompareDumps(*da, *db, {});
  EXPECT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pass, 2u);
  EXPECT_TRUE(r.unmatched_out.empty());
  EXPECT_THAT(r.unmatched_ref, ::testing::ElementsAre("extra-1-of/x"));
}

}  // namespace
}  // namespace anxin::compare
