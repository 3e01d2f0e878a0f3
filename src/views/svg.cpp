// The Gantt chart of `status --svg` and `simulate --svg`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "gpuq/views/svg.h"

namespace gpuq {

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* fill_of(const std::string& status) {
  if (status == "done") return "#4caf50";
  if (status == "running") return "#2196f3";
  if (status == "failed") return "#e53935";
  return "#b0bec5";  // predicted
}

// The chart's geometry: a row per GPU, then as many rows for 0-GPU jobs as overlap (first
// fit), and the hours they span.
struct Chart {
  static constexpr double left = 90, right = 30, top = 50, row_h = 26, width = 1400;
  const Plan& plan;
  const std::vector<Bar>& bars;
  const std::vector<int>& node_gpus;
  size_t nodes, gpu_rows;  // gpu_rows: a row per GPU of each node
  std::map<size_t, size_t> lane_of;  // bar -> its row among the 0-GPU rows
  std::map<int, size_t> row_of_gpu;
  std::map<size_t, std::vector<std::pair<double, double>>> spans_on_row;  // row -> its bars' [x start, x end]
  size_t rows = 0;
  double t0 = 0, t1 = 0, scale = 1;

  Chart(const Plan& p, const std::vector<Bar>& b, const std::vector<int>& gpus, std::optional<double> now_h, int n)
      : plan(p), bars(b), node_gpus(gpus), nodes(static_cast<size_t>(std::max(n, 1))), gpu_rows(nodes * gpus.size()) {
    std::vector<std::pair<double, size_t>> cpu_order;
    for (size_t k = 0; k < bars.size(); ++k)
      if (bars[k].gpus.empty()) cpu_order.push_back({bars[k].start, k});
    std::sort(cpu_order.begin(), cpu_order.end());
    std::vector<double> lane_free;
    for (auto& [start, k] : cpu_order) {
      size_t lane = 0;
      while (lane < lane_free.size() && lane_free[lane] > bars[k].start + 1e-9) ++lane;
      if (lane == lane_free.size()) lane_free.push_back(0);
      lane_free[lane] = bars[k].end;
      lane_of[k] = lane;
    }
    for (const Bar& bar : bars) {
      t0 = std::min(t0, bar.start);
      t1 = std::max(t1, bar.end);
    }
    if (now_h) t1 = std::max(t1, *now_h);
    if (t1 - t0 < 1e-9) t1 = t0 + 1;
    rows = gpu_rows + lane_free.size();
    scale = (width - left - right) / (t1 - t0);
    for (size_t i = 0; i < node_gpus.size(); ++i) row_of_gpu[node_gpus[i]] = i;
    std::map<size_t, std::vector<std::pair<double, size_t>>> on_row;  // GPU row -> (start, bar)
    for (size_t k = 0; k < bars.size(); ++k)
      for (size_t r : rows_of(k)) {
        spans_on_row[r].push_back({x(bars[k].start), x(bars[k].start) + std::max(1.0, (bars[k].end - bars[k].start) * scale)});
        if (r < gpu_rows) on_row[r].push_back({bars[k].start, k});
      }
    // A GPU that holds several jobs at once (jobs that pack by gpu_mem_gib): its row is split
    // into as many stacked lanes as it ever holds jobs together, each bar in the first lane free.
    for (auto& [r, v] : on_row) {
      std::sort(v.begin(), v.end());
      std::vector<double> lane_end;
      for (auto [start, k] : v) {
        size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > start + 1e-9) ++lane;
        if (lane == lane_end.size()) lane_end.push_back(0);
        lane_end[lane] = bars[k].end;
        stack_of[{k, r}] = lane;
      }
      if (lane_end.size() > 1) stacks_on_row[r] = lane_end.size();
    }
  }
  std::map<std::pair<size_t, size_t>, size_t> stack_of;  // (bar, GPU row) -> its lane in a shared GPU's row
  std::map<size_t, size_t> stacks_on_row;                // GPU row -> its lanes, where it has more than one
  double x(double h) const { return left + (h - t0) * scale; }
  double height() const { return top + static_cast<double>(rows) * row_h + 60; }
  double axis_y() const { return top + static_cast<double>(rows) * row_h; }

