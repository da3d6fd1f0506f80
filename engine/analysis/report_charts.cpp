// The report's SVG charts: nice ticks, line charts with the legend below the plot, the heat map with its caption.
#include "analysis/report_charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "analysis/run_report.h"
#include "core/half.h"
#include "core/min_max_thinning.h"

namespace ampwb {
namespace {

std::string num(double v, const char* fmt = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// 1, 2 or 5 times a power of ten, the smallest at or above `raw`.
double nice_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  return 10 * power;
}

// 2^k's text: the number up to a million, else "2^k".
std::string power_of_two_text(int k) {
  if (k >= 0 && k < 20) return num(std::ldexp(1.0, k), "%.0f");
  if (k < 0 && k > -11) return num(std::ldexp(1.0, k), "%.10g");
  return "2^" + std::to_string(k);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int most, bool whole) {
  if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  // A flat line: counted axes (epochs) go on to the next whole number; a positive value sits at the top of its axis,
  // so that an accuracy of 100% is not drawn on an axis offering more; a zero at the foot of 0 to 1.
  if (hi == lo && whole) hi = lo + 1;
  if (hi == lo && lo > 0) lo -= lo * 0.1;
  if (hi == lo) hi = lo + (lo == 0 ? 1 : std::max(1e-9, std::fabs(lo) * 0.1));
  most = std::max(2, most);
  double step = nice_step((hi - lo) / (most - 1));
  for (;;) {
    if (whole) step = std::max(1.0, std::round(step));
    const long long first = std::llround(std::floor(lo / step + 1e-9)),
                    last = std::llround(std::ceil(hi / step - 1e-9));
    if (last - first + 1 <= most) {
      // k / 10 rather than k * 0.1: the tick is the double nearest the decimal number (0.3, not 0.30000000000000004).
      const double per_unit = step < 1 ? std::round(1 / step) : 0;
      std::vector<double> ticks;
      for (long long k = first; k <= last; ++k)
        ticks.push_back(k == 0         ? 0.0
                        : per_unit > 0 ? static_cast<double>(k) / per_unit
                                       : static_cast<double>(k) * step);
      return ticks;
    }
    step = nice_step(step * 1.0001);
  }
}

std::string tick_text(double value, double spacing) {
  // Spacings are 1, 2 or 5 times 10^k: -k decimals show every tick exactly.
  const int decimals = spacing > 0 ? std::clamp(static_cast<int>(-std::floor(std::log10(spacing) + 1e-9)), 0, 9) : 0;
  if (std::fabs(value) >= 1e6 || (value != 0 && std::fabs(value) < 1e-4)) return num(value, "%.3g");
  char fmt[16];
  std::snprintf(fmt, sizeof fmt, "%%.%df", decimals);
  return num(value, fmt);
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::vector<ChartLine>& lines,
                           ChartAxis x_axis, ChartAxis y_axis) {
  constexpr double W = 640, plot_h = 300, left = 64, right = 16, top = 28, bottom = 44;
  const bool log_y = y_axis == ChartAxis::PowersOfTwo;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto y_of = [&](double y) { return log_y ? std::log2(std::max(y, 1e-30)) : y; };
  for (const ChartLine& l : lines)
    for (const auto& [x, y] : l.points)
      if (std::isfinite(y))
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y_of(y)), y1 = std::max(y1, y_of(y));

  // The legend's rows below the plot: entries side by side, wrapped at the chart's width.
  std::vector<std::pair<double, double>> legend_at;  // (x, row) per line
  double lx = left, rows = lines.empty() ? 0 : 1;
  for (const ChartLine& l : lines) {
    const double width = 30 + 6.5 * static_cast<double>(l.label.size()) + 16;
    if (lx > left && lx + width > W - right) lx = left, ++rows;
    legend_at.emplace_back(lx, rows - 1);
    lx += width;
  }
  const double H = plot_h + 18 * rows;

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + num(W) + "\" height=\"" +
                    num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" role=\"img\"><title>" +
                    html_escape(title) + "</title>";
  svg +=
      "<text x=\"" + num(left) + "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" + html_escape(title) + "</text>";
  if (!(x0 <= x1)) return svg + "<text x=\"" + num(left) + "\" y=\"60\">(nothing recorded)</text></svg>";

