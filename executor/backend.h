// Backend: what one kind of device gives the executor — its kernels, its allocator, its
// streams, and copies to and from the host. The backends built into this binary are one list
// (executor/backends.cc); nothing else names a device kind.
//
//   PDIST_ASSIGN_OR_RETURN(Backend * cuda, BackendFor(Device::Cuda(0)));  // or why not
//   Tensor x = Tensor::Empty(type, cuda->allocator(Device::Cuda(0)));
//   PDIST_ASSIGN_OR_RETURN(Tensor host, ToDevice(x, Device::Cpu()));
//
// A build without a backend, or a machine without its device, answers BackendFor with a
// FailedPrecondition that names what is missing and how to get it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/allocator.h"
#include "executor/device.h"
#include "executor/stream.h"
#include "executor/tensor.h"

namespace pdist::exec {

class KernelRegistry;  // executor/kernel.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  // OK when `device` can run on this machine; else FailedPrecondition saying why.
  virtual absl::Status CheckAvailable(const Device& device) const = 0;
  // Adds this backend's kernels (called once, for the process's KernelRegistry).
  virtual void RegisterKernels(KernelRegistry& registry) const = 0;
  // The device's allocator, for the process's life. `device` must be available.
  virtual Allocator& allocator(const Device& device) = 0;
  // A new stream on `device` (available) for one purpose. Communication streams come in lanes
  // (the executor's: 0 for the collectives, one per point-to-point direction after it): streams
  // of different lanes run independently of each other, where a backend's streams of one lane
  // may share the device's queue (CUDA: one cudaStream_t per device and lane).
  virtual std::unique_ptr<Stream> NewStream(const Device& device, StreamPurpose purpose, int lane = 0) = 0;
  // Copies `src` into `dst` (same type; either may be on the host, the other on this backend's
  // device), ordered after `stream`'s work (nullptr: synchronously).
  virtual absl::Status Copy(const Tensor& src, Tensor& dst, Stream* stream) = 0;

  // The data movement the device-neutral collective kernels (executor/collective_kernels.cc)
  // need around a communicator's dim-0 collectives, on tensors of this backend's device,
  // ordered after `stream`'s work:
  // regroups blocks, src [a, b, chunk] → dst [b, a, chunk] (chunk in elements of src's dtype);
  virtual absl::Status SwapBlocks(const Tensor& src, Tensor& dst, int64_t a, int64_t b, int64_t chunk,
                                  Stream* stream) = 0;
  // copies `bytes` bytes from src at byte `src_offset` into dst at byte `dst_offset`.
  virtual absl::Status CopyBytes(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset, int64_t bytes,
                                 Stream* stream) = 0;
};

// The backends this binary was built with, the CPU's first.
const std::vector<Backend*>& Backends();

// The backend that runs `device`, once it has said the device is available here.
absl::StatusOr<Backend*> BackendFor(const Device& device);

// `t` on `device` (itself when it is there already), copied synchronously.
absl::StatusOr<Tensor> ToDevice(const Tensor& t, const Device& device);

}  // namespace pdist::exec
