// pdist-spmd: evaluates one op's SPMD rule per JSON request (tools/spmd_json.h has the format).
//
//   echo '{"op": "matmul", "mesh_shape": [2], "inputs": [{"shape": [8, 4], "dims_mapping": [-1, 0]},
//          {"shape": [4, 6], "dims_mapping": [-1, -1]}]}' | pdist-spmd
//   {"inputs":[{"dims_mapping":[-1,0],"partial_dims":[]},{"dims_mapping":[0,-1],"partial_dims":[]}],
//    "outputs":[{"dims_mapping":[-1,-1],"partial_dims":[0]}]}
//
// Exit status: 0 when every request was read (a request the rule rejects answers
// {"error": ...} and still counts), 1 when stdin is not JSON, 2 bad usage.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "tools/cli.h"
#include "tools/spmd_json.h"

namespace pdist {
namespace {

int Main(int argc, char** argv) {
  bool pretty = false;
  cli::FlagSet flags("pdist-spmd", "[options] < requests.json",
                     "Reads one SPMD request (or a JSON array of them) from stdin and writes one response per\n"
                     "request to stdout, in order. A request:\n"
                     "  {\"op\": \"matmul\", \"attrs\": {\"trans_x\": false, \"trans_y\": false}, \"mesh_shape\": [2, 2],\n"
                     "   \"direction\": \"forward\" | \"reverse\",\n"
                     "   \"inputs\": [{\"shape\": [64, 32], \"dims_mapping\": [0, -1], \"partial_dims\": []}, ...],\n"
                     "   \"outputs\": [...]}                  (reverse only)\n"
                     "A response: {\"inputs\": [{\"dims_mapping\": [...], \"partial_dims\": [...]}, ...], \"outputs\": [...]}\n"
                     "or {\"error\": \"message\"}. An absent optional input is null or shape [0] with an empty\n"
                     "dims_mapping; split's outputs come back as one list. \"describe\": true adds the rule's\n"
                     "einsum-style text. Op names, attributes and operand orders follow Paddle's SPMD rules.");
  flags.Bool("pretty", &pretty, "indent the JSON output");
  const std::vector<std::string> args = flags.ParseOrExit(argc, const_cast<const char* const*>(argv));
  if (!args.empty()) {
    std::fprintf(stderr, "pdist-spmd: unexpected argument '%s': requests come on stdin (see --help)\n", args[0].c_str());
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  absl::StatusOr<nlohmann::json> responses = tools::EvaluateSpmdText(text);
  if (!responses.ok()) {
    std::fprintf(stderr, "pdist-spmd: <stdin>: %s\n", std::string(responses.status().message()).c_str());
    return 1;
  }
  std::cout << responses->dump(pretty ? 2 : -1) << "\n";
  return std::cout ? 0 : 1;
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
