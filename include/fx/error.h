#pragma once
/// \file
/// The one error hierarchy of fxcpp. Every error says which node, target,
/// file or position it is about; messages follow torch.fx's wording where
/// torch.fx has one.

#include <stdexcept>
#include <string>

namespace fx {

/// Base of every error fxcpp throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A graph broke one of the IR's invariants (Graph::lint()).
class LintError : public Error {
 public:
  using Error::Error;
};

/// A call_function / call_method / call_module target that cannot be found.
class TargetError : public Error {
 public:
  using Error::Error;
};

/// Symbolic tracing met something it cannot capture (control flow on values).
class TraceError : public Error {
 public:
  using Error::Error;
};

/// A model or data file that cannot be read (not TorchScript, truncated...).
class ImportError : public Error {
 public:
  using Error::Error;
};

}  // namespace fx
