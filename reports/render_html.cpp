// Implements: the self-contained report page (index.html: inline CSS, every metric table, the loss plots,
// links to the MD/CSV/TeX/JSON renderings and the context block) and write_report, which writes every
// rendering of one Results into a report directory. Its tables pool replicate groups as summary.md does (one row
// "<job> (n seeds)", mean ± sd over seeds: PooledCell in results.h).
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "core/safetensors.h"
#include "reports/metric_tables.h"
#include "reports/results.h"
#include "reports/verdicts.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Control characters other than newline and tab as U+FFFD: a sample's bytes are data, not page structure.
std::string printable_text(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
      out += "\xEF\xBF\xBD";
    else
      out += static_cast<char>(c);
  }
  return out;
}

}  // namespace

std::string render_html(const Results& r, const std::vector<std::string>& images) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>aobench report</title>\n"
    << "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}"
    << "table{border-collapse:collapse;margin:0.5em 0 1em}th,td{border:1px solid #ccc;padding:4px 10px}"
    << "th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    << ".proto{font-size:0.85em;color:#555}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}"
    << "code{background:#f6f6f6;padding:1px 4px}pre.sample{white-space:pre-wrap;background:#fafafa;"
    << "border-left:3px solid #ccc;padding:6px 10px;max-height:16em;overflow:auto}mark{background:#ffe9a8}"
    << "figure{margin:1em 0}figcaption{font-size:0.9em;color:#444;max-width:900px}"
    << "</style></head><body>\n<h1>aobench report</h1>\n";
  h << "<p>Downloads: <a href=\"summary.md\">summary.md</a> · <a href=\"results.csv\">results.csv</a> · "
    << "<a href=\"results.tex\">results.tex</a> · <a href=\"results.json\">results.json</a></p>\n";
  const PooledHeadline pooled = pooled_headline(r);
  const Headline& head = pooled.table;
  if (!head.rows.empty()) {
    h << "<h2>Headline: perplexity <small>(lower is better; ≤ marks an upper bound)</small></h2>\n"
      << "<table><tr><th>run</th><th>protocol</th><th>windows</th>";
    for (const auto& d : head.datasets) h << "<th>" << esc(d.empty() ? "-" : d) << "</th>";
    h << "</tr>\n";
    for (size_t i = 0; i < head.rows.size(); ++i) {
      const HeadlineRow& row = head.rows[i];
      h << "<tr><td>" << esc(row.label()) << "</td><td>" << esc(row.protocol) << "</td><td>" << esc(row.windows)
        << "</td>";
      for (const auto& d : head.datasets) {
        auto it = pooled.cells[i].find(d);
        h << "<td class=num>" << (it == pooled.cells[i].end() ? "" : esc(it->second.text("≤ ", " ± "))) << "</td>";
      }
      h << "</tr>\n";
    }
    h << "</table>\n<ul class=proto>";
    if (!head.shared_details.empty()) h << "<li>All rows: " << esc(head.shared_details) << "</li>";
    if (pooled.any_group) h << "<li>The " << esc(kSeedsNote) << "</li>";
    for (const auto& row : head.rows)
      if (head.shared_details.empty() && !row.details.empty())
        h << "<li>" << esc(row.run) << ": " << esc(row.details) << "</li>";
    for (const auto& row : head.rows)
      for (const auto& [n, text] : row.notes) h << "<li>[" << n << "] " << esc(text) << "</li>";
    h << "</ul>\n";
  }
  h << "<h2>Runs</h2>\n<table><tr><th>run</th><th>plugin</th><th>flavour</th><th>paradigm</th><th>params</th>"
    << "<th>steps</th><th>tokens</th><th>train FLOPs</th></tr>\n";
  for (const auto& [name, run] : r.runs)
    h << "<tr><td>" << esc(name) << "</td><td>" << esc(run.plugin) << "</td><td>" << esc(run.flavour) << "</td><td>"
      << esc(run.paradigm) << "</td><td class=num>" << run.params << "</td><td class=num>" << run.steps
      << "</td><td class=num>" << run.tokens << "</td><td class=num>" << flops_text(run.train_flops) << "</td></tr>\n";
  h << "</table>\n";
  // The metric tables of summary.md (reports/metric_tables.h), footnote numbers as superscripts.
  auto marks = [](const std::vector<int>& notes) {
    return notes.empty() ? std::string() : "<sup>" + note_numbers(notes, ",") + "</sup>";
  };
  for (const MetricTable& t : metric_tables(r)) {
    const std::string title = t.title(), better = title.substr(title.rfind(" ("));
    h << "<h2>" << esc(title.substr(0, title.size() - better.size())) << " <small>" << esc(better.substr(1))
      << "</small></h2>\n<table><tr><th>run</th>";
    for (const auto& c : t.columns) h << "<th>" << esc(c.text) << marks(c.notes) << "</th>";
    h << "</tr>\n";
    for (const auto& row : t.rows) {
      h << "<tr><td>" << esc(row.label) << "</td>";
      for (const auto& c : row.cells) h << "<td class=num>" << esc(c.text) << marks(c.notes) << "</td>";
      h << "</tr>\n";
    }
    h << "</table>\n";
    for (const auto& line : t.shared) h << "<p class=proto>" << esc(line) << ".</p>";
    if (!t.notes.empty()) {
      h << "<ol class=proto>";
      for (const auto& n : t.notes) h << "<li>" << esc(n) << "</li>";
      h << "</ol>";
    }
    h << "\n";
  }
  if (!images.empty()) {
    h << "<h2>Figures</h2>\n";
    // What each figure shows, under it, as a paper's caption would.
    static const std::map<std::string, std::string> captions = {
        {"loss_val",
         "Validation loss (nats/token) against optimizer steps. A job trained under several seeds is its mean line "
         "over a ± 1 sd band; a diffusion encoder's curve is its ELBO, an upper bound on the NLL."},
        {"loss_train", "Training loss (nats/token) against optimizer steps, one line per run."},
        {"loss_val_tokens",
         "Validation loss against tokens seen, so runs of different batch or context length line up by data."},
        {"ppl_vs_m", "Perplexity against the context-order ensemble size M (log₂ axis), per run and dataset."},
        {"gen_speed",
         "Generation time of one batch against sampling steps (log–log); error bars: standard error of the timed "
         "calls."}};
    int figure = 0;
    for (const auto& img : images)
      if (img.size() > 4 && img.substr(img.size() - 4) == ".png") {
        const std::string stem = img.substr(0, img.size() - 4), svg = stem + ".svg";
        const auto caption = captions.find(stem);
        h << "<figure><img src=\"" << esc(img) << "\" alt=\"" << esc(stem) << "\"><figcaption><b>Figure " << ++figure
          << ".</b> " << esc(caption == captions.end() ? stem : caption->second) << " <a href=\"" << esc(img)
          << "\">PNG</a> · <a href=\"" << esc(svg) << "\">SVG</a></figcaption></figure>\n";
      }
  }
  bool any_samples = false;
  for (const auto& [name, run] : r.runs) any_samples |= !run.samples.empty();
  if (any_samples) {
    h << "<h2>Samples</h2>\n<p class=proto>The first " << kSamplesShown
      << " samples of each samples file, as decoded by the run's tokenizer; <mark>marked</mark> text is the "
         "prompt's.</p>\n";
    for (const auto& [name, run] : r.runs)
      for (const auto& [file, samples] : run.samples) {
        h << "<h3>" << esc(name) << " · <code>" << esc(file) << "</code></h3>\n";
        for (const auto& sample : samples) {
          h << "<pre class=sample>";
          for (const auto& [given, text] : sample)
            h << (given ? "<mark>" : "") << esc(printable_text(text)) << (given ? "</mark>" : "");
          h << "</pre>\n";
        }
      }
  }
  h << "<h2>Context</h2>\n<table>";
  for (auto it = r.context.begin(); it != r.context.end(); ++it)
    h << "<tr><th>" << esc(it.key()) << "</th><td><code>" << esc(context_text(it.key(), it.value()))
      << "</code></td></tr>";
  h << "</table>\n</body></html>\n";
  return h.str();
}

void write_report(const Results& r, const std::string& out_dir) {
  fs::create_directories(out_dir);
  const fs::path dir(out_dir);
  r.save((dir / "results.json").string());
  const FindingsReport findings = render_findings(r);  // verdicts lead when the experiment names findings
  std::string md = render_markdown(r);
  md.insert(md.find("\n\n") + 2, findings.markdown);  // after the title
  write_file_atomic((dir / "summary.md").string(), md);
  write_file_atomic((dir / "results.csv").string(), render_csv(r));
  write_file_atomic((dir / "results.tex").string(), findings.latex + render_latex(r));
  const auto images = render_plots(r, out_dir);
  std::string html = render_html(r, images);
  html.insert(html.find("</h1>\n") + 6, findings.html);
  write_file_atomic((dir / "index.html").string(), html);
}

}  // namespace aobench
