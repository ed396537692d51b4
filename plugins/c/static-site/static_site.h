/* static-site: serves files from a StaticSite parent with a ConfigMap, a
 * Deployment and a Service. A port of plugins/static-site (Rust) with the
 * same output for the same request; see that plugin's README. */
#ifndef STATIC_SITE_H
#define STATIC_SITE_H

#include "wr_plugin.h"

#define CONTENT_HASH_ANNOTATION "static-site.examples.wasm-reconciler.dev/content-hash"
/* Largest total content: a ConfigMap holds at most 1 MiB. */
#define MAX_CONTENT_BYTES (1024 * 1024 - 4096)

bool static_site_reconcile(const wr_request *req, wr_response *resp, wr_error *err);

#endif
