// FlagSet: registration, argv parsing and generated --help for the pdist tools.
#include "tools/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/attribute.h"

namespace pdist::cli {
namespace {

// How the user typed it: -o for one-letter names, --name otherwise.
std::string FlagName(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }

}  // namespace

void FlagSet::Add(Flag flag) { flags_.push_back(std::move(flag)); }

void FlagSet::String(const std::string& name, std::string* target, const std::string& help) {
  Add({name, "STRING", help, target->empty() ? "" : absl::StrCat("\"", *target, "\""),
       [name, target](const std::string& v) {
         // An empty value is almost always an unset shell variable (`--save "$DIR"`): taken as the
         // flag's absence, a checkpoint would silently not be written.
         if (v.empty()) {
           return absl::InvalidArgumentError(
               absl::StrCat("flag ", FlagName(name), ": an empty value (leave the flag out for its default)"));
         }
         *target = v;
         return absl::OkStatus();
       }});
}

void FlagSet::Bool(const std::string& name, bool* target, const std::string& help) {
  Add({name, "", help, *target ? "true" : "", [name, target](const std::string& v) {
         if (v == "true" || v == "1") {
           *target = true;
         } else if (v == "false" || v == "0") {
           *target = false;
         } else {
           return absl::InvalidArgumentError(absl::StrCat("flag ", FlagName(name), ": '", v, "' is not true or false"));
         }
         return absl::OkStatus();
       }});
}

void FlagSet::Int(const std::string& name, int64_t* target, const std::string& help) {
  Add({name, "INT", help, absl::StrCat(*target), [name, target](const std::string& v) {
         if (!absl::SimpleAtoi(v, target)) {
           return absl::InvalidArgumentError(absl::StrCat("flag ", FlagName(name), ": '", v, "' is not an integer"));
         }
         return absl::OkStatus();
       }});
}

void FlagSet::Double(const std::string& name, double* target, const std::string& help) {
  Add({name, "NUMBER", help, ir::DoubleToString(*target), [name, target](const std::string& v) {
         if (!absl::SimpleAtod(v, target)) {
           return absl::InvalidArgumentError(absl::StrCat("flag ", FlagName(name), ": '", v, "' is not a number"));
         }
         // No flag means anything by nan or inf, and each would pass a `< 0` check unseen.
         if (!std::isfinite(*target)) {
           return absl::InvalidArgumentError(absl::StrCat("flag ", FlagName(name), ": '", v, "' is not a finite number"));
         }
         return absl::OkStatus();
       }});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, const char* const* argv) {
  given_.clear();
  std::vector<std::string> positional;
  bool flags_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (flags_done || arg == "-" || arg.empty() || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    // --name[=value] for every flag; -n[=value] for one-letter names.
    const size_t dashes = arg.compare(0, 2, "--") == 0 ? 2 : 1;
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    if (name == "help" || (dashes == 1 && name == "h")) {
      help_requested_ = true;
      return positional;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr || (dashes == 1 && name.size() != 1)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg.substr(0, eq)));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (flag->metavar.empty()) {
      value = "true";  // a boolean never consumes the next argument
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value (", flag->metavar, ")"));
    }
    absl::Status status = flag->set(value);
    if (!status.ok()) return status;
    given_.insert(flag->name);
  }
  return positional;
}

std::vector<std::string> FlagSet::ParseOrExit(int argc, const char* const* argv) {
  absl::StatusOr<std::vector<std::string>> args = Parse(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "%s: %s\n(run '%s --help' for usage)\n", program_.c_str(),
                 std::string(args.status().message()).c_str(), program_.c_str());
    std::exit(2);
  }
  if (help_requested_) {
    std::fputs(Help().c_str(), stdout);
    std::exit(0);
  }
  return *std::move(args);
}

std::string FlagSet::Help() const {
  std::string help = absl::StrCat("usage: ", program_, " ", usage_, "\n");
  if (!description_.empty()) absl::StrAppend(&help, "\n", description_, "\n");
  absl::StrAppend(&help, "\noptions:\n");
  for (const Flag& flag : flags_) {
    const std::string left = absl::StrCat(flag.name.size() == 1 ? "-" : "--", flag.name,
                                          flag.metavar.empty() ? "" : absl::StrCat(flag.name.size() == 1 ? " " : "=", flag.metavar));
    absl::StrAppend(&help, absl::StrFormat("  %-22s %s", left, flag.help));
    if (!flag.default_text.empty()) absl::StrAppend(&help, " (default: ", flag.default_text, ")");
    absl::StrAppend(&help, "\n");
  }
  absl::StrAppend(&help, absl::StrFormat("  %-22s %s\n", "--help", "print this help and exit"));
  return help;
}

}  // namespace pdist::cli
