// Implements: loss curves as gnuplot plots (DESIGN.md §1: gnuplot driven as a subprocess). For each curve
// (loss/val → loss_val, loss/train → loss_train) writes <name>.dat (one data block per run) and <name>.gp,
// then runs gnuplot (an argument vector, no shell: core/subprocess.h) for a PNG (pngcairo) and an SVG; likewise
// gen_speed (generation time vs steps, log-log). Plotting is optional: a missing or failing gnuplot prints a
// warning and the report goes on without images. The paper's figures: loss_val_tokens (validation loss against
// tokens seen) and ppl_vs_m (perplexity against ensemble size M). In the validation-loss figures a replicate group
// (reports/replicates.h: one job under ≥ 2 seeds) is its mean line over a shaded ± 1 sd band of the same colour.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>

#include "core/subprocess.h"
#include "reports/metric_tables.h"
#include "reports/replicates.h"
#include "reports/results.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

// A gnuplot single-quoted string: no backslash escapes and, unlike "...", no `command` substitution, so a
// run name cannot run anything; '' is a literal quote, and control characters (a newline ends a command)
// become spaces.
std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else
      out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out + "'";
}

// The lines every figure starts with: no enhanced text (run names keep their underscores), its title, a
// colour-blind-safe palette (Okabe–Ito without its yellow, which vanishes on white, then grey; a point shape per
// colour too, for print in grey), the legend below the axes where it covers no data, a grid.
std::string figure_setup(const std::string& title) {
  static const char* const colours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                        "#E69F00", "#56B4E9", "#000000", "#999999"};
  std::string s = "set termoption noenhanced\nset encoding utf8\nset title " + gp_quote(title) + "\n";
  for (int i = 0; i < 8; ++i)
    s += "set linetype " + std::to_string(i + 1) + " lc rgb \"" + colours[i] + "\" lw 2 pt " +
         std::to_string(std::vector<int>{7, 5, 9, 11, 13, 15, 4, 6}[i]) + "\n";
  return s + "set linetype cycle 8\nset key below horizontal\nset grid\n";
}

// One data block of <name>.dat as a plot entry: a run's line, or a group's mean line with its band (columns step,
// mean, sd).
struct PlotEntry {
  std::string title;
  bool band = false;
};

// The plot command over every block of <name>.dat. A band is drawn first, 20 % opaque and without a border, then its
// mean line; both take the entry's colour (lc), which every entry then names, since an area would take a colour of
// the automatic sequence. Without bands the command is the one of single runs, no colour named.
std::string plot_command(const std::string& name, const std::vector<PlotEntry>& entries, const std::string& style) {
  const bool banded = std::any_of(entries.begin(), entries.end(), [](const PlotEntry& e) { return e.band; });
  std::string plot = "plot ";
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string src = std::string("\"") + name + ".dat\" index " + std::to_string(i);
    const std::string lc = banded ? " lc " + std::to_string(i + 1) : "";
    if (i) plot += ", ";
    if (entries[i].band)
      plot += src + " using 1:($2-$3):($2+$3) with filledcurves fs transparent solid 0.2 noborder" + lc + " notitle, " +
              src + " using 1:2";
    else
      plot += src;
    plot += " with " + style + lc + " title " + gp_quote(entries[i].title);
  }
  return plot;
}

// A diffusion encoder's validation loss is its ELBO: an upper bound on the NLL, never a likelihood, so says its legend.
std::string bound_note(const RunResults& run) {
  return run.paradigm == "masked_diffusion_encoder" ? ", ELBO upper bound" : "";
}

// "gpt (3 seeds, ± sd)": the legend of a band.
std::string band_title(const RunGroup& g) {
  return g.name + " (" + std::to_string(g.runs.size()) + " seeds, ± sd" + bound_note(*g.members.front()) + ")";
}