  // The header, the legend, and the rows' labels and stripes.
  std::string frame(const std::string& title) const {
    std::string out = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
        "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{:.0f}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        width, height(), width, height(), left, xml_escape(title));
    double lx = width - right - 420;
    for (const char* s : {"done", "running", "failed", "predicted"}) {
      out += fmt::format("<rect x=\"{:.0f}\" y=\"12\" width=\"14\" height=\"12\" fill=\"{}\"/><text x=\"{:.0f}\" y=\"22\">{}</text>\n",
                         lx, fill_of(s), lx + 18, s);
      lx += 100;
    }
    for (size_t r = 0; r < rows; ++r) {
      double y = top + static_cast<double>(r) * row_h;
      // The rows of jobs that take no GPU each read "no GPU" (as many as such jobs overlap):
      // "no GPU 2" read as a GPU that is not there.
      std::string label = r >= gpu_rows ? std::string("no GPU")
                          : nodes > 1   ? fmt::format("node {} GPU {}", r / node_gpus.size(), node_gpus[r % node_gpus.size()])
                                        : fmt::format("GPU {}", node_gpus[r]);
      out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/>\n", left, y,
                         width - left - right, row_h, r % 2 ? "#fafafa" : "#f0f0f0");
      out += fmt::format("<text x=\"8\" y=\"{:.0f}\">{}</text>\n", y + row_h * 0.65, label);
    }
    return out;
  }

  // The time axis: a step of 1, 2 or 5 times a power of ten, for at most about 12 ticks.
  // Each tick is a whole multiple of the step (no sum of steps, whose rounding printed
  // -1.38778e-17h for 0), printed with the decimals the step needs.
  std::string axis() const {
    double span = t1 - t0, magnitude = std::pow(10.0, std::floor(std::log10(span / 12))), step = magnitude;
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (span / (m * magnitude) <= 12) {
        step = m * magnitude;
        break;
      }
    int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
    std::string out = fmt::format("<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#333\"/>\n",
                                  left, axis_y(), width - right, axis_y());
    auto first = static_cast<long long>(std::ceil(t0 / step - 1e-9));
    auto last = static_cast<long long>(std::floor(t1 / step + 1e-9));
    for (long long i = first; i <= last; ++i) {
      double h = static_cast<double>(i) * step;
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#ccc\"/>"
                         "<text x=\"{0:.1f}\" y=\"{3:.0f}\" text-anchor=\"middle\">{4:.{5}f}h</text>\n",
                         x(h), top, axis_y() + 4, axis_y() + 18, h, decimals);
    }
    out += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">hours</text>\n",
                       (left + width - right) / 2, axis_y() + 36);
    return out;
  }

  // The rows bar k is drawn on.
  std::vector<size_t> rows_of(size_t k) {
    const Bar& b = bars[k];
    std::vector<size_t> rws;
    if (b.gpus.empty())
      rws.push_back(gpu_rows + lane_of[k]);
    else
      for (int g : b.gpus)
        if (row_of_gpu.count(g)) rws.push_back(static_cast<size_t>(b.node) * node_gpus.size() + row_of_gpu[g]);
    return rws;
  }

  // Where the next bar on row r starts after x_end (or the chart's right edge).
  double next_start(size_t r, double x_end) const {
    double next = width - right;
    if (auto it = spans_on_row.find(r); it != spans_on_row.end())
      for (auto [xs, xe] : it->second)
        if (xs >= x_end - 0.5 && xs < next) next = xs;
    return next;
  }

  // Where the last bar on row r before x_start ends (or the chart's left edge).
  double previous_end(size_t r, double x_start) const {
    double prev = left;
    if (auto it = spans_on_row.find(r); it != spans_on_row.end())
      for (auto [xs, xe] : it->second)
        if (xe <= x_start + 0.5 && xe > prev) prev = xe;
    return prev;
  }

  // Bar k on each of its rows, with a hover title, and its id: inside the bar where it fits,
  // else just after it or just before it where the row is free that far, else cut short
  // inside (about 6.5 px a character).
  std::string bar(size_t k) {
    const Bar& b = bars[k];
    const std::string& id = b.label.empty() ? plan.jobs[b.job].id : b.label;
    double w = std::max(1.0, (b.end - b.start) * scale);
    double label_w = static_cast<double>(id.size()) * 6.5;
    std::string out;
    for (size_t r : rows_of(k)) {
      double y = top + static_cast<double>(r) * row_h + 3;
      if (auto st = stacks_on_row.find(r); st != stacks_on_row.end()) {  // a shared GPU: its lane of the row
        double h = (row_h - 6) / static_cast<double>(st->second);
        double ys = y + h * static_cast<double>(stack_of[{k, r}]);
        out += fmt::format(
            "<g><title>{} ({}): {:.2f}h -> {:.2f}h, GPUs {} (shared)</title>"
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" rx=\"1\" fill=\"{}\" "
            "stroke=\"white\" stroke-width=\"0.5\"/>",
            xml_escape(id), b.status, b.start, b.end, py_list(b.gpus), x(b.start), ys, w, h, fill_of(b.status));
        out += lane_label(b, id, ys, w, h) + "</g>\n";
        continue;
      }
      out += fmt::format(
          "<g><title>{} ({}): {:.2f}h -> {:.2f}h, GPUs {}</title>"
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" rx=\"2\" fill=\"{}\" stroke=\"white\" "
          "stroke-width=\"0.5\"/>",
          xml_escape(id), b.status, b.start, b.end, py_list(b.gpus), x(b.start), y, w, row_h - 6, fill_of(b.status));
      const char* inside_ink = b.status == "predicted" ? "#263238" : "white";
      size_t fit = static_cast<size_t>(std::max(0.0, (w - 4) / 6.5));
      if (label_w <= w - 4) {
        out += label(x(b.start) + 3, y, inside_ink, id);
      } else if (label_w <= next_start(r, x(b.start) + w) - (x(b.start) + w) - 6) {
        out += label(x(b.start) + w + 3, y, "#263238", id);
      } else if (label_w <= x(b.start) - previous_end(r, x(b.start)) - 6) {
        out += label(x(b.start) - 3, y, "#263238", id, "end");
      } else if (fit >= 3) {
        out += label(x(b.start) + 3, y, inside_ink, id.substr(0, fit - 1) + "~");
      }
      out += "</g>\n";
    }
    return out;
  }

  // The id of a bar in its lane of a shared GPU's row, in a font the lane's height takes: inside
  // the bar where it fits, else cut short inside (a "~" for the rest), else none (its title has it).
  std::string lane_label(const Bar& b, const std::string& id, double ys, double w, double h) const {
    double font = std::min(11.0, std::floor(h - 1));
    if (font < 5) return "";
    double char_w = font * 0.6;
    size_t fit = static_cast<size_t>(std::max(0.0, (w - 4) / char_w));
    std::string text = static_cast<double>(id.size()) * char_w <= w - 4 ? id
                       : fit >= 3                                      ? id.substr(0, fit - 1) + "~"
                                                                       : "";
    if (text.empty()) return "";
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:g}\" fill=\"{}\">{}</text>", x(b.start) + 2,
                       ys + h / 2 + font * 0.35, font, b.status == "predicted" ? "#263238" : "white", xml_escape(text));
  }

  std::string label(double lx, double y, const char* ink, const std::string& text,
                    const char* anchor = "start") const {
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" text-anchor=\"{}\">{}</text>", lx,
                       y + row_h * 0.5, ink, anchor, xml_escape(text));
  }

  std::string now_line(double now_h) const {
    return fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#d81b60\" "
                       "stroke-width=\"2\"/><text x=\"{0:.1f}\" y=\"{3:.0f}\" fill=\"#d81b60\" "
                       "text-anchor=\"middle\">now</text>\n",
                       x(now_h), top - 4, axis_y(), top - 8);
  }
};

}  // namespace

