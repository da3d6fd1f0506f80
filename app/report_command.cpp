// ampwb report RUN... --out FILE.html|FILE.pdf: the runs' self-contained report (analysis/run_report.h). A PDF is the
// same HTML printed by a headless Chromium (Debian's chromium-headless-shell), which renders the SVG charts as a
// browser shows them.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "analysis/run_report.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/shell_word.h"
#include "store/run_store.h"

namespace ampwb::cli {
namespace {
namespace fs = std::filesystem;

struct ReportOptions {
  std::vector<std::string> runs;
  std::string out, db;
  bool overwrite = false;
};

// The headless browser that prints PDFs: $AMPWB_CHROMIUM, else the first of Debian's on the PATH.
std::string find_chromium() {
  if (const char* given = std::getenv("AMPWB_CHROMIUM")) return given;
  for (const char* name : {"chromium-headless-shell", "chromium", "google-chrome"})
    for (const char* dir : {"/usr/bin", "/usr/local/bin"})
      if (::access((fs::path(dir) / name).c_str(), X_OK) == 0) return (fs::path(dir) / name).string();
  return "";
}

int report_command(const ReportOptions& options) {
  const fs::path out = options.out;
  std::string extension = out.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (extension != ".html" && extension != ".htm" && extension != ".pdf")
    throw Error("--out " + out.string() + ": a report is written as .html or .pdf");
  // Said before the report is made, and the same for HTML and PDF (Chromium would only say it could not print).
  check_out_file(out.string(), options.overwrite);
  const RunStore store = open_for_reading(store_path(options.db), "report");
  const std::vector<int64_t> ids = resolve_runs(store, options.runs, "report");
  const std::string html = html_report(store, ids);
  if (extension != ".pdf") {
    make_out_folder(out.string());
    write_file_atomically(out.string(), html);
    std::printf("wrote %s (%zu run%s)\n", std::filesystem::absolute(out).c_str(), ids.size(),
                ids.size() == 1 ? "" : "s");
    return 0;
  }
  const std::string chromium = find_chromium();
  if (chromium.empty())
    throw Error("a PDF report needs a headless Chromium (apt install chromium-headless-shell), or write " +
                out.stem().string() + ".html and print it from a browser");
  // Printed in the temporary folder, then written into place whole: a failed print leaves an earlier report as it
  // was, and makes no folder.
  const std::string stem = (fs::temp_directory_path() / ("ampwb-report-" + std::to_string(::getpid()))).string();
  const std::string html_file = stem + ".html", printed = stem + ".pdf";
  write_file_atomically(html_file, html);
  const std::string command =
      shell_quoted(chromium) + " --headless --no-sandbox --disable-gpu --no-pdf-header-footer " +
      "--print-to-pdf=" + shell_quoted(printed) + " " + shell_quoted("file://" + html_file) + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  std::error_code ec;
  fs::remove(html_file, ec);
  std::ifstream pdf(printed, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(pdf)), std::istreambuf_iterator<char>());
  fs::remove(printed, ec);
  if (status != 0 || bytes.empty())
    throw Error("the headless Chromium (" + chromium + ") could not print " + out.string());
  make_out_folder(out.string());
  write_file_atomically(out.string(), bytes);
  std::printf("wrote %s (%zu run%s)\n", std::filesystem::absolute(out).c_str(), ids.size(), ids.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* report = app.add_subcommand(
      "report", "one self-contained HTML (or PDF) report of runs: comparison, charts, diagnosis, time, layers");
  report->add_option("RUN", options->runs, "run ids or names, or sweep:N for a sweep's runs; the first is the baseline")
      ->type_name("")
      ->required()
      ->expected(1, -1);
  report->add_option("--out", options->out, "the report file: .html, or .pdf (printed by a headless Chromium)")
      ->type_name("FILE")
      ->required();
  add_overwrite_flag(report, options->overwrite);
  add_db_option(report, options->db);
  run_on_parse(report, invocation, options, report_command);
}

}  // namespace ampwb::cli
