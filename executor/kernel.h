// Kernel interface: device-neutral signature, registry keyed by (device type, op type).
//
// The executor allocates nothing for a kernel: a kernel receives its inputs and writes its
// outputs, which it creates (AllocateOutput: from the context's allocator, on its stream; or
// an alias of an input for view-like ops such as reshape). The context gives the kernel its
// device, stream and allocator (executor/backend.h). Each backend registers its kernels
// (Backend::RegisterKernels): the CPU's live in executor/cpu/, each family registered by its
// function in executor/cpu/cpu_kernels.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/allocator.h"
#include "executor/device.h"
#include "executor/stream.h"
#include "executor/tensor.h"
#include "ir/program.h"

namespace pdist::exec {
namespace comm {
class CommGroups;
}  // namespace comm

class KernelContext {
 public:
  KernelContext(const ir::Operation& op, std::vector<const Tensor*> inputs, std::vector<Tensor>* outputs)
      : op_(op), inputs_(std::move(inputs)), outputs_(outputs) {}

  const ir::Operation& op() const { return op_; }
  const ir::AttributeMap& attrs() const { return op_.attrs(); }
  size_t num_inputs() const { return inputs_.size(); }
  // nullptr for an absent optional operand.
  const Tensor* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  // The op's results, or as many as the caller's types where it overrode them (a fused or merged
  // op's kernel running another op's kernel on its share).
  size_t num_outputs() const { return output_types_.empty() ? op_.num_results() : output_types_.size(); }
  // The type result `i` is allocated with: the static type from shape inference, unless the
  // caller overrode it (cpu/float_math.h runs a bf16 op's f32 kernel with f32 results).
  const TensorType& output_type(size_t i) const {
    return output_types_.empty() ? op_.result(i)->type() : output_types_.at(i);
  }
  void OverrideOutputTypes(std::vector<TensorType> types) { output_types_ = std::move(types); }
  // Allocates result `i` with its static type, on the context's device, and returns it — or,
  // where the executor donated a dying operand's storage for it (Donate), returns that.
  Tensor& AllocateOutput(size_t i) {
    if (i < donated_.size() && donated_[i].defined() && donated_[i].type() == output_type(i)) {
      return (*outputs_)[i] = std::move(donated_[i]);
    }
    return (*outputs_)[i] = Tensor::Empty(output_type(i), *allocator_, stream_);
  }
  // The storage of an operand whose value dies at this op, for result `i` to be written over
  // (ir::OpDef::overwrites_dying_operand); AllocateOutput(i) hands it out instead of allocating.
  void Donate(size_t i, Tensor storage) {
    if (donated_.size() <= i) donated_.resize(i + 1);
    donated_[i] = std::move(storage);
  }
  // A temporary on the context's device and stream, alive until the device work this kernel
  // enqueues has run: on a stream other than the one blocks are freed in order on (a CUDA
  // kernel on the communication stream, whose frees go to the compute stream), a local tensor
  // would be freed under that work. The executor keeps such temporaries with the submitted work
  // (set_keep_alive); elsewhere they live as long as the context.
  Tensor Scratch(const TensorType& type) {
    scratch_list()->push_back(Tensor::Empty(type, *allocator_, stream_));
    return scratch_list()->back();
  }
  void set_keep_alive(std::vector<Tensor>* keep_alive) { keep_alive_ = keep_alive; }
  // Where Scratch keeps its temporaries, for code that allocates its own (the axis collectives,
  // through comm::DataPlace::keep_alive; the CPU's float math, for the kernel it wraps).
  std::vector<Tensor>* scratch_list() { return keep_alive_ != nullptr ? keep_alive_ : &scratch_; }
  // Sets result `i` to an existing tensor (an alias of an input, for view ops).
  void SetOutput(size_t i, Tensor t) { (*outputs_)[i] = std::move(t); }
  // Where the op says result `i` is one of its operands (ir::AliasedOperand: add_grad's x_grad
  // is out_grad when x was not broadcast) and that operand's tensor has the result's type, sets
  // the result to it — no bytes made — and returns true; false otherwise.
  bool AliasOperand(size_t i);
  Tensor& output(size_t i) { return (*outputs_)[i]; }

  // Where the kernel runs: its device, the stream its work goes on (nullptr: the calling thread
  // of a host kernel), the allocator of its results. Defaults: the host.
  Device device() const { return allocator_->device(); }
  Stream* stream() const { return stream_; }
  Allocator& allocator() const { return *allocator_; }
  void set_placement(Allocator& allocator, Stream* stream) {
    allocator_ = &allocator;
    stream_ = stream;
  }

  // The rank's communicators, for collective kernels; nullptr in a single-rank run.
  comm::CommGroups* comm_groups() const { return comm_groups_; }
  void set_comm_groups(comm::CommGroups* groups) { comm_groups_ = groups; }
  // The micro-batch this op runs for in a pipelined step (0 otherwise): random ops draw the
  // numbers of that micro-batch's place in the whole batch.
  int64_t micro_batch() const { return micro_batch_; }
  void set_micro_batch(int64_t micro_batch) { micro_batch_ = micro_batch; }

 private:
  const ir::Operation& op_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>* outputs_;
  std::vector<TensorType> output_types_;  // empty: the static types
  Allocator* allocator_ = &HostAllocator::Instance();
  Stream* stream_ = nullptr;
  comm::CommGroups* comm_groups_ = nullptr;
  int64_t micro_batch_ = 0;
  std::vector<Tensor>* keep_alive_ = nullptr;
  std::vector<Tensor> scratch_;
  std::vector<Tensor> donated_;  // per result: a dying operand's storage to write it over
};

using KernelFn = std::function<absl::Status(KernelContext&)>;

class KernelRegistry {
 public:
  // Every kernel of every built backend (executor/backends.cc), registered once.
  static const KernelRegistry& Global();

  void Register(DeviceType device, const std::string& op_type, KernelFn fn);
  const KernelFn* Find(DeviceType device, const std::string& op_type) const;
  std::vector<std::string> OpTypes(DeviceType device) const;

 private:
  std::map<std::pair<DeviceType, std::string>, KernelFn> kernels_;
};

}  // namespace pdist::exec
