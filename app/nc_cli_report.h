/* nc_cli_report.h — how the CLI shows a simulation record: tables, JSON and
 * PNG plots (drawn by ui/nc_plot, the same code as the workbench's views). */
#ifndef NC_CLI_REPORT_H
#define NC_CLI_REPORT_H

#include "nc_cli_util.h"
#include "nc_record.h"

/* The steps shown in tables: 1, 2, 4, ... up to T, and T itself. */
int nc_cli_table_steps(int T, int *steps, int max);

void nc_cli_print_accuracy(const nc_record *rec);
void nc_cli_print_layers(const nc_record *rec);
/* Adds accuracy_by_step, ann_accuracy, qcfs_accuracy, firing_rate_by_layer,
 * calibration_error_by_layer, sops to an open JSON object. */
void nc_cli_json_record(nc_json *j, const nc_record *rec);
/* Writes accuracy.png, firing_rates.png, calibration_error.png, sops.png and
 * raster.png into `dir` (created if missing); prints each path.  0 on success. */
int nc_cli_write_plots(const nc_record *rec, const char *label, const char *dir);

#endif
