/* {{name}}: the reconcile logic for `{{kind}}` objects. */
#ifndef PLUGIN_H
#define PLUGIN_H

#include "wr_plugin.h"

bool plugin_reconcile(const wr_request *req, wr_response *resp, wr_error *err);

#endif
