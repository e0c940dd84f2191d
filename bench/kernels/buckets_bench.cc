// The bucket planner on 10 million sequence lengths, end to end: read the
// file, parse, histogram, plan, through PlanBucketsForFile (what `anxin
// buckets plan` runs), for the same lengths written three ways (one number a
// line, a length,count CSV, JSON Lines). Beside it, in the same process, the
// previous reader (the whole file in memory, a vector of every record, each
// JSON line parsed by nlohmann::json) on the same files: both must give the
// same histogram and plan, exactly. Then the plan alone, next to the O(K n^2)
// dynamic programme on the same histogram (the ablation for SMAWK); both must
// find the same padding.
//
//   kernels_buckets_bench [--sequences 10000000] [--max-buckets 8] [--dir /tmp] [--reps 3]
//
// Lengths follow a log-normal distribution (median 1,500 tokens, capped at
// 32,768), like the long tail of a pre-training corpus; fixed seed. The files
// go to a fresh directory under --dir and are read from the page cache.
// Prints one JSON object a line; exit 1 when any two results differ, 3 when
// a call fails.
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"
#include "anxin/kernels/buckets.h"

namespace {

using anxin::Result;
using anxin::kernels::BucketPlan;
using anxin::kernels::BucketPlanOptions;
using anxin::kernels::LengthHistogram;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds of this process: on a shared machine, what the work cost
// whatever else ran beside it (the planner is single-threaded).
double Cpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The reader before it read in blocks and scanned JSON, kept as it was (error
// words shortened): the reference the fast path must agree with and the
// figure it is set beside.
namespace baseline {

struct Entry {
  int64_t length;
  uint64_t count;
};

std::string Excerpt(std::string_view s) {
  std::string e(s.substr(0, 40));
  if (s.size() > 40) e += "...";
  return e;
}

Result<int64_t> ParseLength(std::string_view field, const std::string& where) {
  field = anxin::Trim(field);
  if (field.empty()) return anxin::InvalidArgument(where + ": empty field where a length belongs");
  int64_t v = 0;
  const char* end = field.data() + field.size();
  auto [p, ec] = std::from_chars(field.data(), end, v);
  if (ec == std::errc::result_out_of_range)
    return anxin::InvalidArgument(where + ": '" + Excerpt(field) + "' is too large for a length");
  if (ec != std::errc() || p != end) {
    double d = 0;
    auto [q, ec2] = std::from_chars(field.data(), end, d);
    if (ec2 == std::errc() && q == end && std::isfinite(d) && d == std::floor(d) && d < 9e15) {
      v = static_cast<int64_t>(d);
    } else {
      return anxin::InvalidArgument(where + ": '" + Excerpt(field) +
                                    "' is not a number: give one whole number of tokens");
    }
  }
  if (v < 0)
    return anxin::InvalidArgument(where + ": '" + Excerpt(field) +
                                  "' is negative: lengths count tokens, 0 or more");
  return v;
}

Result<int64_t> JsonLength(const nlohmann::json& j, const std::string& where) {
  static constexpr const char* kNumberKeys[] = {"length",   "len",     "num_tokens",
                                                "n_tokens", "seq_len", "sequence_length"};
  static constexpr const char* kTokenKeys[] = {"input_ids", "token_ids", "tokens", "ids"};
  if (!j.is_object()) return anxin::InvalidArgument(where + ": not a JSON object");
  for (const char* key : kNumberKeys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_number_integer()) {
      int64_t v = it->get<int64_t>();
      if (v < 0) return anxin::InvalidArgument(where + ": negative");
      return v;
    }
    if (it->is_number_float()) return ParseLength(it->dump(), where + ": \"" + key + "\"");
    return anxin::InvalidArgument(where + ": not a whole number of tokens");
  }
  for (const char* key : kTokenKeys) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_array()) return anxin::InvalidArgument(where + ": not an array of token ids");
    return static_cast<int64_t>(it->size());
  }
  return anxin::InvalidArgument(where + ": no length field");
}

