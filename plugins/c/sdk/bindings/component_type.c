/* The component type (the world's WIT) is embedded into the core module with
 * `wasm-tools component embed` by plugins/c/build.sh, not linked in as the
 * object file `wit-bindgen c` can emit: that keeps binary objects out of the
 * repository. The generated reconciler.c still references this symbol to force
 * that object's linking, so it is defined here, empty. */
void __component_type_object_force_link_reconciler(void);
void __component_type_object_force_link_reconciler(void) {}
