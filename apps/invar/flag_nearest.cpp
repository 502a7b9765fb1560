#include "flag_nearest.h"

#include <algorithm>

namespace invar::app {
namespace {

std::string undashed(const std::string& s) {
  return s.substr(std::min(s.find_first_not_of('-'), s.size()));
}

// Edit distance with a swap of neighbours counted as one edit, as typing slips make them
// (optimal string alignment: insert, delete, substitute, transpose; git ranks its suggestions
// by the same kind of distance).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string flag_nearest(const std::string& given, const std::vector<std::string>& known) {
  const std::string g = undashed(given);
  if (g.empty()) return "";
  std::string best;
  // A third of the name, and one edit below six letters: two edits turn any two-letter name
  // into any one-letter one (-fa is not -c), and a hint that means something else misleads more
  // than none.
  size_t best_d = std::max<size_t>(1, g.size() / 3) + 1;
  for (const std::string& k : known) {
    const size_t d = edit_distance(g, undashed(k));
    if (d < best_d || (d == best_d && !best.empty() && k < best)) best = k, best_d = d;
  }
  // One letter is too little to guess from (any short flag is one edit away).
  if (!best.empty() && g.size() >= 2) return best;
  best.clear();
  for (const std::string& k : known)
    if (undashed(k).rfind(g, 0) == 0 && g.size() >= 3 &&
        (best.empty() || k.size() < best.size() || (k.size() == best.size() && k < best)))
      best = k;
  return best;
}

}  // namespace invar::app
