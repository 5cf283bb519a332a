// The extension's single module definition (read-only). The module is always named kernel_ext:
// model_new.py does `import kernel_ext` and calls the functions that kernels/*_binding.cpp define.
#include "binding_registry.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  for (auto& entry : kernelarena::binding_registry()) entry.second(m);
}
