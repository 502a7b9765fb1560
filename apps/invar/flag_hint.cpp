#include "flag_hint.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace invar::app {
namespace {

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
