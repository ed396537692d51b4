/* The StaticSite spec and config (see spec.c). */
#ifndef STATIC_SITE_SPEC_H
#define STATIC_SITE_SPEC_H

#include "static_site.h"

typedef struct {
    const wr_json *image; /* a non-blank string */
    int64_t replicas;
    int64_t port;
    /* Files sorted by name (byte order): names[i] -> bodies[i] (strings). */
    size_t n_files;
    const char **names;
    const wr_json **bodies;
} site_spec;

/* Reads and validates parent.spec; false with a permanent InvalidSpec error. */
bool parse_spec(wr_arena *a, const wr_json *parent, site_spec *site, wr_error *err);
/* sha256 (hex) over each file in name order as `name NUL contents NUL`. */
char *site_content_hash(wr_arena *a, const site_spec *site);
/* The cluster domain from the controller config (NULL config: the default),
 * checked like serde's deny_unknown_fields, with serde's wording. */
bool parse_config(wr_arena *a, const wr_json *config, const char **domain, wr_error *err);

#endif