  const std::vector<double> xs = nice_ticks(x0, x1, 7, x_axis == ChartAxis::WholeNumbers);
  const std::vector<double> ys = nice_ticks(y0, y1, 6, log_y);  // a log axis ticks at whole powers of two
  x0 = xs.front(), x1 = xs.back(), y0 = ys.front(), y1 = ys.back();
  const double x_step = xs.size() > 1 ? xs[1] - xs[0] : 1, y_step = ys.size() > 1 ? ys[1] - ys[0] : 1;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (W - left - right); };
  auto py = [&](double y) { return plot_h - bottom - (y_of(y) - y0) / (y1 - y0) * (plot_h - top - bottom); };
  auto py_axis = [&](double fy) { return plot_h - bottom - (fy - y0) / (y1 - y0) * (plot_h - top - bottom); };
  svg += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(W - left - right) + "\" height=\"" +
         num(plot_h - top - bottom) + "\" fill=\"none\" stroke=\"#999\"/>";
  for (double fx : xs)
    svg += "<text class=\"x-tick\" x=\"" + num(px(fx)) + "\" y=\"" + num(plot_h - bottom + 16) +
           "\" font-size=\"11\" text-anchor=\"middle\">" + tick_text(fx, x_step) + "</text>";
  for (double fy : ys) {
    const double ty = py_axis(fy);
    const std::string text = log_y ? power_of_two_text(static_cast<int>(std::lround(fy))) : tick_text(fy, y_step);
    svg += "<text class=\"y-tick\" x=\"" + num(left - 6) + "\" y=\"" + num(ty + 4) +
           "\" font-size=\"11\" text-anchor=\"end\">" + text + "</text>";
    svg += "<line x1=\"" + num(left) + "\" x2=\"" + num(W - right) + "\" y1=\"" + num(ty) + "\" y2=\"" + num(ty) +
           "\" stroke=\"#eee\"/>";
  }
  svg += "<text x=\"" + num((W + left) / 2) + "\" y=\"" + num(plot_h - 8) +
         "\" font-size=\"12\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>";
  // One bucket (a minimum and a maximum) per two pixels of the plot, as in the window: a spike there is one here.
  const auto buckets = static_cast<size_t>((W - left - right) / 2);
  for (size_t i = 0; i < lines.size(); ++i) {
    const ChartLine& l = lines[i];
    std::string pts;
    std::vector<std::pair<double, double>> drawn;
    for (const auto& [x, y] : thinned_min_max(l.points, buckets))
      if (std::isfinite(y)) drawn.emplace_back(px(x), py(y));
    for (const auto& [x, y] : drawn) pts += num(x, "%.1f") + "," + num(y, "%.1f") + " ";
    svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + l.colour + "\" points=\"" + pts + "\"/>";
    if (drawn.size() == 1)  // a line of one point (a run of one epoch) draws nothing: a dot shows it
      svg += "<circle class=\"point\" cx=\"" + num(drawn[0].first, "%.1f") + "\" cy=\"" + num(drawn[0].second, "%.1f") +
             "\" r=\"3.5\" fill=\"" + l.colour + "\"/>";
    for (const auto& [x, y] : l.markers)
      svg += "<text x=\"" + num(px(x)) + "\" y=\"" + num(py(y) + 4) + "\" fill=\"" + l.colour +
             "\" font-size=\"12\" text-anchor=\"middle\">&#215;</text>";
    const auto [at, row] = legend_at[i];
    const double ly = plot_h + 18 * row + 6;
    svg += "<g class=\"legend\"><line x1=\"" + num(at) + "\" x2=\"" + num(at + 22) + "\" y1=\"" + num(ly) + "\" y2=\"" +
           num(ly) + "\" stroke-width=\"2.5\" stroke=\"" + l.colour + "\"/><text x=\"" + num(at + 28) + "\" y=\"" +
           num(ly + 4) + "\" font-size=\"11\">" + html_escape(l.label) + "</text></g>";
  }
  return svg + "</svg>";
}

