/* Component entry: exports plugin_reconcile as the WIT `reconcile`. */
#include "plugin.h"
#include "wr_export.h"

WR_EXPORT_RECONCILER(plugin_reconcile)
