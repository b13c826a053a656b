// The report's metric tables, built once and rendered by summary.md, index.html and results.tex: one table per
// metric family (ppl, nll, bpb, genppl, gen_s, …; MetricParams::family), its columns dataset × measure (L2R,
// any-order K, ensemble M, ELBO bound), its rows the replicate groups (reports/replicates.h). A metric's protocol
// ("l2r exact; first token skipped; 128-token windows; …") is split at "; " and each part attached where it holds:
// parts every cell of the table shares are one line under it, parts every cell of a column shares are that
// column's footnote, any other part is a footnote of its cells; a window subset is written in the cell
// ("16/604 windows").
#pragma once
#include <string>
#include <vector>

#include "reports/results.h"

namespace aobench {

struct MetricTable {
  struct Cell {
    std::string text;        // "≤ 23.4 ± 0.5 (16/604 windows)"; "" when the row has no value here
    std::vector<int> notes;  // footnote numbers (1-based into `notes`)
  };
  struct Row {
    std::string label;  // the group: "<job> (n seeds)" or the run's name
    std::vector<Cell> cells;
  };
  std::string family;             // "ppl"
  std::string dataset;            // the one dataset of every column when its headers name measures only, else ""
  bool higher_is_better = false;  //
  std::vector<Cell> columns;      // header text and the column's footnotes
  std::vector<Row> rows;
  std::vector<std::string> shared;  // sentences for every cell: "All cells: <shared protocol>", what "±" means
  std::vector<std::string> notes;   // footnote n is notes[n - 1]
  // "ppl on fortunes_val (lower is better)"
  std::string title() const;
};

// {"a", "b"} → "a<sep>b".
std::string joined(const std::vector<std::string>& v, const std::string& sep);
// A cell's or column's footnote numbers as "1<sep>3", for each renderer's marks; "" without any.
std::string note_numbers(const std::vector<int>& notes, const std::string& sep);

// A protocol's parts: "a; b; c" → {"a", "b", "c"}.
std::vector<std::string> protocol_parts(const std::string& protocol);
// "16/86 windows" → "16 of 86": a window subset named in a protocol part; "" for any other part.
std::string window_subset(const std::string& part);

// An infilling metric of `family` (MetricParams::family "infill_ppl", "infill_fill_acc", …) by its parts:
// "ppl_infill_middle_r50_k4" → column "ppl_infill_middle_r50_", place "middle", percent 50, route "k4" (the
// scoring protocol, or greedy / sampled / truth for fillings); false for any other metric.
struct InfillKey {
  std::string column, place, route;
  int64_t percent = 0;
};
bool parse_infill(const std::string& metric, const std::string& family, InfillKey& out);
// Places in the order the README lists them (start, middle, end, spans, random); an unknown one after them.
int place_rank(const std::string& place);

// Every metric table of `r`, likelihood families first (ppl, nll, bpb), then generation quality, then timing,
// then any other family by name.
std::vector<MetricTable> metric_tables(const Results& r);

}  // namespace aobench
