/* Component entry: exports static_site_reconcile as the WIT `reconcile`. */
#include "static_site.h"
#include "wr_export.h"

WR_EXPORT_RECONCILER(static_site_reconcile)