LengthHistogram Histogram(std::vector<Entry> entries, std::string format) {
  LengthHistogram h;
  h.format = std::move(format);
  int64_t max_len = 0;
  for (const Entry& e : entries) max_len = std::max(max_len, e.length);
  if (max_len <= (int64_t{1} << 24)) {
    std::vector<uint64_t> dense(static_cast<size_t>(max_len) + 1, 0);
    for (const Entry& e : entries) dense[static_cast<size_t>(e.length)] += e.count;
    for (size_t l = 0; l < dense.size(); ++l) {
      if (dense[l] == 0) continue;
      h.lengths.push_back(static_cast<int64_t>(l));
      h.counts.push_back(dense[l]);
    }
  } else {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.length < b.length; });
    for (const Entry& e : entries) {
      if (e.count == 0) continue;
      if (!h.lengths.empty() && h.lengths.back() == e.length) {
        h.counts.back() += e.count;
      } else {
        h.lengths.push_back(e.length);
        h.counts.push_back(e.count);
      }
    }
  }
  for (size_t i = 0; i < h.lengths.size(); ++i) {
    h.sequences += h.counts[i];
    h.tokens += h.counts[i] * static_cast<uint64_t>(h.lengths[i]);
  }
  return h;
}

Result<LengthHistogram> ReadLengths(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(std::string text,
                         anxin::ReadInputFile(path, "--lengths", size_t{4} << 30));
  std::vector<Entry> entries;
  std::string format;
  size_t line_no = 0;
  size_t pos = 0;
  bool csv_header_allowed = true;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view t = anxin::Trim(line);
    if (t.empty() || t.front() == '#') continue;
    if (format.empty()) {
      format = t.front() == '{'                        ? "jsonl"
               : t.find(',') != std::string_view::npos ? "csv"
                                                       : "numbers";
    }
    auto where = [&] { return path + ":" + std::to_string(line_no); };
    if (format == "numbers") {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || p != t.data() + t.size() || v < 0) {
        ANXIN_ASSIGN_OR_RETURN(v, ParseLength(t, where()));
      }
      entries.push_back({v, 1});
    } else if (format == "csv") {
      auto fields = anxin::Split(t, ',');
      if (fields.size() != 2) return anxin::InvalidArgument(where() + ": not two fields");
      if (csv_header_allowed && !anxin::Trim(fields[0]).empty() &&
          !std::isdigit(static_cast<unsigned char>(anxin::Trim(fields[0]).front()))) {
        if (anxin::Trim(fields[0]).front() != '-') {
          csv_header_allowed = false;
          continue;
        }
      }
      csv_header_allowed = false;
      ANXIN_ASSIGN_OR_RETURN(int64_t len, ParseLength(fields[0], where() + ": length"));
      ANXIN_ASSIGN_OR_RETURN(int64_t count, ParseLength(fields[1], where() + ": count"));
      entries.push_back({len, static_cast<uint64_t>(count)});
    } else {
      nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
      if (j.is_discarded()) return anxin::InvalidArgument(where() + ": not valid JSON");
      ANXIN_ASSIGN_OR_RETURN(int64_t len, JsonLength(j, where()));
      entries.push_back({len, 1});
    }
  }
  if (entries.empty()) return anxin::InvalidArgument(path + ": no lengths in the file");
  return Histogram(std::move(entries), format);
}

Result<BucketPlan> PlanBucketsForFile(const std::string& path, const BucketPlanOptions& options) {
  ANXIN_ASSIGN_OR_RETURN(LengthHistogram h, ReadLengths(path));
  return anxin::kernels::PlanBuckets(h, options);
}

}  // namespace baseline

bool SameHistogram(const LengthHistogram& a, const LengthHistogram& b) {
  return a.lengths == b.lengths && a.counts == b.counts && a.sequences == b.sequences &&
         a.tokens == b.tokens && a.format == b.format;
}