// The validation-loss blocks of `r` into `dat`, x = step × x_per_step(run): one per run, a group of ≥ 2 seeds as its
// mean and sd (val_loss_band) when its members share steps. x_per_step ≤ 0 leaves a run out.
template <class XPerStep>
std::vector<PlotEntry> val_loss_blocks(const Results& r, std::ostream& dat, const std::string& what,
                                       XPerStep x_per_step) {
  std::vector<PlotEntry> entries;
  for (const RunGroup& g : replicate_groups(r)) {
    double per_step = 0;  // the group's: tokens/steps of a member (seeds train alike)
    for (const RunResults* m : g.members) per_step = per_step > 0 ? per_step : x_per_step(*m);
    const auto band = g.runs.size() >= 2 && per_step > 0 ? val_loss_band(g) : std::vector<BandPoint>{};
    if (!band.empty()) {
      dat << "# " << seeds_label(g) << ": " << what << ", mean and sd of the validation loss over seeds\n";
      for (const auto& p : band) dat << p.step * per_step << " " << p.mean << " " << p.sd << "\n";
      dat << "\n\n";
      entries.push_back({band_title(g), true});
      continue;
    }
    // A lone run, or seeds without a common step: a line per run.
    for (size_t i = 0; i < g.members.size(); ++i) {
      const RunResults& rr = *g.members[i];
      auto it = rr.curves.find("loss/val");
      const double x = x_per_step(rr);
      if (it == rr.curves.end() || it->second.empty() || !(x > 0)) continue;
      dat << "# " << g.runs[i] << (what == "step" ? "" : ": " + what + ", validation loss") << "\n";
      for (const auto& [step, v] : it->second) dat << step * x << " " << v << "\n";
      dat << "\n\n";  // gnuplot: a new data block (index) per run
      const std::string note = bound_note(rr);
      entries.push_back({g.runs[i] + (note.empty() ? "" : " (" + note.substr(2) + ")"), false});
    }
  }
  return entries;
}

// Runs `gnuplot <name>.gp` in out_dir (when present) and lists the PNG/SVG that exist afterwards.
void run_gnuplot(const std::string& out_dir, const std::string& name, bool have_gnuplot,
                 std::vector<std::string>& images) {
  if (!have_gnuplot) return;
  if (run_program({"gnuplot", name + ".gp"}, nullptr, out_dir, /*show_stderr=*/true) != 0)
    std::cerr << "warning: gnuplot failed on " << (fs::path(out_dir) / (name + ".gp")).string()
              << "; skipping this plot\n";
  for (const char* ext : {".png", ".svg"})
    if (fs::exists(fs::path(out_dir) / (name + ext))) images.push_back(name + ext);
}

// Writes <name>.gp — its title, the figure_setup lines, `setup` (the axes) and `plot` drawn as PNG and SVG — then
// runs gnuplot.
void write_plot(const std::string& out_dir, const std::string& name, const std::string& title, const std::string& setup,
                const std::string& plot, bool have_gnuplot, std::vector<std::string>& images) {
  std::ofstream gp(fs::path(out_dir) / (name + ".gp"));
  gp << "# " << title << " (regenerate: gnuplot " << name << ".gp)\n" << figure_setup(title) << setup;
  gp << "set terminal pngcairo size 900,620 noenhanced\nset output \"" << name << ".png\"\n"
     << plot << "\n"
     << "set terminal svg size 900,620 noenhanced\nset output \"" << name << ".svg\"\n"
     << plot << "\n"
     << "unset output\n";
  gp.close();
  run_gnuplot(out_dir, name, have_gnuplot, images);
}

// write_plot of every data block of <name>.dat (one per entry) as lines with points.
void write_block_plot(const std::string& out_dir, const std::string& name, const std::string& title,
                      const std::string& setup, const std::vector<PlotEntry>& entries, bool have_gnuplot,
                      std::vector<std::string>& images) {
  write_plot(out_dir, name, title, setup, plot_command(name, entries, "linespoints lw 2 ps 0.6"), have_gnuplot, images);
}