std::string svg_heat_map(const std::vector<LayerNumerics>& records, bool fp16) {
  std::map<int, int64_t> last_step;  // epoch -> its last probed step
  for (const LayerNumerics& n : records) last_step[n.epoch] = std::max(last_step[n.epoch], n.step);
  std::vector<std::string> layers;
  std::map<std::pair<std::string, int>, const LayerNumerics*> cell;
  for (const LayerNumerics& n : records) {
    if (n.step != last_step[n.epoch]) continue;
    if (std::find(layers.begin(), layers.end(), n.layer) == layers.end()) layers.push_back(n.layer);
    cell[{n.layer, n.epoch}] = &n;
  }
  if (layers.empty()) return "<p>No per-layer numerics recorded.</p>";
  struct Band {
    const char* fill;
    const char* meaning;
  };
  const Band bands[] = {
      {"#b2182b", "overflow or inf/NaN"}, {"#ef8a62", "under 2"}, {"#fddbc7", "2 to 6"}, {"#d1e5f0", "6 or more"}};
  std::string caption = std::string("<figcaption class=\"caption\">") +
                        (fp16 ? "Each" : "What FP16 would face (this run does not compute in FP16): each") +
                        " cell is the headroom of a layer's largest activation (rows) below FP16's largest value, "
                        "65,504, in powers of two, at the last probed step of each epoch (columns); "
                        "the fewer, the closer to overflow. Colours: ";
  for (size_t i = 0; i < std::size(bands); ++i)
    caption += std::string(i ? ", " : "") + "<span class=\"swatch\" style=\"background:" + bands[i].fill +
               "\"></span> " + bands[i].meaning;
  caption += ".</figcaption>";
  constexpr double name_w = 170, cw = 46, ch = 16;
  const double W = name_w + cw * static_cast<double>(last_step.size()) + 10, H = ch * (layers.size() + 1) + 6;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heatmap\" width=\"" + num(W) + "\" height=\"" +
                    num(H) + "\"><title>Activation headroom to FP16 (powers of two), layers by epoch</title>";
  size_t col = 0;
  for (const auto& [epoch, step] : last_step)
    svg += "<text x=\"" + num(name_w + cw * col++ + cw / 2) + "\" y=\"12\" font-size=\"11\" text-anchor=\"middle\">" +
           "epoch " + std::to_string(epoch) + "</text>";
  for (size_t row = 0; row < layers.size(); ++row) {
    const double y = ch * (row + 1);
    svg += "<text x=\"" + num(name_w - 6) + "\" y=\"" + num(y + 12) + "\" font-size=\"11\" text-anchor=\"end\">" +
           html_escape(layers[row]) + "</text>";
    col = 0;
    for (const auto& [epoch, step] : last_step) {
      const auto found = cell.find({layers[row], epoch});
      const double x = name_w + cw * col++;
      if (found == cell.end()) continue;
      const ValueRange& a = found->second->activation;
      const double headroom = a.max_abs > 0 ? std::log2(kHalfMax / a.max_abs) : 30;
      const char* fill = a.nonfinite_fraction > 0 || headroom < 0 ? bands[0].fill
                         : headroom < 2                           ? bands[1].fill
                         : headroom < 6                           ? bands[2].fill
                                                                  : bands[3].fill;
      svg += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cw - 2) + "\" height=\"" + num(ch - 2) +
             "\" fill=\"" + fill + "\"><title>" + html_escape(layers[row]) + ", epoch " + std::to_string(epoch) +
             ": max |activation| " + num(a.max_abs) + "</title></rect>";
      svg += "<text x=\"" + num(x + cw / 2 - 1) + "\" y=\"" + num(y + 11) +
             "\" font-size=\"10\" text-anchor=\"middle\">" + num(headroom, "%.1f") + "</text>";
    }
  }
  return "<figure class=\"heatmap\">" + caption + svg + "</svg></figure>";  // the caption first: the map is long
}

}  // namespace ampwb
