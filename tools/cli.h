// A tiny command-line parser shared by every pdist tool, so that all take flags the same way.
//
//   cli::FlagSet flags("pdist-opt", "INPUT [options]", "Runs a pass pipeline on a program.");
//   std::string passes;
//   bool verify_only = false;
//   flags.String("passes", &passes, "pass pipeline, e.g. autodiff,optimizer{type=sgd}");
//   flags.Bool("verify-only", &verify_only, "parse and verify, then exit");
//   std::vector<std::string> args = flags.ParseOrExit(argc, argv);
//
// Accepted forms: --name=value, --name value, -n value for one-letter names, --flag / --flag=false
// for booleans (a boolean never takes the next argument), `--` ends the flags, `-` alone is a
// positional argument (stdin by convention).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::cli {

class FlagSet {
 public:
  FlagSet(std::string program, std::string usage, std::string description = "")
      : program_(std::move(program)), usage_(std::move(usage)), description_(std::move(description)) {}

  // Each registers --name, writing the parsed value to *target; the value *target holds at
  // registration is the default shown by --help. A string flag given an empty value and a number
  // flag given nan or inf are errors naming the flag.
  void String(const std::string& name, std::string* target, const std::string& help);
  void Bool(const std::string& name, bool* target, const std::string& help);
  void Int(const std::string& name, int64_t* target, const std::string& help);
  void Double(const std::string& name, double* target, const std::string& help);

  // Parses argv[1..]; returns the positional arguments. Errors (InvalidArgument) name the flag
  // and the value: "unknown flag --pases", "flag --steps: 'ten' is not an integer".
  // After `--help` it returns no error and help_requested() is true.
  absl::StatusOr<std::vector<std::string>> Parse(int argc, const char* const* argv);
  bool help_requested() const { return help_requested_; }
  // Whether the last Parse saw --name (for flags whose default cannot say "not given", and for
  // two names of one value given together).
  bool Given(const std::string& name) const { return given_.contains(name); }

  // Parse, or exit: --help prints Help() to stdout and exits 0; an error prints
  // "<program>: <error>" and a hint to stderr and exits 2.
  std::vector<std::string> ParseOrExit(int argc, const char* const* argv);

  // "usage: pdist-opt INPUT [options]\n\n<description>\n\noptions:\n  --passes=STRING ..."
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string metavar;  // STRING, INT, NUMBER; empty for a boolean
    std::string help;
    std::string default_text;
    // Stores the value; an error message naming what was expected.
    std::function<absl::Status(const std::string&)> set;
  };
  void Add(Flag flag);
  const Flag* Find(const std::string& name) const;

  std::string program_;
  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
  std::set<std::string> given_;
};

}  // namespace pdist::cli
