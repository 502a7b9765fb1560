#include "flag_hint.h"

#include <algorithm>
#include <cctype>

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

// Every name a flag of `app` is typed with: --long and -s.
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == '\0';
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

std::string flag_hint(const CLI::App& root, const std::vector<std::string>& args) {
  std::vector<const CLI::App*> chain = {&root};
  std::string path = "invar";
  std::vector<std::string> known = flag_names(root);
  std::string out;
  auto unknown = [&](const std::string& what, const std::string& name,
                     const std::vector<std::string>& names) {
    const std::string near = flag_nearest(name, names);
    out += path + ": unknown " + what + " " + name +
           (near.empty() ? std::string() : " (did you mean " + near + "?)") + "\n";
  };
  for (const std::string& a : args) {
    if (a == "--") break;  // the rest are positional
    if (a.size() > 1 && a[0] == '-' && !is_number(a)) {
      const std::string name = a.substr(0, a.find('='));
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      // -c512 (a value joined to a short flag) and -xy (short flags together).
      if (name[1] != '-' && std::find(known.begin(), known.end(), name.substr(0, 2)) != known.end())
        continue;
      unknown("flag", name, flag_names(*chain.back()));
      continue;
    }
    const CLI::App* app = chain.back();
    const auto subs = app->get_subcommands([](const CLI::App*) { return true; });
    const auto sub = std::find_if(subs.begin(), subs.end(),
                                  [&](const CLI::App* s) { return s->get_name() == a; });
    if (sub != subs.end()) {
      chain.push_back(*sub);
      path += " " + a;
      const auto more = flag_names(**sub);
      known.insert(known.end(), more.begin(), more.end());
    } else if (!subs.empty() && app->get_require_subcommand_min() > 0 && !is_number(a)) {
      std::vector<std::string> names;
      for (const CLI::App* s : subs) names.push_back(s->get_name());
      unknown("command", a, names);
      break;  // what follows belongs to a command we do not know
    }
    // else: a positional argument or an option's value
  }
  return out;
}

}  // namespace invar::app
