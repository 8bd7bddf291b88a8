// Package chip is the Blackhole chip as the runtime's upper layers see it:
// NoC reads and writes to a core's L1, its registers or a DRAM bank
// (through TLB windows of an access.Device, reconfigured as needed),
// multicast writes to rectangles of Tensix cores, per-core soft reset, and
// the chip's coordinate tables: logical worker core to NoC0 coordinate,
// DRAM bank to NoC0 endpoint, harvested columns, and the bank-to-NoC
// tables firmware reads at boot (BankTables).
//
// Coordinates are NoC0 physical (tt-metal's "translated" coordinates equal
// physical ones for Blackhole Tensix cores of an unharvested chip); tcc's
// kernels name cores by logical (x, y) and the runtime resolves them here.
package chip