std::string gantt_svg(const Plan& plan, const std::vector<Bar>& bars, const std::vector<int>& node_gpus,
                      std::optional<double> now_h, const std::string& title, int nodes) {
  Chart chart(plan, bars, node_gpus, now_h, nodes);
  std::string out = chart.frame(title) + chart.axis();
  for (size_t k = 0; k < bars.size(); ++k) out += chart.bar(k);
  if (now_h) out += chart.now_line(*now_h);
  return out + "</svg>\n";
}

std::vector<Bar> live_bars(const Plan& plan, const State& state, const Outlook& o) {
  std::vector<Bar> bars;
  std::vector<char> predicted(plan.jobs.size(), 0);
  for (const SimRow& r : o.sim.rows) {
    const JobState* s = state.of(plan, r.job);
    bool running = s && s->status == Status::Running;
    bars.push_back({r.job, running ? "running" : "predicted", r.start, r.end, r.gpus});
    predicted[r.job] = 1;
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);
    if (!s) continue;
    for (const EarlierAttempt& a : earlier_attempts(*s))  // each attempt a retry or a restart replaced
      bars.push_back({i, a.exit == 0 ? "done" : "failed", (a.start - o.now) / 3600, (a.end - o.now) / 3600, a.gpus});
    if (predicted[i] || !s->start || !s->end) continue;
    if (s->status != Status::Done && s->status != Status::Failed) continue;
    bars.push_back({i, status_name(s->status), (*s->start - o.now) / 3600, (*s->end - o.now) / 3600,
                    s->gpus.value_or(std::vector<int>{})});
  }
  // A job removed from the plan while it ran still holds its GPUs: up to now, under its own id.
  for (const auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.start && s.gpus && !plan.find(id))
      bars.push_back({0, "running", std::min(0.0, (*s.start - o.now) / 3600), 0.0, *s.gpus, 0,
                      id + " (not in the plan)"});
  return bars;
}

}  // namespace gpuq
