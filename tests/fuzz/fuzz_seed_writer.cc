// Writes the fuzzer's seed corpus: for each textual program given, a copy of the text and its
// model.pb body (without checksum, as fuzz_model_loader reseals its input).
//
//   fuzz_seed_writer OUT_DIR tests/lit/roundtrip.pdir tests/lit/autodiff.pdir
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ir/serialize.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_seed_writer OUT_DIR PROGRAM.pdir...\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  int written = 0;
  for (int i = 2; i < argc; ++i) {
    absl::StatusOr<std::string> text = pdist::ir::ReadFileToString(argv[i]);
    if (!text.ok()) continue;
    const std::string stem = std::filesystem::path(argv[i]).stem().string();
    std::ofstream(out / (stem + ".pdir"), std::ios::binary) << *text;
    ++written;
    // Error-case programs are seeds as text only.
    absl::StatusOr<pdist::ir::Program> program = pdist::ir::DecodeProgram(*text);
    absl::StatusOr<std::string> bytes = program.ok() ? pdist::ir::SerializeProgram(*program)
                                                     : absl::StatusOr<std::string>(program.status());
    if (!bytes.ok()) continue;
    std::ofstream(out / (stem + ".pb"), std::ios::binary) << *bytes;
    std::ofstream(out / (stem + ".body"), std::ios::binary) << bytes->substr(0, bytes->size() - 9);
    written += 2;
  }
  std::printf("wrote %d seeds to %s\n", written, out.c_str());
  return written > 0 ? 0 : 1;
}
