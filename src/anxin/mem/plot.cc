#include "anxin/mem/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "anxin/base/strings.h"

namespace anxin::mem {
namespace {

const char* ColorFor(const std::string& name) {
  if (name == "pytorch-actual") return "#d62728";
  if (name == "pytorch-model") return "#ff7f0e";
  if (name == "anxin") return "#1f77b4";
  return "#7f7f7f";
}

}  // namespace

std::string ReplaySvg(const ReplayResult& r, const std::string& title) {
  constexpr double kW = 900, kH = 420, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double max_bytes = static_cast<double>(r.peak_live);
  for (const auto& p : r.policies)
    max_bytes = std::max(max_bytes, static_cast<double>(p.peak_reserved));
  double max_gib = std::max(1e-9, ToGiB(max_bytes));
  // A "nice" tick step: 1, 2 or 5 times a power of ten.
  double raw = max_gib / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  double top_gib = std::ceil(max_gib * 1.05 / step) * step;
  double events = std::max<double>(1, static_cast<double>(r.events));
  auto x = [&](double e) { return kLeft + pw * e / events; };
  auto y = [&](double bytes) { return kTop + ph * (1 - ToGiB(bytes) / top_gib); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      kW, kH, kLeft, XmlEscape(title));
  for (double g = 0; g <= top_gib + 1e-9; g += step) {
    double yy = y(g * static_cast<double>(kGiB));
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g} GiB</text>\n",
        kLeft, yy, kLeft + pw, yy, kLeft - 6, yy + 4, g);
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n"
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"black\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">trace event (of {6})</text>\n",
      kLeft, kTop, kTop + ph, kLeft + pw, kLeft + pw / 2, kH - 12, r.events);
  auto polyline = [&](const std::vector<Sample>& s, bool live, const char* color, double width,
                      const char* dash) {
    std::string pts;
    for (const Sample& p : s) {
      pts += fmt::format("{:.1f},{:.1f} ", x(static_cast<double>(p.event)),
                         y(static_cast<double>(live ? p.live : p.reserved)));
    }
    return fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-dasharray=\"{}\" "
        "points=\"{}\"/>\n",
        color, width, dash, pts);
  };
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& p : r.policies) {
    svg += polyline(p.series, false, ColorFor(p.name), 1.6,
                    p.name == "pytorch-model" ? "5,3" : "none");
    legend.emplace_back(
        fmt::format("{} reserved (peak {:.2f} GiB)", p.name, ToGiB(p.peak_reserved)),
        ColorFor(p.name));
  }
  if (!r.policies.empty()) {
    svg += polyline(r.policies.front().series, true, "#2ca02c", 1.2, "none");
    legend.emplace_back(fmt::format("allocated (peak {:.2f} GiB)", ToGiB(r.peak_live)), "#2ca02c");
  }
  double ly = kTop + ph - 14.0 * static_cast<double>(legend.size()) - 6;
  for (const auto& [text, color] : legend) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"3\"/><text x=\"{4:.1f}\" y=\"{5:.1f}\">{6}</text>\n",
        kLeft + pw - 330, ly, kLeft + pw - 310, color, kLeft + pw - 304, ly + 4, XmlEscape(text));
    ly += 14;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace anxin::mem
