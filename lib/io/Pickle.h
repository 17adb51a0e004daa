// A small Python pickle reader and writer for data files other programs
// write (PyTorch Distributed Checkpoint's `.metadata`): no Python, no
// LibTorch, no code runs. Objects are kept as a tree of their class name,
// constructor arguments and state, for a caller to interpret by class name.
//
//   \x80\x04 ... c"torch" "Size" ... (64, 1, 4) REDUCE ... STOP
//     -> Object{module "torch", name "Size", args Tuple[Int 64, Int 1, Int 4]}
//
//   SPMD_ASSIGN_OR_RETURN(io::PyRef root, io::readPickle(bytes, ".metadata"));
//   if (root->isObject("torch.distributed.checkpoint.metadata", "Metadata")) ...
//   std::string out = io::writePickle(*root);   // what Python's pickle.loads reads back
//
// The reader takes untrusted bytes: every read is bounds-checked, the stack,
// memo and value count are capped, and a malformed stream is an error, never
// an abort. A stream may share nodes (the memo) but not build a cycle (a
// list holding itself): the reader refuses one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/Status.h"

namespace spmd::io {

struct PyValue;
/// A node of an unpickled value tree (shared: the memo may reference it twice).
using PyRef = std::shared_ptr<PyValue>;

/// One unpickled value.
struct PyValue {
  enum class Kind { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Object };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;                              ///< Str, Bytes; Global and Object: the module
  std::string name;                              ///< Global and Object: the class or function
  std::vector<PyRef> items;                      ///< Tuple, List; Object: the constructor arguments
  std::vector<std::pair<PyRef, PyRef>> entries;  ///< Dict, in insertion order
  PyRef state;                                   ///< Object: what BUILD set (null: none)
  bool newobj = false;                           ///< Object: made by cls.__new__ (NEWOBJ), not a call

  static PyRef none();
  static PyRef ofBool(bool v);
  static PyRef ofInt(int64_t v);
  static PyRef ofFloat(double v);
  static PyRef str(std::string v);
  static PyRef bytes(std::string v);
  static PyRef tuple(std::vector<PyRef> v);
  static PyRef list(std::vector<PyRef> v);
  static PyRef dict(std::vector<std::pair<PyRef, PyRef>> v = {});
  static PyRef global(std::string module, std::string name);
  /// `module.name(*args)` (REDUCE), or `module.name.__new__(cls, *args)` when `newobj`.
  static PyRef object(std::string module, std::string name, std::vector<PyRef> args, bool newobj,
                      PyRef state = nullptr);

  /// True for an Object of class `module`.`name`.
  bool isObject(std::string_view module, std::string_view name) const;
  /// The Dict entry whose key is the string `key`, or null (not a Dict, or no such key).
  PyRef get(std::string_view key) const;
};

/// Unpickles `bytes` (protocols 0 to 5 as written by Python's C pickler for
/// plain data and classes: no persistent ids, no extension registry, no
/// out-of-band buffers). Errors read "<where>: not a pickle this reader
/// accepts: <what> at byte <n>": an unknown opcode, a read past the end, a
/// stack or memo underflow, an integer beyond int64, a value that contains
/// itself, more than 16 million values, or no STOP.
Expected<PyRef> readPickle(std::string_view bytes, const std::string& where);

/// Pickles `value` (protocol 4: Python 3's pickle.loads reads it, building
/// the named classes). A value reached twice is written twice; a cyclic
/// tree is refused by a depth limit (an error naming the depth).
Expected<std::string> writePickle(const PyValue& value);

/// Structural equality (depth-limited; values nested deeper than 200 compare unequal).
bool samePyValue(const PyValue& a, const PyValue& b);

}  // namespace spmd::io
