// Package report counts device programs per decoder layer: the op-count
// report behind `tcc report ops` and a build's report.json.
//
// After the pipeline every graph op is one device program on each device, so
// the counts are per device per decode step. The JSON form is a contract
// other tools read (DESIGN.md): model, mesh, stage, total_ops, and layers
// with index, kind, ops and by_op. Table and CSV forms are for people and
// spreadsheets.
package report