// Everything the command prints, text and --json, compared whole.
std::string PlanImage(const BucketPlan& p) {
  return anxin::kernels::BucketPlanText(p) + anxin::kernels::BucketPlanJson(p).dump();
}

struct Timing {
  double wall = 0, cpu = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long sequences = 10'000'000;
  int k = 8, reps = 3;
  std::string base_dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--sequences")
      sequences = std::stol(argv[i + 1]);
    else if (a == "--max-buckets")
      k = std::stoi(argv[i + 1]);
    else if (a == "--dir")
      base_dir = argv[i + 1];
    else if (a == "--reps")
      reps = std::max(1, std::stoi(argv[i + 1]));
  }
  std::string templ = base_dir + "/anxin-buckets-bench-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    std::perror(templ.c_str());
    return 3;
  }
  const std::string dir = templ;

  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(std::log(1500.0), 0.9);
  std::vector<int64_t> lengths(static_cast<size_t>(sequences));
  for (int64_t& len : lengths) len = std::min<long>(32768, std::max<long>(1, std::lround(d(rng))));

  // The same lengths three ways; every form must give the same histogram.
  struct Form {
    const char* name;
    std::string path;
    size_t bytes = 0;
  };
  std::vector<Form> forms = {{"numbers", dir + "/lengths.txt"},
                             {"csv", dir + "/lengths.csv"},
                             {"jsonl", dir + "/lengths.jsonl"}};
  for (Form& f : forms) {
    std::FILE* out = std::fopen(f.path.c_str(), "w");
    if (out == nullptr) {
      std::perror(f.path.c_str());
      return 3;
    }
    std::string chunk = std::string(f.name) == "csv" ? "length,count\n" : "";
    for (size_t i = 0; i < lengths.size(); ++i) {
      std::string len = std::to_string(lengths[i]);
      if (std::string(f.name) == "numbers") {
        chunk += len + "\n";
      } else if (std::string(f.name) == "csv") {
        chunk += len + ",1\n";
      } else {
        chunk += "{\"id\": " + std::to_string(i) + ", \"length\": " + len + "}\n";
      }
      if (chunk.size() > (1 << 20) || i + 1 == lengths.size()) {
        std::fwrite(chunk.data(), 1, chunk.size(), out);
        f.bytes += chunk.size();
        chunk.clear();
      }
    }
    if (std::fclose(out) != 0) {
      std::perror(f.path.c_str());
      return 3;
    }
  }

  BucketPlanOptions opts;
  opts.max_buckets = k;
  int status = 0;
  std::string first_plan;
  LengthHistogram h;
  for (const Form& f : forms) {
    // The fast path, reps times; every call must succeed with the same plan.
    std::vector<double> wall, cpu;
    std::string image;
    for (int r = 0; r < reps; ++r) {
      double t0 = Now(), c0 = Cpu();
      auto plan = anxin::kernels::PlanBucketsForFile(f.path, opts);
      wall.push_back(Now() - t0);
      cpu.push_back(Cpu() - c0);
      if (!plan) {
        std::fprintf(stderr, "error: %s: %s\n", f.name, plan.error().ToString().c_str());
        return 3;
      }
      std::string this_image = PlanImage(*plan);
      if (r > 0 && this_image != image) {
        std::fprintf(stderr, "error: %s: run %d planned differently\n", f.name, r + 1);
        status = 1;
      }
      image = this_image;
    }
    // The previous reader, once (it is the slow one), on the same file.
    double t0 = Now(), c0 = Cpu();
    auto old_plan = baseline::PlanBucketsForFile(f.path, opts);
    Timing old{Now() - t0, Cpu() - c0};
    if (!old_plan) {
      std::fprintf(stderr, "error: %s: baseline: %s\n", f.name,
                   old_plan.error().ToString().c_str());
      return 3;
    }
    bool same_plan = PlanImage(*old_plan) == image;
    auto new_h = anxin::kernels::ReadLengths(f.path);
    auto old_h = baseline::ReadLengths(f.path);
    if (!new_h || !old_h) return 3;
    bool same_histogram = SameHistogram(*new_h, *old_h);
    // Across forms only the format name differs.
    if (first_plan.empty()) {
      first_plan = image;
      h = *new_h;
    }
    bool same_as_numbers = image == first_plan && new_h->lengths == h.lengths &&
                           new_h->counts == h.counts &&
                           new_h->sequences == static_cast<uint64_t>(sequences);
    if (!same_plan || !same_histogram || !same_as_numbers) {
      std::fprintf(stderr,
                   "error: %s: same plan as the previous reader: %d, same histogram: %d, same "
                   "as the numbers file: %d\n",
                   f.name, same_plan, same_histogram, same_as_numbers);
      status = 1;
    }
    std::printf(
        "{\"form\": \"%s\", \"sequences\": %ld, \"max_buckets\": %d, \"file_bytes\": %zu, "
        "\"reps\": %d, \"end_to_end_s\": %.3f, \"end_to_end_cpu_s\": %.3f, "
        "\"end_to_end_worst_s\": %.3f, \"end_to_end_worst_cpu_s\": %.3f, \"previous_s\": %.3f, "
        "\"previous_cpu_s\": %.3f, \"same_plan\": %s, \"same_histogram\": %s}\n",
        f.name, sequences, k, f.bytes, reps, Median(wall), Median(cpu),
        *std::max_element(wall.begin(), wall.end()), *std::max_element(cpu.begin(), cpu.end()),
        old.wall, old.cpu, same_plan ? "true" : "false", same_histogram ? "true" : "false");
    std::fflush(stdout);
    std::remove(f.path.c_str());
  }
  rmdir(dir.c_str());

  for (int64_t align : {128, 16, 1}) {
    opts.align = align;
    double t0 = Now(), c0 = Cpu();
    auto p = anxin::kernels::PlanBuckets(h, opts);
    double plan_s = Now() - t0, plan_cpu = Cpu() - c0;
    if (!p) return 3;
    // The same groups the planner cuts, for the O(K n^2) programme.
    std::vector<int64_t> aligned;
    std::vector<uint64_t> counts, real;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      int64_t a = (std::max<int64_t>(h.lengths[i], 1) + align - 1) / align * align;
      if (!aligned.empty() && aligned.back() == a) {
        counts.back() += h.counts[i];
        real.back() += h.counts[i] * static_cast<uint64_t>(h.lengths[i]);
      } else {
        aligned.push_back(a);
        counts.push_back(h.counts[i]);
        real.push_back(h.counts[i] * static_cast<uint64_t>(h.lengths[i]));
      }
    }
    double brute_s = -1;
    if (aligned.size() <= 4096) {
      c0 = Cpu();
      uint64_t b = anxin::kernels::internal::BruteForcePadding(aligned, counts, real, k);
      brute_s = Cpu() - c0;
      if (b != p->padding_by_k.back()) {
        std::fprintf(stderr, "error: align %ld: SMAWK %lu, brute force %lu padded tokens\n",
                     static_cast<long>(align), static_cast<unsigned long>(p->padding_by_k.back()),
                     static_cast<unsigned long>(b));
        status = 1;
      }
    }
    std::printf(
        "{\"sequences\": %ld, \"max_buckets\": %d, \"align\": %ld, \"distinct\": %zu, "
        "\"plan_s\": %.6f, \"plan_cpu_s\": %.6f, \"brute_force_cpu_s\": %.6f, "
        "\"padded_tokens\": %lu, \"waste\": %.4f}\n",
        sequences, k, static_cast<long>(align), aligned.size(), plan_s, plan_cpu, brute_s,
        static_cast<unsigned long>(p->padding_by_k.back()), p->schemes.back().waste);
  }
  return status;
}
