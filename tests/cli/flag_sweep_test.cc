// Walks every command of `anxin` as the program builds it (BuildApp) and, for
// each option that takes a number or a size, checks that it declares its
// range (flag_checks.h) and that values outside the range are refused with
// the flag named. An option added without a range fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "anxin/cli/command.h"
#include "anxin/cli/flag_checks.h"

namespace anxin::cli {
namespace {

using ::testing::HasSubstr;

struct FoundOption {
  std::vector<std::string> command;  // {"serve", "sim"}
  std::string flag;                  // "--port"
  std::optional<FlagRange> range;
  std::optional<uint64_t> min_bytes;
  bool number = false;
};

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

void Walk(CLI::App* app, std::vector<std::string> path, std::vector<FoundOption>& out) {
  for (CLI::Option* option : app->get_options()) {
    if (!option->nonpositional() || option->get_items_expected_max() == 0) continue;
    FoundOption f{path, option->get_name(), DeclaredRange(*option), DeclaredMinBytes(*option),
                  TakesNumber(*option)};
    if (f.number || f.range || f.min_bytes) out.push_back(std::move(f));
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    std::vector<std::string> p = path;
    p.push_back(sub->get_name());
    Walk(sub, p, out);
  }
}

std::vector<FoundOption> AllOptions() {
  CLI::App app("anxin", "anxin");
  ParsedCommandLine parsed;
  EXPECT_TRUE(BuildApp(app, &parsed).has_value());
  std::vector<FoundOption> out;
  Walk(&app, {}, out);
  return out;
}

// Parses `anxin COMMAND FLAG VALUE` on a freshly built app; the message of
// the parse error, or "" when it parsed.
std::string ParseError(const FoundOption& f, const std::string& value) {
  CLI::App app("anxin", "anxin");
  ParsedCommandLine parsed;
  if (!BuildApp(app, &parsed)) return "BuildApp failed";
  std::vector<std::string> args = {"anxin"};
  args.insert(args.end(), f.command.begin(), f.command.end());
  args.push_back(f.flag + "=" + value);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

TEST(FlagSweep, EveryNumericOptionDeclaresARange) {
  std::vector<FoundOption> all = AllOptions();
  int numeric = 0;
  for (const FoundOption& f : all) {
    if (!f.number) continue;
    ++numeric;
    EXPECT_TRUE(f.range.has_value())
        << "anxin " << Join(f.command) << " " << f.flag
        << " takes a number but declares no range: add ->check(InRange(...)), AtLeast, Above, "
           "Share or PortNumber (src/anxin/cli/flag_checks.h)";
  }
  // The walk reached the commands: dozens of numeric options, among them
  // the ports of the servers.
  EXPECT_GE(numeric, 80);
  for (const auto& [command, flag] :
       std::vector<std::pair<std::string, std::string>>{{"agent", "--port"},
                                                        {"notify", "--port"},
                                                        {"serve sim", "--port"},
                                                        {"serve gate", "--port"},
                                                        {"bench serve", "--concurrency"},
                                                        {"kv accuracy", "--min-cosine"}}) {
    bool found = false;
    for (const FoundOption& f : all) found |= Join(f.command) == command && f.flag == flag;
    EXPECT_TRUE(found) << command << " " << flag;
  }
}

TEST(FlagSweep, ValuesOutsideEachRangeAreRefusedNamingTheFlag) {
  int tried = 0, ranged = 0;
  for (const FoundOption& f : AllOptions()) {
    if (!f.range) continue;
    ++ranged;
    const FlagRange& r = *f.range;
    std::vector<std::string> bad = {"x"};
    if (std::isfinite(r.min)) bad.push_back(Number(r.min_exclusive ? r.min : r.min - 1));
    if (std::isfinite(r.max)) bad.push_back(Number(r.max + 1));
    for (const std::string& value : bad) {
      ++tried;
      std::string error = ParseError(f, value);
      // "--port: must be from 0 to 65535, got 70000"; a flag may have a
      // check of its own before the range (devices --count).
      EXPECT_THAT(error, HasSubstr(f.flag + ": "))
          << "anxin " << Join(f.command) << " " << f.flag << "=" << value;
    }
    // The edge of the range itself is a value the flag takes.
    double edge = std::isfinite(r.min) ? (r.min_exclusive ? r.min + 1 : r.min) : r.max;
    if (r.min_exclusive && std::isfinite(r.max) && edge > r.max) edge = r.max;
    std::string error = ParseError(f, Number(edge));
    EXPECT_THAT(error, ::testing::Not(HasSubstr(f.flag + ": must be")))
        << "anxin " << Join(f.command) << " " << f.flag << "=" << Number(edge);
  }
  // Every command was reached, and each ranged flag was tried with a
  // non-number and at least one bound outside its range.
  EXPECT_GE(ranged, 80);
  EXPECT_GE(tried, 2 * ranged);
}

TEST(FlagSweep, SizesAreRefusedBelowTheirMinimumAndWhenAmbiguous) {
  int sizes = 0;
  for (const FoundOption& f : AllOptions()) {
    if (!f.min_bytes) continue;
    ++sizes;
    const std::string where = "anxin " + Join(f.command) + " " + f.flag;
    EXPECT_THAT(ParseError(f, "80GB"), HasSubstr(f.flag + ": size '80GB' is ambiguous")) << where;
    EXPECT_THAT(ParseError(f, "-1"), HasSubstr(f.flag + ": expected a size")) << where;
    if (*f.min_bytes >= 1) {
      EXPECT_THAT(ParseError(f, "0"), HasSubstr(f.flag + ": must be at least 1 byte")) << where;
    }
    EXPECT_THAT(ParseError(f, "80GiB"), ::testing::Not(HasSubstr(f.flag + ":"))) << where;
  }
  EXPECT_GE(sizes, 8);
}

}  // namespace
}  // namespace anxin::cli