// Generation time against sampling steps, log-log, one line per run (the paper's speed figure): the
// gen_s metrics of `aobench speed` (one per sampling-steps setting), with their standard errors as error bars.
void speed_plot(const Results& r, const std::string& out_dir, bool have_gnuplot, std::vector<std::string>& images) {
  const std::string name = "gen_speed";
  std::vector<std::string> runs;
  std::ofstream dat(fs::path(out_dir) / (name + ".dat"));
  for (const auto& [run, rr] : r.runs) {
    std::vector<std::tuple<long long, double, double>> points;
    for (const auto& [key, m] : rr.metrics) {
      if (m.params.family != "gen_s" || m.params.steps <= 0) continue;
      points.emplace_back(m.params.steps, m.value, m.stderr_.value_or(0.0));
    }
    if (points.empty()) continue;
    std::sort(points.begin(), points.end());
    dat << "# " << run << ": steps, seconds, stderr\n";
    for (const auto& [steps, v, se] : points) dat << steps << " " << v << " " << se << "\n";
    dat << "\n\n";
    runs.push_back(run);
  }
  dat.close();
  if (runs.empty()) {
    fs::remove(fs::path(out_dir) / (name + ".dat"));
    return;
  }
  std::string plot = "plot ";
  for (size_t i = 0; i < runs.size(); ++i)
    plot += (i ? ", " : "") + std::string("\"") + name + ".dat\" index " + std::to_string(i) +
            " with yerrorlines lw 2 ps 0.6 title " + gp_quote(runs[i]);
  write_plot(out_dir, name, "Generation time against sampling steps (mean ± stderr of the timed calls)",
             "set logscale xy 2\nset xlabel \"sampling steps\"\nset ylabel \"seconds per generated batch\"\n", plot,
             have_gnuplot, images);
}

// The paper's convergence figure: validation loss against tokens seen, one line per run (tokens per step =
// the run's tokens / steps, so runs of different batch or context line up by data seen).
void tokens_plot(const Results& r, const std::string& out_dir, bool have_gnuplot, std::vector<std::string>& images) {
  const std::string name = "loss_val_tokens";
  std::ofstream dat(fs::path(out_dir) / (name + ".dat"));
  const auto runs = val_loss_blocks(r, dat, "tokens seen", [](const RunResults& rr) {
    return rr.steps > 0 && rr.tokens > 0 ? double(rr.tokens) / double(rr.steps) : 0.0;
  });
  dat.close();
  if (runs.empty()) {
    fs::remove(fs::path(out_dir) / (name + ".dat"));
    return;
  }
  write_block_plot(out_dir, name, "Validation loss against tokens seen",
                   "set xlabel \"tokens seen\"\nset ylabel \"validation loss (nats/token)\"\n"
                   "set format x \"%.1s%c\"\n",
                   runs, have_gnuplot, images);
}

// Perplexity against context-order ensemble size M (log2 x axis), one line per run and dataset: the
// "<dataset>/ppl_m<M>" metrics of `aobench eval` in ensemble mode (position-subsampled ones excluded).
void ensemble_plot(const Results& r, const std::string& out_dir, bool have_gnuplot, std::vector<std::string>& images) {
  const std::string name = "ppl_vs_m";
  std::vector<PlotEntry> lines;
  std::ofstream dat(fs::path(out_dir) / (name + ".dat"));
  for (const auto& [run, rr] : r.runs) {
    std::map<std::string, std::map<int, double>> by_dataset;
    for (const auto& [key, m] : rr.metrics) {
      auto [dataset, metric] = split_metric_key(key);
      if (metric.rfind("ppl_m", 0) != 0 || metric.find("_p") != std::string::npos) continue;
      by_dataset[dataset][std::atoi(metric.c_str() + 5)] = m.value;
    }
    for (const auto& [dataset, points] : by_dataset) {
      dat << "# " << run << " " << dataset << ": M, perplexity\n";
      for (const auto& [m, v] : points) dat << m << " " << v << "\n";
      dat << "\n\n";
      lines.push_back({run + " " + dataset});
    }
  }
  dat.close();
  if (lines.empty()) {
    fs::remove(fs::path(out_dir) / (name + ".dat"));
    return;
  }
  write_block_plot(out_dir, name, "Perplexity against context-order ensemble size M",
                   "set logscale x 2\nset xlabel \"ensemble size M\"\nset ylabel \"perplexity\"\n", lines, have_gnuplot,
                   images);
}

