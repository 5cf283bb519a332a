// Fixed binding registry (read-only). Each kernels/<op>_binding.cpp registers a function that
// adds its Python bindings; binding.cpp applies every registration when the module is imported.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace kernelarena {

using BindingFn = void (*)(pybind11::module_&);

// A function-local static is unique across translation units of one shared library, so every
// kernels/*_binding.cpp appends to the same list during static initialisation.
inline std::vector<std::pair<std::string, BindingFn>>& binding_registry() {
  static std::vector<std::pair<std::string, BindingFn>> entries;
  return entries;
}

struct BindingRegistrar {
  BindingRegistrar(const char* name, BindingFn fn) { binding_registry().emplace_back(name, fn); }
};

}  // namespace kernelarena

// REGISTER_BINDING(relu, bind_relu): bind_relu(m) runs when `import kernel_ext` happens.
#define REGISTER_BINDING(name, fn) \
  static ::kernelarena::BindingRegistrar kernelarena_registrar_##name(#name, fn)