// Infilling: perplexity per hidden token against the share of the window hidden, one figure per dataset and place
// ("infill_<dataset>_<place>"), a line per replicate group (its mean over seeds) and route — each paradigm's exact
// route (prefix, k<K>, an encoder's chain) and the encoders' bound; the mixtures and ensembles stay in the tables.
void infill_plot(const Results& r, const std::string& out_dir, bool have_gnuplot, std::vector<std::string>& images) {
  // (dataset, place) → line label → (percent, perplexity)
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::map<int64_t, double>>> figures;
  for (const RunGroup& g : replicate_groups(r))
    for (const auto& [key, m] : g.members.front()->metrics) {
      const auto [dataset, metric] = split_metric_key(key);
      InfillKey k;
      if (!parse_infill(metric, m.params.family, k) || m.params.family != "infill_ppl") continue;
      if (k.route != "prefix" && k.route != "elbo" && k.route[0] != 'k') continue;  // not mix<K>, m<M>
      const PooledCell cell = pooled_cell(g, key);
      if (cell.have > 0)
        figures[{dataset, k.place}][seeds_label(g) + " · " + k.route + (cell.is_bound ? " (bound)" : "")][k.percent] =
            cell.value;
    }
  for (const auto& [where, lines] : figures) {
    const auto& [dataset, place] = where;
    std::string name = "infill_" + dataset + "_" + place;  // a file name inside a gnuplot "…" string: plain characters
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
    std::vector<PlotEntry> entries;
    std::ofstream dat(fs::path(out_dir) / (name + ".dat"));
    for (const auto& [label, points] : lines) {
      dat << "# " << label << ": percent hidden, perplexity per hidden token\n";
      for (const auto& [percent, ppl] : points) dat << percent << " " << ppl << "\n";
      dat << "\n\n";
      entries.push_back({label});
    }
    dat.close();
    write_block_plot(out_dir, name,
                     "Infilling on " + dataset + ", hidden at " + place + ": perplexity of the hidden tokens",
                     "set logscale y\nset xlabel \"hidden share of the window (%)\"\n"
                     "set ylabel \"perplexity per hidden token\"\n",
                     entries, have_gnuplot, images);
  }
}

}  // namespace

std::vector<std::string> render_plots(const Results& r, const std::string& out_dir) {
  std::vector<std::string> images;
  std::string version;
  const bool have_gnuplot = run_program({"gnuplot", "--version"}, &version) == 0;
  if (!have_gnuplot)
    std::cerr << "warning: gnuplot not found; skipping plots (install gnuplot-nox, see scripts/setup.sh)\n";
  for (const auto& [curve, title] : std::vector<std::pair<std::string, std::string>>{{"loss/val", "validation loss"},
                                                                                     {"loss/train", "training loss"}}) {
    std::string name = curve;
    name[name.find('/')] = '_';
    std::vector<PlotEntry> runs;
    std::ofstream dat(fs::path(out_dir) / (name + ".dat"));
    if (curve == "loss/val")  // replicate groups as bands
      runs = val_loss_blocks(r, dat, "step", [](const RunResults&) { return 1.0; });
    else
      for (const auto& [run, rr] : r.runs) {
        auto it = rr.curves.find(curve);
        if (it == rr.curves.end() || it->second.empty()) continue;
        dat << "# " << run << "\n";
        for (const auto& [step, v] : it->second) dat << step << " " << v << "\n";
        dat << "\n\n";  // gnuplot: a new data block (index) per run
        runs.push_back({run});
      }
    dat.close();
    if (runs.empty()) continue;
    std::string heading = title;
    heading[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(heading[0])));
    write_block_plot(out_dir, name, heading + " against optimizer steps",
                     "set xlabel \"step\"\nset ylabel \"" + title + " (nats/token)\"\n", runs, have_gnuplot, images);
  }
  speed_plot(r, out_dir, have_gnuplot, images);
  tokens_plot(r, out_dir, have_gnuplot, images);
  ensemble_plot(r, out_dir, have_gnuplot, images);
  infill_plot(r, out_dir, have_gnuplot, images);
  return images;
}

}  // namespace aobench
